"""What the planner keeps of the trials it dispatched: each running trial, and the trials that failed in a row."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sweep.analysis.summary import short_reason
from sweep.contract import TrialConfig, TrialState
from sweep.ledger import Row, TrialRows

#: Trials in a row that fail for the same reason before the study stops: then the environment is broken, not a
#: config, and every further trial would fail the same way and be billed for it.
SAME_FAILURE_STOP = 3


@dataclass
class Running:
    """A dispatched trial."""

    number: int
    optuna_trial: Any
    params: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    allowance: float = 0.0
    config: TrialConfig = field(default_factory=TrialConfig)
    """Its TrialConfig as dispatched (seed, phase, baseline: what a row the planner writes for it says)."""

    @property
    def phase(self) -> str:
        return self.config.phase

    def placeholder(self) -> Row:
        """A 'running' row of its config, for a trial that has sent no row yet."""
        c = self.config
        return TrialRows("", self.number, self.params, c.seed, 0.0, "", c.phase, c.baseline).row(TrialState.RUNNING)


@dataclass
class FailureStreak:
    """The reasons of the trials that failed in a row most recently; any other end empties it."""

    reasons: list[str] = field(default_factory=list)

    def note(self, row: Row) -> str | None:
        """Count a trial's end row; why the study must stop (:data:`SAME_FAILURE_STOP` trials in a row failed for
        the same reason), else None."""
        if row.state != TrialState.FAILED:
            self.reasons = []
            return None
        reason = short_reason(row.reason)
        self.reasons = [*self.reasons, reason] if self.reasons[-1:] == [reason] else [reason]
        if len(self.reasons) >= SAME_FAILURE_STOP:
            return f"{len(self.reasons)} trials in a row failed the same way ({reason})"
        return None
