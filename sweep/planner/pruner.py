"""The scheduler: decides, from ledger rows only, whether a running trial goes on and whether a new one may start.

Optuna cannot prune multi-objective studies, so pruning is by cost: :class:`CostPruner` stops a trial
that has spent more than the best known USD-to-target, or whose success curve, extrapolated from
its last checkpoints, would reach the target only well after that. Both sides are on equal terms: cost
without the one-time start-up and compilation (``metrics``' ``race_usd``), which depend on what ran before.
The budget helpers reserve for every running trial what it may still spend, so no trial starts that the
budget cannot pay.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.contract import CONTINUE, PRUNE, RESERVE_MARGIN, Decision
from sweep.ledger import metrics

#: A confirmation trial the budget cannot give the per-trial cap starts with what is left, if that is at least this
#: many times the best known cost to target (plus one-time costs).
CONFIRM_MIN_FACTOR = 2.0


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

    def decide(self, rows: list[dict], best_usd: float | None) -> Verdict:
        """The verdict on the trial whose rows (oldest first) end at its latest checkpoint."""
        if best_usd is None or not rows:
            return GO_ON
        spent = metrics(rows[-1])["race_usd"]
        if spent > best_usd:
            return Verdict(PRUNE, f"spent ${spent:.4f} > best USD-to-target ${best_usd:.4f} (both on equal terms)")
        predicted = self.predicted_usd(rows)
        if predicted is not None and predicted > self.slack * best_usd:
            why = f"success curve reaches the target at ~${predicted:.4f} > {self.slack:g} x best ${best_usd:.4f}"
            return Verdict(PRUNE, why)
        return GO_ON

    def predicted_usd(self, rows: list[dict]) -> float | None:
        """USD at which a least-squares line through the last checkpoints meets the target (inf if flat)."""
        points = [(metrics(r)["race_usd"], r["success"]) for r in rows if r.get("success") is not None]
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
