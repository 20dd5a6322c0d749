"""The figures a run ends with, from its ledger only: one :class:`Summary` (built by :func:`summarize`) behind the
three printouts (``sweep.run``'s text, ``sweep.trial``'s trial summary, the report's top box), the decision they lead
with (:func:`decision_lines`: what to use, its cost to target against the baseline, what the study cost, its payback),
the recommended trial (or the one that came closest) and how a config is described. The per-config statistics over
seeds, the recommendation and its payback are :mod:`sweep.analysis.evidence`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.analysis.evidence import Payback, Recommendation, config_stats, payback, recommend
from sweep.analysis.figures import TrialFigures
from sweep.analysis.texts import ci_text, cost_text, describe_params, payback_text, study_text
from sweep.contract import TrialState
from sweep.ledger import LedgerView, Row, end_label, metrics, read_rows, summary_figures
from sweep.prices import usd


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
    """How it ended, as counts show it (:func:`~sweep.ledger.end_label`)."""
    change: str
    """The key that would most likely let it reach (a per-trial cap, the study budget, or the target itself)."""


@dataclass(frozen=True)
class Restarts:
    """The one-time seconds a run split into pieces paid again: each resumed piece starts its workers afresh, and the
    first trial of each worker pays their start-up and compilation again (:attr:`sweep.record.Row.fresh_worker`;
    on Isaac Lab, Warp compiles its kernels at their first launch in each process)."""

    pieces: int
    """Drivers after the run's first (resumes that wrote a row)."""
    trials: int
    """Trials of those pieces that were their worker's first."""
    one_time_s: float
    """Their one-time seconds: start-up and compilation (:data:`sweep.contract.ONE_TIME_PHASES`)."""
    usd: float
    """Those seconds at each trial's price (billed within the trials' own USD, not on top of it)."""


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
    reached_first: int = 0
    """Reached trials whose first checkpoint already reached the target: their cost to target is one evaluation
    round's, a bound no finer than ``target.eval_every_steps``."""
    payback: Payback | None = None
    """Whether the study paid for itself against the baseline; None when no config reached the target."""
    cut_short: tuple[int, float] = (0, 0.0)
    """(trials, USD) ended by the study's own stops rather than by their config (:attr:`EndCause.by_study`: Ctrl-C,
    SIGTERM, the end of a run split into pieces, a dead driver): billed, and told apart because what they spent
    measured nothing (their configs may run again)."""
    restarts: Restarts | None = None
    """What resuming the run cost in start-up (None for a run never resumed)."""

    @property
    def reached_trials(self) -> int:
        return self.trials_by_state.get("reached", 0)

    @property
    def failed_trials(self) -> int:
        return self.trials_by_state.get("failed", 0)

    @property
    def evaluated(self) -> bool:
        """Whether any trial ran a held-out pass."""
        return self.recommended is not None or self.closest is not None

    @property
    def top_failure(self) -> tuple[str, int] | None:
        """The most common reason among failed trials (shortened) and how many trials failed with it."""
        reasons = Counter(short_reason(t.reason) for t in self.trials.values() if t.state == TrialState.FAILED)
        return reasons.most_common(1)[0] if reasons else None


def summarize(rows: Iterable[Row]) -> Summary:
    """The one summary of a ledger (all figures derived from its rows; kept by its view until the next row)."""
    return LedgerView.of(rows).derived(_summarize)


def _summarize(view: LedgerView) -> Summary:
    figures = summary_figures(view)
    trials = {t: TrialFigures.of(r) for t, r in view.last.items()}
    rec = recommend(config_stats(view), trials)
    by_phase: dict[str, float] = {}
    for t in trials.values():
        by_phase[t.phase] = by_phase.get(t.phase, 0.0) + t.usd
    return Summary(
        total_usd=figures.total_usd,
        usd_by_state=figures.usd_by_state,
        pruned_failed_share=figures.pruned_failed_share,
        trials_by_state=dict(Counter(t.label for t in trials.values())),
        pareto=figures.pareto,
        usd_per_reached=figures.usd_per_reaching_trial,
        trials=trials,
        recommended=rec.trial if rec is not None else None,
        recommendation=rec,
        usd_by_phase=by_phase,
        closest=closest_trial(view) if rec is None else None,
        n_rows=len(view),
        reached_first=reached_at_first_checkpoint(view),
        payback=payback(rec, figures.total_usd) if rec is not None else None,
        cut_short=cut_short(view),
        restarts=restarts(view),
    )


