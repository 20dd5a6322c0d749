"""The leader's intensification (``search.intensify``), around whichever searcher the study uses: the config that leads
the search (the lowest mean cost to target on equal terms, :mod:`sweep.planner.leader`) runs again on new training
seeds until it has that many search trials, before the searcher is asked for further configs; so later trials race
against a mean, not one lucky seed. As Ray Tune's ``Repeater`` wraps a searcher."""

from __future__ import annotations

from typing import Any

import sweep.planner.leader as leader
import sweep.planner.study_store as study_store
from sweep.analysis.evidence import ConfigStat
from sweep.params import TrialParams
from sweep.planner.phase import Done, Wait
from sweep.planner.searchers.base import Proposal, Searcher, SearchView


class Intensify(Searcher):
    """``inner``'s proposals, the leader's new seeds first."""

    def __init__(self, inner: Searcher) -> None:
        super().__init__(inner.cfg)
        self.inner = inner

    def sampler(self) -> Any:
        return self.inner.sampler()

    def open(self, study: Any) -> None:
        self.inner.open(study)

    def done(self, study: Any, view: SearchView) -> Done | None:
        """``inner``'s reason, unless the leader is still due another seed."""
        done = self.inner.done(study, view)
        return None if done is not None and self.due(study, view) is not None else done

    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        """The leader again, on a trial with no sampled params (the sampler is not asked), while it is due;
        else ``inner``'s proposal."""
        lead = self.due(study, view)
        if lead is None:
            return self.inner.propose(study, view)
        params = TrialParams.of(lead.params).as_dict()
        return Proposal(study_store.new_trial(study), params, rerun=True, attrs={"intensify_of": lead.trials[0]})

    def stuck(self, study: Any, view: SearchView, salt: int) -> Done | None:
        return self.inner.stuck(study, view, salt)

    def due(self, study: Any, view: SearchView) -> ConfigStat | None:
        """The leader to run again (:func:`sweep.planner.leader.due`); none while the initial design waits in the
        queue (it runs first)."""
        lead = leader.due(view.rows, self.cfg.search.intensify, view.running_configs(), self.cfg.confirm.enabled)
        return None if lead is None or study_store.queued(study) else lead


__all__ = ["Intensify"]
