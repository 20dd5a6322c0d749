"""What a study looks like while it runs, for the progress display (``sweep.run``'s live view and its plain line):
plain data computed from the ledger rows the planner already holds, so the planner stays free of any rendering.

Every USD figure is billable seconds x price (:func:`sweep.ledger.metrics`); "equal terms" leaves one-time start-up
and compilation out, as the pruner and the ranking do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sweep.analysis.texts import describe_params
from sweep.contract import TrialConfig, TrialState
from sweep.ledger import LedgerView, Row, metrics
from sweep.prices import usd


@dataclass(frozen=True)
class TrialStatus:
    """One running trial, from its latest ledger row (its config alone before the first row)."""

    trial: int
    config: str
    """The config in words (:func:`sweep.analysis.texts.describe_params`)."""
    seed: int
    """Its training seed."""
    phase: str
    """Its study phase (:data:`sweep.contract.STUDY_PHASES`)."""
    baseline: bool
    """It runs the study's baseline config."""
    iteration: int
    """PPO iterations done (0 before the first row)."""
    env_steps: int
    success: float | None
    """Held-out success of its latest evaluated checkpoint; None before its first pass."""
    success_max: float | None
    """When that pass stopped once below the target was certain: the most a full pass could have measured."""
    usd: float
    """Billed so far (USD)."""
    cap_usd: float
    """Its per-trial cap in USD (billed: every second counts)."""
    race_usd: float
    """Spent so far on equal terms (USD, without start-up and compilation)."""
    race_cap_usd: float | None
    """Its race cap on equal terms (USD), when it is raced; None otherwise."""


@dataclass(frozen=True)
class Best:
    """The cheapest trial to the target so far, on equal terms (what the planner races the others against)."""

    trial: int
    config: str
    usd: float
    """Its USD to target on equal terms."""


@dataclass(frozen=True)
class Status:
    """The study as the progress display shows it, at one moment."""

    spent_usd: float
    """Every trial's billed spend, running ones up to their latest row (USD)."""
    budget_usd: float
    """The study budget (USD)."""
    states: dict[str, int]
    """Dispatched trials by state as the ledger spells it ('running', 'reached', 'not run', ...)."""
    stopping: str
    """Why the study is ending, in words; '' while it goes on."""
    phase: str = "search"
    """'screen' (the throughput screen runs), 'search' or 'confirm'."""
    best: Best | None = None
    """The cheapest trial to the target so far on equal terms; None before one reached."""
    running: tuple[TrialStatus, ...] = field(default_factory=tuple)
    """The running trials, by trial number."""


def trial_status(
    number: int, config: TrialConfig, params: dict[str, Any], rows: list[Row], usd_per_hour: float
) -> TrialStatus:
    """Running trial ``number`` from the rows it sent so far (``rows``, oldest first); ``config`` is its TrialConfig as
    dispatched (its seed, phase, caps in billable seconds), ``usd_per_hour`` the study's price."""
    last = rows[-1] if rows else None
    m = metrics(last) if last is not None else None
    evaluated = next((r for r in reversed(rows) if r.success is not None or r.success_max is not None), None)
    return TrialStatus(
        trial=number,
        config=describe_params(params),
        seed=int(config.seed),
        phase=str(config.phase),
        baseline=bool(config.baseline),
        iteration=int(last.iteration) if last is not None else 0,
        env_steps=int(last.env_steps) if last is not None else 0,
        success=evaluated.success if evaluated is not None else None,
        success_max=evaluated.success_max if evaluated is not None else None,
        usd=float(m.usd) if m is not None else 0.0,
        cap_usd=usd(float(config.cap_s), usd_per_hour),
        race_usd=float(m.race_usd) if m is not None else 0.0,
        race_cap_usd=usd(float(config.race_cap_s), usd_per_hour) if config.race_cap_s is not None else None,
    )


def best_so_far(rows: Iterable[Row]) -> Best | None:
    """The reached trial with the lowest USD to target on equal terms (ties: the first trial), or None."""
    reached = [
        (metrics(r).race_usd_to_target or 0.0, t, r)
        for t, r in LedgerView.of(rows).last.items()
        if r.state == TrialState.REACHED
    ]
    if not reached:
        return None
    cost, trial, row = min(reached, key=lambda x: (x[0], x[1]))
    return Best(trial, describe_params(row.params), cost)


__all__ = ["Best", "Status", "TrialStatus", "best_so_far", "trial_status"]
