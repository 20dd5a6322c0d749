"""Held-out seeds never meet training seeds; the Wilson interval is right."""

from __future__ import annotations

import pytest

from sweep.errors import ConfigError
from sweep.evaluation import EVAL_SEED_BASE, check_training_seed, panel_seeds, wilson_interval


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


@pytest.mark.parametrize(
    "profile",
    [
        pytest.param(
            "cpu",
            marks=pytest.mark.xfail(
                strict=True,
                reason="the cpu profile's success rule passes an untrained policy (0.86 of 64 episodes measured): "
                "its metric barely measures learning until the profile is recalibrated",
            ),
        ),
        "gpu",
    ],
)
def test_a_freshly_initialized_policy_scores_under_0_2_held_out_success(profile: str) -> None:
    """A target that an untrained policy already meets cannot separate configs: the metric must start low."""
    from sweep import perf
    from sweep.backends import get_backend
    from sweep.contract import TrialConfig
    from sweep.evaluation import evaluate
    from sweep.learner import build_learner
    from sweep.ledger import PhaseClock

    cfg = TrialConfig(profile=profile, num_envs=32, num_steps_per_env=8, seed=3, flags={"compile_cache": True})
    backend = get_backend("mjx_locomotion")
    env, panel = backend.make_env(32, 3, "cpu", profile), backend.make_env(64, 3, "cpu", profile)
    _, alg = build_learner(cfg, env, "cpu", perf.resolve(cfg.flags), PhaseClock())
    assert evaluate(alg.get_policy(), panel, panel_seeds(64)).rate < 0.2
