"""benchmarks/eval_policies.py: what a rule for when to run a pass costs, on curves measured in full."""

from __future__ import annotations

import pytest

from tests.helpers import benchmark


def checkpoint(n: int, train_success: float, success: float, losses_by_check: list[int]) -> dict:
    """A full pass of 16 episodes, checked every 50 steps at 0.1 s per check."""
    checks = [[50 * (i + 1), 0, losses, 0.1 * (i + 1)] for i, losses in enumerate(losses_by_check)]
    return {
        "shape": "64x8",
        "seed": 1,
        "checkpoint": n,
        "round_s": 2.0,
        "train_success": train_success,
        "success": success,
        "episodes": 16,
        "pass_s": 0.1 * len(losses_by_check),
        "checks": checks,
    }


CURVE = [
    checkpoint(1, 0.0, 0.25, [10, 12, 12, 12]),  # decided below 0.9 at the first check (more than 1.6 failures)
    checkpoint(2, 0.5, 0.75, [0, 1, 3, 4]),  # decided at the third check
    checkpoint(3, 0.6, 0.9375, [0, 0, 1, 1]),  # the first to reach: runs in full
    checkpoint(4, 0.9, 1.0, [0, 0, 0, 0]),
]


def test_a_pass_below_the_target_stops_at_its_first_decided_check_and_a_reaching_one_runs_in_full() -> None:
    policies = benchmark("eval_policies")
    assert policies.pass_seconds(CURVE[0]) == (0.1, 50)
    assert policies.pass_seconds(CURVE[1]) == (pytest.approx(0.3), 150)
    assert policies.pass_seconds(CURVE[2]) == (0.4, 200)


def test_a_gate_that_skips_the_first_reaching_pass_detects_later_and_pays_the_rounds_between() -> None:
    policies = benchmark("eval_policies")
    curves = {("64x8", 1): CURVE}
    every = policies.cost(curves, 0.0)
    assert (every.training_s, every.passes, every.delays) == (6.0, 3, 0)
    assert abs(every.eval_s - (0.1 + 0.3 + 0.4)) < 1e-9
    late = policies.cost(curves, 0.7)  # skips checkpoints 1-3, detects at 4
    assert (late.training_s, late.eval_s, late.passes, late.delays) == (8.0, 0.4, 1, 1)
    oracle = policies.cost(curves, 0.0, oracle=True)
    assert (oracle.training_s, oracle.eval_s, oracle.passes) == (6.0, 0.4, 1)
    never = policies.cost({("64x8", 1): CURVE[:3]}, 0.7)
    assert never.undetected == 1
    unknown = [*CURVE[:2], {**CURVE[2], "train_success": None}, CURVE[3]]  # no value: a pass, as a trial decides
    assert policies.cost({("64x8", 1): unknown}, 0.7).delays == 0
