"""A study's money, read from its ledger rows: what is spent, what running trials hold in reserve, the best cost to
target and what a new trial may spend. The planner decides with these figures; they are never kept apart from the
rows, so a resumed study reads the same figures from its ledger.

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
from sweep.contract import TrialState
from sweep.ledger import last_rows, metrics
from sweep.planner.pruner import allowance_usd, can_start, confirm_allowance_usd, reserve_usd


class Held(Protocol):
    """A running trial as the accounts see it: the rows it sent so far and what it may spend."""

    rows: list[dict]
    allowance: float


@dataclass
class Accounts:
    """The figures of one study. ``rows`` and ``running`` are the planner's own (appended and updated as trials
    send rows, start and end), read afresh by every call."""

    cfg: RunConfig
    usd_per_hour: float
    rows: list[dict]
    running: Mapping[int, Held]

    def best_usd(self) -> float | None:
        """The best known cost to target on equal terms."""
        reached = [
            metrics(r)["race_usd_to_target"] for r in last_rows(self.rows).values() if r["state"] == TrialState.REACHED
        ]
        return min(reached) if reached else None

    def race_bar_usd(self) -> float | None:
        """What a search trial is raced against (its cap and the pruner's bar):
        :func:`sweep.planner.leader.race_bar_usd`."""
        return leader.race_bar_usd(self.rows, self.cfg.search.race_slack)

    def one_time_usd(self) -> float:
        """The most a trial of this study has paid for start-up and compilation (reserved on top of the best)."""
        per_s = self.usd_per_hour / 3600.0
        return max((metrics(r)["one_time_s"] * per_s for r in last_rows(self.rows).values()), default=0.0)

    def allowance(self) -> float:
        """What a new search trial may spend: its cap, or (pruning) the race bar on equal terms plus one-time costs."""
        bar = self.race_bar_usd()
        return allowance_usd(
            self.cfg.budget.trial_usd, None if bar is None else bar + self.one_time_usd(), self.cfg.search.prune
        )

    def spent_usd(self) -> float:
        """Every trial's spend, running ones up to their last row."""
        return sum(metrics(r)["usd"] for r in last_rows(self.rows).values())

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

    def search_budget_usd(self) -> float:
        """What the search may commit: the study budget less the share kept for confirmation."""
        share = self.cfg.confirm.budget_share if self.cfg.confirm.enabled else 0.0
        return self.budget_usd() * (1.0 - share)

    def finished_usd(self) -> float:
        """The spend of the trials that ended."""
        return sum(metrics(r)["usd"] for t, r in last_rows(self.rows).items() if t not in self.running)

    def reserved_usd(self) -> float:
        """What the running trials hold: each its spend so far or its allowance (with margin), whichever is more."""
        return sum(
            reserve_usd(metrics(run.rows[-1])["usd"] if run.rows else 0.0, run.allowance)
            for run in self.running.values()
        )

    def search_can_start(self) -> bool:
        """Whether the search budget, less what ended trials spent and running ones hold, pays one more search trial
        at its :meth:`allowance` (:func:`sweep.planner.pruner.can_start`)."""
        return can_start(self.search_budget_usd(), self.finished_usd(), self.reserved_usd(), self.allowance())

    def confirm_allowance(self) -> float | None:
        """What the next confirmation trial may spend (:func:`sweep.planner.pruner.confirm_allowance_usd`)."""
        return confirm_allowance_usd(
            self.budget_usd(),
            self.finished_usd(),
            self.reserved_usd(),
            self.cfg.budget.trial_usd,
            self.best_usd(),
            self.one_time_usd(),
        )


__all__ = ["Accounts", "Held"]
