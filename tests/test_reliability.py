"""Faults injected for real: killed workers, a killed driver, Ctrl-C, divergence, out of memory, a soak run."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
import yaml

from sweep import runlock
from sweep.backends.mjx.locomotion import MjxLocomotion
from sweep.contract import CONTINUE
from sweep.ledger import LedgerView, metrics, read_rows
from sweep.planner.study_store import started
from sweep.trial.runner import run_trial
from tests.helpers import tiny_trial
from tests.replay_table import write_table
from tests.test_run import ROOT, run, space_file, study


def start(space: Path, run_id: str, out: Path) -> subprocess.Popen:
    """The main command in its own process group (so a kill takes Ray's processes with it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sweep.run", f"space={space}", f"run_id={run_id}", f"out={out}"],
        cwd=out.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_rows(path: Path, predicate, timeout: float = 120.0) -> list[dict]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = read_rows(path)
        if predicate(rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting on {path}")


def slow_space(tmp_path: Path, **over) -> Path:
    """Replayed trials that take a few real seconds each (time_scale), so faults land mid-trial."""
    path = space_file(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["backend_options"]["time_scale"] = 0.05
    data["workers"]["num"] = 1
    data.update(over)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(autouse=True)
def no_stray_ray():
    yield
    # `ray stop` costs a process start: only where a test left a raylet behind (the in-process trials start none)
    if subprocess.run(["pgrep", "-f", "raylet"], capture_output=True).returncode == 0:
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], capture_output=True)


@pytest.mark.slow
def test_killed_worker_fails_its_trial_and_the_study_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    proc = start(slow_space(tmp_path), "w", out)
    ledger = out / "w" / "ledger.jsonl"
    wait_rows(ledger, lambda rows: sum(r.state == "running" for r in rows) >= 3)
    pids = subprocess.run(["pgrep", "-f", "ray::TrialWorker"], capture_output=True, text=True).stdout.split()
    assert pids, "no worker process found"
    os.kill(int(pids[0]), signal.SIGKILL)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert "raylet" not in err.lower() and "worker died" not in err.lower(), err  # the ledger has the reason
    rows = read_rows(ledger)
    ends = LedgerView.of(rows).last
    lost = [r for r in ends.values() if r.state == "failed" and "worker lost" in r.reason]
    assert len(lost) == 1
    before = [r for r in rows if r.trial == lost[0].trial and r.state == "running"]
    assert lost[0].billable_s >= before[-1].billable_s  # spend up to the last row, plus the time to notice
    assert any(t > lost[0].trial for t in ends), "the study stopped after the worker died"
    assert sum(metrics(r).usd for r in ends.values()) <= 400.0
    assert len(study(out / "w").trials) == len(ends)


@pytest.mark.slow
def test_killed_driver_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    proc = start(slow_space(tmp_path), "d", out)
    ledger = out / "d" / "ledger.jsonl"
    wait_rows(ledger, lambda rows: sum(r.state == "running" for r in rows) >= 4)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and every process it started
    proc.wait()
    before = read_rows(ledger)
    spent_before = sum(metrics(r).usd for r in LedgerView.of(before).last.values())
    dead = runlock.read(out / "d" / runlock.LOCK_FILE)  # the killed driver's lock, its last heartbeat inside
    assert dead is not None and dead.pid == proc.pid
    alive = max(  # the run's last sign of life: a row, a trial start or the driver's heartbeat
        [r.wall_time for r in before]
        + [t.datetime_start.timestamp() for t in study(out / "d").trials if t.datetime_start]
        + [dead.beat]
    )
    resumed = run(f"resume={out / 'd'}", "budget.max_trials=10", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = read_rows(ledger)
    assert after[: len(before)] == before
    keys = [(r.trial, r.iteration, r.state) for r in after]
    assert len(keys) == len(set(keys))
    ends = LedgerView.of(after).last
    orphan = LedgerView.of(before).last[max(r.trial for r in before)]
    assert ends[orphan.trial].state in ("failed", "reached", "pruned")
    if ends[orphan.trial].state == "failed":  # billed past its last row, up to the last sign of life
        billed = orphan.billable_s + max(0.0, alive - orphan.wall_time)
        assert ends[orphan.trial].billable_s == pytest.approx(billed, abs=1e-6)
        assert "last sign of life" in ends[orphan.trial].reason
    assert sum(metrics(r).usd for r in ends.values()) >= spent_before
    asked = started(study(out / "d"))  # a killed driver may leave a queued proposal, which no one asked yet
    assert asked == len(ends) and asked > len(LedgerView.of(before).last)
    assert not (out / "d" / runlock.LOCK_FILE).exists()  # taken over, then removed at the clean end


@pytest.mark.slow
def test_ctrl_c_bills_running_trials_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    proc = start(slow_space(tmp_path), "c", out)
    ledger = out / "c" / "ledger.jsonl"
    wait_rows(ledger, lambda rows: sum(r.state == "running" for r in rows) >= 3)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "raylet" not in err.lower() and "worker died" not in err.lower(), err
    rows = read_rows(ledger)
    ends = LedgerView.of(rows).last
    assert all(r.state != "running" for r in ends.values()), "a trial was left without an end row"
    assert any(r.state == "capped" and "Ctrl-C" in r.reason for r in ends.values())
    assert (out / "c" / "report.html").exists()


@pytest.mark.slow
def test_ctrl_c_while_the_output_goes_through_a_pipe_still_writes_the_report(tmp_path: Path) -> None:
    """``sweep.run ... | tee log`` and Ctrl-C: the same SIGINT ends tee, so stdout is a broken pipe."""
    out = tmp_path / "reports"
    err_path = tmp_path / "stderr.txt"
    # tee as in a terminal, where Ctrl-C ends it: SIGINT at its default even where this suite runs with it ignored
    # (a background job), or tee would outlive the signal and the study would end on its own before the Ctrl-C
    tee = subprocess.Popen(
        ["tee", str(tmp_path / "log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.run", f"space={slow_space(tmp_path)}", "run_id=p", f"out={out}"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
            stdout=tee.stdin,
            stderr=err_file,
        )
    tee.stdin.close()  # only the driver holds the pipe now
    wait_rows(out / "p" / "ledger.jsonl", lambda rows: sum(r.state == "running" for r in rows) >= 3)
    tee.send_signal(signal.SIGINT)
    tee.wait()
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=120)
    err = err_path.read_text()
    assert code == 130, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "raylet" not in err.lower() and "worker died" not in err.lower(), err  # no Ray paragraphs
    assert (out / "p" / "report.html").exists() and (out / "p" / "report.html").stat().st_size > 10_000
    ends = LedgerView.of(read_rows(out / "p" / "ledger.jsonl")).last
    assert all(r.state != "running" for r in ends.values())


@pytest.mark.slow
def test_ctrl_c_on_a_terminal_stops_the_live_view_and_writes_the_report(tmp_path: Path) -> None:
    """On a terminal the run draws its live view (rich) on stderr; Ctrl-C must still bill every running trial, leave
    no traceback and write the report, as in a pipe."""
    out = tmp_path / "reports"
    argv = [f"space={slow_space(tmp_path)}", "run_id=t", f"out={out}"]
    proc, terminal, screen, reader = on_a_terminal(argv, tmp_path)
    wait_rows(out / "t" / "ledger.jsonl", lambda rows: sum(r.state == "running" for r in rows) >= 3)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    reader.join(timeout=10)
    os.close(terminal)
    text = screen.decode(errors="replace")
    assert "running trials" in text and "\u2501" in text, text[-3000:]  # the live view, with its budget bar
    assert "Traceback" not in text and "raylet" not in text.lower(), text[-3000:]
    ends = LedgerView.of(read_rows(out / "t" / "ledger.jsonl")).last
    assert all(r.state != "running" for r in ends.values())
    assert any(r.state == "capped" and "Ctrl-C" in r.reason for r in ends.values())
    assert (out / "t" / "report.html").stat().st_size > 10_000


def on_a_terminal(argv: list[str], cwd: Path) -> tuple[subprocess.Popen, int, bytearray, Any]:
    """``sweep.run argv`` on a pseudo-terminal of its own (stdin, stdout, stderr), kept drained by a thread.
    Returns (process, the terminal's side of ours, what it has shown, the thread, which ends with the driver)."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))  # a 200-column terminal
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.run", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"},
        start_new_session=True,
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    screen = bytearray()

    def read() -> None:  # keep the terminal drained, or the driver blocks on a full buffer
        with contextlib.suppress(OSError):  # EIO once the driver is gone, EBADF once the terminal is closed
            while chunk := os.read(main, 65536):
                screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return proc, main, screen, reader


def session_ended(pid: int, timeout: float = 60.0) -> bool:
    """Whether every process of the session ``pid`` led (the driver, and Ray's processes it started) has exited."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if subprocess.run(["pgrep", "-s", str(pid)], capture_output=True).returncode != 0:
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "to"),
    [("SIGTERM", "driver"), ("SIGTERM", "group"), ("SIGHUP", "closed terminal")],
    ids=["SIGTERM to the driver (docker stop, a scheduler)", "SIGTERM to its group (timeout)", "SIGHUP"],
)
def test_sigterm_and_sighup_end_the_study_as_ctrl_c_does_and_resume_continues(name: str, to: str, tmp_path: Path):
    out = tmp_path / "reports"
    sig = getattr(signal, name)
    argv = [f"space={slow_space(tmp_path)}", "run_id=s", f"out={out}"]
    ledger = out / "s" / "ledger.jsonl"
    if to == "closed terminal":  # the terminal goes away: SIGHUP to its processes, and writes to it fail
        proc, terminal, _, _ = on_a_terminal(argv, tmp_path)
        wait_rows(ledger, lambda rows: sum(r.state == "running" for r in rows) >= 3)
        os.close(terminal)
        os.killpg(proc.pid, sig)
        code, err = proc.wait(timeout=120), ""
    else:
        proc = start(Path(argv[0].split("=", 1)[1]), "s", out)
        wait_rows(ledger, lambda rows: sum(r.state == "running" for r in rows) >= 3)
        (os.kill if to == "driver" else os.killpg)(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
        code = proc.returncode
    assert code == 128 + sig, err
    for dump in ("Traceback", f"{name} received", "raylet", "worker died", "PC: @"):  # ours, Ray's core worker's
        assert dump.lower() not in err.lower(), err
    assert session_ended(proc.pid), "processes of the stopped run are still alive"
    rows = read_rows(ledger)
    ends = LedgerView.of(rows).last
    assert all(r.state != "running" for r in ends.values()), "a trial was left without an end row"
    assert any(r.cause == "study_end" and name in r.reason for r in ends.values()), ends
    asked = [t for t in study(out / "s").trials if t.state != optuna.trial.TrialState.WAITING]  # not the queue
    assert {t.number: t.user_attrs["state"] for t in asked} == {t: r.state.value for t, r in ends.items()}
    assert all(t.state.is_finished() for t in asked)
    assert (out / "s" / "report.html").stat().st_size > 10_000
    assert not (out / "s" / runlock.LOCK_FILE).exists()
    resumed = run(f"resume={out / 's'}", "budget.max_trials=6", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = read_rows(ledger)
    assert after[: len(rows)] == rows  # nothing lost
    assert len(LedgerView.of(after).last) > len(ends)  # and the study went on
    assert all(r.state != "running" for r in LedgerView.of(after).last.values())


class FaultyBackend(MjxLocomotion):
    """The embedded backend whose training env breaks at step ``at``: NaN observations or out of memory."""

    def __init__(self, fault: str, at: int = 20) -> None:
        self.fault, self.at = fault, at

    def make_env(self, num_envs, seed, device, profile, **knobs):
        env = super().make_env(num_envs, seed, device, profile, **knobs)
        if num_envs == 16:  # the evaluation env stays healthy
            return env
        step, fault, count = env.step, self.fault, [0]

        def broken(actions):
            count[0] += 1
            obs, rew, dones, extras = step(actions)
            if fault == "nan_reward" and count[0] == self.at:  # one poisoned reward, then healthy again
                rew = rew.clone()
                rew[0] = float("nan")
            elif count[0] >= self.at and fault == "oom":
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
            elif count[0] >= self.at and fault == "nan":
                obs["policy"][0, 0] = float("nan")
            return obs, rew, dones, extras

        env.step = broken
        return env


@pytest.mark.parametrize(("fault", "reason"), [("nan", "NaN"), ("oom", "out of device memory")])
def test_divergence_and_out_of_memory_fail_the_trial_with_the_cost_counted(fault, reason, monkeypatch) -> None:
    monkeypatch.setattr("sweep.trial.runner.get_backend", lambda name: FaultyBackend(fault))
    cfg = tiny_trial(num_steps_per_env=8, eval_every_steps=16)
    rows = []
    final = run_trial(cfg, lambda r: rows.append(r) or CONTINUE, price_usd_per_hour=1.0, price_label="t")
    assert final.state == "failed" and reason in final.reason, final.reason
    assert metrics(final).usd > 0 and final.env_steps > 0
    assert rows[-1] is final


def test_fast_finite_check_skips_a_poisoned_update_and_the_ledger_counts_it(monkeypatch) -> None:
    monkeypatch.setattr("sweep.trial.runner.get_backend", lambda name: FaultyBackend("nan_reward", at=12))
    cfg = tiny_trial(num_steps_per_env=8, eval_every_steps=16, flags={"compile_cache": True, "fast_finite_check": True})
    rows = []
    final = run_trial(cfg, lambda r: rows.append(r) or (CONTINUE if len(rows) < 3 else "stop"))
    assert final.state == "capped", final.reason  # the trial went on past the bad update
    assert final.skipped_updates == cfg.num_learning_epochs * cfg.num_mini_batches  # every step of that update
    assert rows[0].skipped_updates == final.skipped_updates  # already on the first checkpoint row


@pytest.mark.slow
def test_soak_thirty_trials_rows_and_study_agree(tmp_path: Path) -> None:
    path = space_file(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["backend_options"]["time_scale"] = 0.0
    # 48 feasible configs (the planner runs no config twice); 256 envs were never recorded: those fail
    data["knobs"]["num_envs"] = [64, 128, 256]
    data["knobs"]["num_mini_batches"] = [2, 4]
    data["knobs"]["flags"] = {"fused_optimizer": [False, True], "deferred_episode_stats": [False, True]}
    table_path = Path(data["backend_options"]["table"])
    table = json.loads(table_path.read_text())
    table["trials"] = [
        {
            **t,
            "params": {
                **t["params"],
                "num_mini_batches": mb,
                "flag.fused_optimizer": fused,
                "flag.deferred_episode_stats": d,
            },
        }
        for t in table["trials"]
        for mb, fused, d in itertools.product((2, 4), (False, True), (False, True))
    ]
    table_path.write_text(json.dumps(table))
    data["budget"] = {"usd": 1e6, "trial_usd": 60.0, "max_trials": 32}
    data["search"] = {"prune": False, "sampler": "random", "initial": [{"num_envs": 256, "num_steps_per_env": 8}]}
    path.write_text(yaml.safe_dump(data))
    proc = run(f"space={path}", "run_id=soak", f"out={tmp_path / 'reports'}", cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = tmp_path / "reports" / "soak"
    rows = read_rows(run_dir / "ledger.jsonl")
    ends = LedgerView.of(rows).last
    told_unrun = [r for r in ends.values() if r.state == "pruned" and r.billable_s == 0]  # infeasible, repeats
    assert len(ends) - len(told_unrun) == 32
    states = Counter(r.state for r in ends.values())
    assert states["failed"] >= 1 and states["reached"] >= 1
    checkpoints = sum(r.state == "running" for r in rows)
    assert len(rows) == checkpoints + len(ends)  # one row per checkpoint plus one end row per trial
    s = optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert len(s.trials) == len(ends)


@pytest.mark.slow
def test_soak_three_killed_drivers_and_resumes_in_a_row_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    from sweep.ledger import summary_figures

    out = tmp_path / "reports"
    # 16 configs, so that three cycles of at least 3 new checkpoints each never run out of configs to try
    table = write_table(tmp_path / "table16.json", mini_batches=(1, 2, 4, 8))
    space = slow_space(
        tmp_path,
        budget={"usd": 1e6, "trial_usd": 60.0, "max_trials": 40},
        knobs={"num_envs": [64, 128], "num_steps_per_env": [8, 16], "num_mini_batches": [1, 2, 4, 8]},
        backend_options={"table": str(table), "time_scale": 0.05},
    )
    ledger = out / "k" / "ledger.jsonl"
    seen = 0
    for cycle in range(3):
        argv = [f"space={space}", "run_id=k", f"out={out}"] if cycle == 0 else [f"resume={out / 'k'}"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.run", *argv],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        before = ledger.read_bytes() if ledger.exists() else b""
        try:
            wait_rows(ledger, lambda rows, n=seen: sum(r.state == "running" for r in rows) >= n + 3, timeout=180)
        except AssertionError as exc:  # say what the driver printed and whether it was still running
            running = proc.poll() is None
            with contextlib.suppress(ProcessLookupError):  # an exited driver may have left no process in its group
                os.killpg(proc.pid, signal.SIGKILL)
            err = proc.communicate()[1][-4000:]
            state = "running" if running else f"exited with code {proc.returncode}"
            raise AssertionError(f"cycle {cycle}: {exc}; the driver {state}; {err}") from exc
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        after = ledger.read_bytes()
        assert after.startswith(before), f"cycle {cycle}: earlier ledger bytes changed"
        rows = read_rows(ledger)
        keys = [(r.trial, r.iteration, r.state) for r in rows]
        assert len(keys) == len(set(keys)), f"cycle {cycle}: a row was written twice"
        spend = sum(r.billable_s * r.price_usd_per_hour / 3600 for r in LedgerView.of(rows).last.values())
        assert summary_figures(rows).total_usd == pytest.approx(spend, rel=1e-12)
        seen = sum(r.state == "running" for r in rows)
    before = ledger.read_bytes()
    final = run(f"resume={out / 'k'}", "budget.max_trials=1", cwd=tmp_path)  # closes the last orphans, bills them
    assert final.returncode == 0, final.stderr
    rows = read_rows(ledger)
    ends = LedgerView(rows).last
    assert ledger.read_bytes().startswith(before) and all(r.state != "running" for r in ends.values())
    assert started(study(out / "k")) == len(ends)
