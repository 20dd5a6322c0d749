"""A GPU worker loads the study's env shapes ahead of its trials, in order, and a trial then compiles none of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from sweep import config
from sweep.backends.policy import PolicyShape
from sweep.config import validation
from sweep.execution import precompile, preload
from sweep.perf import graphs

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """A backend whose preload only records what it was asked, and whether the device was kept quiet."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, dict, bool]] = []
        self.policies: list[object] = []

    def preload(self, num_envs: int, device: str, profile: str, policy: object = None, **knobs: object) -> None:
        self.calls.append((num_envs, knobs, graphs.CAPTURING.locked()))
        self.policies.append(policy)


def test_the_first_shape_loads_at_once_and_the_others_once_the_compiler_has_built_them(tmp_path, monkeypatch):
    backend = Recorder()
    monkeypatch.setattr("sweep.backends.get_backend", lambda name: backend)
    ready = tmp_path / "precompile.jsonl"
    on, off = {"buffer_donation": True}, {"buffer_donation": False}
    plan = {"backend": "x", "profile": "gpu", "device": "cpu", "ready": str(ready), "panel": 256}
    plan["policy"] = {"hidden": [128, 128], "activation": "elu", "steps": 50}
    plan["shapes"] = [[256, off], [4096, on], [2048, off]]
    # nothing compiled yet: only the first trial's panel, compiled here beside that trial
    assert preload.run(plan, poll_s=0.01, give_up_s=0.05) == [preload.shape_key(256, off)]
    ready.write_text(json.dumps({"num_envs": 2048, "knobs": off, "seconds": 1.0}) + "\n")
    backend.calls.clear(), backend.policies.clear()
    threading.Timer(
        0.1, lambda: ready.write_text(ready.read_text() + json.dumps({"num_envs": 4096, "knobs": on}))
    ).start()
    loaded = preload.run(plan, poll_s=0.01, give_up_s=30.0)
    # the panel, then 2048 (ready first), then 4096 once its line came; each with the device kept quiet
    assert loaded == [preload.shape_key(n, k) for n, k in ((256, off), (2048, off), (4096, on))]
    assert [(n, k["buffer_donation"], quiet) for n, k, quiet in backend.calls] == [
        (256, False, True),
        (2048, False, True),
        (4096, True, True),
    ]
    # the panel compiles the plan's policy loop, the training shapes their step
    assert backend.policies == [PolicyShape((128, 128), "elu", 50), None, None]
    notes = [json.loads(line) for line in (tmp_path / "preload.jsonl").read_text().splitlines()]
    assert [n["num_envs"] for n in notes] == [256, 256, 2048, 4096] and all(n["seconds"] >= 0 for n in notes)


def test_the_workers_plan_is_the_first_trials_shapes_then_the_compilers_on_a_gpu_only(tmp_path: Path) -> None:
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=True))
    plan = precompile.worker_plan(cfg, tmp_path, "gpu", has_gpu=True)
    compiled = precompile.shapes(cfg, ("buffer_donation",))
    # at once: the first trial's panel and its own shape (legged_gym's 4096 x 24, stock), then the compiler's others
    assert plan is not None and plan["at_once"] == 2
    assert plan["shapes"] == [compiled[0], (4096, {"buffer_donation": False}), *compiled[1:]]
    assert plan["ready"] == str(tmp_path.resolve() / "precompile.jsonl") and plan["profile"] == "gpu"
    assert plan["panel"] == cfg.target.eval_episodes and plan["policy"]["hidden"] == [128, 128, 128]
    assert precompile.worker_plan(cfg, tmp_path, "gpu", has_gpu=False) is None  # CPU cores belong to the trials


def test_a_trial_builds_preloaded_shapes_without_compiling_their_reset_step_or_policy_loop(tmp_path: Path) -> None:
    probe = f"""
import logging, jax, torch
from sweep import perf
from sweep.execution import preload
from sweep.contract import panel_seeds
from sweep.backends.policy import MlpPolicy
from sweep.backends.mjx.locomotion import MjxLocomotionEnv
MjxLocomotionEnv.loop_platforms = ("cpu",)  # passes in the env's own loop, as on a GPU device
perf.enable_compile_cache()
plan = {{"backend": "mjx_locomotion", "profile": "cpu", "device": "cpu", "shapes": [[8, {{}}], [16, {{}}]],
        "at_once": 2, "panel": 16, "policy": {{"hidden": [8], "activation": "elu", "steps": 50}},
        "ready": {str(tmp_path / "none.jsonl")!r}}}
print("loaded", preload.run(plan, poll_s=0.01, give_up_s=0.1))
seen = []
handler = logging.Handler()
handler.emit = lambda record: seen.append(record.getMessage())
logging.getLogger("jax").addHandler(handler)
jax.config.update("jax_log_compiles", True)
from sweep.backends import get_backend
env = get_backend("mjx_locomotion").make_env(8, 3, "cpu", "cpu")
env.warm_up()
panel = get_backend("mjx_locomotion").make_env(16, 3, "cpu", "cpu")
layers = ((torch.randn(8, 50) * 0.1, torch.zeros(8)), (torch.randn(12, 8) * 0.1, torch.zeros(12)))
policy = MlpPolicy(torch.zeros(50), torch.ones(50), 0.01, layers, "elu")
assert panel.compile_policy_steps(policy.shape(50))
panel.reset_with_seeds(panel_seeds(16))
panel.policy_steps(policy, 50)
jax.jit(lambda x: x + 1)(1.0)  # compiles: the log is read
compiled = [m.split()[1] for m in seen if m.startswith("Compiling ")]
print("compiled", " ".join(compiled))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, check=True, timeout=900, capture_output=True, text=True
    ).stdout
    assert "loaded [(8, '{}'), (16, '{}')]" in out, out
    compiled = out.split("compiled", 1)[1].split()
    # nothing of the envs': reset, step, the panel's policy loop and the key functions were loaded
    assert compiled == ["jit(<lambda>)"], out