def restarts(rows: Iterable[Row]) -> Restarts | None:
    """The one-time seconds paid again by the pieces after the first (:class:`Restarts`); None for a run in one
    piece."""
    view = LedgerView.of(rows)
    pieces = {r.piece for r in view}
    if pieces <= {0}:
        return None
    fresh = [r for r in view.last.values() if r.piece > 0 and r.fresh_worker and r.ran]
    paid = [(metrics(r).one_time_s, r.price_usd_per_hour) for r in fresh]
    return Restarts(
        pieces=len(pieces - {0}),
        trials=len(fresh),
        one_time_s=sum(seconds for seconds, _ in paid),
        usd=sum(usd(seconds, per_hour) for seconds, per_hour in paid),
    )


def cut_short(rows: Iterable[Row]) -> tuple[int, float]:
    """(trials, USD) of the trials that ran and ended by the study's own stops (:attr:`Summary.cut_short`)."""
    cut = [r for r in LedgerView.of(rows).last.values() if r.ran and r.by_study]
    return len(cut), sum(metrics(r).usd for r in cut)


def reached_at_first_checkpoint(rows: Iterable[Row]) -> int:
    """Reached trials whose reaching row is at the earliest iteration of any of their rows (their first
    checkpoint)."""
    view = LedgerView.of(rows)
    first: dict[int, int] = {}
    for r in view:
        first[r.trial] = min(first.get(r.trial, r.iteration), r.iteration)
    return sum(r.state == TrialState.REACHED and r.iteration == first[t] for t, r in view.last.items())


def short_reason(reason: str, width: int = 160) -> str:
    """A failure's reason on one line of at most ``width`` characters."""
    line = " ".join(reason.split()) or "no reason recorded"
    return line if len(line) <= width else line[: width - 3] + "..."


def failure_line(s: Summary, ledger_path: str | Path) -> str | None:
    """Why trials failed, in one line: the most common reason with its count, and where every reason is."""
    top = s.top_failure
    if top is None:
        return None
    reason, n = top
    return (
        f"{s.failed_trials} trial{'s' if s.failed_trials != 1 else ''} failed; most common reason ({n} of "
        f"{s.failed_trials}): {reason}; every trial's reason is in {ledger_path}"
    )


def resolution_line(s: Summary) -> str | None:
    """When at least half the reached trials (and 2 or more) reached at their first checkpoint: the ranking only
    measures costs to the nearest evaluation round, and which key refines it. None otherwise."""
    n, k = s.reached_trials, s.reached_first
    if n < 2 or 2 * k < n:
        return None
    return (
        f"{k} of {n} reached trials reached the target at their first checkpoint: their cost to target is one "
        "evaluation round's, so the ranking cannot separate them by less; a smaller target.eval_every_steps ranks "
        "them more finely (with more passes)"
    )


def closest_trial(rows: Iterable[Row]) -> Closest | None:
    """When no trial reached the target: the trial with the best held-out success, how it ended, and the key
    that would most likely let it reach (a per-trial cap, the study budget, or the target itself)."""
    view = LedgerView.of(rows)
    evaluated = [(r.success, r) for r in view if r.success is not None]
    if not evaluated:
        return None
    success, best = max(evaluated, key=lambda x: (x[0], -x[1].billable_s))
    end = view.last[best.trial]
    if "per-trial cap" in end.reason:
        key = "budget.trial_usd (the per-trial cap stopped it)"
    elif end.state == TrialState.CAPPED:
        key = "budget.usd (the study budget ran out while it trained)"
    elif end.state == TrialState.PRUNED:
        key = "search.prune=false or budget.trial_usd (the planner stopped it on cost)"
    else:
        key = "target.success, or budget.trial_usd for longer trials"
    return Closest(best.trial, best.params, success, metrics(end).usd, end_label(end), key)


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


def reached_text(s: Summary) -> str:
    n = s.reached_trials
    return f"{n} trial{'s' if n != 1 else ''} reached the target"


def states_text(s: Summary) -> str:
    """'1 capped, 2 reached' ('' when the ledger has no trial)."""
    return ", ".join(f"{n} {state}" for state, n in sorted(s.trials_by_state.items()))


