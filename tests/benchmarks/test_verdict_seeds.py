"""benchmarks/verdict_seeds.py: how many seeds a side the recommendation's interval against the baseline needs
before it lies below 1, and what those seeds cost in baseline runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sweep.backends.replay import load_table
from tests.helpers import benchmark
from tests.replay_table import write_yardstick_table


def test_the_sides_are_every_recording_of_the_held_out_best_and_of_the_baseline(tmp_path: Path) -> None:
    bench = benchmark("verdict_seeds")
    costs = {(64, 8): {1: 10.0, 2: 12.0}, (64, 16): {1: 9.0}}  # (64, 16) is cheaper replayed, dearer held out
    held = {(64, 8): {4: 11.0}, (64, 16): {4: 30.0}, "baseline": {4: 21.0}}
    table = write_yardstick_table(tmp_path / "t.json", costs, {1: 20.0, 2: 22.0}, held)
    best, baseline = bench.sides(load_table(str(table)), 0.9, 0.1)
    assert sorted(best) == pytest.approx([10.0, 11.0, 12.0])
    assert sorted(baseline) == pytest.approx([20.0, 21.0, 22.0])


def test_sides_far_apart_are_always_decided_and_equal_ones_seldom() -> None:
    bench = benchmark("verdict_seeds")
    apart = bench.verdicts([10.0, 10.5], [40.0, 41.0], [2, 3], 500, 0)
    assert [v.decided for v in apart] == [1.0, 1.0]
    assert [v.runs for v in apart] == pytest.approx([2 * (1 + 10.25 / 40.5), 3 * (1 + 10.25 / 40.5)])
    alike = bench.verdicts([10.0, 14.0, 20.0], [10.0, 14.0, 20.0], [3], 500, 0)
    assert alike[0].decided < 0.2  # the same costs on both sides: an interval below 1 only by a lucky draw


def test_too_few_recordings_to_resample_are_refused() -> None:
    bench = benchmark("verdict_seeds")
    with pytest.raises(ValueError, match="too few recordings"):
        bench.verdicts([10.0], [20.0, 21.0], [2], 10, 0)


def test_welchs_interval_is_the_one_the_verdict_used_before() -> None:
    bench = benchmark("verdict_seeds")
    lo, hi = bench.welch_interval((10.0, 11.0), (28.0, 30.0))
    assert (round(lo, 2), round(hi, 2)) == (0.17, 0.76)  # one degree of freedom; the pooled interval: 0.28-0.47


def test_coverage_at_one_spread_pooled_near_95_percent_and_welch_wider() -> None:
    bench = benchmark("verdict_seeds")
    [two] = bench.coverage(0.16, 0.16, 0.6, [2], 3000, 0)
    assert two.n == 2 and 0.93 < two.pooled < 0.97 and two.welch > 0.98  # Welch's floor(df) of about 1
    assert two.pooled_decided > two.welch_decided
    [far] = bench.coverage(0.05, 0.05, 0.3, [3], 500, 0)
    assert far.pooled_decided == far.welch_decided == 1.0  # far apart and tight: both always decided


def test_the_spread_is_pooled_over_configs_with_two_recordings_or_more() -> None:
    bench = benchmark("verdict_seeds")
    logs = {"a": [0.0, 2.0], "b": [1.0, 1.0, 4.0], "c": [9.0]}
    assert bench.pooled_sigma(logs) == pytest.approx(math.sqrt((1 + 1 + 1 + 1 + 4) / 3))
    with pytest.raises(ValueError, match="no spread"):
        bench.pooled_sigma({"a": [1.0], "b": [2.0]})
