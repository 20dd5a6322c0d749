"""The throughput screen (``search.screen``), around whichever searcher the study uses.

A config's cost to target is its env steps to target over its throughput (env steps per training second). The steps
follow the shape and the learning and cost a trial to the target to measure; the throughput costs seconds. So before
the search proposes its first config, every feasible config of the space trains for
:data:`~sweep.contract.SCREEN_ITERATIONS` iterations with no held-out pass (``phase='screen'``); the cost model then
learns env steps to target and divides each untried config's prediction by its measured throughput
(:func:`sweep.planner.acquisition.throughputs`). Screen trials are billed and count in the budget like every trial;
they are no seeds of their config, no search trials (``budget.max_trials``) and no repeats: the config still runs in
the search when it is chosen. A config whose screen measured nothing (it failed) leaves the model as it is without a
screen.
"""

from __future__ import annotations

from typing import Any

import sweep.planner.space as space
import sweep.planner.study_store as study_store
from sweep.ledger import LedgerView
from sweep.params import TrialParams
from sweep.planner.phase import Done, Wait
from sweep.planner.searchers.base import Proposal, Searcher, SearchView


class Screen(Searcher):
    """Every feasible config's screen trial first, then ``inner``'s proposals."""

    def __init__(self, inner: Searcher) -> None:
        super().__init__(inner.cfg)
        self.inner = inner
        self._points: dict[tuple, dict[str, Any]] | None = None

    def sampler(self) -> Any:
        return self.inner.sampler()

    def open(self, study: Any) -> None:
        self.inner.open(study)

    def done(self, study: Any, view: SearchView) -> Done | None:
        """None while a config waits for its screen; then ``inner``'s reason."""
        return None if self.pending(view) else self.inner.done(study, view)

    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        """The next config's screen trial; while screens run, wait (the model divides by every config's throughput);
        then ``inner``'s proposal."""
        todo = self.pending(view)
        if todo:
            return Proposal(study_store.new_trial(study), todo[0], phase="screen")
        if any(run.phase == "screen" for run in view.running.values()):
            return Wait("the throughput screen runs")
        return self.inner.propose(study, view)

    def stuck(self, study: Any, view: SearchView, salt: int) -> Done | None:
        return self.inner.stuck(study, view, salt)

    def pending(self, view: SearchView) -> list[dict[str, Any]]:
        """The feasible configs, in the sampler's order, that no screen trial has measured, runs or failed on (one the
        study's end stopped is screened again)."""
        if self._points is None:
            points = space.untried_points(view.cfg, set(), view.profile, view.control_dt_s, view.memory_gib, 0)
            self._points = {TrialParams.identity(p): p for p in points}
        ends = LedgerView.of(view.rows).last.values()
        done = {TrialParams.identity(r.params) for r in ends if r.phase == "screen" and not r.by_study}
        done |= {TrialParams.identity(run.params) for run in view.running.values() if run.phase == "screen"}
        return [point for key, point in self._points.items() if key not in done]


__all__ = ["Screen"]
