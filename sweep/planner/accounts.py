"""A study's money, read from its ledger rows: what is spent, what running trials hold in reserve, the best cost to
target and what a new trial may spend. The planner decides with these figures; they are never kept apart from the
rows, so a resumed study reads the same figures from its ledger. The budget rules (:func:`allowance_usd`,
:func:`reserve_usd`, :func:`fitted_usd`, :func:`search_allowance_usd`, :func:`confirm_allowance_usd`) live here and
only here: every running trial is reserved what it may still spend, so no trial starts that the budget cannot pay.

All figures are USD. "Equal terms" leaves one-time start-up and compilation out (what the pruner and the ranking
compare); every spend and reservation counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import sweep.planner.leader as leader
from sweep.analysis.evidence import config_stats
from sweep.config import RunConfig
from sweep.contract import RESERVE_MARGIN, TrialState
from sweep.ledger import LedgerView, Row, metrics
from sweep.prices import usd

#: A confirmation trial the budget cannot give the per-trial cap starts with what is left, if that is at least this
#: many times its config's mean cost to target on equal terms (plus a trial's mean one-time costs): seeds of one
#: config have cost up to 1.4 x their mean (docs/benchmarks.md), so a trial given less would often stop short.
CONFIRM_MIN_FACTOR = 1.5


def allowance_usd(trial_cap_usd: float, best_usd: float | None, prune: bool) -> float:
    """Most a new trial may cost: its cap, or (with pruning) the best known cost to target if lower."""
    if prune and best_usd is not None:
        return min(trial_cap_usd, best_usd)
    return trial_cap_usd


def reserve_usd(spent_usd: float, allowance: float) -> float:
    """What the budget must keep for a running trial: its allowance plus the overrun margin, or its spend."""
    return max(spent_usd, allowance * RESERVE_MARGIN)


def fitted_usd(left_usd: float, wanted_usd: float, floor_usd: float | None) -> float | None:
    """What a trial may spend when the budget has ``left_usd`` after every running trial's reservation (no trial
    starts that the budget cannot pay): ``wanted_usd`` if that leaves room for its own reservation; else all that is
    left, if at least ``floor_usd``; else (or with no floor) None."""
    if left_usd >= reserve_usd(0.0, wanted_usd):
        return wanted_usd
    left = left_usd / RESERVE_MARGIN
    return left if floor_usd is not None and left >= floor_usd else None


def search_allowance_usd(
    budget_usd: float,
    finished_usd: float,
    running_reserved_usd: float,
    allowance: float,
    best_usd: float | None,
    one_time_usd: float,
) -> float | None:
    """What the next search trial may spend: its ``allowance``; when the search budget left cannot reserve that, what
    it can (the last trial), if that is at least the best known cost to target plus a trial's one-time costs on
    average (room for a config that beats the best); else None."""
    floor = None if best_usd is None else best_usd + one_time_usd
    return fitted_usd(budget_usd - finished_usd - running_reserved_usd, allowance, floor)


def confirm_allowance_usd(
    budget_usd: float,
    finished_usd: float,
    running_reserved_usd: float,
    trial_cap_usd: float,
    expected_usd: float | None,
    one_time_usd: float,
) -> float | None:
    """What the next confirmation trial may spend: the per-trial cap; when the budget left cannot reserve that, what
    it can reserve, if that is at least :data:`CONFIRM_MIN_FACTOR` x its config's expected cost to target on equal
    terms plus the one-time costs it is expected to pay (so the trial that ends a confirmation, often the baseline's,
    still runs, and none starts that would likely stop short); else None."""
    floor = None if expected_usd is None else CONFIRM_MIN_FACTOR * expected_usd + one_time_usd
    return fitted_usd(budget_usd - finished_usd - running_reserved_usd, trial_cap_usd, floor)


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

    def mean_one_time_usd(self) -> float:
        """What a trial of this study has paid for start-up and compilation on average (what the next is expected to
        pay; reservations keep the most, :meth:`one_time_usd`)."""
        paid = [usd(metrics(r).one_time_s, self.usd_per_hour) for r in self.rows.last.values() if r.ran and r.ended]
        return sum(paid) / len(paid) if paid else 0.0

    def allowance(self) -> float:
        """What a new search trial may spend: its cap, or (pruning) the race bar on equal terms plus one-time costs."""
        bar = self.race_bar_usd()
        return allowance_usd(
            self.cfg.budget.trial_usd, None if bar is None else bar + self.one_time_usd(), self.cfg.search.prune
        )

    def spent_usd(self) -> float:
        """Every trial's spend, running ones up to their last row."""
        return sum(metrics(r).usd for r in self.rows.last.values())

    def baseline_run_usd(self) -> float | None:
        """One baseline training run: the baseline's mean USD to target on equal terms over its counted seeds, as
        :func:`sweep.analysis.evidence.payback` counts it; None until one of its trials has reached the target."""
        base = next((c for c in config_stats(self.rows) if c.baseline), None)
        if base is None or base.n_reached == 0 or not base.race_mean:
            return None
        return base.race_mean

    def budget_usd(self) -> float:
        """The study budget now: ``budget.usd``, or ``budget.runs`` baseline runs once the baseline is priced
        (:meth:`baseline_run_usd`), whichever is less."""
        runs = self.cfg.budget.runs
        unit = self.baseline_run_usd() if runs is not None else None
        return self.cfg.budget.usd if unit is None else min(self.cfg.budget.usd, runs * unit)

    def budget_text(self) -> str:
        """The budget that binds now, in words: '6 baseline runs ($0.2412 at the baseline's mean $0.0402)' or
        '$2'."""
        runs, usd = self.cfg.budget.runs, self.budget_usd()
        if runs is None or usd >= self.cfg.budget.usd:
            return f"${self.cfg.budget.usd:g}"
        return f"{runs:g} baseline runs (${usd:.4f} at the baseline's mean ${self.baseline_run_usd():.4f})"

    def search_budget_usd(self, keep_share: bool = True) -> float:
        """What the search may commit: the study budget, less the share kept for the confirmation while
        ``keep_share`` (there is something to confirm: the planner says when)."""
        share = self.cfg.confirm.budget_share if self.cfg.confirm.enabled and keep_share else 0.0
        return self.budget_usd() * (1.0 - share)

    def expected_usd(self, key: tuple) -> float | None:
        """What a new seed of config ``key`` is expected to cost on equal terms: its mean over its counted seeds, or
        the best known cost to target for a config without one."""
        stat = next((c for c in config_stats(self.rows) if c.key == key), None)
        return stat.race_mean if stat is not None and stat.race_mean else self.best_usd()

    def finished_usd(self) -> float:
        """The spend of the trials that ended."""
        return sum(metrics(r).usd for t, r in self.rows.last.items() if t not in self.running)

    def reserved_usd(self) -> float:
        """What the running trials hold: each its spend so far or its allowance (with margin), whichever is more."""
        return sum(
            reserve_usd(metrics(run.rows[-1]).usd if run.rows else 0.0, run.allowance) for run in self.running.values()
        )

    def search_allowance(self, keep_share: bool = True) -> float | None:
        """What the next search trial may spend from :meth:`search_budget_usd` (:func:`search_allowance_usd`): its
        :meth:`allowance`, or less for the last trial; None when the search budget cannot pay another trial."""
        return search_allowance_usd(
            self.search_budget_usd(keep_share),
            self.finished_usd(),
            self.reserved_usd(),
            self.allowance(),
            self.best_usd(),
            self.mean_one_time_usd(),
        )

    def confirm_allowance(self, key: tuple) -> float | None:
        """What the next confirmation trial, of config ``key``, may spend (:func:`confirm_allowance_usd`, its floor
        from :meth:`expected_usd` and a trial's mean one-time costs)."""
        return confirm_allowance_usd(
            self.budget_usd(),
            self.finished_usd(),
            self.reserved_usd(),
            self.cfg.budget.trial_usd,
            self.expected_usd(key),
            self.mean_one_time_usd(),
        )


__all__ = [
    "Accounts",
    "Held",
    "allowance_usd",
    "confirm_allowance_usd",
    "fitted_usd",
    "reserve_usd",
    "search_allowance_usd",
]
