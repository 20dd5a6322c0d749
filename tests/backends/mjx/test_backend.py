"""The embedded backend honours the rsl-rl VecEnv contract and sweep's additions."""

from __future__ import annotations

import pytest
import torch

from sweep.backends import get_backend
from sweep.backends.mjx.locomotion import MjxLocomotionEnv, with_overrides
from sweep.backends.mjx.task import NUM_ACTIONS, OBS_DIM
from sweep.errors import ConfigError

N = 8


@pytest.fixture(scope="module")
def short_env() -> MjxLocomotionEnv:
    """Flat floor with 6-step episodes, so time-outs come quickly."""
    return MjxLocomotionEnv(N, seed=3, device="cpu", params=with_overrides("cpu", episode_steps=6))


def test_shapes_and_dtypes(short_env: MjxLocomotionEnv) -> None:
    obs = short_env.get_observations()
    assert obs["policy"].shape == (N, OBS_DIM) and obs["policy"].dtype == torch.float32
    obs, rew, dones, extras = short_env.step(torch.zeros(N, NUM_ACTIONS))
    assert obs["policy"].shape == (N, OBS_DIM)
    assert rew.shape == (N,) and rew.dtype == torch.float32
    assert dones.shape == (N,) and dones.dtype == torch.long
    assert extras["time_outs"].dtype == torch.bool and extras["time_outs"].shape == (N,)
    assert extras["success"].dtype == torch.bool
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(rew).all()


def test_time_outs_and_reset_of_finished_envs(short_env: MjxLocomotionEnv) -> None:
    short_env.reset_with_seeds(list(range(N)))
    for step in range(1, 6):
        _, _, dones, extras = short_env.step(torch.zeros(N, NUM_ACTIONS))
        assert not extras["time_outs"].any(), f"time-out too early at step {step}"
        assert torch.equal(short_env.episode_length_buf, torch.full((N,), step))
    _, _, dones, extras = short_env.step(torch.zeros(N, NUM_ACTIONS))
    # Standing still for 6 steps: nobody falls, everybody times out, and time-outs are dones.
    assert extras["time_outs"].all() and dones.bool().all()
    # Finished envs restarted inside step: their step counters are back at zero.
    assert torch.equal(short_env.episode_length_buf, torch.zeros(N, dtype=torch.long))


def test_fall_ends_an_episode_without_time_out() -> None:
    env = MjxLocomotionEnv(N, seed=0, device="cpu", params=with_overrides("cpu", episode_steps=400))
    fell = torch.zeros(N, dtype=torch.bool)
    for _ in range(150):  # violent random actions topple some robots well before the time limit
        _, _, dones, extras = env.step(torch.randn(N, NUM_ACTIONS) * 4)
        fell |= dones.bool() & ~extras["time_outs"]
        assert not (extras["success"] & dones.bool() & ~extras["time_outs"]).any(), "a fall counted as success"
    assert fell.any()


def test_no_recompile_after_first_step(short_env: MjxLocomotionEnv) -> None:
    short_env.step(torch.randn(N, NUM_ACTIONS))
    compiled = short_env.compiled_step_count()
    for _ in range(3):
        short_env.step(torch.randn(N, NUM_ACTIONS))
    short_env.reset_with_seeds(list(range(100, 100 + N)))
    short_env.step(torch.randn(N, NUM_ACTIONS))
    assert short_env.compiled_step_count() == compiled


def test_panel_reset_ignores_training_seed() -> None:
    """The held-out panel is the same whatever seed the env was trained with."""
    params = with_overrides("cpu", episode_steps=6)
    a = MjxLocomotionEnv(N, seed=1, device="cpu", params=params)
    b = MjxLocomotionEnv(N, seed=2, device="cpu", params=params)
    assert not torch.equal(a.get_observations()["policy"], b.get_observations()["policy"])
    seeds = [2**31 + i for i in range(N)]
    assert torch.equal(a.reset_with_seeds(seeds)["policy"], b.reset_with_seeds(seeds)["policy"])


def test_unknown_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="profile"):
        get_backend("mjx_locomotion").make_env(4, 0, "cpu", "moon")


def test_unknown_backend_lists_valid_names() -> None:
    with pytest.raises(ConfigError, match="mjx_locomotion"):
        get_backend("bullet")


def test_an_untested_mujoco_is_named_once_on_stderr(monkeypatch, capsys) -> None:
    import importlib.metadata

    backend = get_backend("mjx_locomotion")
    backend.preflight("cpu", {})  # the tested release: nothing said
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.12.0")
    backend.preflight("cpu", {})
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mujoco 3.12.0, mujoco-mjx 3.12.0 installed" in err
    assert "tested with 3.17.x" in err and "pip install mujoco==3.17.0 mujoco-mjx==3.17.0" in err


@pytest.mark.slow
def test_a_pass_in_the_envs_own_loop_counts_as_one_stepped_from_python() -> None:
    """Same panel, same policy: the device loop's pass has the stepped pass's successes, steps and early verdict.
    Forward commands, which the trotting reference alone mostly meets: some episodes succeed, some fail."""
    from sweep import perf
    from sweep.contract import TrialConfig, panel_seeds
    from sweep.ledger import PhaseClock
    from sweep.trial.evaluation import evaluate
    from sweep.trial.learner import build_learner

    cfg = TrialConfig(profile="cpu", num_envs=16, num_steps_per_env=8, seed=2, flags={"compile_cache": True})
    env = get_backend("mjx_locomotion").make_env(16, 2, "cpu", "cpu")
    panel = MjxLocomotionEnv(64, 2, "cpu", with_overrides("cpu", cmd_vx=(0.0, 0.4)))
    assert not panel.policy_loop  # on a CPU device passes are stepped from Python; the loop is compared here
    _, alg = build_learner(cfg, env, "cpu", perf.resolve(cfg.flags), PhaseClock())
    policy = alg.get_policy()
    with torch.no_grad():  # small actions around the reference, through every layer and the normalizer
        policy.mlp[-1].weight.mul_(0.1)
        policy.obs_normalizer._mean.normal_(0.0, 0.1, generator=torch.Generator().manual_seed(0))
    results = {}
    for target in (None, 0.9):
        panel.policy_loop = True
        fused = evaluate(policy, panel, panel_seeds(64), target=target)
        panel.policy_loop = False
        assert fused == evaluate(policy, panel, panel_seeds(64), target=target)
        results[target] = fused
    assert 0 < results[None].successes < 64, results  # (passes stopped early: tests/trial/test_evaluation.py)


def test_the_on_track_share_is_the_success_rule_applied_to_the_episodes_under_way() -> None:
    """What a checkpoint records beside its pass (``on_track``): of the episodes at least ``min_steps`` in, the share
    that the step's own success rule would pass if they ended now; None while none is that far in."""
    env = MjxLocomotionEnv(32, seed=4, device="cpu", params=with_overrides("cpu", episode_steps=400))
    zeros = torch.zeros(32, NUM_ACTIONS)
    assert env.on_track_share(10) is None
    for _ in range(12):
        _, _, _, extras = env.step(zeros)
    running = env.episode_length_buf >= 10
    assert running.any()
    assert env.on_track_share(10) == pytest.approx(extras["success"][running].float().mean().item())
    assert env.on_track_share(13) is None
