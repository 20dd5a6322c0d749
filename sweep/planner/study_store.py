"""The Optuna study on disk (``study.db``): opened, its queue read, told how each trial ended, its orphans closed.

The planner owns the study; this module holds what it tells Optuna and the end rows it writes for trials it
closes itself (a lost worker, a dead driver, a proposal told without running), so that no trial is lost to the
sampler and none goes unbilled in the ledger. A row always reaches the ledger before Optuna is told: a crash
between the two leaves a trial that the next resume closes from its row.

How an end is told (:func:`tell_end`, :func:`tell_unrun`, :func:`tell_lost`, :func:`close_orphans`):
- reached: COMPLETE with (usd, wall) to target, feasible;
- capped or failed by its own fault (divergence, out of memory): COMPLETE with the cost spent and a
  positive ``success_gap`` constraint (infeasible, ranked by how close it came);
- pruned, and told without running (infeasible, a repeat): PRUNED with the constraint;
- lost to infrastructure (worker or driver died): FAIL.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep import faults
from sweep.config import RunConfig
from sweep.contract import EndCause, Ending, TrialConfig, TrialState
from sweep.ledger import LedgerView, Progress, Row, TrialRows, metrics
from sweep.prices import Price

if TYPE_CHECKING:
    from sweep.planner.searchers import Searcher


def open_study(run_dir: Path, searcher: Searcher) -> Any:
    """The run's study, with the ``searcher``'s Optuna sampler; a new one with what the searcher queues first (the
    initial design; every grid point for ``sampler: grid``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=f"sqlite:///{(run_dir / 'study.db').resolve()}",
        study_name="sweep",
        directions=["minimize", "minimize"],
        sampler=searcher.sampler(),
        load_if_exists=True,
    )
    with warnings.catch_warnings():  # experimental in Optuna, harmless here
        warnings.simplefilter("ignore")
        study.set_metric_names(["usd_to_target", "wall_to_target_s"])
    if not study.trials:
        searcher.open(study)
    return study


def tell_end(study: Any, trial: Any, rows: list[Row], end: Row, target: float) -> None:
    """Tell Optuna how a trial ended, from its ledger rows: reached -> its costs; pruned -> PRUNED;
    capped or failed by its own fault -> its cost so far, marked infeasible by its success gap; lost with its worker
    or driver (an end row the planner wrote before it died, told on resume) -> FAIL."""
    import optuna

    m = metrics(end)
    best_success = max((r.success for r in rows if r.success is not None), default=0.0)
    trial.set_user_attr("state", end.state.value)
    trial.set_user_attr("reason", end.reason)
    gap = max(0.0, target - best_success)
    faults.point("tell")
    if end.cause in (EndCause.WORKER_LOST, EndCause.DRIVER_STOPPED):  # an end the planner wrote, then died
        study.tell(trial, state=optuna.trial.TrialState.FAIL)  # as tell_lost and close_orphans tell it
    elif end.state == TrialState.REACHED:
        trial.set_constraint("success_gap", 0.0)
        study.tell(trial, [m.usd, m.wall_s])
    elif end.state == TrialState.PRUNED:
        trial.set_constraint("success_gap", max(gap, 1e-6))
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        trial.set_constraint("success_gap", max(gap, 1e-6) + (1.0 if end.state == TrialState.FAILED else 0.0))
        study.tell(trial, [m.usd, m.wall_s])


def dispatched_config(attrs: Mapping[str, Any]) -> TrialConfig | None:
    """The TrialConfig a trial was dispatched with, from the study's user attributes (None for a trial given none)."""
    saved = attrs.get("trial_config")
    return TrialConfig.of(saved) if isinstance(saved, Mapping) else None


