"""``benchmarks/record_trials.py``: which recorded grid points are finished, and which recording the table keeps."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.errors import ConfigError
from tests.helpers import ROOT, benchmark

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


TABLE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "h200_grid3.json"


def test_top_configs_are_the_tables_best_by_the_yardsticks_own_mean_best_first() -> None:
    rec = benchmark("record_trials")
    from sweep.params import TrialParams

    table = json.loads(TABLE.read_text())
    means = rec.sibling("search_efficiency").config_means(table, 0.9)
    top = rec.top_configs(table, 16)
    assert [means[p.key()] for p in top] == sorted(means.values())[:16]
    assert len({p.key() for p in top}) == 16
    best = top[0]  # recorded as the table spells it: every flag, the compile cache on
    assert (best.num_envs, best.num_steps_per_env, best.mode) == (4096, 12, "sweep")
    assert dict(best.flags)["compile_cache"] and dict(best.flags)["cuda_graph_update"]
    assert best.key() in {TrialParams.identity(t["params"]) for t in table["trials"]}


def test_chosen_configs_come_first_then_the_top_each_once_and_the_grid_keeps_its_order() -> None:
    rec = benchmark("record_trials")

    def args(**kw) -> argparse.Namespace:
        base = dict(configs="", top=0, from_table=str(TABLE), num_envs="2048,4096", horizons="8,12", flags="a_flag")
        return argparse.Namespace(**{**base, **kw})

    chosen = rec.points(args(configs="4096x24:stock,4096x12+buffer_donation+cuda_graph_update", top=3))
    assert chosen[0] == {"num_envs": 4096, "num_steps_per_env": 24, "mode": "stock", "flags": {}}
    # The table's best is the second config named: named once, where it was first named.
    assert len(chosen) == 4 and chosen[1]["flags"] == {"buffer_donation": True, "cuda_graph_update": True}
    assert [(p["num_envs"], p["num_steps_per_env"]) for p in chosen[2:]] == [(8192, 8), (4096, 12)]
    grid = rec.points(args())
    assert [(p["num_envs"], p["num_steps_per_env"], p["flags"]["a_flag"]) for p in grid] == [
        (n, h, v) for n in (2048, 4096) for h in (8, 12) for v in (False, True)
    ]


@pytest.mark.parametrize("spec", ["4096", "4096x24:stock+no_such_flag", "4096x24+critic_chunk=x", "ax24"])
def test_a_bad_config_spec_is_refused_with_the_key(spec: str) -> None:
    rec = benchmark("record_trials")
    with pytest.raises(ConfigError, match="--configs"):
        rec.parse_config(spec)


def test_held_out_seeds_must_be_new_to_the_table_and_are_checked_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "held.json"
    command = [sys.executable, "benchmarks/record_trials.py", "grid", "--configs", "4096x24:stock", "--held-out"]
    for extra, says in (([f"--from={TABLE}", "--seeds=4,3"], "[3] are shared"), (["--seeds=4"], "--from")):
        proc = subprocess.run(
            [*command, *extra, f"--out={out}"], capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir()), "record_trials wrote before refusing"


def recorded(seed: int, mode: str = "sweep", envs: int = 4096, success: float = 0.95) -> dict:
    params = {"backend": "mjx_locomotion", "profile": "gpu", "num_envs": envs, "num_steps_per_env": 24, "mode": mode}
    curve = [{"billable_s": 40.0 + seed, "phases_s": {"compile": 20.0}, "success": success}]
    return {"params": params, "seed": seed, "curve": curve, "end": {"state": "reached", "billable_s": 41.0}}


def table_of(*trials: dict, **keys) -> dict:
    return {"device": "NVIDIA H200", "profile": "gpu", "control_dt_s": 0.02, **keys, "trials": list(trials)}


def test_merge_adds_under_new_keys_and_leaves_what_a_replay_reads_byte_for_byte(tmp_path: Path) -> None:
    rec = benchmark("record_trials")
    into = tmp_path / "table.json"
    into.write_text(json.dumps(table_of(*(recorded(s) for s in (1, 2, 3))), indent=0))
    before = into.read_text()
    held = tmp_path / "held.json"
    held.write_text(json.dumps(table_of(recorded(4), recorded(4, "stock"), recorded(5, "stock"), held_out=True)))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(table_of(*(recorded(s, "stock") for s in (1, 2, 3)))))
    command = [sys.executable, "benchmarks/record_trials.py", "merge", str(held), str(base), f"--into={into}"]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.returncode == 0, proc.stderr
    merged = json.loads(into.read_text())
    assert list(merged) == ["device", "profile", "control_dt_s", "trials", "held_out_trials", "baseline_trials"]
    assert into.read_text().startswith(before[: before.rindex("]")])  # the old keys' text, unchanged
    assert merged["trials"] == json.loads(before)["trials"]
    assert [(t["seed"], t["params"]["mode"]) for t in merged["held_out_trials"]] == [(4, "sweep"), (4, "stock"),
                                                                                      (5, "stock")]  # fmt: skip
    assert {t["params"]["mode"] for t in merged["baseline_trials"]} == {"stock"}
    assert "3 trials added to held_out_trials" in proc.stdout and "3 trials added to baseline_trials" in proc.stdout

    # Merged again (a recording resumed and merged once more): what is there is skipped, the new point added.
    grown = json.loads(held.read_text())
    grown["trials"].append(recorded(6, "stock"))
    again, key, added = rec.merge(merged, grown)
    assert (key, added, len(again["held_out_trials"])) == ("held_out_trials", 1, 4)


@pytest.mark.parametrize(
    "recording, says",
    [
        (table_of(recorded(4), held_out=True, device="NVIDIA H100 80GB HBM3"), "device"),
        (table_of(recorded(4), held_out=True, profile="cpu"), "profile"),
        (table_of(recorded(4), held_out=True, control_dt_s=0.01), "control_dt_s"),
        (table_of(recorded(4), recorded(1), held_out=True), "held-out seeds [1]"),
        (table_of(recorded(4, "stock")), "not marked held-out"),
        (table_of(recorded(1, "stock"), recorded(2, "stock", envs=2048)), "one config"),
        (table_of(recorded(4, success=0.5), held_out=True), "another record"),
        (table_of(recorded(1, success=0.5)), "another record"),  # the same point as one of the table's trials
    ],
)
def test_merge_refuses_what_does_not_belong_to_the_table(recording: dict, says: str) -> None:
    rec = benchmark("record_trials")
    table = table_of(*(recorded(s) for s in (1, 2, 3)), held_out_trials=[recorded(4)])
    with pytest.raises(ConfigError, match=re.escape(says)):
        rec.merge(table, recording)
