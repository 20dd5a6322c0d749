"""``benchmarks/isaaclab_fidelity.py replay`` on CPU: a tiny ``sweep.run`` of Isaac Lab's Go2 to a recommendation, then
Isaac Lab's own trainer on it, scored on the run's held-out panel."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from sweep.backends.isaaclab import params as ilpar
from sweep.contract import TrialState
from sweep.ledger import read_rows
from tests.backends.isaaclab.test_backend import needs_isaaclab
from tests.helpers import ROOT, run_module

#: The CPU design of the Go2 space cut to one trial whose target is the share of its 16-episode panel that the first
#: checkpoint tracks (1 of 16): a recommendation in about half a minute, and a replay of a few iterations.
TINY_RUN = ("target.success=0.05", "budget.max_trials=1", "budget.usd=0.02", "budget.trial_usd=0.0075")


@pytest.mark.isaaclab
@pytest.mark.slow
@needs_isaaclab
def test_replay_trains_the_recommendation_in_isaac_labs_trainer_and_scores_it_on_the_runs_panel(
    isaac_asset_root, tmp_path
) -> None:
    args = ["space=go2_flat", f"backend_options.asset_root={isaac_asset_root}", "run_id=tiny", f"out={tmp_path}"]
    run = run_module("sweep.run", *args, *TINY_RUN, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    run_dir = tmp_path / "tiny"
    rows = read_rows(run_dir / "ledger.jsonl")
    reached = [r for r in rows if r.state == TrialState.REACHED]
    assert reached, run.stdout[-3000:]
    episodes = yaml.safe_load((run_dir / "config.yaml").read_text())["target"]["eval_episodes"]

    out = tmp_path / "replay"
    script = str(ROOT / "benchmarks" / "isaaclab_fidelity.py")
    command = [sys.executable, script, "replay", "--run", str(run_dir), "--seed", "3", "--out", str(out)]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    result = json.loads((out / "replay.json").read_text())
    lo, hi = result["success_ci95"]
    assert 0 <= lo <= result["success"] <= hi <= 1
    assert result["episodes"] == episodes and result["iteration"] == reached[0].iteration
    assert result["seed"] == 3 and result["device"] == "cpu" and result["trial"]["trial"] == reached[0].trial
    assert f"--max_iterations {reached[0].iteration} --seed 3 " in result["command"]
    line = f"{result['episodes']} episodes) after {result['iteration']} iteration(s) of Isaac Lab's trainer, seed 3"
    assert f"replay: held-out success {result['success']:.3f}" in proc.stdout and line in proc.stdout
    agent, task_env = (ilpar.read_params(out / f"trainer_{kind}.yaml") for kind in ("agent", "env"))
    assert agent["seed"] == 3 and agent["max_iterations"] == reached[0].iteration  # --seed replaced agent.seed=1
    assert task_env["scene"]["num_envs"] == reached[0].params["num_envs"] and task_env["episode_length_s"] == 1.0
