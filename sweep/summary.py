"""The figures a run ends with, from its ledger only: one :class:`Summary` (built by :func:`summarize`) behind the
three printouts (``sweep.run``'s text, ``sweep.trial``'s trial summary, the report's top box), the recommended trial
(or the one that came closest), how a config is described, and the per-config statistics over seeds.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.contract import stopped_by_cap
from sweep.ledger import END_STATES, end_label, last_rows, metrics, read_rows, summary_figures


@dataclass(frozen=True)
class TrialFigures:
    """One trial's figures, from its latest ledger row (its end row once it has ended), each from
    :func:`sweep.ledger.metrics` over the denominator its name says."""

    trial: int
    state: str
    """The ledger state: running / reached / capped / pruned / failed."""
    label: str
    """The state shown in counts: 'not run' for a config told PRUNED without running (:func:`end_label`)."""
    reason: str
    params: dict[str, Any]
    seed: int
    env_steps: int
    training_s: float
    """Seconds of sim + policy + learn (throughput's denominator)."""
    throughput_sps: float
    """Env steps per training second."""
    wall_s: float
    """Billable seconds so far."""
    usd: float
    """Billable seconds x price."""
    usd_to_target: float | None
    """USD when the trial reached the target, else None."""
    race_usd_to_target: float | None
    """The same on equal terms: without the one-time start-up and compilation (what the ranking compares)."""
    one_time_s: float
    """Billable seconds of start-up and compilation."""
    wall_to_target_s: float | None
    success: float | None
    success_lo: float | None
    success_hi: float | None
    success_max: float | None
    """The most a full pass could have measured, when the last pass stopped once below the target was certain."""
    eval_episodes: int
    bottleneck: str
    price_label: str
    price_usd_per_hour: float
    device: str
    checkpoint: str | None
    """The checkpoint file relative to the run folder, None when none is kept."""
    phase: str = "search"
    """The study phase the trial belongs to: 'search' or 'confirm'."""
    baseline: bool = False
    """The trial ran the study's baseline config."""
    race_usd: float = 0.0
    """USD so far on equal terms (without start-up and compilation)."""

    @classmethod
    def of(cls, row: dict) -> TrialFigures:
        m = metrics(row)
        return cls(
            trial=int(row["trial"]),
            state=row["state"],
            label=end_label(row),
            reason=row.get("reason", ""),
            params=row["params"],
            seed=int(row.get("seed", 0)),
            env_steps=int(row["env_steps"]),
            training_s=m["training_s"],
            throughput_sps=m["throughput_sps"],
            wall_s=m["wall_s"],
            usd=m["usd"],
            usd_to_target=m["usd_to_target"],
            race_usd_to_target=m["race_usd_to_target"],
            one_time_s=m["one_time_s"],
            wall_to_target_s=m["wall_to_target_s"],
            success=row.get("success"),
            success_lo=row.get("success_lo"),
            success_hi=row.get("success_hi"),
            success_max=row.get("success_max"),
            eval_episodes=int(row.get("eval_episodes", 0)),
            bottleneck=m["bottleneck"],
            price_label=row.get("price_label", ""),
            price_usd_per_hour=float(row["price_usd_per_hour"]),
            device=row.get("device", ""),
            checkpoint=row.get("checkpoint") or None,
            phase=row.get("phase", "search"),
            baseline=bool(row.get("baseline", False)),
            race_usd=m["race_usd"],
        )


@dataclass(frozen=True)
class Closest:
    """When no trial reached the target: the trial with the best held-out success and the key to change."""

    trial: int
    params: dict[str, Any]
    success: float
    """Its best held-out success (at any checkpoint)."""
    usd: float
    """What it spent in all (its latest row)."""
    state: str
    change: str
    """The key that would most likely let it reach (a per-trial cap, the study budget, or the target itself)."""


@dataclass(frozen=True)
class Summary:
    """Every figure the three printouts show (``sweep.run``, ``sweep.trial``, the report's top box)."""

    total_usd: float
    """Study spend: every trial, pruned and failed included."""
    usd_by_state: dict[str, float]
    pruned_failed_share: float
    """Share of the study spend on pruned and failed trials (0-1)."""
    trials_by_state: dict[str, int]
    """Trials by shown state (:func:`end_label`)."""
    pareto: list[int]
    """Trials on the (USD, wall-clock) to target Pareto front."""
    usd_per_reached: float | None
    """Study spend per target-reaching trial."""
    trials: dict[int, TrialFigures]
    """Every trial's figures, by trial number."""
    recommended: TrialFigures | None
    """The trial behind the recommendation (its checkpoint): the recommended config's cheapest seed to the target on
    equal terms; None when none reached."""
    recommendation: Recommendation | None
    """The recommended config over its seeds, with the baseline comparison; None when none reached."""
    usd_by_phase: dict[str, float]
    """Study spend by phase ('search', 'confirm'), every trial included."""
    closest: Closest | None
    """When none reached: the trial that came closest (None when none was evaluated either)."""
    n_rows: int
    """Ledger rows read."""

    @property
    def reached_trials(self) -> int:
        return self.trials_by_state.get("reached", 0)


def summarize(rows: list[dict]) -> Summary:
    """The one summary of a ledger (all figures derived from its rows)."""
    figures = summary_figures(rows)
    trials = {t: TrialFigures.of(r) for t, r in last_rows(rows).items()}
    rec = recommend(config_stats(rows), trials)
    by_phase: dict[str, float] = {}
    for t in trials.values():
        by_phase[t.phase] = by_phase.get(t.phase, 0.0) + t.usd
    return Summary(
        total_usd=figures["total_usd"],
        usd_by_state=figures["usd_by_state"],
        pruned_failed_share=figures["pruned_failed_share"],
        trials_by_state=dict(Counter(t.label for t in trials.values())),
        pareto=figures["pareto"],
        usd_per_reached=figures["usd_per_reaching_trial"],
        trials=trials,
        recommended=rec.trial if rec is not None else None,
        recommendation=rec,
        usd_by_phase=by_phase,
        closest=closest_trial(rows) if rec is None else None,
        n_rows=len(rows),
    )


def closest_trial(rows: list[dict]) -> Closest | None:
    """When no trial reached the target: the trial with the best held-out success, how it ended, and the key
    that would most likely let it reach (a per-trial cap, the study budget, or the target itself)."""
    evaluated = [r for r in rows if r.get("success") is not None]
    if not evaluated:
        return None
    best = max(evaluated, key=lambda r: (r["success"], -r["billable_s"]))
    end = last_rows(rows)[best["trial"]]
    reason = end.get("reason", "")
    if "per-trial cap" in reason:
        key = "budget.trial_usd (the per-trial cap stopped it)"
    elif end["state"] == "capped":
        key = "budget.usd (the study budget ran out while it trained)"
    elif end["state"] == "pruned":
        key = "prune=false or budget.trial_usd (the planner stopped it on cost)"
    else:
        key = "target.success, or budget.trial_usd for longer trials"
    return Closest(best["trial"], best["params"], best["success"], metrics(end)["usd"], end_label(end), key)


def closest_line(s: Summary) -> str:
    """Which trial came closest to the target and what to change (for a run that found no config)."""
    near = s.closest
    if near is None:
        return "no trial was evaluated"
    return (
        f"closest: trial {near.trial} ({describe_params(near.params)}), "
        f"held-out success {near.success:.3f}, {near.state} after ${near.usd:.4f}; to go further change "
        f"{near.change}"
    )


def ci_text(lo: float | None, hi: float | None) -> str:
    return f"95% CI {lo:.3f}-{hi:.3f}" if lo is not None and hi is not None else "no interval recorded"


def changed_flags(params: dict[str, Any]) -> str:
    """The perf flags of a trial that differ from rsl-rl's behaviour, e.g. 'fused_optimizer, log_every=0'."""
    from sweep import perf
    from sweep.contract import named_flags

    return ", ".join(
        k if v is True else f"{k}={v}"
        for k, v in sorted(named_flags(params).items())
        if k in perf.CATALOG and v != perf.CATALOG[k].default
    )


def describe_params(params: dict[str, Any]) -> str:
    """'4096 envs x 12 steps, 4 mini-batches; flags on: a, b' (flags at their defaults are left out)."""
    text = f"{params.get('num_envs')} envs x {params.get('num_steps_per_env')} steps, "
    text += f"{params.get('num_mini_batches')} mini-batches"
    flags = changed_flags(params)
    return text + (f"; flags on: {flags}" if flags else "; no perf flags")


def reached_text(s: Summary) -> str:
    n = s.reached_trials
    return f"{n} trial{'s' if n != 1 else ''} reached the target"


def states_text(s: Summary) -> str:
    """'1 capped, 2 reached' ('' when the ledger has no trial)."""
    return ", ".join(f"{n} {state}" for state, n in sorted(s.trials_by_state.items()))


def run_text(s: Summary) -> str:
    """The end-of-run summary printed by sweep.run."""
    phases = phase_text(s)
    lines = [
        f"trials: {states_text(s) or 'none'}; study spend ${s.total_usd:.4f} "
        f"({100 * s.pruned_failed_share:.1f}% on pruned and failed trials{'; ' + phases if phases else ''})"
    ]
    rec = s.recommended
    if rec:
        lines += [
            recommendation_line(s),
            f"best seed: trial {rec.trial} ({describe_params(rec.params)})",
            f"  USD to target ${rec.usd_to_target:.4f} (${rec.race_usd_to_target:.4f} on equal terms: without its "
            f"{rec.one_time_s:.1f} s of start-up and compilation), wall to target {rec.wall_to_target_s:.1f} s, "
            f"held-out success {rec.success:.3f} ({ci_text(rec.success_lo, rec.success_hi)}), "
            f"{rec.throughput_sps:,.0f} env steps/s, {rec.bottleneck}",
            f"  study spend per target-reaching checkpoint ${s.usd_per_reached:.4f} ({reached_text(s)}); "
            f"checkpoint {rec.checkpoint or 'none saved'}",
            f"Pareto set (USD, wall-clock): trials {s.pareto}",
        ]
    else:
        lines.append(f"no trial reached the target; {closest_line(s)}")
    return "\n".join(lines)


def text_summary(run_dir: str | Path) -> str:
    """The end-of-run summary printed by sweep.run (from the ledger only)."""
    return run_text(summarize(read_rows(Path(run_dir) / "ledger.jsonl")))


def pass_text(success: float | None, success_max: float | None) -> str:
    """A held-out pass in a few characters: its rate, or for a pass stopped below the target the most a full
    pass could have measured."""
    if success is not None:
        return f"{success:.3f}"
    if success_max is not None:
        return f"< {success_max:.3f} (stopped once below the target was certain)"
    return "not evaluated"


def format_summary(s: Summary, trial: int, target: float, ledger_path: Path) -> str:
    """The summary ``python -m sweep.trial`` prints for one trial of the ledger ``s`` was built from."""
    t = s.trials[trial]
    lines = [f"trial {t.trial}: {t.state} ({t.reason})"]
    if t.success is not None:
        lines.append(
            f"  held-out success   {t.success:.3f} ({ci_text(t.success_lo, t.success_hi)}, "
            f"{t.eval_episodes} episodes; target {target:g})"
        )
    elif t.success_max is not None:
        lines.append(f"  held-out success   {pass_text(None, t.success_max)} (target {target:g})")
    lines += [
        f"  env steps          {t.env_steps:,}",
        f"  throughput         {t.throughput_sps:,.0f} env steps/s (over {t.training_s:.1f} training s)",
    ]
    if t.wall_to_target_s is not None:
        lines.append(f"  wall to target     {t.wall_to_target_s:.1f} s (all billable phases)")
        lines.append(f"  USD to target      ${t.usd_to_target:.4f} at {t.price_label} (${t.price_usd_per_hour:g}/h)")
    else:
        lines.append(f"  spent              {t.wall_s:.1f} s, ${t.usd:.4f} at {t.price_label}")
    lines += [f"  bottleneck         {t.bottleneck}", f"  ledger             {ledger_path} ({s.n_rows} rows)"]
    return "\n".join(lines)


#: Student t 0.975 quantiles for 1-30 degrees of freedom (scipy.stats.t.ppf, to 6 decimals); above 30 an expansion.
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip
_Z975 = 1.959963985


def t975(df: int) -> float:
    """The two-sided 95% Student t quantile for ``df`` >= 1 degrees of freedom (scipy is not a dependency)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    if df <= len(_T975):
        return _T975[df - 1]
    z, n = _Z975, float(df)  # Cornish-Fisher expansion around the normal quantile: within 1e-6 from 31 on
    return (
        z
        + (z**3 + z) / (4 * n)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3)
    )


#: How the recommendation is chosen (written into recommended.yaml and the README).
RANKING_RULE = (
    "the config with the lowest mean USD to target on equal terms (billable seconds less one-time start-up and "
    "compilation, x price) over its seeds; a seed that stopped on cost before the target (pruned, or at its cap) "
    "counts at what it had spent, a lower bound, and a config with such a seed ranks after every config whose seeds "
    "all reached; when a confirmation ran, the configs it confirmed rank before every config it did not (a single "
    "search seed cannot outrank a mean over confirmed seeds); failed trials and trials stopped by the study's end "
    "are no seeds of the mean"
)
#: How the recommendation is compared with the baseline.
VS_BASELINE_RULE = (
    "ratio of the mean USD to target on equal terms, recommended / baseline (one-time start-up and compilation left "
    "out of both); 95% interval by the delta method on the log of each mean with Welch-Satterthwaite degrees of "
    "freedom, each config's seeds taken as independent samples (confirmation gives both the same seeds, their search "
    "seeds differ); no interval with fewer than 2 seeds on either side"
)


@dataclass(frozen=True)
class ConfigStat:
    """One config (``contract.config_key``) over the trials that ran it, each with its own seed: the mean USD to
    target of the seeds that reached it (billed), with a 95% Student t interval over those seeds, and the same on
    equal terms over every seed that counts (:data:`RANKING_RULE`), which ranks configs."""

    key: tuple
    params: dict[str, Any]
    """The params of the config's first trial (as the ledger records them)."""
    trials: tuple[int, ...]
    """Trials that ran this config to an end (configs told without running and trials still running left out)."""
    seeds: tuple[int, ...]
    """Their training seeds, in the same order."""
    reached_trials: tuple[int, ...]
    usd_to_target: tuple[float, ...]
    """USD to target of each reached trial, in the order of ``reached_trials``."""
    mean_usd: float | None
    """Mean USD to target over the reached seeds (None when none reached)."""
    lo: float | None
    """Lower end of the 95% t interval of that mean (equal to the mean with one reached seed)."""
    hi: float | None
    counted_trials: tuple[int, ...] = ()
    """Trials whose cost is a seed of the ranking mean: the reached ones and the censored ones (stopped on cost)."""
    race_usd: tuple[float, ...] = ()
    """USD on equal terms of each counted trial (to the target, or until it stopped), in that order."""
    censored_trials: tuple[int, ...] = ()
    """Counted trials that stopped on cost before the target: their cost to target is more than they spent."""
    race_mean: float | None = None
    """Mean USD on equal terms over the counted seeds (a lower bound when one is censored); None when none counts."""
    race_lo: float | None = None
    race_hi: float | None = None
    baseline: bool = False
    """The config is the study's baseline (a trial of it says so)."""
    confirmed: bool = False
    """The confirmation phase ran this config (a trial of it says so)."""

    @property
    def n_seeds(self) -> int:
        return len(self.trials)

    @property
    def n_reached(self) -> int:
        return len(self.reached_trials)

    @property
    def censored(self) -> bool:
        return bool(self.censored_trials)

    @property
    def reached_seeds(self) -> tuple[int, ...]:
        return tuple(seed for t, seed in zip(self.trials, self.seeds, strict=True) if t in self.reached_trials)


def rank_key(c: ConfigStat) -> tuple:
    """How configs rank (:data:`RANKING_RULE`): those with a counted seed first, confirmed before unconfirmed,
    uncensored before censored, then by mean USD to target on equal terms, then by first trial."""
    return (c.race_mean is None, not c.confirmed, c.censored, c.race_mean or 0.0, c.trials[0])


def config_stats(rows: list[dict]) -> list[ConfigStat]:
    """Every config that ran, with its seeds and mean costs, best first (:func:`rank_key`)."""
    groups: dict[tuple, list[dict]] = {}
    ends = last_rows(rows)
    for r in (ends[t] for t in sorted(ends)):
        if r["state"] in END_STATES and end_label(r) != "not run":
            groups.setdefault(config_identity(r["params"]), []).append(r)
    stats = []
    for key, members in groups.items():
        reached = [r for r in members if r["state"] == "reached"]
        counted = [r for r in members if r["state"] == "reached" or stopped_by_cap(r)]
        usd = tuple(float(metrics(r)["usd_to_target"]) for r in reached)
        race = tuple(float(metrics(r)["race_usd"]) for r in counted)
        mean, lo, hi = _t_interval(usd)
        race_mean, race_lo, race_hi = _t_interval(race)
        stats.append(
            ConfigStat(
                key=key,
                params=members[0]["params"],
                trials=tuple(int(r["trial"]) for r in members),
                seeds=tuple(int(r.get("seed", 0)) for r in members),
                reached_trials=tuple(int(r["trial"]) for r in reached),
                usd_to_target=usd,
                mean_usd=mean,
                lo=lo,
                hi=hi,
                counted_trials=tuple(int(r["trial"]) for r in counted),
                race_usd=race,
                censored_trials=tuple(int(r["trial"]) for r in counted if r["state"] != "reached"),
                race_mean=race_mean,
                race_lo=race_lo,
                race_hi=race_hi,
                baseline=any(r.get("baseline") for r in members),
                confirmed=any(r.get("phase") == "confirm" for r in members),
            )
        )
    return sorted(stats, key=rank_key)


@dataclass(frozen=True)
class VsBaseline:
    """The recommended config against the baseline (:data:`VS_BASELINE_RULE`)."""

    ratio: float | None
    """Mean USD to target on equal terms, recommended / baseline (None when the baseline has no counted seed)."""
    lo: float | None
    """95% interval of the ratio (None with fewer than 2 seeds on either side)."""
    hi: float | None
    baseline: ConfigStat
    shared_seeds: tuple[int, ...]
    """Training seeds both configs ran."""


@dataclass(frozen=True)
class Recommendation:
    """The recommended config over its seeds (:data:`RANKING_RULE`) and how it compares with the baseline."""

    config: ConfigStat
    trial: TrialFigures
    """Its cheapest seed to the target on equal terms: the trial whose checkpoint is the deliverable."""
    vs_baseline: VsBaseline | None
    """None when no trial ran the baseline."""

    @property
    def is_baseline(self) -> bool:
        return self.config.baseline


def recommend(stats: list[ConfigStat], trials: dict[int, TrialFigures]) -> Recommendation | None:
    """The best config (``stats`` ranked by :func:`rank_key`) that reached the target at least once, or None."""
    best = next((c for c in stats if c.n_reached > 0 and c.race_mean is not None), None)
    if best is None:
        return None
    trial = min((trials[t] for t in best.reached_trials), key=lambda t: (t.race_usd_to_target or 0.0, t.trial))
    base = next((c for c in stats if c.baseline), None)
    vs = None
    if base is not None:
        ratio, lo, hi = ratio_interval(best.race_usd, base.race_usd)
        vs = VsBaseline(ratio, lo, hi, base, tuple(sorted(set(best.seeds) & set(base.seeds))))
    return Recommendation(best, trial, vs)


def ratio_interval(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float | None, float | None, float | None]:
    """(ratio, lo, hi): mean(a) / mean(b) with its 95% interval by the delta method on log means (Welch-Satterthwaite
    degrees of freedom, samples independent); no interval with fewer than 2 values on either side."""
    if not a or not b:
        return None, None, None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    if ma <= 0 or mb <= 0:
        return (ma / mb if mb > 0 else None), None, None
    ratio = ma / mb
    if len(a) < 2 or len(b) < 2:
        return ratio, None, None
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / (len(a) * ma**2)  # var of log(mean a), to first order
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / (len(b) * mb**2)
    se = math.sqrt(va + vb)
    if se == 0:
        return ratio, ratio, ratio
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t975(max(1, math.floor(df))) * se
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def recommendation_line(s: Summary) -> str:
    """The recommendation in one line: config, mean cost over its seeds with the interval, the baseline ratio."""
    rec = s.recommendation
    if rec is None:
        return "no config reached the target"
    c = rec.config
    n = len(c.counted_trials)
    bound = ">= " if c.censored else ""
    spread = f"95% CI {c.race_lo:.4f}-{c.race_hi:.4f}" if n > 1 else "one seed: no interval"
    text = (
        f"recommended {describe_params(c.params)}: mean {bound}${c.race_mean:.4f} to target on equal terms "
        f"({spread}) over {n} seed{'s' if n != 1 else ''}"
    )
    vs = rec.vs_baseline
    if rec.is_baseline:
        return text + "; it is the baseline"
    if vs is None or vs.ratio is None:
        return text + "; the baseline was not run"
    ci = f"95% CI {vs.lo:.2f}-{vs.hi:.2f}" if vs.lo is not None else "no interval: fewer than 2 seeds"
    return text + f"; {vs.ratio:.2f}x the baseline ({ci}; baseline mean ${vs.baseline.race_mean:.4f})"


def phase_text(s: Summary) -> str:
    """'search $a, confirmation $b' ('' when the study had no confirmation)."""
    if not s.usd_by_phase.get("confirm"):
        return ""
    return f"search ${s.usd_by_phase.get('search', 0.0):.4f}, confirmation ${s.usd_by_phase['confirm']:.4f}"


def _t_interval(values: tuple[float, ...]) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi): the 95% Student t interval of the mean; a single value is its own interval."""
    n = len(values)
    if n == 0:
        return None, None, None
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def config_identity(params: dict[str, Any]) -> tuple:
    """The identity a config's statistics are kept under: ``contract.config_key``; a ledger that names a flag this
    catalog no longer has (or lacks a knob) keeps its params as recorded for an identity, so an older ledger still
    gets its report."""
    from sweep.contract import config_key
    from sweep.errors import ConfigError

    try:
        return config_key(params)
    except (ConfigError, KeyError, TypeError, ValueError):
        return ("as recorded", *sorted((k, repr(v)) for k, v in params.items() if k not in ("backend", "profile")))
