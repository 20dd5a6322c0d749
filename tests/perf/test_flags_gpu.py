"""CUDA-only performance flags, checked on a GPU (skipped without one)."""

from __future__ import annotations

import contextlib
import copy
import io
import math
from typing import Any

import pytest
import torch

from sweep import perf
from sweep.backends.agent import agent_config
from sweep.backends.mjx.locomotion import MjxLocomotionEnv, with_overrides
from sweep.contract import TrialConfig
from sweep.ledger import PhaseClock
from sweep.trial.learner import SweepLoop

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
N, T = 512, 8
UPDATES = 3  # 3 eager warm-up mini-batch steps and the capture happen in the first; the others replay


def algorithm(env: MjxLocomotionEnv, flags: dict) -> tuple[Any, TrialConfig, dict]:
    """A PPO learner with ``flags``, its weights drawn from torch seed 5."""
    from rsl_rl.algorithms import PPO

    flags = perf.resolve(flags)
    cfg = TrialConfig(num_envs=N, num_steps_per_env=T, num_mini_batches=2, num_learning_epochs=2, flags=flags)
    train_cfg = agent_config(cfg, flags)
    perf.apply_to_process(flags)
    torch.manual_seed(5)
    with contextlib.redirect_stdout(io.StringIO()):
        alg = PPO.construct_algorithm(
            env.get_observations(), env, {**copy.deepcopy(train_cfg), "multi_gpu": None}, "cuda"
        )
    return alg, cfg, flags


def copy_rollout(src: Any, dst: Any) -> None:
    """Give ``dst`` the same rollout, returns and advantages as ``src``, keeping ``dst``'s buffers in place."""
    for name in ("rewards", "actions", "dones", "values", "actions_log_prob", "returns", "advantages"):
        getattr(dst, name).copy_(getattr(src, name))
    for key in src.observations.keys():  # noqa: SIM118 (TensorDict)
        dst.observations[key].copy_(src.observations[key])
    if dst.distribution_params is None:
        dst.distribution_params = tuple(p.clone() for p in src.distribution_params)
    else:
        for d, s in zip(dst.distribution_params, src.distribution_params, strict=True):
            d.copy_(s)
    dst.step = src.step


def test_graphed_update_matches_the_eager_update_on_the_same_rollouts() -> None:
    """Each update of the captured learner, fed the eager learner's rollout (MJX on a GPU is not bit-for-bit
    repeatable, so the two never collect their own), gives the same losses and the same weights."""
    env = MjxLocomotionEnv(N, 5, "cuda", with_overrides("gpu", episode_steps=100))
    eager, cfg, flags = algorithm(env, {"fused_optimizer": True})
    graphed, _, _ = algorithm(env, {"cuda_graph_update": True})
    assert graphed.graphs is not None
    eager_update, compared = eager.update, []

    def both() -> dict[str, Any]:
        copy_rollout(eager.storage, graphed.storage)
        for name in ("actor", "critic"):
            getattr(graphed, name).load_state_dict(getattr(eager, name).state_dict())
        torch.manual_seed(11)  # the same mini-batch split for both
        theirs = {k: float(v) for k, v in graphed.update().items()}
        torch.manual_seed(11)
        ours = eager_update()
        compared.append(({k: float(v) for k, v in ours.items()}, theirs))
        for a, b in zip(eager.actor.parameters(), graphed.actor.parameters(), strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), f"update {len(compared)}: actor weights differ"
        return ours

    eager.update = both
    loop = SweepLoop(eager, env, cfg, {**flags, "log_every": 1}, PhaseClock(), "cuda")
    for _ in range(UPDATES):
        loop(1)
    assert len(compared) == UPDATES
    for i, (ours, theirs) in enumerate(compared):
        assert theirs.keys() == ours.keys()
        for key, value in ours.items():
            assert math.isfinite(value)
            assert theirs[key] == pytest.approx(value, rel=1e-3, abs=1e-5), (i, key, ours, theirs)


def test_the_graphs_capture_and_its_wait_for_a_loading_thread_are_billed_to_compile() -> None:
    """A thread loading a later trial's env shapes holds the capture lock for seconds: the first update waits, and
    that wait, with the capture, is one-time work, billed to 'compile', not to 'learn' (where it once made a
    leader's first round look 3x slower than its second)."""
    import threading
    import time

    from sweep.perf.graphs import CAPTURING

    env = MjxLocomotionEnv(N, 5, "cuda", with_overrides("gpu", episode_steps=100))
    graphed, cfg, flags = algorithm(env, {"cuda_graph_update": True})
    env.warm_up()  # the step compiled: the lock is still held when the first update reaches its capture
    clock = PhaseClock()
    loop = SweepLoop(graphed, env, cfg, {**flags, "log_every": 1}, clock, "cuda")
    held = threading.Event()

    def load() -> None:
        with CAPTURING:
            held.set()
            time.sleep(1.0)

    loader = threading.Thread(target=load)
    loader.start()
    held.wait()
    loop(1)
    loader.join()
    first = graphed.capture_s()
    assert first >= 0.5  # the wait is in it
    assert clock.seconds["compile"] == pytest.approx(first)
    assert clock.seconds["learn"] < first  # the eager warm-up steps and the replay: training
    loop(2)  # replays: nothing more to capture
    assert graphed.capture_s() == first
    assert clock.seconds["compile"] == pytest.approx(first)
