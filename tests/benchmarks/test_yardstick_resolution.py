"""benchmarks/yardstick_resolution.py: how finely the search-efficiency yardstick can judge a recommendation (where a
recording crossed the target, exact-flag twins and the ceiling of a truth of n seeds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.params import TrialParams
from tests.helpers import benchmark
from tests.replay_table import write_yardstick_table


def test_the_crossing_lies_after_the_checkpoint_before_and_after_the_last_pass_evaluated() -> None:
    bench = benchmark("yardstick_resolution")
    points = [(10.0, 0.2), (20.0, None), (30.0, None), (40.0, 0.95)]  # the gate skipped two passes
    curve = [{"billable_s": s, "phases_s": {"compile": 0.0}, "success": ok} for s, ok in points]
    assert bench.gap_shares({"curve": curve}, 0.9) == pytest.approx((0.25, 0.75))
    assert bench.gap_shares({"curve": curve[:3]}, 0.9) is None  # never reached
    first = [{"billable_s": 8.0, "phases_s": {"compile": 3.0}, "success": 0.95}]  # compilation left out
    assert bench.gap_shares({"curve": first}, 0.9) == pytest.approx((1.0, 1.0))


def test_twins_differ_only_in_exact_flags() -> None:
    bench = benchmark("yardstick_resolution")

    def key(**flags: bool) -> tuple:
        params = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
        return TrialParams.identity({**params, **{f"flags.{name}": on for name, on in flags.items()}})

    held = {
        key(buffer_donation=True): 10.0,
        key(buffer_donation=False): 13.0,  # exact (docs/perf-flags.md): a twin of the first
        key(cuda_graph_update=True): 11.0,  # not exact: learns otherwise, no twin
    }
    [(one, means)] = bench.twins(held)
    assert bench.learning_key(one) == bench.learning_key(key())
    assert means == [10.0, 13.0]


def test_the_ceiling_is_certain_for_configs_far_apart_and_a_coin_for_equal_ones() -> None:
    bench = benchmark("yardstick_resolution")
    assert bench.ceiling({"a": 0.0, "b": 2.0}, 0.1, 3, 0.1, 500, 0) == 1.0
    coin = bench.ceiling({"a": 0.0, "b": 0.0}, 0.5, 3, 0.0, 4000, 0)  # no tolerance: correct when its draw is lowest
    assert 0.45 < coin < 0.55
    near = {"a": 0.0, "b": 0.05, "c": 0.1}
    few, many = (bench.ceiling(near, 0.3, n, 0.1, 4000, 0) for n in (2, 20))
    assert few < 0.8 < many  # more held-out seeds, a finer truth
    with pytest.raises(ValueError, match="fewer than two"):
        bench.ceiling({"a": 0.0}, 0.1, 3, 0.1, 10, 0)


def test_the_command_reports_each_measurement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = benchmark("yardstick_resolution")
    costs = {(64, 8): {1: 10.0, 2: 12.0}, (64, 16): {1: 20.0, 2: 22.0}}
    held = {(64, 8): {4: 11.0, 5: 11.5}, (64, 16): {4: 21.0}, "baseline": {4: 30.0}}
    table = write_yardstick_table(tmp_path / "t.json", costs, {1: 30.0, 2: 31.0}, held)
    bench.main([str(table), "--seeds", "3,6", "--resamples", "200"])
    out = capsys.readouterr().out
    assert "2 configs with held-out recordings, the best held-out mean 11.2 s, 1 within 10% of it" in out
    assert "a median 25% of a recording's cost earlier" in out  # four checkpoints a recording
    assert "(7 recordings of 2 configs)" in out
    assert "ceiling, 3 held-out seeds a config: the config of lowest mean judged correct in 100%" in out
    assert "ceiling, 6 held-out seeds" in out


def test_bad_seeds_stop_in_one_line(tmp_path: Path) -> None:
    bench = benchmark("yardstick_resolution")
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path / "t.json"), "--seeds", "0"])
    with pytest.raises(SystemExit, match="error: "):
        bench.main([str(tmp_path / "missing.json")])
