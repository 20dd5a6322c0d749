"""Held-out evaluation: a fixed panel of episodes whose seeds no training run may ever use.

Training seeds live in ``[0, EVAL_SEED_BASE)``; panel seeds are ``EVAL_SEED_BASE + i``. Backends
also derive training and evaluation randomness from differently tagged streams, so the two can
never meet. The panel is the same for every trial, which makes trials comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sweep.backends.base import TaskEnv
from sweep.errors import ConfigError

#: First held-out seed; every training seed must be below it.
EVAL_SEED_BASE = 2**31
DEFAULT_EPISODES = 256


def panel_seeds(episodes: int = DEFAULT_EPISODES) -> list[int]:
    """Seeds of the held-out panel: one per episode, disjoint from every training seed."""
    if episodes <= 0:
        raise ConfigError(f"target.eval_episodes: must be > 0 (got {episodes})")
    return [EVAL_SEED_BASE + i for i in range(episodes)]


def check_training_seed(seed: int, key: str = "seed") -> int:
    """Reject a training seed that could collide with the held-out panel."""
    if not 0 <= seed < EVAL_SEED_BASE:
        raise ConfigError(f"{key}: training seeds must be in [0, {EVAL_SEED_BASE}) (got {seed})")
    return seed


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval (95% by default) for a success rate of ``successes`` out of ``n``."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class EvalResult:
    """Outcome of one pass over the held-out panel."""

    successes: int
    episodes: int

    @property
    def rate(self) -> float:
        return self.successes / self.episodes

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.episodes)


@torch.inference_mode()
def evaluate(policy: torch.nn.Module, env: TaskEnv, seeds: list[int]) -> EvalResult:
    """Run one episode per seed with the deterministic policy (the action mean) and count successes.

    ``env`` must have exactly ``len(seeds)`` environments; each one's first finished episode counts.
    """
    was_training = policy.training
    policy.eval()
    obs = env.reset_with_seeds(seeds)
    finished = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    success = torch.zeros_like(finished)
    limit = int(env.max_episode_length) + 1
    for step in range(limit):
        obs, _, dones, extras = env.step(policy(obs))
        new = dones.bool() & ~finished
        success |= new & extras["success"].bool()
        finished |= new
        if step % 50 == 49 and bool(finished.all()):  # a host sync, so only now and then
            break
    policy.train(was_training)
    return EvalResult(successes=int(success.sum()), episodes=env.num_envs)
