"""``sampler: cost``, the default: the untried config with the highest expected improvement of cost to target per
expected dollar of the trial itself, from every search trial that ended (:mod:`sweep.planner.acquisition`: the model
and the rule). The initial design runs first; until enough trials ended to fit the model, the study's random sampler
draws."""

from __future__ import annotations

from typing import Any

import sweep.planner.acquisition as acquisition
import sweep.planner.space as space
import sweep.planner.study_store as study_store
from sweep.planner.searchers.base import Proposal, Searcher, SearchView


class CostSearcher(Searcher):
    """Bets on the config :func:`sweep.planner.acquisition.choose` ranks first, unless a queued trial goes first."""

    def propose(self, study: Any, view: SearchView) -> Proposal:
        if study_store.queued(study):
            return self.ask(study)
        evidence = view.evidence()
        candidates = view.untried(len(view.rows))
        best, one_time = view.accounts.best_usd(), view.accounts.one_time_usd()
        choices = space.choices(self.cfg)
        return self.ask(study, acquisition.choose(evidence, candidates, choices, best, one_time, view.throughputs()))


__all__ = ["CostSearcher"]
