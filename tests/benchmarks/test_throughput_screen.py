"""benchmarks/throughput_screen.py: env steps to the target fitted on a few trained configs, divided by each
config's measured throughput, as a ranking of the configs a search has not trained."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import benchmark


def slice_of(bench, correct: tuple[int, int]) -> list:
    """A 3 x 3 slice whose env steps to the target grow as num_envs ** 0.5 x horizon ** 0.25 and whose throughput
    grows as num_envs: the cheapest config is the largest; ``correct`` marks one."""
    out = []
    for n in (1024, 2048, 4096):
        for h in (8, 16, 32):
            steps = 1e4 * n**0.5 * h**0.25
            sps = 100.0 * n / (1.0 + h / 64)
            out.append(
                bench.Screened(
                    key=(n, h),
                    params={"num_envs": n, "num_steps_per_env": h},
                    num_envs=n,
                    horizon=h,
                    sps=sps,
                    first_s=1.0,
                    steps=[steps],
                    cost_s=steps / sps,
                    correct=(n, h) == correct,
                )
            )
    return out


def test_the_fit_recovers_the_steps_model_and_holds_its_slopes_at_zero_below_three_points() -> None:
    bench = benchmark("throughput_screen")
    points = [(n, h, 1e4 * n**0.5 * h**0.25) for n, h in ((1024, 8), (2048, 32), (4096, 16), (1024, 32))]
    c, a, b = bench.fit(points, ridge=0.0)
    assert (a, b) == (pytest.approx(0.5), pytest.approx(0.25)) and c == pytest.approx(math.log(1e4))
    c, a, b = bench.fit(points[:2], ridge=0.0)
    assert (a, b) == (0.0, 0.0) and c == pytest.approx((math.log(points[0][2]) + math.log(points[1][2])) / 2)
    _, shrunk, _ = bench.fit(points, ridge=10.0)
    assert 0.0 < shrunk < 0.5


def test_an_exact_model_finds_the_cheapest_config_once_three_are_trained() -> None:
    bench = benchmark("throughput_screen")
    configs = slice_of(bench, correct=(4096, 8))
    cheapest = min(configs, key=lambda c: c.cost_s)
    assert cheapest.correct
    assert bench.hit_rate(configs, k=3, m=1, draws=200, ridge=1e-9, seed=0) == 1.0
    # Fewer than 3 points fit no slope: the ranking is by throughput alone, whose fastest is (4096, 8) here too, so
    # the rate is the chance that the one trained config is (4096, 8) or that the ranking picks it: certain.
    assert bench.hit_rate(configs, k=1, m=1, draws=200, ridge=1e-9, seed=0) == 1.0
    # When the fastest config is not the cheapest, throughput alone misses it, and the fit does not.
    slower = [
        replace(c, steps=[c.steps[0] / 100], cost_s=c.cost_s / 100) if c.key == (1024, 8) else c
        for c in slice_of(bench, correct=(1024, 8))
    ]
    assert bench.hit_rate(slower, k=1, m=1, draws=400, ridge=1e-9, seed=0) == pytest.approx(1 / 9, abs=0.05)


def test_the_uninformed_chance_and_the_command_lines_values() -> None:
    bench = benchmark("throughput_screen")
    assert bench.uninformed(2, 24, 2) == pytest.approx(1 - 22 * 21 / (24 * 23))
    assert bench.held("flags.buffer_donation=true,num_envs=4096") == {
        "flags.buffer_donation": True,
        "num_envs": 4096.0,
    }
    assert bench.counts("1,3") == [1, 3]
    for bad in ("flags.buffer_donation", "=true", "num_envs=many"):
        with pytest.raises(argparse.ArgumentTypeError, match="key=value"):
            bench.held(bad)
    for bad in ("0,2", "two", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integers"):
            bench.counts(bad)


def test_the_command_on_the_committed_table(monkeypatch, capsys) -> None:
    bench = benchmark("throughput_screen")
    table = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "h200_grid3.json"
    monkeypatch.setattr("sys.argv", ["throughput_screen.py", str(table), "--trained", "3", "--draws", "200"])
    bench.main()
    out = capsys.readouterr().out
    assert out.startswith("24 configs hold flags.buffer_donation=true; 2 correct;")
    assert out.count("  correct") == 2 and "baseline runs; a shape new to a worker adds" in out
    assert "trained 3 at random, then the screen's 1: a correct config trained in" in out
