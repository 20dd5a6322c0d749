"""TensorBoard scalars: one step per ledger row, in the trial's folder, with the ledger's numbers."""

from __future__ import annotations

import pytest

from sweep.ledger import PHASES, Row, metrics, read_rows
from sweep.trial.tblog import scalars


def test_each_row_of_a_real_trial_is_in_its_event_file_with_the_ledgers_numbers(reached_run) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = reached_run
    rows = read_rows(run_dir / "ledger.jsonl")
    (events,) = (run_dir / "trials" / "0003").glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"held_out/success", "held_out/success_lo", "held_out/success_hi", "train/mean_return"} <= tags
    assert {"perf/env_steps_per_s", "cost/usd", "cost/billable_s"} | {f"phases/{p}_s" for p in PHASES} <= tags
    for tag, key in (("held_out/success", "success"), ("held_out/success_hi", "success_hi")):
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert got == [(r.env_steps, pytest.approx(getattr(r, key))) for r in rows], tag
    assert [e.value for e in acc.Scalars("cost/usd")] == [pytest.approx(metrics(r).usd) for r in rows]
    assert [e.wall_time for e in acc.Scalars("cost/usd")] == [pytest.approx(r.wall_time) for r in rows]
    assert len(rows) == 2  # one checkpoint row and the end row: nothing written between checkpoints


def test_figures_a_row_does_not_have_are_left_out() -> None:
    row = {"success": None, "success_lo": None, "success_hi": None, "mean_return": None, "env_steps": 100, "trial": 0,
           "billable_s": 7.2, "price_usd_per_hour": 3600.0, "phases_s": {"sim": 2.0}, "state": "failed"}  # fmt: skip
    out = scalars(Row.of(row))
    assert not any(tag.startswith(("held_out/", "train/")) for tag in out)
    assert out["cost/usd"] == pytest.approx(7.2) and out["perf/env_steps_per_s"] == pytest.approx(50.0)