def checkpoint_text(rec: TrialFigures, run_dir: Path) -> str:
    """The recommended trial's checkpoint, relative to the run folder, and whether the folder still holds it (a run
    folder brought back from a machine without its checkpoints does not)."""
    if not rec.checkpoint:
        return "none saved"
    if (run_dir / rec.checkpoint).is_file():
        return rec.checkpoint
    return (
        f"{rec.checkpoint}, not in this run folder (copied without checkpoints, or deleted): train its config again "
        f"on seed {rec.seed} for it"
    )


def run_text(
    s: Summary, ledger_path: str | Path = "ledger.jsonl", trainer: str | None = None, ended: str | None = None
) -> str:
    """The end-of-run summary printed by sweep.run: the decision first (:func:`decision_lines`; ``trainer``: the Isaac
    Lab trainer line of recommended.yaml; ``ended``: why the study ended), then the trials, why any failed, and the
    recommended config's best seed."""
    lines = [f"{label}: {text}" for label, text in decision_lines(s, trainer, ended)]
    lines.append(f"trials: {states_text(s) or 'none'}")
    n, cut_usd = s.cut_short
    if n:
        lines.append(
            f"cut short: {n} trial{'s' if n != 1 else ''} stopped by the study itself (a stop signal, a run's piece "
            f"ending, a dead driver), ${cut_usd:.4f}, {cut_usd / s.total_usd:.1%} of the study's spend: billed, "
            "measured nothing, their configs free to run again"
        )
    if s.restarts is not None:
        r = s.restarts
        lines.append(
            f"resumed: {r.pieces} time{'s' if r.pieces != 1 else ''}; start-up and compilation paid again by the first "
            f"trial of each fresh worker: {r.trials} trial{'s' if r.trials != 1 else ''}, {r.one_time_s:.1f} s, "
            f"${r.usd:.4f}, {r.usd / s.total_usd if s.total_usd else 0.0:.1%} of the study's spend"
        )
    failed = failure_line(s, ledger_path)
    lines += [f"failures: {failed}"] if failed else []
    rec = s.recommended
    if rec:
        lines += [
            f"best seed: trial {rec.trial} (seed {rec.seed}), whose checkpoint is the deliverable: USD to target "
            f"${rec.usd_to_target:.4f} (${rec.race_usd_to_target:.4f} on equal terms: without its "
            f"{rec.one_time_s:.1f} s of start-up and compilation), wall to target {rec.wall_to_target_s:.1f} s, "
            f"held-out success {rec.success:.3f} ({ci_text(rec.success_lo, rec.success_hi)}), "
            f"{rec.throughput_sps:,.0f} env steps/s, {rec.bottleneck}",
            f"  study spend per target-reaching checkpoint ${s.usd_per_reached:.4f} ({reached_text(s)}); "
            f"checkpoint {checkpoint_text(rec, Path(ledger_path).parent)}",
            f"Pareto set (USD, wall-clock): trials {s.pareto}",
        ]
        coarse = resolution_line(s)
        lines += [f"note: {coarse}"] if coarse else []
    return "\n".join(lines)


def text_summary(run_dir: str | Path) -> str:
    """The end-of-run summary printed by sweep.run (from the ledger only)."""
    path = Path(run_dir) / "ledger.jsonl"
    return run_text(summarize(read_rows(path)), path)


def decision_lines(s: Summary, trainer: str | None = None, ended: str | None = None) -> list[tuple[str, str]]:
    """The decision, as (label, sentence) pairs in the order a reader needs them: what to use (and ``trainer``, the
    Isaac Lab trainer line, when given), its cost to target against the baseline, what the study cost (in baseline
    runs when compared), its payback, and why the study ended (``ended``, the planner's record, when given). The
    printout and the report's card both lead with these, each said once; without a config that reached the target:
    the trial that came closest and the study's cost."""
    rec, pay = s.recommendation, s.payback
    why = [("study ended", ended)] if ended else []
    if rec is None or pay is None:
        outcome = ("outcome", f"no trial reached the target; {closest_line(s)}")
        return [outcome, ("study cost", study_text(s, None)), *why]
    lines = [("use", describe_params(rec.config.params))]
    lines += [("Isaac Lab trainer", trainer)] if trainer else []
    lines += [("cost to target", cost_text(rec, pay)), ("study cost", study_text(s, pay))]
    return [*lines, ("payback", payback_text(rec, pay)), *why]
