"""CUDA-only performance flags, checked on a GPU (skipped without one)."""

from __future__ import annotations

import contextlib
import copy
import io
import math

import pytest
import torch

from sweep import perf
from sweep.backends.mjx_locomotion import MjxLocomotionEnv, with_overrides
from sweep.ledger import PhaseClock
from sweep.trial import TrialConfig, _SweepLoop, agent_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
N, T = 512, 8


def iterations(flags: dict, n: int = 3) -> tuple[list[torch.Tensor], list[dict[str, float]]]:
    """Actions and losses of ``n`` iterations with ``flags`` (same env and torch seed)."""
    from rsl_rl.algorithms import PPO

    flags = perf.resolve(flags)
    cfg = TrialConfig(num_envs=N, num_steps_per_env=T, num_mini_batches=2, num_learning_epochs=2, flags=flags)
    env = MjxLocomotionEnv(N, 5, "cuda", with_overrides("gpu", episode_steps=100))
    train_cfg = agent_config(cfg)
    perf.apply_to_agent_config(train_cfg, flags)
    torch.manual_seed(5)
    with contextlib.redirect_stdout(io.StringIO()):
        alg = PPO.construct_algorithm(
            env.get_observations(), env, {**copy.deepcopy(train_cfg), "multi_gpu": None}, "cuda"
        )
    actions, losses = [], []
    update = alg.update

    def spy():
        actions.append(alg.storage.actions.clone())
        return update()

    alg.update = spy
    loop = _SweepLoop(alg, env, cfg, {**flags, "log_every": 1}, PhaseClock(), "cuda")
    for _ in range(n):
        loop(1)
        losses.append(dict(loop.last_losses))
    return actions, losses


def test_graphed_update_matches_the_eager_update() -> None:
    eager_actions, eager_losses = iterations({"fused_optimizer": True})
    graph_actions, graph_losses = iterations({"cuda_graph_update": True})
    assert torch.equal(eager_actions[0], graph_actions[0])  # the first rollout precedes any update
    for eager, graphed in zip(eager_losses, graph_losses, strict=True):
        for key in eager:
            assert graphed[key] == pytest.approx(eager[key], rel=1e-4, abs=1e-6), (key, eager, graphed)
    for a, b in zip(eager_actions[1:], graph_actions[1:], strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-4)


def test_graphed_policy_step_trains() -> None:
    actions, losses = iterations({"cuda_graph_policy": True, "cuda_graph_update": True})
    assert all(torch.isfinite(a).all() for a in actions)
    assert all(math.isfinite(v) for step in losses for v in step.values())
