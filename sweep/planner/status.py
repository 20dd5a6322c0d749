"""What a study looks like while it runs, for the progress display (``sweep.run``'s live view and its plain line):
plain data computed from the ledger rows the planner already holds, so the planner stays free of any rendering.

Every USD figure is billable seconds x price (:func:`sweep.ledger.metrics`); "equal terms" leaves one-time start-up
and compilation out, as the pruner and the ranking do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.analysis.summary import describe_params
from sweep.contract import TrialState
from sweep.ledger import last_rows, metrics


@dataclass(frozen=True)
class TrialStatus:
    """One running trial, from its latest ledger row (its config alone before the first row)."""

    trial: int
    config: str
    """The config in words (:func:`sweep.analysis.summary.describe_params`)."""
    seed: int
    """Its training seed."""
    phase: str
    """'search' or 'confirm'."""
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
    """'search' or 'confirm'."""
    best: Best | None = None
    """The cheapest trial to the target so far on equal terms; None before one reached."""
    running: tuple[TrialStatus, ...] = field(default_factory=tuple)
    """The running trials, by trial number."""


def trial_status(
    number: int, config: Mapping[str, Any], params: dict[str, Any], rows: list[dict], usd_per_hour: float
) -> TrialStatus:
    """Running trial ``number`` from the rows it sent so far (``rows``, oldest first); ``config`` is its TrialConfig as
    dispatched (its seed, phase, caps in billable seconds), ``usd_per_hour`` the study's price."""
    last = rows[-1] if rows else None
    m = metrics(last) if last is not None else {"usd": 0.0, "race_usd": 0.0}
    evaluated = next(
        (r for r in reversed(rows) if r.get("success") is not None or r.get("success_max") is not None), None
    )
    race_cap_s = config.get("race_cap_s")
    per_s = usd_per_hour / 3600.0
    return TrialStatus(
        trial=number,
        config=describe_params(params),
        seed=int(config.get("seed", 0)),
        phase=str(config.get("phase", "search")),
        baseline=bool(config.get("baseline", False)),
        iteration=int(last["iteration"]) if last is not None else 0,
        env_steps=int(last["env_steps"]) if last is not None else 0,
        success=evaluated.get("success") if evaluated is not None else None,
        success_max=evaluated.get("success_max") if evaluated is not None else None,
        usd=float(m["usd"]),
        cap_usd=float(config.get("cap_s", 0.0)) * per_s,
        race_usd=float(m["race_usd"]),
        race_cap_usd=float(race_cap_s) * per_s if race_cap_s is not None else None,
    )


def best_so_far(rows: Iterable[dict]) -> Best | None:
    """The reached trial with the lowest USD to target on equal terms (ties: the first trial), or None."""
    reached = [
        (metrics(r)["race_usd_to_target"], t, r) for t, r in last_rows(rows).items() if r["state"] == TrialState.REACHED
    ]
    if not reached:
        return None
    usd, trial, row = min(reached, key=lambda x: (x[0], x[1]))
    return Best(trial, describe_params(row["params"]), usd)


__all__ = ["Best", "Status", "TrialStatus", "best_so_far", "trial_status"]
