"""``benchmarks/record_trials.py``: which recorded grid points are finished, and which recording the table keeps."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import benchmark

CAP_S = 90.0


def row(trial: int, seed: int, state: str, billable_s: float, one_time_s: float = 0.0, run_id: str = "grid") -> dict:
    return {
        "run_id": run_id,
        "trial": trial,
        "seed": seed,
        "params": {"num_envs": 2048, "num_steps_per_env": 8},
        "state": state,
        "billable_s": billable_s,
        "phases_s": {"compile": one_time_s * 0.7, "startup": one_time_s * 0.3, "learn": billable_s - one_time_s},
    }


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_trial_capped_after_a_long_compile_is_unfinished_and_its_rerun_replaces_it(tmp_path: Path) -> None:
    rec = benchmark("record_trials")
    out = tmp_path / "grid.json"
    write(
        out.with_suffix(".jsonl"),
        [
            row(0, 1, "running", 40.0, one_time_s=40.0),
            row(0, 1, "capped", 91.0, one_time_s=40.0),  # 51 s of training: short of the cap on equal terms
            row(1, 2, "capped", 91.0, one_time_s=2.0),  # 89 s: within 5% of the cap, finished
            row(2, 3, "running", 30.0),  # cut off mid-way: not recorded at all
        ],
    )
    write(
        out.with_name("grid.shard1.jsonl"),
        [row(0, 1, "running", 50.0, run_id="grid-shard1"), row(0, 1, "reached", 70.0, run_id="grid-shard1")],
    )
    rows = rec.recorded_rows(str(out), CAP_S)
    kept = {(r["seed"], r["run_id"], r["state"]) for r in rows}
    assert kept == {(1, "grid-shard1", "running"), (1, "grid-shard1", "reached"), (2, "grid", "capped")}
    assert all(r["complete"] for r in rows)

    # Without the rerun, the short recording stays in the table (the best there is) but its point is unfinished.
    out.with_name("grid.shard1.jsonl").unlink()
    rows = rec.recorded_rows(str(out), CAP_S)
    assert {(r["seed"], r["complete"]) for r in rows if r["state"] != "running"} == {(1, False), (2, True)}


def test_only_a_trial_capped_short_of_the_cap_on_equal_terms_is_unfinished() -> None:
    rec = benchmark("record_trials")
    assert rec.complete(row(0, 1, "reached", 30.0, one_time_s=25.0), CAP_S)
    assert rec.complete(row(0, 1, "failed", 5.0), CAP_S)
    assert rec.complete(row(0, 1, "capped", 140.0, one_time_s=50.0), CAP_S)  # the equal-terms cap: 90 s trained
    assert not rec.complete(row(0, 1, "capped", 92.0, one_time_s=30.0), CAP_S)
