"""The scheduler: decides, from ledger rows only, whether a running trial goes on (whether a new one may start is
the budget's rule, :mod:`sweep.planner.accounts`).

Optuna cannot prune multi-objective studies, so pruning is by cost: :class:`CostPruner` stops a trial
that has spent more than the best known USD-to-target, or whose success curve, extrapolated from
its last checkpoints, would reach the target only well after that. Both sides are on equal terms: cost
without the one-time start-up and compilation (``metrics``' ``race_usd``), which depend on what ran before.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.contract import CONTINUE, PRUNE, Decision
from sweep.ledger import Row, metrics


@dataclass(frozen=True)
class Verdict:
    """The answer to a running trial's latest checkpoint row, and why."""

    decision: Decision
    reason: str = ""
    """Why it stops ('' when it goes on)."""


#: Go on: nothing says otherwise.
GO_ON = Verdict(CONTINUE)


@dataclass
class CostPruner:
    """Decides continue / prune for a running trial from its own checkpoint rows."""

    target: float
    min_points: int = 3
    """Checkpoints needed before the curve is extrapolated."""
    slack: float = 1.25
    """Prune on extrapolation only when the predicted cost exceeds the best by this factor."""

    def decide(self, rows: list[Row], best_usd: float | None) -> Verdict:
        """The verdict on the trial whose rows (oldest first) end at its latest checkpoint."""
        if best_usd is None or not rows:
            return GO_ON
        spent = metrics(rows[-1]).race_usd
        if spent > best_usd:
            return Verdict(PRUNE, f"spent ${spent:.4f} > best USD-to-target ${best_usd:.4f} (both on equal terms)")
        predicted = self.predicted_usd(rows)
        if predicted is not None and predicted > self.slack * best_usd:
            why = f"success curve reaches the target at ~${predicted:.4f} > {self.slack:g} x best ${best_usd:.4f}"
            return Verdict(PRUNE, why)
        return GO_ON

    def predicted_usd(self, rows: list[Row]) -> float | None:
        """USD at which a least-squares line through the last checkpoints meets the target (inf if flat)."""
        points = [(metrics(r).race_usd, r.success) for r in rows if r.success is not None]
        if len(points) < self.min_points:
            return None
        points = points[-self.min_points :]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
        if ys[-1] >= self.target:
            return xs[-1]
        if slope <= 0:
            return float("inf")
        return xs[-1] + (self.target - ys[-1]) / slope
