"""One driver per run folder: the lock file, its heartbeat, takeover of a dead holder, the race for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep import runlock
from sweep.runlock import LOCK_FILE, Holder, LockHeld, LockLost
from tests.helpers import ROOT

#: A process that takes the folder given as argv[1] once argv[4] exists, says so, and holds it until argv[2] exists (or
#: it is killed); argv[3] arms a fault.
HOLD = """
import sys, time
from pathlib import Path
from sweep import faults, runlock
faults.arm(sys.argv[3])
while not Path(sys.argv[4]).exists():
    time.sleep(0.001)
try:
    lock = runlock.acquire(Path(sys.argv[1]))
except runlock.LockHeld as exc:
    print("held:", exc, flush=True)
    sys.exit(2)
print("won", flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.05)
lock.release()
"""


def hold(run_dir: Path, until: Path, fault: str = "", go: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir), str(until), fault, str(go or run_dir)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def foreign(run_dir: Path, beat_age_s: float, token: str = "f00d") -> Holder:
    """A lock written by a driver on another machine whose last beat is ``beat_age_s`` old."""
    now = time.time()
    holder = Holder("elsewhere", 4242, now - 600.0, now - beat_age_s, token, "another-boot", "pid:[1]", "77")
    (run_dir / LOCK_FILE).write_text(holder.to_json())
    return holder


def test_the_lock_names_its_holder_and_a_second_driver_is_refused_with_it(tmp_path: Path) -> None:
    with runlock.acquire(tmp_path) as lock:
        data = json.loads((tmp_path / LOCK_FILE).read_text())
        assert (data["pid"], data["token"]) == (os.getpid(), lock.holder.token)
        assert data["host"] and data["since"] <= data["beat"] <= time.time()
        proc = hold(tmp_path, tmp_path / "never")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert out.startswith("held:") and f"pid {os.getpid()} on host {data['host']}" in out and "last beat" in out
        assert "resume=" in out and f"kill {os.getpid()}" in out
        before = lock.holder.beat
        assert lock.beat() and json.loads((tmp_path / LOCK_FILE).read_text())["beat"] >= before
    assert not (tmp_path / LOCK_FILE).exists()  # a clean stop removes it
    assert list(tmp_path.iterdir()) == []


def test_a_lock_is_judged_by_the_beat_inside_it_not_by_file_times(tmp_path: Path) -> None:
    # Copied elsewhere: the file is new, the beat inside is old: the holder is dead and is taken over.
    dead = foreign(tmp_path, beat_age_s=runlock.STALE_S + 5.0)
    with runlock.acquire(tmp_path) as lock:
        assert lock.holder.lives == [[dead.since, dead.beat]]  # its life, for billing the trials it left
        assert runlock.lives(tmp_path) == ([(dead.since, dead.beat)], lock.holder.since)
    # An old file whose beat inside is fresh: that driver lives (on a machine whose processes this one cannot see).
    foreign(tmp_path, beat_age_s=1.0)
    old = time.time() - 3600
    os.utime(tmp_path / LOCK_FILE, (old, old))
    with pytest.raises(LockHeld, match="pid 4242 on host elsewhere"):
        runlock.acquire(tmp_path)


def test_a_holder_on_this_machine_whose_process_is_gone_is_taken_over_at_once(tmp_path: Path) -> None:
    proc = hold(tmp_path, tmp_path / "never")
    assert proc.stdout.readline().strip() == "won"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    dead = runlock.read(tmp_path / LOCK_FILE)
    assert dead is not None and time.time() - dead.beat < runlock.STALE_S  # a fresh beat, and yet
    with runlock.acquire(tmp_path) as lock:
        assert lock.holder.lives == [[dead.since, dead.beat]]


@pytest.mark.slow
def test_of_drivers_racing_for_a_dead_lock_exactly_one_wins(tmp_path: Path) -> None:
    for round_ in range(3):
        run_dir = tmp_path / f"r{round_}"
        run_dir.mkdir()
        foreign(run_dir, beat_age_s=runlock.STALE_S + 5.0, token=f"dead{round_}")
        done, go = run_dir / "done", tmp_path / f"go{round_}"
        racers = [hold(run_dir, done, go=go) for _ in range(5)]
        time.sleep(2.0)  # every racer started and waits for the word
        go.touch()
        first = [p.stdout.readline().strip() for p in racers]  # each has won, or been refused and exited
        done.touch()
        for p in racers:
            p.wait(timeout=60)
        assert sum(line == "won" for line in first) == 1, first
        assert sorted(p.returncode for p in racers) == [0, 2, 2, 2, 2]
        assert not (run_dir / LOCK_FILE).exists()


def test_a_driver_killed_while_taking_over_is_taken_over_in_turn(tmp_path: Path) -> None:
    dead = foreign(tmp_path, beat_age_s=runlock.STALE_S + 5.0)
    proc = hold(tmp_path, tmp_path / "never", fault="lock.takeover:1")  # dies between its claim and its lock
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / f"{LOCK_FILE}.{dead.token}").exists() and runlock.read(tmp_path / LOCK_FILE) == dead
    with runlock.acquire(tmp_path) as lock:
        assert lock.holder.lives == [[dead.since, dead.beat]]  # the dead claimer ran nothing: no life of its own


def test_a_driver_whose_lock_was_taken_over_stops_writing(tmp_path: Path) -> None:
    lock = runlock.acquire(tmp_path)
    lock.check()
    taker = foreign(tmp_path, beat_age_s=0.0, token="taker")  # another driver's lock in its place
    assert not lock.beat()
    assert runlock.read(tmp_path / LOCK_FILE) == taker  # its beat did not write over the taker's lock
    with pytest.raises(LockLost, match=r"taken over by another sweep\.run"):
        lock.check()
    lock.release()
    assert runlock.read(tmp_path / LOCK_FILE) == taker  # nor did its release remove it


def test_an_unreadable_lock_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("{")  # a driver that died between creating the file and writing it
    with runlock.acquire(tmp_path) as lock:
        assert lock.holder.lives == []
