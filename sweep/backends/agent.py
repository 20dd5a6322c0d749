"""Sweep's own rsl-rl 5.5 agent config: what the embedded task's trials train with, and what a backend whose task
registers no config of its own gives (:meth:`sweep.backends.base.Backend.agent_config`)."""

from __future__ import annotations

from typing import Any

from sweep import perf

#: The actor's hidden layer widths and activation (the critic has the same).
ACTOR_HIDDEN_DIMS = (128, 128, 128)
ACTOR_ACTIVATION = "elu"


def agent_config(cfg: Any, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rsl-rl 5.5 runner/agent config a trial trains with (what the exported YAML shows), with the perf
    ``flags`` that act through it applied (``check_for_nan``, mixed precision, the PPO class). No side effects."""
    out = {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "check_for_nan": True,
        "logger": "tensorboard",
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": cfg.num_learning_epochs,
            "num_mini_batches": cfg.num_mini_batches,
            "clip_param": 0.2,
            "gamma": 0.99,
            "lam": 0.95,
            "value_loss_coef": 1.0,
            "entropy_coef": 0.005,
            "learning_rate": 1e-3,
            "max_grad_norm": 1.0,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "use_clipped_value_loss": True,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": list(ACTOR_HIDDEN_DIMS),
            "activation": ACTOR_ACTIVATION,
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(ACTOR_HIDDEN_DIMS),
            "activation": ACTOR_ACTIVATION,
            "obs_normalization": True,
        },
    }
    if flags is not None:
        perf.apply_to_agent_config(out, flags)
    return out
