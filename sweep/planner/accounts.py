"""A study's money, read from its ledger rows: what is spent, what running trials hold in reserve, the best cost to
target and what a new trial may spend. The planner decides with these figures; they are never kept apart from the
rows, so a resumed study reads the same figures from its ledger. The budget rules (:func:`allowance_usd`,
:func:`reserve_usd`, :func:`can_start`, :func:`confirm_allowance_usd`) live here and only here: every running trial
is reserved what it may still spend, so no trial starts that the budget cannot pay.

All figures are USD. "Equal terms" leaves one-time start-up and compilation out (what the pruner and the ranking
compare); every spend and reservation counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import sweep.planner.leader as leader
from sweep.config import RunConfig
from sweep.contract import RESERVE_MARGIN, TrialState
from sweep.ledger import LedgerView, Row, metrics
from sweep.prices import usd

#: A confirmation trial the budget cannot give the per-trial cap starts with what is left, if that is at least this
#: many times the best known cost to target (plus one-time costs).
CONFIRM_MIN_FACTOR = 2.0


def allowance_usd(trial_cap_usd: float, best_usd: float | None, prune: bool) -> float:
    """Most a new trial may cost: its cap, or (with pruning) the best known cost to target if lower."""
    if prune and best_usd is not None:
        return min(trial_cap_usd, best_usd)
    return trial_cap_usd


def reserve_usd(spent_usd: float, allowance: float) -> float:
    """What the budget must keep for a running trial: its allowance plus the overrun margin, or its spend."""
    return max(spent_usd, allowance * RESERVE_MARGIN)


def can_start(budget_usd: float, finished_usd: float, running_reserved_usd: float, allowance: float) -> bool:
    """A trial starts only if the budget left after every running trial's reservation pays its own."""
    return budget_usd - finished_usd - running_reserved_usd >= reserve_usd(0.0, allowance)


def confirm_allowance_usd(
    budget_usd: float,
    finished_usd: float,
    running_reserved_usd: float,
    trial_cap_usd: float,
    best_usd: float | None,
    one_time_usd: float,
) -> float | None:
    """What the next confirmation trial may spend: the per-trial cap; when the budget left cannot reserve that, what
    it can reserve, if that is at least :data:`CONFIRM_MIN_FACTOR` x the best known cost to target plus the one-time
    costs seen (so the trial that ends a confirmation, often the baseline's, still runs); else None."""
    if can_start(budget_usd, finished_usd, running_reserved_usd, trial_cap_usd):
        return trial_cap_usd
    left = (budget_usd - finished_usd - running_reserved_usd) / RESERVE_MARGIN
    if best_usd is None or left < CONFIRM_MIN_FACTOR * best_usd + one_time_usd:
        return None
    return left


class Held(Protocol):
    """A running trial as the accounts see it: the rows it sent so far and what it may spend."""

    rows: list[Row]
    allowance: float


@dataclass
class Accounts:
    """The figures of one study. ``rows`` (the planner's view of its ledger) and ``running`` are the planner's own
    (added to and updated as trials send rows, start and end), read afresh by every call."""

    cfg: RunConfig
    usd_per_hour: float
    rows: LedgerView
    running: Mapping[int, Held]

    def best_usd(self) -> float | None:
        """The best known cost to target on equal terms."""
        reached = [metrics(r).race_usd_to_target for r in self.rows.last.values() if r.state == TrialState.REACHED]
        return min(reached) if reached else None

    def race_bar_usd(self) -> float | None:
        """What a search trial is raced against (its cap and the pruner's bar):
        :func:`sweep.planner.leader.race_bar_usd`."""
        return leader.race_bar_usd(self.rows, self.cfg.search.race_slack)

    def one_time_usd(self) -> float:
        """The most a trial of this study has paid for start-up and compilation (reserved on top of the best)."""
        return max((usd(metrics(r).one_time_s, self.usd_per_hour) for r in self.rows.last.values()), default=0.0)

    def allowance(self) -> float:
        """What a new search trial may spend: its cap, or (pruning) the race bar on equal terms plus one-time costs."""
        bar = self.race_bar_usd()
        return allowance_usd(
            self.cfg.budget.trial_usd, None if bar is None else bar + self.one_time_usd(), self.cfg.search.prune
        )

    def spent_usd(self) -> float:
        """Every trial's spend, running ones up to their last row."""
        return sum(metrics(r).usd for r in self.rows.last.values())

    def search_budget_usd(self) -> float:
        """What the search may commit: the study budget less the share kept for confirmation."""
        share = self.cfg.confirm.budget_share if self.cfg.confirm.enabled else 0.0
        return self.cfg.budget.usd * (1.0 - share)

    def finished_usd(self) -> float:
        """The spend of the trials that ended."""
        return sum(metrics(r).usd for t, r in self.rows.last.items() if t not in self.running)

    def reserved_usd(self) -> float:
        """What the running trials hold: each its spend so far or its allowance (with margin), whichever is more."""
        return sum(
            reserve_usd(metrics(run.rows[-1]).usd if run.rows else 0.0, run.allowance) for run in self.running.values()
        )

    def search_can_start(self) -> bool:
        """Whether the search budget, less what ended trials spent and running ones hold, pays one more search trial
        at its :meth:`allowance` (:func:`can_start`)."""
        return can_start(self.search_budget_usd(), self.finished_usd(), self.reserved_usd(), self.allowance())

    def confirm_allowance(self) -> float | None:
        """What the next confirmation trial may spend (:func:`confirm_allowance_usd`)."""
        return confirm_allowance_usd(
            self.cfg.budget.usd,
            self.finished_usd(),
            self.reserved_usd(),
            self.cfg.budget.trial_usd,
            self.best_usd(),
            self.one_time_usd(),
        )


__all__ = ["Accounts", "Held", "allowance_usd", "can_start", "confirm_allowance_usd", "reserve_usd"]
