"""benchmarks/overhead_shares.py: evaluation split pass by pass from a ledger's rows."""

from __future__ import annotations

from tests.helpers import benchmark


def row(trial: int, state: str, eval_s: float) -> dict:
    return {"trial": trial, "state": state, "phases_s": {"eval": eval_s}}


def test_a_reached_trials_last_pass_is_told_from_its_other_passes() -> None:
    rows = [
        row(0, "running", 0.0),  # a checkpoint whose pass was skipped
        row(0, "running", 1.0),
        row(1, "running", 0.5),
        row(0, "running", 2.5),  # the pass that reached: 1.5 s
        row(0, "reached", 2.5),  # the end row repeats the last checkpoint's phases
        row(1, "capped", 1.25),  # the cap's pass: not a reached trial's
    ]
    last_reached, others = benchmark("overhead_shares").pass_seconds(rows)
    assert last_reached == 1.5
    assert others == 1.0 + 0.5 + 0.75
