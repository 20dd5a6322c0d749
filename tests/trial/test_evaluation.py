"""Held-out seeds never meet training seeds; the Wilson interval is right."""

from __future__ import annotations

import pytest

from sweep.contract import EVAL_SEED_BASE, check_training_seed, panel_seeds
from sweep.errors import ConfigError
from sweep.trial.evaluation import wilson_interval


def test_panel_and_training_seeds_are_disjoint() -> None:
    panel = set(panel_seeds(256))
    assert len(panel) == 256
    assert min(panel) >= EVAL_SEED_BASE
    # every seed a trial may train with is below the panel
    for seed in (0, 1, 12345, EVAL_SEED_BASE - 1):
        assert check_training_seed(seed) not in panel
    for bad in (EVAL_SEED_BASE, EVAL_SEED_BASE + 5, -1):
        with pytest.raises(ConfigError, match="seed"):
            check_training_seed(bad)


def test_panel_is_fixed() -> None:
    assert panel_seeds(8) == panel_seeds(8) == [EVAL_SEED_BASE + i for i in range(8)]
    with pytest.raises(ConfigError):
        panel_seeds(0)


def test_wilson_interval() -> None:
    lo, hi = wilson_interval(230, 256)
    assert lo == pytest.approx(0.8551, abs=1e-3) and hi == pytest.approx(0.9306, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    lo, hi = wilson_interval(5, 10)
    assert lo < 0.5 < hi


def fresh_policy(profile: str, seed: int, panel_envs: int):
    """A freshly initialized PPO actor of the embedded task on CPU, and a held-out panel of ``panel_envs`` envs."""
    from sweep import perf
    from sweep.backends import get_backend
    from sweep.contract import TrialConfig
    from sweep.ledger import PhaseClock
    from sweep.trial.learner import build_learner

    cfg = TrialConfig(profile=profile, num_envs=32, num_steps_per_env=8, seed=seed, flags={"compile_cache": True})
    backend = get_backend("mjx_locomotion")
    env, panel = backend.make_env(32, seed, "cpu", profile), backend.make_env(panel_envs, seed, "cpu", profile)
    _, alg = build_learner(cfg, env, "cpu", perf.resolve(cfg.flags), PhaseClock())
    return alg.get_policy(), panel


@pytest.mark.parametrize("profile", ["cpu", pytest.param("gpu", marks=pytest.mark.slow)])  # the GPU profile's larger
# scene takes over 10 s on a CPU, the CPU profile's 2-4 s
def test_a_freshly_initialized_policy_scores_under_0_2_held_out_success(profile: str) -> None:
    """A target that an untrained policy already meets cannot separate configs: the metric must start low."""
    from sweep.trial.evaluation import evaluate

    policy, panel = fresh_policy(profile, 3, 64)
    assert evaluate(policy, panel, panel_seeds(64)).rate < 0.2


def test_a_pass_of_a_copy_of_the_weights_is_the_pass_of_the_module() -> None:
    from sweep.backends.policy import mlp_policy
    from sweep.trial.evaluation import evaluate

    policy, panel = fresh_policy("cpu", 4, 16)
    module = evaluate(policy, panel, panel_seeds(16))
    assert evaluate(mlp_policy(policy).copy(), panel, panel_seeds(16)) == module


class ScriptedPanel:
    """A panel whose episode ``i`` falls at step ``fall[i]`` (a failure) or runs to the time limit and then
    succeeds or not (``wins[i]``): the verdict logic of a pass, checked against every stopping point."""

    def __init__(self, fall: list[int | None], wins: list[bool], length: int) -> None:
        import torch

        self.num_envs, self.device, self.max_episode_length = len(fall), "cpu", length
        self.fall, self.wins, self.t = fall, torch.tensor(wins), 0

    def reset_with_seeds(self, seeds):
        import torch

        assert len(seeds) == self.num_envs
        self.t = 0
        return torch.zeros(self.num_envs, 1)

    def step(self, actions):
        import torch

        self.t += 1
        fell = torch.tensor([f is not None and f == self.t for f in self.fall])
        timeout = torch.tensor([f is None and self.t == self.max_episode_length for f in self.fall])
        dones = fell | timeout
        return torch.zeros(self.num_envs, 1), torch.zeros(self.num_envs), dones, {"success": timeout & self.wins}


@pytest.mark.parametrize("seed", range(40))
def test_a_pass_stopped_once_decided_gives_the_full_pass_verdict(seed: int) -> None:
    """Over random panels near and far from the target, the early verdict is the full pass's, its bounds hold
    the full pass's rate, and a panel that falls early stops early."""
    import random

    import torch

    from sweep.trial.evaluation import evaluate

    rng = random.Random(seed)
    n, length, target = 64, 400, rng.choice([0.5, 0.8, 0.9])
    fall_share, win_share = rng.random(), rng.random()
    fall = [rng.randint(1, length - 1) if rng.random() < fall_share else None for _ in range(n)]
    wins = [rng.random() < win_share for _ in range(n)]
    policy = torch.nn.Identity()
    full = evaluate(policy, ScriptedPanel(fall, wins, length), panel_seeds(n))
    early = evaluate(policy, ScriptedPanel(fall, wins, length), panel_seeds(n), target=target)
    assert not full.decided_early
    assert early.reached(target) == full.reached(target)
    assert early.rate <= full.rate <= early.rate_max
    lo, hi = early.interval
    assert lo <= full.interval[0] and full.interval[1] <= hi
    if early.decided_early:
        assert early.steps < length


def test_a_pass_that_falls_early_stops_at_the_first_check() -> None:
    import torch

    from sweep.trial.evaluation import evaluate

    fall = [10] * 20 + [None] * 44  # 20 of 64 fall at step 10: a 0.9 target is out of reach from then on
    result = evaluate(torch.nn.Identity(), ScriptedPanel(fall, [True] * 64, 1000), panel_seeds(64), target=0.9)
    assert result.decided_early and result.steps == 50 and not result.reached(0.9)
    assert result.rate == 0.0 and result.rate_max == pytest.approx(44 / 64)


def test_each_check_of_a_full_pass_is_reported_with_the_counts_so_far() -> None:
    """What a benchmark reads off a full pass (``on_check``): every check's steps and masks, the last one's counts
    being the pass's own."""
    import torch

    from sweep.trial.evaluation import evaluate

    fall = [60] * 10 + [None] * 54  # 10 fall at step 60; of the rest, the first 40 succeed at the time limit
    seen = []
    result = evaluate(
        torch.nn.Identity(),
        ScriptedPanel(fall, [i < 50 for i in range(64)], 200),
        panel_seeds(64),
        on_check=lambda steps, finished, success: seen.append((steps, int(finished.sum()), int(success.sum()))),
    )
    assert seen == [(50, 0, 0), (100, 10, 0), (150, 10, 0), (200, 64, 40)]
    assert result.successes == 40 and not result.decided_early


@pytest.mark.slow
def test_an_untrained_policy_on_the_real_task_is_decided_early_with_the_full_verdict() -> None:
    """The embedded task, a fresh policy: the pass stops long before the time limit, with the same verdict."""
    from sweep.trial.evaluation import evaluate

    policy, panel = fresh_policy("gpu", 5, 64)
    full = evaluate(policy, panel, panel_seeds(64))
    early = evaluate(policy, panel, panel_seeds(64), target=0.9)
    assert early.decided_early and not early.reached(0.9) and not full.reached(0.9)
    assert early.steps < full.steps / 2, (early.steps, full.steps)
