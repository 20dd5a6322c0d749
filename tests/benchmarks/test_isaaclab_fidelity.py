"""benchmarks/isaaclab_fidelity.py without Isaac Lab: what ``replay`` reads from a run folder (the recommended config's
best trial, the iteration at which it reached the target, the trainer's seed) and the trainer line it runs."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from sweep.contract import TrialConfig
from sweep.errors import ConfigError
from sweep.ledger import LedgerWriter, Row
from tests.helpers import benchmark

GO2 = "Isaac-Velocity-Flat-UnitreeGo2"
LINE = f"python -m isaaclab train --rl_library rsl_rl --task {GO2} presets=newton_mjwarp agent.seed=9"


def row(trial: int, num_envs: int, seed: int, iteration: int, state: str, phase: str, success: float) -> Row:
    """A ledger row of ``trial`` at ``iteration``: one billable second per iteration at $3600/h ($1 a second)."""
    return Row(
        run_id="r",
        trial=trial,
        state=state,
        params={"backend": "isaaclab", "profile": GO2, "num_envs": num_envs, "num_steps_per_env": 24},
        iteration=iteration,
        env_steps=iteration * num_envs * 24,
        billable_s=float(iteration),
        phases_s={"sim": float(iteration)},
        price_usd_per_hour=3600.0,
        price_label="t",
        success=success,
        success_lo=success / 2,
        success_hi=(1 + success) / 2,
        eval_episodes=16,
        seed=seed,
        phase=phase,
    )


def trial_rows(trial: int, num_envs: int, seed: int, reached_at: int, phase: str, end: str = "reached") -> list[Row]:
    """A trial's checkpoints every 2 iterations, the last at ``reached_at`` reaching the target (0.8), then its end."""
    running = [row(trial, num_envs, seed, i, "running", phase, 0.1) for i in range(2, reached_at, 2)]
    success = 0.8 if end == "reached" else 0.1
    last = row(trial, num_envs, seed, reached_at, "running", phase, success)
    return [*running, last, row(trial, num_envs, seed, reached_at, end, phase, success)]


def write_run(tmp_path: Path, rows: list[Row], recommends: int | None) -> Path:
    """A run folder with ``rows`` as its ledger and, unless ``recommends`` is None, a ``recommended.yaml`` naming that
    trial, with the parts ``replay`` reads (the trainer line, the trial's config, its checkpoint)."""
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(r)
    if recommends is not None:
        cfg = TrialConfig(backend="isaaclab", profile=GO2, num_envs=16, eval_episodes=16, seed=9)
        doc = {
            "task": {"backend": "isaaclab", "profile": GO2},
            "evidence": {"trial": recommends},
            "checkpoint": {"path": f"trials/{recommends:04d}/checkpoint.pt"},
            "trial": asdict(cfg),
            "isaaclab": {"command": LINE},
        }
        (run_dir / "recommended.yaml").write_text(yaml.safe_dump(doc))
    return run_dir


#: The recommended config (16 envs) on three seeds, the cheapest its second confirmation seed (trial 3, reached at
#: iteration 4, $4); another config (32 envs) capped.
LEDGER = [
    *trial_rows(0, 16, 1, 8, "search"),
    *trial_rows(1, 32, 2, 6, "search", end="capped"),
    *trial_rows(2, 16, 7, 10, "confirm"),
    *trial_rows(3, 16, 9, 4, "confirm"),
]


def test_replay_takes_the_best_trial_the_iteration_it_reached_at_and_the_first_confirmation_seed(tmp_path) -> None:
    fidelity = benchmark("isaaclab_fidelity")
    run_dir = write_run(tmp_path, LEDGER, recommends=3)
    plan = fidelity.replay_plan(run_dir)
    assert (plan.trial, plan.iteration, plan.trial_seed) == (3, 4, 9)
    assert plan.seed == 7  # the recommended config's first confirmation seed (trial 2's), not the best trial's
    assert plan.trial_success == 0.8 and plan.trial_ci95 == (0.4, 0.9)
    assert plan.command == LINE and plan.checkpoint == "trials/0003/checkpoint.pt"
    assert plan.cfg.profile == GO2 and plan.cfg.eval_episodes == 16
    assert fidelity.replay_plan(run_dir, seed=5).seed == 5
    search_only = [r for r in LEDGER if r.phase == "search"]
    assert fidelity.replay_plan(write_run(tmp_path / "s", search_only, recommends=0)).seed == 1  # no confirmation


def test_replay_refuses_a_run_without_a_recommendation_or_with_a_stale_one(tmp_path) -> None:
    fidelity = benchmark("isaaclab_fidelity")
    capped = write_run(tmp_path / "capped", trial_rows(0, 16, 1, 4, "search", end="capped"), recommends=None)
    with pytest.raises(ConfigError, match=r"no recommendation \(no trial reached the target\)"):
        fidelity.replay_plan(capped)
    with pytest.raises(ConfigError, match=r"recommended.yaml: missing, or it recommends another trial than"):
        fidelity.replay_plan(write_run(tmp_path / "none", LEDGER, recommends=None))
    with pytest.raises(ConfigError, match=r"recommends another trial than the ledger's 3"):
        fidelity.replay_plan(write_run(tmp_path / "stale", LEDGER, recommends=0))
    with pytest.raises(ConfigError, match=r"no ledger.jsonl here"):
        fidelity.replay_plan(tmp_path)


def test_replay_without_a_recommendation_exits_1_with_one_error_line(tmp_path, monkeypatch, capsys) -> None:
    fidelity = benchmark("isaaclab_fidelity")
    capped = write_run(tmp_path, trial_rows(0, 16, 1, 4, "search", end="capped"), recommends=None)
    monkeypatch.setattr(sys, "argv", ["isaaclab_fidelity.py", "replay", "--run", str(capped), "--out", "x"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts its tree first, for its children too
    monkeypatch.setenv("PYTHONPATH", "")
    assert fidelity.main() == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {capped}: no recommendation")
    assert not (tmp_path / "x").exists()  # nothing trained, nothing written


def test_the_trainer_line_adds_the_iterations_the_seed_and_a_cpu_device() -> None:
    fidelity = benchmark("isaaclab_fidelity")
    assert fidelity.trainer_line(LINE, 4, "cpu", 7)[1:] == [
        *LINE.split()[1:],
        "--max_iterations",
        "4",
        "--seed",
        "7",
        "--device",
        "cpu",
        "agent.device=cpu",
    ]
    assert fidelity.trainer_line(LINE, 2, "cuda:0")[0] == sys.executable
    assert fidelity.trainer_line(LINE, 2, "cuda:0")[-2:] == ["--max_iterations", "2"]  # the trainer's own device
    assert fidelity.trainer_line(LINE, 2, "auto")[-2:] == ["--max_iterations", "2"]


def test_the_final_checkpoint_is_the_highest_iteration_not_the_last_name(tmp_path) -> None:
    fidelity = benchmark("isaaclab_fidelity")
    for it in (0, 9, 10):
        (tmp_path / f"model_{it}.pt").write_bytes(b"")
    assert fidelity.final_checkpoint(tmp_path).name == "model_10.pt"