def end_row(
    cfg: RunConfig,
    price: Price,
    number: int,
    params: dict,
    ending: Ending,
    billable_s: float,
    last: Row | None = None,
    dispatched: TrialConfig | None = None,
) -> Row:
    """The end row of a trial the planner closes itself: the progress of its ``last`` row (if any),
    billed ``billable_s`` seconds, the time no phase claimed counted as 'other'; its seed, phase and baseline
    mark from the TrialConfig it was ``dispatched`` with (a search trial's seed by the counter if unknown).
    Its checkpoint stays named only while ``checkpoints: all`` keeps it on disk."""
    d = dispatched
    rows = TrialRows(
        cfg.run_id,
        number,
        params,
        int(d.seed) if d is not None else number + cfg.seeds.training,
        price.usd_per_hour,
        price.label,
        d.phase if d is not None else "search",
        bool(d.baseline) if d is not None else False,
    )
    before = last.progress if last is not None else Progress()
    kept = (before.checkpoint or "") if cfg.checkpoints == "all" else ""
    progress = replace(before, billable_s=billable_s, checkpoint=kept)
    unclaimed = billable_s - before.billable_s
    if unclaimed > 0:
        progress = replace(progress, phases_s=progress.phases_s.plus("other", unclaimed))
    state, cause, reason = ending
    return rows.row(state, progress, reason, cause)


def tell_unrun(
    study: Any,
    trial: Any,
    cfg: RunConfig,
    price: Price,
    params: dict,
    reason: str,
    found: dict[str, float],
    dispatched: TrialConfig | None,
    write: Callable[[Row], None],
) -> None:
    """A proposal told PRUNED without running (infeasible, a repeat; ``found``: its constraint values): its zero-cost
    end row written first, then Optuna told."""
    import optuna

    for key, value in found.items():
        trial.set_constraint(key, value)
    trial.set_user_attr("state", TrialState.PRUNED.value)
    trial.set_user_attr("reason", reason)
    write(
        end_row(cfg, price, trial.number, params, (TrialState.PRUNED, EndCause.NOT_RUN, reason), 0.0, None, dispatched)
    )
    faults.point("tell")
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def tell_lost(
    study: Any,
    trial: Any,
    cfg: RunConfig,
    price: Price,
    rows: list[Row],
    started: float,
    ending: Ending,
    dispatched: TrialConfig,
    write: Callable[[Row], None],
) -> None:
    """A dispatched trial whose worker died or was stopped (``rows``: what it sent; ``started``: Unix s): billed to
    its last row plus the time until now, its end row written first, then Optuna told FAIL (it did not finish,
    through no fault of its config)."""
    import optuna

    last = rows[-1] if rows else None
    seen = time.time()
    billable = (last.billable_s + (seen - last.wall_time)) if last else (seen - started)
    params = trial.user_attrs["knobs"]
    write(end_row(cfg, price, trial.number, params, ending, billable, last, dispatched))
    trial.set_user_attr("state", ending[0].value)
    trial.set_user_attr("reason", ending[2])
    faults.point("tell")
    study.tell(trial, state=optuna.trial.TrialState.FAIL)


