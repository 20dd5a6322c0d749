"""One trial's figures, from its latest ledger row: what the printouts, the report and the recommendation read of it,
each from :func:`sweep.ledger.metrics` over the denominator its name says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweep.contract import TrialState
from sweep.ledger import Row, end_label, metrics


@dataclass(frozen=True)
class TrialFigures:
    """One trial's figures, from its latest ledger row (its end row once it has ended), each from
    :func:`sweep.ledger.metrics` over the denominator its name says."""

    trial: int
    state: TrialState
    """The ledger state: running / reached / capped / pruned / failed."""
    label: str
    """The state shown in counts: 'not run' for a config told PRUNED without running (:func:`end_label`)."""
    reason: str
    params: dict[str, Any]
    seed: int
    env_steps: int
    training_s: float
    """Seconds of sim + policy + learn (throughput's denominator)."""
    throughput_sps: float
    """Env steps per training second."""
    wall_s: float
    """Billable seconds so far."""
    usd: float
    """Billable seconds x price."""
    usd_to_target: float | None
    """USD when the trial reached the target, else None."""
    race_usd_to_target: float | None
    """The same on equal terms: without the one-time start-up and compilation (what the ranking compares)."""
    one_time_s: float
    """Billable seconds of start-up and compilation."""
    wall_to_target_s: float | None
    success: float | None
    success_lo: float | None
    success_hi: float | None
    success_max: float | None
    """The most a full pass could have measured, when the last pass stopped once below the target was certain."""
    eval_episodes: int
    bottleneck: str
    price_label: str
    price_usd_per_hour: float
    device: str
    checkpoint: str | None
    """The checkpoint file relative to the run folder, None when none is kept."""
    phase: str = "search"
    """The study phase the trial belongs to: 'search' or 'confirm'."""
    baseline: bool = False
    """The trial ran the study's baseline config."""
    race_usd: float = 0.0
    """USD so far on equal terms (without start-up and compilation)."""

    @classmethod
    def of(cls, row: Row) -> TrialFigures:
        m = metrics(row)
        return cls(
            trial=row.trial,
            state=row.state,
            label=end_label(row),
            reason=row.reason,
            params=row.params,
            seed=int(row.seed),
            env_steps=int(row.env_steps),
            training_s=m.training_s,
            throughput_sps=m.throughput_sps,
            wall_s=m.wall_s,
            usd=m.usd,
            usd_to_target=m.usd_to_target,
            race_usd_to_target=m.race_usd_to_target,
            one_time_s=m.one_time_s,
            wall_to_target_s=m.wall_to_target_s,
            success=row.success,
            success_lo=row.success_lo,
            success_hi=row.success_hi,
            success_max=row.success_max,
            eval_episodes=int(row.eval_episodes),
            bottleneck=m.bottleneck,
            price_label=row.price_label,
            price_usd_per_hour=float(row.price_usd_per_hour),
            device=row.device,
            checkpoint=row.checkpoint or None,
            phase=row.phase,
            baseline=bool(row.baseline),
            race_usd=m.race_usd,
        )
