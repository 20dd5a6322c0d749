"""Searchers that are an Optuna sampler and nothing more: every proposal is asked of the study (the queue first, then
the sampler). ``random`` and ``grid`` are there to compare with; ``tpe`` is Optuna's TPE, which learns from the costs
told and the constraints set (:mod:`sweep.planner.study_store`)."""

from __future__ import annotations

from typing import Any

import sweep.planner.space as space
from sweep.planner.searchers.base import Proposal, Searcher, SearchView


class RandomSearcher(Searcher):
    """``sampler: random``: configs drawn at random (seeded by ``seeds.sampler``)."""

    def propose(self, study: Any, view: SearchView) -> Proposal:
        return self.ask(study)


class GridSearcher(RandomSearcher):
    """``sampler: grid``: every config of the space, queued when the study opens in an order shuffled by
    ``seeds.sampler``, after the initial design."""

    def open(self, study: Any) -> None:
        super().open(study)
        for point in space.grid_points(self.cfg, self.cfg.seeds.sampler):
            study.enqueue_trial(point, skip_if_exists=True)


class TpeSearcher(RandomSearcher):
    """``sampler: tpe``: Optuna's TPE with constraints, random for its first trials past the initial design."""

    def sampler(self) -> Any:
        import optuna

        startup = max(4, len(self.cfg.search.initial) + 2)
        return optuna.samplers.TPESampler(seed=self.cfg.seeds.sampler, n_startup_trials=startup)


__all__ = ["GridSearcher", "RandomSearcher", "TpeSearcher"]
