"""Ledger math (one denominator per figure), durability, torn lines and the bottleneck label."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sweep.ledger import (
    PHASES,
    LedgerView,
    LedgerWriter,
    PhaseClock,
    Row,
    bottleneck,
    frame,
    metrics,
    read_rows,
    repair,
)


def make_row(**kw) -> Row:
    phases = dict.fromkeys(PHASES, 0.0)
    phases.update(kw.pop("phases", {}))
    base = dict(
        run_id="r",
        trial=0,
        state="running",
        params={"num_envs": 4},
        iteration=10,
        env_steps=1000,
        billable_s=sum(phases.values()),
        phases_s=phases,
        price_usd_per_hour=3.6,
        price_label="test",
    )
    base.update(kw)
    return Row(**base)


def test_same_denominator_rule() -> None:
    row = make_row(
        state="reached",
        env_steps=12_000,
        phases={"startup": 5, "compile": 10, "sim": 20, "policy": 6, "learn": 4, "eval": 30, "log": 1, "checkpoint": 2},
    )
    m = metrics(row)
    assert m.training_s == pytest.approx(30.0)  # sim + policy + learn only
    assert m.throughput_sps == pytest.approx(400.0)  # 12000 steps / 30 training s, not / 78 billable s
    assert m.wall_to_target_s == pytest.approx(78.0)  # every billable phase
    assert m.usd_to_target == pytest.approx(78.0 * 3.6 / 3600)  # all billable seconds x price


def test_unreached_trials_have_cost_but_no_cost_to_target() -> None:
    for state in ("running", "pruned", "failed", "capped"):
        m = metrics(make_row(state=state, phases={"sim": 100.0}))
        assert m.usd == pytest.approx(100 * 3.6 / 3600)
        assert m.usd_to_target is None and m.wall_to_target_s is None


def test_bottleneck_labels() -> None:
    assert bottleneck({"sim": 5.0, "learn": 2.0, "policy": 2.0}) == "sim-bound"
    assert bottleneck({"sim": 3.0, "learn": 2.0, "policy": 2.0}) == "learner-bound"  # policy + learn
    assert bottleneck({"sim": 1.0, "eval": 9.0}) == "eval-bound"
    assert bottleneck({"sim": 1.0, "compile": 9.0}) == "compile-bound"
    assert bottleneck({"sim": 9.0}, peak_gib=130.0, capacity_gib=139.0) == "memory-bound"
    assert bottleneck({"sim": 9.0}, peak_gib=10.0, capacity_gib=139.0) == "sim-bound"


def test_phase_clock_bills_unclaimed_time_as_other() -> None:
    clock = PhaseClock()
    with clock.phase("sim"):
        time.sleep(0.02)
    time.sleep(0.02)  # in no phase: still billed
    billable, phases = clock.snapshot()
    assert phases["sim"] >= 0.02 and phases["other"] >= 0.02
    assert sum(phases.values()) == pytest.approx(billable, rel=1e-6)


def test_rows_round_trip_and_frame(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as w:
        w.append(make_row(trial=0, phases={"sim": 1.0}))
        w.append(make_row(trial=0, state="reached", phases={"sim": 2.0}))
        w.append(make_row(trial=1, state="failed", reason="boom", phases={"sim": 3.0}))
    rows = read_rows(path)
    assert len(rows) == 3
    assert {t: r.state for t, r in LedgerView(rows).last.items()} == {0: "reached", 1: "failed"}
    df = frame(rows)
    assert list(df["usd"]) == pytest.approx([1 * 3.6 / 3600, 2 * 3.6 / 3600, 3 * 3.6 / 3600])
    assert "p.num_envs" in df.columns


def test_a_torn_line_is_repaired_once_said_in_one_line_and_no_row_is_lost(tmp_path: Path, capsys) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as w:
        w.append(make_row(trial=0))
    torn = make_row(trial=1).to_json()[:40]
    with open(path, "a") as f:
        f.write(torn)  # power cut mid-line
    assert [r.trial for r in read_rows(path)] == [0]  # reading skips it and says nothing
    assert capsys.readouterr().err == ""
    with LedgerWriter(path) as w:  # the next writer (a resume) repairs, then appends on a fresh line
        w.append(make_row(trial=2))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "moved 1 torn line(s) (line 2" in err and "ledger.jsonl.torn" in err
    assert [r.trial for r in read_rows(path)] == [0, 2]
    assert (tmp_path / "ledger.jsonl.torn").read_text() == torn + "\n"  # kept aside, not deleted
    assert repair(path) is None  # repaired once: later reads and writers are silent
    with LedgerWriter(path):
        pass
    assert capsys.readouterr().err == ""


def test_rows_survive_a_killed_writer(tmp_path: Path) -> None:
    """SIGKILL right after append: every appended row is on disk (flushed and fsynced)."""
    path = tmp_path / "ledger.jsonl"
    script = textwrap.dedent(
        f"""
        import json, os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from sweep.ledger import LedgerWriter, Row
        w = LedgerWriter({str(path)!r})
        for i in range(5):
            w.append(Row.of(json.loads({json.dumps(make_row().to_json())}) | {{"trial": i}}))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -9
    assert [r.trial for r in read_rows(path)] == [0, 1, 2, 3, 4]