def close_orphans(
    study: Any,
    rows: LedgerView,
    cfg: RunConfig,
    price: Price,
    drivers: tuple[list[tuple[float, float]], float],
    write: Callable[[Row], None],
) -> None:
    """On resume: close the trials a dead driver left running in the study.

    A trial whose end row reached the ledger is told that end. One stopped mid-way ends 'failed', billed from its
    last row to the last sign of life of the driver that ran it (:func:`last_sign_of_life`); one with no row yet (it
    died in start-up or compilation) ends 'failed', billed from its start to that moment; one the driver never sent
    to a worker (it died between asking and dispatching) ends 'failed' at no cost. Each such end row goes to
    ``write`` (the ledger) before Optuna is told FAIL. ``drivers``: the dead drivers' (start, last beat), oldest
    first, and the current driver's start (:func:`sweep.runlock.lives`).
    """
    import optuna

    ends = rows.last
    orphans = [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    signs = [r.wall_time for r in rows if r.wall_time] + [
        t.datetime_start.timestamp() for t in study.trials if t.datetime_start is not None
    ]
    for frozen in orphans:
        last = ends.get(frozen.number)
        dispatched = dispatched_config(frozen.user_attrs)
        trial = optuna.trial.Trial(study, frozen._trial_id)
        if last is not None and last.ended:
            tell_end(study, trial, rows.of_trial(frozen.number), last, cfg.target.success)
            faults.point("orphans")
            continue
        started_at = frozen.datetime_start.timestamp() if frozen.datetime_start else None
        alive = last_sign_of_life(started_at if last is None else last.wall_time, signs, *drivers)
        if last is not None:
            # Billed to the run's last sign of life: the trial ran on at least until the driver last beat.
            reason = "driver stopped while the trial ran; billed to the driver's last sign of life"
            billable = last.billable_s + max(0.0, alive - last.wall_time)
            params = last.params
        elif dispatched is None:
            reason = "driver stopped before the trial was dispatched; nothing ran, nothing is billed"
            billable = 0.0
            params = frozen.user_attrs.get("knobs", frozen.params)
        else:
            billable = max(0.0, alive - started_at) if started_at is not None else 0.0
            reason = (
                "driver stopped before the trial's first checkpoint; billed from its start to the run's last sign "
                "of life"
            )
            params = frozen.user_attrs.get("knobs", frozen.params)
        ending = (TrialState.FAILED, EndCause.DRIVER_STOPPED, reason)
        write(end_row(cfg, price, frozen.number, params, ending, billable, last, dispatched))
        trial.set_user_attr("state", ending[0].value)
        trial.set_user_attr("reason", reason)
        faults.point("tell")
        study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        faults.point("orphans")


def last_sign_of_life(
    seen: float | None, signs: list[float], lives: list[tuple[float, float]], current_since: float
) -> float:
    """The last moment the driver that ran a trial is known alive, the trial last seen at ``seen`` (its last row, or
    its start): of the dead drivers' ``lives`` ((start, last beat), oldest first), the one that started last before
    ``seen``; its last beat, or any later sign of life (a row, a trial start: ``signs``) before the next driver
    started. With no life known (a folder without a lock or heartbeat), the latest sign of life; seen before the
    first known life began, the latest sign before it."""
    if seen is None or not lives:
        return max(signs, default=time.time())
    if seen < lives[0][0]:
        return max([seen, *(s for s in signs if s < lives[0][0])])
    index = max(i for i, (since, _) in enumerate(lives) if since <= seen)
    since, beat = lives[index]
    until = lives[index + 1][0] if index + 1 < len(lives) else current_since
    return max([beat, seen, *(s for s in signs if since <= s < until)])


#: The study's user attribute that says why it ended (read by the outputs: :func:`sweep.report.export.study_end`).
ENDED = "ended"


def record_end(study: Any, reason: str) -> None:
    """Keep why the study ended (or was stopped) in the study, for the printout, the card and recommended.yaml; a
    resumed study records its own end over it."""
    if reason:
        study.set_user_attr(ENDED, reason)


def started(study: Any) -> int:
    """Trials asked for so far (enqueued ones still waiting are not)."""
    import optuna

    return sum(t.state != optuna.trial.TrialState.WAITING for t in study.get_trials(deepcopy=False))


def outside_search(study: Any) -> int:
    """Trials of the screen and of the confirmation (its probes included): they do not count towards
    ``budget.max_trials``."""
    return sum(t.user_attrs.get("phase", "search") != "search" for t in study.get_trials(deepcopy=False))


def queued(study: Any) -> bool:
    """Whether trials wait in the queue to be asked (the initial design, a queued bet, a grid point)."""
    import optuna

    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))


def new_trial(study: Any) -> Any:
    """An Optuna trial the planner fills itself (no sampled params). Not study.ask(): it would hand out a trial
    still waiting in the queue."""
    import optuna

    return optuna.trial.Trial(study, study._storage.create_new_trial(study._study_id))
