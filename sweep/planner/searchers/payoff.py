"""Cost-aware stopping (``budget.later_runs``), around whichever searcher the study uses: the search ends once no
untried config is expected to pay for its trial, that is once, for every untried config, its expected saving per
later training run (against the leader's mean cost to target) times the later runs the user expects is less than
what its trial is expected to cost (:func:`sweep.planner.acquisition.prospect`). This is the cost-adjusted stopping
rule that pairs with an acquisition of expected improvement per cost (docs/methodology.md): the improvement is
weighted by the runs that will use the answer, so the trade-off is the user's own. ``budget.runs`` stays a cap
beside it."""

from __future__ import annotations

from typing import Any

import sweep.planner.acquisition as acquisition
import sweep.planner.leader as leader
import sweep.planner.space as space
from sweep.params import TrialParams
from sweep.planner.phase import Done, Wait
from sweep.planner.searchers.base import Proposal, Searcher, SearchView


class Payoff(Searcher):
    """``inner``'s proposals while some untried config is expected to pay for its trial."""

    def __init__(self, inner: Searcher, later_runs: float) -> None:
        super().__init__(inner.cfg)
        self.inner, self.later_runs = inner, later_runs
        self._seen: tuple | None = None
        self._verdict: Done | None = None

    def sampler(self) -> Any:
        return self.inner.sampler()

    def open(self, study: Any) -> None:
        self.inner.open(study)

    def done(self, study: Any, view: SearchView) -> Done | None:
        """``inner``'s reason, else :meth:`verdict`'s."""
        return self.inner.done(study, view) or self.verdict(view)

    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        return self.inner.propose(study, view)

    def stuck(self, study: Any, view: SearchView, salt: int) -> Done | None:
        return self.inner.stuck(study, view, salt)

    def verdict(self, view: SearchView) -> Done | None:
        """Done when the untried config most worth its trial (:func:`sweep.planner.acquisition.prospect`) is not;
        None while one is, or while nothing can be said: no config has reached the target yet, or too few search
        trials ended for the cost model. Judged again whenever the study's rows or its running trials change."""
        seen = (len(view.rows), tuple(sorted(view.running)), len(view.unrun))
        if seen != self._seen:
            self._seen, self._verdict = seen, self._judge(view)
        return self._verdict

    def _judge(self, view: SearchView) -> Done | None:
        lead = leader.leader(view.rows)
        if lead is None or not lead.race_mean:
            return None
        cfg = self.cfg
        bar = view.accounts.race_bar_usd() if cfg.search.prune else None
        cap = view.accounts.allowance() if bar is None else bar
        found = acquisition.prospect(
            view.evidence(),
            view.untried(len(view.rows)),
            space.choices(cfg),
            lead.race_mean,
            cap,
            view.accounts.mean_one_time_usd(),
            self.later_runs,
            view.throughputs(),
        )
        if found is None or found.pays:
            return None
        p = TrialParams.of(found.params)
        return Done(
            f"more search does not pay: the untried config most worth a trial ({p.num_envs} x {p.num_steps_per_env}) "
            f"is expected to save ${found.saving_usd:.4g} a later run against the leader's mean "
            f"${lead.race_mean:.4g}, x {self.later_runs:g} later runs (budget.later_runs) = "
            f"${found.saving_usd * self.later_runs:.4g}, less than its trial's expected ${found.trial_usd:.4g}"
        )


__all__ = ["Payoff"]
