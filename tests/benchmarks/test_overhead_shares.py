"""benchmarks/overhead_shares.py: evaluation pass by pass, the answer a checkpoint, other a round, from ledger rows."""

from __future__ import annotations

import pytest

from sweep.ledger import Row
from tests.helpers import benchmark


def typed(lines: list[dict]) -> list[Row]:
    """Ledger lines as the ledger's reader reads them."""
    return [Row.of(line) for line in lines]


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
    last_reached, others = benchmark("overhead_shares").pass_seconds(typed(rows))
    assert last_reached == 1.5
    assert others == 1.0 + 0.5 + 0.75


def ledger_row(trial: int, state: str, iteration: int, phases: dict, billable: float, envs: int = 4096) -> dict:
    return {
        "trial": trial,
        "state": state,
        "iteration": iteration,
        "phases_s": phases,
        "billable_s": billable,
        "params": {"num_envs": envs, "num_steps_per_env": 24},
    }


def test_the_first_trials_bill_and_each_sizes_rounds_come_from_the_rows() -> None:
    shares = benchmark("overhead_shares")
    cold = {"startup": 20.0, "compile": 10.0}
    rows = [
        ledger_row(0, "running", 10, {**cold, "sim": 4.0, "policy": 1.0, "learn": 1.0}, 36.0),
        ledger_row(0, "running", 20, {**cold, "sim": 8.0, "policy": 2.0, "learn": 2.0, "eval": 1.5}, 43.5),
        ledger_row(0, "reached", 20, {**cold, "sim": 8.0, "policy": 2.0, "learn": 2.0, "eval": 1.5}, 43.5),
        ledger_row(1, "running", 10, {"sim": 2.0, "learn": 1.0, "eval": 0.5}, 3.5, envs=1024),
        ledger_row(1, "capped", 10, {"sim": 2.0, "learn": 1.0, "eval": 1.0}, 4.0, envs=1024),
        ledger_row(2, "failed", 0, {"learn": 0.1}, 0.1, envs=1024),  # ended before an iteration: left out
    ]
    # one-time s, training s up to the first checkpoint, training s, billable s
    rows = typed(rows)
    assert shares.first_trial(rows) == (30.0, 6.0, 12.0, 43.5)
    sizes = shares.by_size(rows, eval_every_steps=240)  # 10 iterations of 24 steps per round
    assert sizes[4096] == {
        "trials": 1,
        "training_s": 12.0,
        "eval_s": 1.5,
        "passes": 1,
        "round_s": 6.0,  # 12 s over 20 iterations, times 10
        "eval_share": 1.5 / 13.5,
    }
    assert sizes[1024]["trials"] == 1 and sizes[1024]["passes"] == 2 and sizes[1024]["round_s"] == 3.0


def test_trials_with_a_flag_are_counted_with_the_reasons_of_those_that_failed() -> None:
    rows = [
        {"trial": 0, "state": "reached", "billable_s": 9.0, "reason": "", "params": {"flags.cuda_graph_update": True}},
        {
            "trial": 1,
            "state": "failed",
            "billable_s": 0.2,
            "reason": "CUDA error",
            "params": {"flags.cuda_graph_update": True},
        },
        {
            "trial": 2,
            "state": "failed",
            "billable_s": 0.3,
            "reason": "NaN",
            "params": {"flags.cuda_graph_update": False},
        },
        {
            "trial": 3,
            "state": "failed",
            "billable_s": 0.0,
            "reason": "never ran",
            "params": {"flags.cuda_graph_update": True},
        },
    ]
    assert benchmark("overhead_shares").flag_trials(typed(rows), "cuda_graph_update") == (2, ["CUDA error"])


def test_passes_at_every_other_due_checkpoint_are_estimated_with_the_look_back_and_the_extra_round() -> None:
    def rows_of(trial: int, end: str, evals: list[float]) -> list[dict]:
        # one row per checkpoint, 4 s of training per round, then the end row repeating the last checkpoint
        out = [
            ledger_row(trial, "running", 10 * (i + 1), {"sim": 4.0 * (i + 1), "eval": e}, 5.0 * (i + 1))
            for i, e in enumerate(evals)
        ]
        return [*out, {**out[-1], "state": end}]

    rows = [
        *rows_of(0, "reached", [1.0, 2.0, 3.5]),  # 3 passes, the 3rd (kept) reached: look back at the 2nd
        *rows_of(1, "reached", [1.0, 2.5]),  # the 2nd reached but is skipped: one more round, its pass, a look back
        *rows_of(2, "capped", [1.0, 2.0, 3.0, 4.0]),  # the 2nd is skipped; the cap's (4th) always runs
    ]
    e = benchmark("overhead_shares").every_other(typed(rows))
    assert (e.passes, e.new_passes, e.extra_rounds) == (9, 3 + 3 + 3, 1)
    assert e.eval_s == 3.5 + 2.5 + 4.0
    assert e.new_eval_s == 3.5 + (1.0 + 1.5 + 1.5) + (4.0 - 1.0)
    assert e.new_billable_s == e.billable_s - e.eval_s + e.new_eval_s + 4.0  # the extra round's training
    assert e.new_training_s == e.training_s + 4.0


def test_the_answer_is_taken_a_checkpoint_and_other_a_round() -> None:
    shares = benchmark("overhead_shares")

    def at(trial: int, state: str, answer: float, other: float) -> dict:
        return {"trial": trial, "state": state, "phases_s": {"answer": answer, "other": other}}

    rows = [
        at(0, "running", 0.0, 0.010),
        at(1, "running", 0.0, 0.020),
        at(0, "running", 0.005, 0.030),  # trial 0's first answer, 5 ms; its round's other, 20 ms
        at(0, "reached", 0.012, 0.031),  # its second answer, 7 ms, before its end row: not a round
        at(1, "capped", 0.004, 0.022),
    ]
    rows = typed(rows)
    assert shares.rises_ms(rows, "answer", to_checkpoint=False) == pytest.approx([5.0, 7.0, 4.0])
    assert shares.rises_ms(rows, "other", to_checkpoint=True) == pytest.approx([20.0])
