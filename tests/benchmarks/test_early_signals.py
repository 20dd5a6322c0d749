"""benchmarks/early_signals.py: where a recording's training signal crosses a level, and how well the spend then
predicts its cost to the target."""

from __future__ import annotations

import argparse
import math
import statistics

import pytest

from tests.helpers import benchmark


def record(cost_s: float, cross_s: float | None, reached: bool = True) -> dict:
    """A recording that reaches the target at ``cost_s`` (or ends there short of it), its training success at 0.4
    from ``cross_s`` on (never, with None)."""
    curve = []
    for at in sorted({cost_s / 4, cost_s / 2, *([cross_s] if cross_s else []), cost_s}):
        crossed = cross_s is not None and at >= cross_s
        done = reached and at == cost_s
        curve.append(
            {
                "billable_s": at,
                "phases_s": {},
                "success": 0.95 if done else None,
                "train_success": 0.4 if crossed else 0.0,
            }
        )
    return {"params": {"num_envs": 64, "num_steps_per_env": 8}, "seed": 1, "curve": curve, "end": {}}


def test_the_crossing_share_and_how_well_it_predicts_the_cost() -> None:
    bench = benchmark("early_signals")
    records = [record(10.0, 5.0), record(20.0, 10.0), record(40.0, 20.0)]
    extra = [record(30.0, 15.0, reached=False), record(50.0, None)]  # never reached; never crossed: left out
    found = bench.early_signal(records + extra, 0.9, "train_success", 0.3)
    assert found.recordings == 3 and found.share == pytest.approx(0.5)
    assert found.log_corr == pytest.approx(1.0) and found.spread == pytest.approx(1.0)  # cost = 2 x early spend
    assert found.cost_spread == pytest.approx(math.exp(statistics.pstdev(map(math.log, (10.0, 20.0, 40.0)))))
    assert "crossed at 50% of the cost to target" in found.line()


def test_an_early_spend_unrelated_to_the_cost_predicts_nothing() -> None:
    bench = benchmark("early_signals")
    found = bench.early_signal([record(10.0, 8.0), record(20.0, 8.0), record(40.0, 8.0)], 0.9, "train_success", 0.3)
    assert found.log_corr == pytest.approx(0.0) and found.spread == pytest.approx(found.cost_spread)
    assert bench.early_signal([record(10.0, 5.0)], 0.9, "train_success", 0.3) is None  # too few to judge


def test_a_level_is_a_known_signal_and_numbers() -> None:
    bench = benchmark("early_signals")
    assert bench.levels("mean_return=8,13") == ("mean_return", [8.0, 13.0])
    for bad in ("success=0.5", "train_success=high"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.levels(bad)
