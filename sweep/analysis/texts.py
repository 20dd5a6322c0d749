"""How the outputs say a config, an interval and money: the words behind the printouts, the report's card and its
tables (:mod:`sweep.analysis.summary` puts them together)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sweep.analysis.evidence import Payback, Recommendation

if TYPE_CHECKING:
    from sweep.analysis.summary import Summary


def ci_text(lo: float | None, hi: float | None) -> str:
    return f"95% CI {lo:.3f}-{hi:.3f}" if lo is not None and hi is not None else "no interval recorded"


def changed_flags(params: dict[str, Any]) -> str:
    """The perf flags of a trial that differ from rsl-rl's behaviour, e.g. 'fused_optimizer, log_every=0'."""
    from sweep import perf
    from sweep.params import named_flags

    return ", ".join(
        k if v is True else f"{k}={v}"
        for k, v in sorted(named_flags(params).items())
        if k in perf.CATALOG and v != perf.CATALOG[k].default
    )


def describe_params(params: dict[str, Any]) -> str:
    """'4096 envs x 12 steps, 4 mini-batches; flags on: a, b' (flags at their defaults are left out)."""
    text = f"{params.get('num_envs')} envs x {params.get('num_steps_per_env')} steps, "
    text += f"{params.get('num_mini_batches')} mini-batches"
    if params.get("mode") == "stock":
        return text + "; rsl-rl's own runner, unchanged"
    flags = changed_flags(params)
    return text + (f"; flags on: {flags}" if flags else "; no perf flags")


def cost_text(rec: Recommendation, pay: Payback) -> str:
    """The recommended config's mean USD to target on equal terms over its seeds, with its interval, and its ratio to
    the baseline's mean with the ratio's interval (when the two are compared: :attr:`Payback.compared`)."""
    c = rec.config
    n = len(c.counted_trials)
    spread = f"95% CI ${c.race_lo:.4f}-${c.race_hi:.4f}" if n > 1 else "one seed: no interval"
    text = (
        f"mean {'>= ' if c.censored else ''}${c.race_mean:.4f} per training run on equal terms ({spread}) over {n} "
        f"seed{'s' if n != 1 else ''}"
    )
    vs = rec.vs_baseline
    if rec.is_baseline:
        return text + "; it is the baseline"
    if vs is None or vs.ratio is None or not pay.compared:
        return text
    b, low = vs.baseline, pay.baseline_is_lower_bound
    nb = len(b.counted_trials)
    ci = f"95% CI {vs.lo:.2f}-{vs.hi:.2f}" if vs.lo is not None else "no interval: fewer than 2 seeds on a side"
    return text + (
        f"; {'<= ' if low else ''}{vs.ratio:.2f}x the baseline's mean {'>= ' if low else ''}${b.race_mean:.4f} over "
        f"{nb} seed{'s' if nb != 1 else ''} ({ci}; baseline: {describe_params(b.params)})"
    )


def study_text(s: Summary, pay: Payback | None) -> str:
    """What the study cost: every trial billed, in baseline training runs when compared, by phase, the share spent on
    pruned and failed trials."""
    text = f"${s.total_usd:.4f}"
    if pay is not None and pay.study_in_baseline_runs is not None:
        bound = "<= " if pay.baseline_is_lower_bound else ""
        text += f", {bound}{pay.study_in_baseline_runs:.1f} baseline training runs"
    phases = phase_text(s)
    return text + f" ({phases + '; ' if phases else ''}{100 * s.pruned_failed_share:.1f}% on pruned and failed trials)"


def usd_text(value: float) -> str:
    """``value`` USD to 4 decimals, or to 2 significant digits where that would read $0.0000: a CPU run's saving per
    training run can be a few millionths of a dollar, and the runs to pay it back are quoted beside it."""
    if value == 0 or abs(value) >= 5e-5:
        return f"${value:.4f}"
    return f"${value:.{1 - math.floor(math.log10(abs(value)))}f}"


def payback_text(rec: Recommendation, pay: Payback) -> str:
    """The saving per training run and the runs after which the study has paid for itself, or why there are none."""
    if not pay.compared or pay.saving_per_run_usd is None:
        return pay.note
    if rec.is_baseline:
        return "none: the recommended config is the baseline"
    low = pay.baseline_is_lower_bound
    if pay.runs_to_pay_back is None:
        return (
            f"none: the recommended config costs {usd_text(-pay.saving_per_run_usd)} more per training run than the "
            "baseline on equal terms"
        )
    text = (
        f"saves {'>= ' if low else ''}{usd_text(pay.saving_per_run_usd)} per training run on equal terms; the study "
        f"pays for itself after {'<= ' if low else ''}{pay.runs_to_pay_back:.1f} training runs"
    )
    vs = rec.vs_baseline
    if vs is not None and vs.hi is not None and vs.hi >= 1.0:
        text += " (the ratio's 95% interval reaches 1: the saving may be none)"
    return text


#: How the study's phases (:data:`sweep.contract.STUDY_PHASES`) are named where their spend is given.
PHASE_NAMES = {"screen": "screen", "search": "search", "probe": "probes", "confirm": "confirmation"}


def phase_text(s: Summary) -> str:
    """'search $a, confirmation $b', with the screen's and the probes' spend where they ran, in the study's order (''
    when the study was a search alone)."""
    spent = {p: s.usd_by_phase[p] for p in PHASE_NAMES if s.usd_by_phase.get(p)}
    if set(spent) <= {"search"}:
        return ""
    return ", ".join(f"{PHASE_NAMES[p]} ${usd:.4f}" for p, usd in spent.items())
