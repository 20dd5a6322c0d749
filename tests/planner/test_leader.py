"""The search's leader from ledger rows: the lowest mean cost on equal terms, its race bar, and when it runs again."""

from __future__ import annotations

import pytest

from sweep.ledger import Row
from sweep.params import TrialParams
from sweep.planner import leader

PRICE = 3600.0  # $1 per billable second


def end(trial: int, envs: int, cost_s: float, state: str = "reached", **extra) -> Row:
    """A search trial's end row of the config ``envs`` x 8 that took ``cost_s`` billable seconds."""
    params = {"num_envs": envs, "num_steps_per_env": 8, "num_mini_batches": 4}
    row = {"trial": trial, "state": state, "params": params, "phase": "search", "seed": trial + 1, "reason": ""}
    figures = {"billable_s": cost_s, "phases_s": {"sim": cost_s}, "env_steps": 1000, "price_usd_per_hour": PRICE}
    return Row.of({**row, **figures, **extra})


def test_the_leader_is_the_lowest_mean_over_seeds_not_the_luckiest_seed() -> None:
    assert leader.leader([end(0, 64, 50.0, state="capped")]) is None  # nothing reached yet
    rows = [end(0, 64, 10.0), end(1, 128, 13.0), end(2, 64, 30.0)]  # 64: a lucky 10 s, then 30 s
    lead = leader.leader(rows)
    assert lead.params["num_envs"] == 128 and leader.race_bar_usd(rows, 1.5) == pytest.approx(13.0 * 1.5)
    assert leader.race_bar_usd(rows[:2], 1.5) == pytest.approx(10.0 * 1.5)  # one seed each: the best seed


def test_the_leader_runs_again_until_it_has_intensify_trials() -> None:
    rows = [end(0, 64, 10.0), end(1, 128, 13.0)]
    key = TrialParams.identity(rows[0].params)
    assert leader.due(rows, 1, [], True) is None
    assert leader.due(rows, 2, [], True).key == key
    assert leader.due(rows, 2, [key], True) is None  # it runs already
    assert leader.due([*rows, end(2, 64, 11.0)], 2, [], True) is None  # it has its 2 trials
    base = [end(0, 64, 10.0, baseline=True), end(1, 128, 13.0)]
    assert leader.due(base, 2, [], True) is None  # the confirmation runs the baseline on its seeds
    assert leader.due(base, 2, [], False).key == key
