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
from sweep.learner import SweepLoop
from sweep.ledger import PhaseClock
from sweep.trial import TrialConfig, agent_config

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
    loop = SweepLoop(alg, env, cfg, {**flags, "log_every": 1}, PhaseClock(), "cuda")
    for _ in range(n):
        loop(1)
        losses.append(dict(loop.last_losses))
    return actions, losses


def test_graphed_update_matches_the_eager_update() -> None:
    eager_actions, eager_losses = iterations({"fused_optimizer": True})
    graph_actions, graph_losses = iterations({"cuda_graph_update": True})
    assert torch.equal(eager_actions[0], graph_actions[0])  # the first rollout precedes any update
    # First update: 3 eager warm-up steps, then the captured step: the same losses up to float rounding.
    for key, value in eager_losses[0].items():
        assert graph_losses[0][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (key, eager_losses[0], graph_losses[0])
    # Later updates replay the graph; their rollouts draw other random numbers, so only check they train.
    assert all(math.isfinite(v) for step in graph_losses for v in step.values())
