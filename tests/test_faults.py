"""The driver killed at named points (``SWEEP_FAULT``): the hook itself, and a real study killed at random points
and resumed after each kill (``benchmarks/kill_soak.py``, whose checks say what must hold)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sweep import faults
from sweep.errors import ConfigError
from sweep.ledger import LedgerWriter, Row, read_rows, repair
from tests.helpers import ROOT, benchmark

#: The seed of the points and counts the kill test draws.
SEED = 20261206


def row(trial: int) -> Row:
    """A checkpoint row of trial ``trial``, the same in every process (its time fixed)."""
    return Row(run_id="t", trial=trial, state="running", params={}, iteration=1, billable_s=1.0,
               price_usd_per_hour=1.0, price_label="x", wall_time=1000.0 + trial)  # fmt: skip


def test_a_bad_fault_spec_is_one_line_naming_the_points() -> None:
    for spec in ("nowhere:1", "tell", "tell:0", "tell:x"):
        with pytest.raises(ConfigError, match="SWEEP_FAULT=") as info:
            faults.arm(spec)
        assert "ledger.torn" in str(info.value) and "\n" not in str(info.value)


def test_a_point_kills_on_the_armed_pass_only_and_a_torn_row_is_kept_by_the_next_writer(tmp_path: Path) -> None:
    code = (
        "import sys; from sweep import faults; from sweep.ledger import LedgerWriter\n"
        "from tests.test_faults import row\n"
        "faults.arm('ledger.torn:3')\n"
        "with LedgerWriter(sys.argv[1]) as w:\n"
        "    for i in range(5): w.append(row(i))\n"
    )
    path = tmp_path / "ledger.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)], env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False
    )
    assert proc.returncode == -signal.SIGKILL
    assert [r.trial for r in read_rows(path)] == [0, 1]  # two whole rows, then half of the third
    assert not path.read_bytes().endswith(b"\n")
    with LedgerWriter(path) as w:  # the next writer (a resume) moves the half row aside and goes on
        w.append(row(9))
    assert [r.trial for r in read_rows(path)] == [0, 1, 9] and repair(path) is None
    kept = (tmp_path / "ledger.jsonl.torn").read_text().strip()
    third = row(2).to_json()
    assert kept and third.startswith(kept)  # the half row, kept aside
    assert faults.reached("ledger.torn") is False  # this process was never armed: a point costs a comparison


@pytest.mark.slow
def test_the_driver_killed_at_twenty_random_points_and_resumed_loses_and_bills_twice_nothing(tmp_path: Path) -> None:
    """A real study of MJX trials on CPU, killed with SIGKILL at 20 points drawn by a seeded generator (in a tell, a
    ledger write, a checkpoint, the confirmation, the report, a resume's closing of orphans, the lock), resumed after
    each; two drivers are started at once twice. Every check of ``benchmarks/kill_soak.py`` runs after each driver."""
    soak = benchmark("kill_soak").run(tmp_path / "soak", points=20, seed=SEED, say=print)
    assert sum(soak.kills.values()) == 20
    named = {name.split(".")[0] for name in soak.kills}
    assert {"ledger", "tell", "checkpoint", "confirm", "report", "lock"} <= named, soak.kills
    assert soak.killed, "no kill left a trial running to be billed on resume"
