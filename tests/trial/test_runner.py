"""The trial runner: a tiny real PPO run improves; bad arguments fail fast with one line; kills keep rows."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch

import sweep.trial.cli as trial_cli
import sweep.trial.runner as runner
from sweep.contract import CONTINUE, EndCause, TrialState, throughput_end
from sweep.ledger import PhaseClock, metrics, read_rows
from sweep.trial.runner import run_any
from tests.helpers import ROOT, run_in_process, run_module, tiny_trial


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_module("sweep.trial", *args, cwd=cwd, timeout=timeout)


@pytest.mark.parametrize(
    ("arg", "key"),
    [
        ("num_env=64", "num_env"),
        ("num_envs=0", "num_envs"),
        ("num_envs=-3", "num_envs"),
        ("num_steps_per_env=0", "num_steps_per_env"),
        ("profile=moon", "profile"),
        ("price.gpu=tpu9", "price.gpu"),
        ("price=-2", "usd_per_hour"),
        ("seed=4294967296", "seed"),
        ("flags.turbo=true", "turbo"),
        ("target=1.5", "target"),
        ("eval_gate=0.95", "eval_gate"),
        ("eval_gate_signal=reward", "eval_gate_signal"),
    ],
)
def test_bad_arguments_fail_with_one_line_naming_the_key(arg: str, key: str, tmp_path: Path) -> None:
    if arg == "num_env=64":  # the real process once; the other cases in this one (the same checks, no imports paid)
        proc = cli(arg, f"out={tmp_path / 'run'}", cwd=tmp_path)
    else:
        proc = run_in_process(
            functools.partial(trial_cli.main, run=run_any), arg, f"out={tmp_path / 'run'}", cwd=tmp_path
        )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and key in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "ledger.jsonl").exists()  # nothing ran


tiny = tiny_trial


@pytest.mark.slow
def test_tiny_real_ppo_run_improves_return(tmp_path: Path) -> None:
    rows = []

    def sink(row):  # the planner's answer takes 50 ms: billed to 'answer', in the rows after
        rows.append(row)
        time.sleep(0.05)
        return CONTINUE if len(rows) < 4 else "stop"

    final = runner.run_trial(tiny(), sink, price_usd_per_hour=1.0, price_label="test", out_dir=tmp_path)
    assert final.state == "capped" and "budget" in final.reason  # the sink asked to stop
    checkpoints = [r for r in rows if r.state == "running"]
    assert len(checkpoints) == 4
    returns = [r.mean_return for r in checkpoints]
    assert returns[-1] > returns[0] + 0.5, returns  # PPO learns: the training return climbs
    for r in checkpoints:  # a full pass has a rate; a pass stopped below the target has its bounds only
        assert (r.success_max is None and 0 <= r.success <= 1) or (r.success is None and r.success_max < tiny().target)
        assert 0 <= r.success_lo <= r.success_hi <= 1
        assert r.train_success is None or 0 <= r.train_success <= 1
    assert any(r.train_success is not None for r in checkpoints)  # training episodes finished and were counted
    assert all(0 <= r.on_track <= 1 for r in checkpoints)  # the embedded env says, at every checkpoint
    m = metrics(final)
    assert m.throughput_sps > 0 and m.usd > 0 and final.phases_s.compile > 0
    assert [round(r.phases_s.answer / 0.05) for r in rows] == [0, 1, 2, 3, 4]  # each wait billed, once
    # the start-up's steps, each timed, within the start-up phase's seconds
    parts = final.startup_parts_s
    assert set(parts) == {"backend", "env", "eval_env", "learner"} and min(parts.values()) >= 0
    assert 0 < sum(parts.values()) <= final.phases_s["startup"]
    # checkpoints: all (the default) keeps an unreached trial's latest checkpoint, with the row it belongs to
    assert (tmp_path / "trials" / "0000" / "checkpoint.pt").exists() and final.checkpoint == "trials/0000/checkpoint.pt"
    meta = json.loads((tmp_path / "trials" / "0000" / "checkpoint.json").read_text())
    assert meta["iteration"] == checkpoints[-1].iteration and meta["success"] == checkpoints[-1].success
    assert not meta["reached"]


def test_the_training_step_compiles_beside_the_build_and_the_panel_env_waits_for_its_first_pass() -> None:
    import jax

    compiles: list[str] = []

    def listen(event: str, seconds: float, **_: object) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        parts: dict[str, float] = {}
        with ExitStack() as stack:  # a shape no other test builds: nothing of it is in this process yet
            built = runner.build(tiny(num_envs=6, eval_episodes=5), PhaseClock(), None, 0, stack, parts)
            assert set(parts) == {"backend", "env", "learner"}  # no panel env before the first pass
            built.ahead.join()
            compiles.clear()
            built.env.warm_up()
            assert compiles == []  # the thread compiled the step while the env and the learner were built
            assert built.eval_env.num_envs == 5 and built.eval_env is built.eval_env  # built once, on first use
            assert set(parts) == {"backend", "env", "learner", "eval_env"}
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def test_the_cap_is_checked_after_every_iteration_not_only_at_checkpoints(tmp_path: Path) -> None:
    # start-up alone passes a 10 ms cap: the trial stops after its first iteration, not at its checkpoint after 10
    final = runner.run_trial(tiny(cap_s=0.01), lambda r: CONTINUE, out_dir=tmp_path)
    assert final.state == "capped" and final.iteration == 1 and tiny().eval_every == 10


@pytest.mark.parametrize("signal", ["train_success", "on_track"])
def test_passes_are_skipped_while_the_training_signal_is_low_and_the_cap_always_evaluates(
    signal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows: list = []

    # The cap comes after the fourth checkpoint, whatever the machine's speed: what the test sees is decided by the
    # checkpoints, not by a wall clock (the cap's own arithmetic is tested in tests/test_contract.py).
    def cap_after_four(cfg, billable_s, phases_s):
        if sum(r.state == "running" for r in rows) < 4:
            return None
        return TrialState.CAPPED, EndCause.CAP, "the test's cap"

    monkeypatch.setattr(runner, "cap_reached", cap_after_four)
    cfg = tiny(eval_gate=0.99, eval_every_steps=32, eval_gate_signal=signal)
    final = runner.run_trial(cfg, lambda r: rows.append(r) or CONTINUE, out_dir=tmp_path)
    checkpoints = [r for r in rows if r.state == "running"]
    skipped = [r for r in checkpoints if r.eval_episodes == 0]
    assert skipped, [(getattr(r, signal), r.eval_episodes) for r in checkpoints]
    for r in skipped:  # gated: the signal was below the gate, no bounds, no time in evaluation
        assert getattr(r, signal) is not None and getattr(r, signal) < 0.99
        assert r.success is None and r.success_lo is None and r.success_max is None
    # the cap's pass runs whatever the gate says: when it reaches the target its checkpoint row comes first
    assert final.state in ("capped", "reached"), final.reason
    gated = checkpoints[:-1] if final.state == "reached" else checkpoints
    assert all(getattr(r, signal) is None or getattr(r, signal) >= 0.99 for r in gated if r.eval_episodes > 0)
    eval_s = [0.0] + [r.phases_s["eval"] for r in checkpoints]
    for r, before, after in zip(checkpoints, eval_s, eval_s[1:], strict=False):
        assert (after == before) == (r.eval_episodes == 0)  # a skipped pass spends nothing in evaluation
    # the panel compiles right before the first pass, billed to 'compile', not before training (on a GPU worker the
    # preloading thread compiles it meanwhile)
    compile_s = [r.phases_s["compile"] for r in checkpoints]
    first = next((i for i, r in enumerate(checkpoints) if r.eval_episodes > 0), len(checkpoints))
    assert len(set(compile_s[:first])) <= 1, compile_s
    assert [*compile_s, final.phases_s["compile"]][first] > compile_s[0] or first == 0
    # the trial's last training is evaluated
    assert final.eval_episodes == tiny().eval_episodes and (final.success is not None or final.success_max is not None)
    if final.state == "capped":
        assert final.phases_s["eval"] > eval_s[-1]


def test_a_learner_whose_weights_turned_non_finite_ends_failed_at_the_round_s_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the fast finite check no step fails on a NaN: without the per-round check this trial would train on to its
    # 30 s cap. The critic is poisoned: a NaN actor fails at once on a CPU (torch's sampler checks its std there, not
    # on a GPU).
    compile_training = runner.compile_training

    def poisoned(built) -> None:
        compile_training(built)
        with torch.no_grad():
            next(built.alg.critic.parameters()).view(-1)[0] = float("nan")

    monkeypatch.setattr(runner, "compile_training", poisoned)
    rows: list = []
    cfg = tiny(cap_s=30, flags={"compile_cache": True, "fast_finite_check": True})
    final = runner.run_trial(cfg, lambda r: rows.append(r) or CONTINUE, out_dir=tmp_path)
    assert final.state == TrialState.FAILED and final.cause == EndCause.FAILED
    assert final.reason == f"diverged: non-finite critic weights by iteration {cfg.eval_every}", final.reason
    assert [r.state for r in rows] == ["failed"] and final.iteration == cfg.eval_every


def test_stock_mode_runs_rsl_rl_unchanged(tmp_path: Path) -> None:
    rows = []
    final = runner.run_trial(tiny(mode="stock", cap_s=1.0), lambda r: rows.append(r) or CONTINUE, out_dir=tmp_path)
    assert final.state == "capped" and final.env_steps > 0
    assert final.phases_s["learn"] > 0 and final.phases_s["sim"] > 0


@pytest.mark.slow
def test_ledger_keeps_rows_when_the_trial_process_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweep.trial",
            "num_envs=32",
            "num_steps_per_env=8",
            "eval_episodes=8",
            "eval_every_steps=8",
            "target=1.0",
            "flags.compile_cache=true",
            "price=1.0",
            f"out={out}",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ledger = out / "ledger.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and len(read_rows(ledger)) < 2:
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = read_rows(ledger)
    assert len(rows) >= 2 and all(r.state == "running" for r in rows)
    assert [r.iteration for r in rows] == sorted(r.iteration for r in rows)


@pytest.mark.parametrize("phase", ["probe", "screen"])
def test_a_probe_or_screen_trains_one_round_and_runs_no_held_out_pass(tmp_path: Path, phase: str) -> None:
    rows = []
    probe = tiny(eval_every_steps=32, phase=phase)  # a round of 2 iterations
    final = runner.run_trial(probe, lambda r: rows.append(r) or CONTINUE, out_dir=tmp_path)
    cfg = tiny(eval_every_steps=32)
    assert rows == [final] and final.cause == EndCause.PROBE and final.phase == phase
    assert (final.state, final.cause, final.reason) == throughput_end(phase)
    assert final.iteration == cfg.eval_every
    assert final.env_steps == cfg.eval_every * cfg.num_envs * cfg.num_steps_per_env
    assert final.eval_episodes == 0 and final.success is None and final.phases_s.get("eval", 0.0) == 0.0
    assert metrics(final).throughput_sps > 0
