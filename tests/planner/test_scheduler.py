"""Planner logic without Ray: cost pruning, budget reservations, how trials are told, summary figures."""

from __future__ import annotations

import pytest

from sweep.contract import CONTINUE, PRUNE, RESERVE_MARGIN
from sweep.ledger import Row, summary_figures
from sweep.planner.accounts import allowance_usd, confirm_allowance_usd, fitted_usd, reserve_usd, search_allowance_usd
from sweep.planner.pruner import CostPruner, Verdict

PRICE = 3600.0  # $/hour, so 1 billable second costs $1


def line(trial: int, billable: float, success: float | None, state: str = "running") -> dict:
    """A ledger line (JSON object) of ``trial``, its seconds all simulation, at $1 a second."""
    return {
        "trial": trial,
        "state": state,
        "billable_s": billable,
        "price_usd_per_hour": PRICE,
        "env_steps": 100,
        "phases_s": {"sim": billable},
        "success": success,
        "params": {},
        "wall_time": billable,
    }


def row(trial: int, billable: float, success: float | None, state: str = "running") -> Row:
    """:func:`line` as the ledger's reader reads it."""
    return Row.of(line(trial, billable, success, state))


def test_no_pruning_without_a_best_cost() -> None:
    pruner = CostPruner(target=0.9)
    assert pruner.decide([row(0, 50, 0.1)], best_usd=None) == Verdict(CONTINUE)


def test_prunes_a_trial_that_already_spent_more_than_the_best() -> None:
    verdict = CostPruner(target=0.9).decide([row(0, 11, 0.8)], best_usd=10.0)
    assert verdict.decision == PRUNE and "best" in verdict.reason
    assert CostPruner(target=0.9).decide([row(0, 9, 0.8)], best_usd=10.0).decision == CONTINUE


def test_prunes_on_an_extrapolated_curve_that_arrives_too_late() -> None:
    pruner = CostPruner(target=0.9, min_points=3, slack=1.25)
    slow = [row(0, 1, 0.10), row(0, 2, 0.12), row(0, 3, 0.14)]  # +0.02 per $ -> target near $41
    assert pruner.predicted_usd(slow) == pytest.approx(3 + 0.76 / 0.02)
    assert pruner.decide(slow, best_usd=10.0).decision == PRUNE
    fast = [row(0, 1, 0.3), row(0, 2, 0.5), row(0, 3, 0.7)]  # reaches 0.9 at $4
    assert pruner.decide(fast, best_usd=10.0).decision == CONTINUE
    flat = [row(0, 1, 0.5), row(0, 2, 0.5), row(0, 3, 0.5)]
    assert pruner.predicted_usd(flat) == float("inf") and pruner.decide(flat, best_usd=10.0).decision == PRUNE
    assert pruner.decide(flat[:2], best_usd=10.0).decision == CONTINUE  # too few points to extrapolate


def test_allowance_and_reservations() -> None:
    assert allowance_usd(5.0, None, prune=True) == 5.0
    assert allowance_usd(5.0, 2.0, prune=True) == 2.0
    assert allowance_usd(5.0, 2.0, prune=False) == 5.0
    assert reserve_usd(0.0, 2.0) == pytest.approx(2.0 * RESERVE_MARGIN)
    assert reserve_usd(3.0, 2.0) == 3.0  # a trial past its allowance reserves what it spent


def test_no_trial_starts_that_the_budget_cannot_pay() -> None:
    # budget 10, finished trials spent 4, one running trial reserves 2.2: 3.8 left
    assert fitted_usd(10.0 - 4.0 - 2.2, 3.0, None) == 3.0  # needs 3.3
    assert fitted_usd(10.0 - 4.0 - 2.2, 3.5, None) is None  # needs 3.85
    assert fitted_usd(10.0 - 10.5, 0.1, None) is None  # already over
    assert fitted_usd(10.0 - 4.0 - 2.2, 3.5, 3.0) == pytest.approx(3.8 / RESERVE_MARGIN)  # all that is left, >= 3


def test_the_last_trial_runs_on_what_is_left_if_a_config_better_than_the_best_still_fits() -> None:
    # a search budget of 10 with 6.2 spent or held: 3.8 left, 3.45 after the margin; the next trial wants 4
    left = pytest.approx(3.8 / RESERVE_MARGIN)
    assert search_allowance_usd(10.0, 4.0, 2.2, 4.0, best_usd=2.0, one_time_usd=1.0) == left
    assert search_allowance_usd(10.0, 4.0, 2.2, 4.0, best_usd=3.0, one_time_usd=1.0) is None  # 3.45 < 3 + 1
    assert search_allowance_usd(10.0, 4.0, 2.2, 4.0, best_usd=None, one_time_usd=1.0) is None  # nothing to beat
    assert search_allowance_usd(10.0, 4.0, 0.0, 4.0, best_usd=3.0, one_time_usd=1.0) == 4.0  # room for all of it
    # a confirmation trial needs 1.5 x its own config's expected cost plus one-time costs: 2.5 fits, 4 does not
    assert confirm_allowance_usd(10.0, 4.0, 2.2, 4.0, expected_usd=1.0, one_time_usd=1.0) == left
    assert confirm_allowance_usd(10.0, 4.0, 2.2, 4.0, expected_usd=2.0, one_time_usd=1.0) is None


def test_summary_counts_pruned_and_failed_spend() -> None:
    rows = [
        row(0, 5, 0.5),
        row(0, 10, 0.95, "reached"),
        row(1, 4, 0.2, "pruned"),
        row(2, 3, None, "failed"),
        row(3, 8, 0.92, "reached"),
    ]
    fig = summary_figures(rows)
    assert fig.total_usd == pytest.approx(10 + 4 + 3 + 8)
    assert fig.usd_by_state == pytest.approx({"reached": 18.0, "pruned": 4.0, "failed": 3.0})
    assert fig.pruned_failed_share == pytest.approx(7 / 25)
    assert fig.best_trial == 3 and fig.pareto == [3]
