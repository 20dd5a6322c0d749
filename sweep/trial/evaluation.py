"""Held-out evaluation: a fixed panel of episodes whose seeds no training run may ever use.

Training seeds live in ``[0, EVAL_SEED_BASE)``; panel seeds are ``EVAL_SEED_BASE + i``. Backends
also derive training and evaluation randomness from differently tagged streams, so the two can
never meet. The panel is the same for every trial, which makes trials comparable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from sweep.backends.base import TaskEnv
from sweep.backends.policy import MlpPolicy, mlp_policy


def pass_due(signal: float | None, gate: float) -> bool:
    """Whether a checkpoint runs its held-out pass: unless its training-side ``signal`` (one of
    :data:`GATE_SIGNALS`, counted on the device) is below ``gate``. No value (no episode ended or none is far enough
    in, or a trainer or env that gives none) means a pass. The cap's pass is not asked: it always runs."""
    return gate <= 0 or signal is None or signal >= gate


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
    """Outcome of one pass over the held-out panel.

    A pass may stop once its verdict against the target is decided (``decided_early``): then the episodes still
    running count neither way, ``rate`` is what the pass had counted and ``rate_max`` the most it could have
    reached, both bounds of what a full pass would have measured.
    """

    successes: int
    episodes: int
    failures: int | None = None
    """Episodes that ended without success (None: not counted, i.e. every episode not a success)."""
    decided_early: bool = False
    steps: int = 0
    """Control steps the pass simulated (each for every episode of the panel)."""

    @property
    def rate(self) -> float:
        return self.successes / self.episodes

    @property
    def rate_max(self) -> float:
        """The highest rate a full pass could give: every episode not yet failed succeeds."""
        failed = self.episodes - self.successes if self.failures is None else self.failures
        return (self.episodes - failed) / self.episodes

    @property
    def interval(self) -> tuple[float, float]:
        """95% Wilson interval of a full pass; of a pass stopped early, the bounds' outer interval."""
        lo = wilson_interval(self.successes, self.episodes)[0]
        return lo, wilson_interval(round(self.rate_max * self.episodes), self.episodes)[1]

    def reached(self, target: float) -> bool:
        return self.rate >= target


def below_target_for_sure(failures: int, episodes: int, target: float) -> bool:
    """Whether ``failures`` out of ``episodes`` already keep a pass below ``target``, however the rest end:
    more failures than ``(1 - target) x episodes`` leave fewer than ``target x episodes`` possible successes."""
    return episodes - failures < target * episodes


#: Control steps between the checks of a pass's finished episodes (each check is one host sync).
CHECK_EVERY = 50


@torch.inference_mode()
def evaluate(
    policy: torch.nn.Module | MlpPolicy,
    env: TaskEnv,
    seeds: list[int],
    target: float | None = None,
    on_check: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
) -> EvalResult:
    """Run one episode per seed with the deterministic policy (the action mean) and count successes.

    ``env`` must have exactly ``len(seeds)`` environments; each one's first finished episode counts. With a
    ``target``, the pass stops at the first check (every :data:`CHECK_EVERY` steps) where it cannot reach the
    target any more, or has already reached it: the verdict is the full pass's, for less simulation. An env that
    can run the policy itself (:meth:`TaskEnv.policy_steps`, given :func:`sweep.backends.policy.mlp_policy`) runs each
    stretch between two checks in one call; the counting and the checks are the same.
    """
    was_training = getattr(policy, "training", False)
    if isinstance(policy, torch.nn.Module):
        policy.eval()
    mlp = policy if isinstance(policy, MlpPolicy) else mlp_policy(policy)
    act = (lambda o: policy(o["policy"])) if isinstance(policy, MlpPolicy) else policy
    obs = env.reset_with_seeds(seeds)
    finished = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    success = torch.zeros_like(finished)
    limit = int(env.max_episode_length) + 1
    early, steps = False, 0
    while steps < limit:
        fused = None if mlp is None else env.policy_steps(mlp, CHECK_EVERY)
        if fused is not None:
            (finished, success), n = fused, CHECK_EVERY
        else:
            n = min(CHECK_EVERY, limit - steps)
            for _ in range(n):
                obs, _, dones, extras = env.step(act(obs))
                new = dones.bool() & ~finished
                success |= new & extras["success"].bool()
                finished |= new
                if "cannot_succeed" in extras:  # decided failures finish now (their later end cannot count as success)
                    finished |= extras["cannot_succeed"].bool()
        steps += n
        if on_check is not None:
            on_check(steps, finished, success)
        if n < CHECK_EVERY:
            break
        if bool(finished.all()):  # a host sync, so only now and then
            break
        if target is not None:
            wins, losses = int(success.sum()), int((finished & ~success).sum())
            if wins >= target * env.num_envs or below_target_for_sure(losses, env.num_envs, target):
                early = True
                break
    if isinstance(policy, torch.nn.Module):
        policy.train(was_training)
    wins, losses = int(success.sum()), int((finished & ~success).sum())
    return EvalResult(wins, env.num_envs, failures=losses if early else None, decided_early=early, steps=steps)


def warm_up_panel(env: TaskEnv, policy: torch.nn.Module) -> None:
    """Compile what ``env``'s passes of ``policy`` will run: its policy loop where it has one, else its step."""
    mlp = mlp_policy(policy)
    if mlp is None or not env.compile_policy_steps(mlp.shape(CHECK_EVERY)):
        env.warm_up()
