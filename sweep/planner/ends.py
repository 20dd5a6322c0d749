"""How the planner records a trial's end: the ledger row (fsynced, added to the planner's view), Optuna's answer
(:mod:`sweep.planner.study_store`), the files of a trial the planner closed itself, and the stop once trials keep
failing the same way. Every row the planner keeps passes through :meth:`Ends.write` or :meth:`Ends.append_now`,
which stamp it with the driver's piece of the run and whether its trial was its worker's first
(:attr:`sweep.record.Row.piece`, :attr:`~sweep.record.Row.fresh_worker`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import sweep.planner.study_store as study_store
from sweep import checkpoints
from sweep.config import RunConfig
from sweep.contract import EndCause, Ending, TrialConfig, TrialPool, TrialState
from sweep.ledger import LedgerView, LedgerWriter, Row
from sweep.planner.phase import StudyPhase
from sweep.planner.running import FailureStreak, Running
from sweep.prices import Price


class Ends:
    """The planner's ledger and Optuna's answers for trials that end; shares the planner's containers."""

    def __init__(
        self,
        cfg: RunConfig,
        price: Price,
        run_dir: Path,
        pool: TrialPool,
        rows: LedgerView,
        running: dict[int, Running],
        unrun: set[int],
        phase: StudyPhase,
    ) -> None:
        self.cfg, self.price, self.run_dir, self.pool = cfg, price, run_dir, pool
        self.rows, self.running, self.unrun, self.phase = rows, running, unrun, phase
        self.piece = max((r.piece + 1 for r in rows), default=0)
        """This driver's piece of the run: one more than the ledger's last."""
        self.failures = FailureStreak()
        """The trials that failed in a row most recently, for the stop on a broken environment."""
        self._ledger: LedgerWriter | None = None

    @contextmanager
    def open(self) -> Iterator[None]:
        """The ledger held open for :meth:`write` while the planner's loop runs."""
        with LedgerWriter(self.run_dir / "ledger.jsonl") as ledger:
            self._ledger = ledger
            try:
                yield
            finally:
                self._ledger = None

    def write(self, row: Row) -> Row:
        """``row`` into the open ledger and the planner's view, as stamped."""
        assert self._ledger is not None, "write() outside open()"
        row = self._stamped(row)
        self._ledger.append(row)
        self.rows.add(row)
        return row

    def append_now(self, row: Row) -> None:
        """``row`` into the ledger before the loop opens it (an orphan of a dead driver closed at start)."""
        row = self._stamped(row)
        with LedgerWriter(self.run_dir / "ledger.jsonl") as w:
            w.append(row)
        self.rows.add(row)

    def close_orphan(self, row: Row) -> None:
        """An end row the planner wrote for an orphan of a dead driver: in the ledger now, its files dropped."""
        self.append_now(row)
        self._drop_checkpoint(row.trial)

    def finish(self, study: Any, run: Running, row: Row) -> None:
        """A trial's own end row arrived: tell Optuna."""
        study_store.tell_end(study, run.optuna_trial, run.rows, row, self.cfg.target.success)
        del self.running[run.number]
        self._note_end(row)

    def fail_lost(self, study: Any, run: Running, ending: Ending) -> None:
        """A trial whose worker died (or was stopped): billed and told (:func:`sweep.planner.study_store.tell_lost`)."""
        study_store.tell_lost(
            study, run.optuna_trial, self.cfg, self.price, run.rows, run.started, ending, run.config, self.write
        )
        self._drop_checkpoint(run.number)
        del self.running[run.number]
        self._note_end(self.rows[-1])

    def tell_unrun(
        self,
        study: Any,
        trial: Any,
        params: dict,
        reason: str,
        found: dict[str, float],
        trial_cfg: TrialConfig | None = None,
    ) -> None:
        """A trial told PRUNED without running (infeasible or a repeat): a zero-cost ledger row, no spend."""
        self.unrun.add(trial.number)
        study_store.tell_unrun(study, trial, self.cfg, self.price, params, reason, found, trial_cfg, self.write)

    def stop_running(self, study: Any, reason: str) -> None:
        """Ctrl-C: kill the running trials and bill each up to now (they end 'capped', not failed). A trial whose end
        row is already in the ledger keeps that end."""
        self.pool.stop_all()
        ends = self.rows.last
        for run in list(self.running.values()):
            last = ends.get(run.number)
            if last is not None and last.ended:
                self.finish(study, run, last)
            else:
                self.fail_lost(study, run, (TrialState.CAPPED, EndCause.STUDY_END, reason))

    def _note_end(self, row: Row) -> None:
        """Stop the study once trials keep failing the same way (:class:`sweep.planner.running.FailureStreak`)."""
        why = self.failures.note(row)
        if why:
            self.phase.stop(why)

    def _drop_checkpoint(self, number: int) -> None:
        """A trial the planner closed itself (its worker or the driver died) never reached the target: with
        ``checkpoints: reached`` its files go, as the trial would have deleted them had it ended on its own."""
        if self.cfg.checkpoints == "reached":
            checkpoints.prune(self.run_dir, number)

    def _stamped(self, row: Row) -> Row:
        return replace(row, piece=self.piece, fresh_worker=row.trial in self.pool.fresh)


__all__ = ["Ends"]
