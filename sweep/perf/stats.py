"""Training-episode statistics and the per-step NaN scan, each with a device-friendly variant; the per-round check
that the learner's own weights are still finite."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict


class EpisodeStats:
    """Mean return and success share of training episodes finished since the last read.

    ``deferred=False`` mirrors rsl-rl's logger: finished returns are copied to the host every step.
    ``deferred=True`` keeps a sum and a count on the device and reads them once, at ``take_mean``.
    """

    def __init__(self, num_envs: int, device: str, deferred: bool) -> None:
        self.deferred = deferred
        self.current = torch.zeros(num_envs, device=device)
        self.total = torch.zeros((), device=device)
        self.count = torch.zeros((), device=device)
        self.host: list[float] = []
        self.successes = torch.zeros((), device=device)
        """Finished training episodes that met the task's success rule (kept on the device: no sync per step)."""
        self.finished = torch.zeros((), device=device)
        self.success_share: float | None = None
        """Of the window :meth:`take_mean` last closed: the share of finished episodes that succeeded."""

    def update(self, rewards: torch.Tensor, dones: torch.Tensor, success: torch.Tensor | None = None) -> None:
        self.current += rewards
        done = dones.bool()
        if success is not None:
            self.successes += (done & success.bool()).sum()
            self.finished += done.sum()
        if self.deferred:
            self.total += torch.where(done, self.current, 0.0).sum()
            self.count += done.sum()
        else:
            self.host.extend(self.current[done].cpu().tolist())
        self.current.masked_fill_(done, 0.0)

    def take_mean(self) -> float | None:
        """Mean return since the last call (None if no episode finished); resets the window (and closes the
        success share's)."""
        finished = float(self.finished)
        self.success_share = float(self.successes) / finished if finished else None
        self.successes.zero_()
        self.finished.zero_()
        if self.deferred:
            total, count = float(self.total), int(self.count)
            self.total.zero_()
            self.count.zero_()
        else:
            total, count = sum(self.host), len(self.host)
            self.host.clear()
        return total / count if count else None


def check_nan(obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor) -> None:
    """rsl-rl's per-step scan (``check_for_nan``): raise if any env output has a NaN; syncs the device."""
    for key, value in obs.items():
        if torch.isnan(value).any():
            raise ValueError(f"diverged: observation group '{key}' contains NaN")
    if torch.isnan(rewards).any():
        raise ValueError("diverged: rewards contain NaN")
    if torch.isnan(dones.float()).any():
        raise ValueError("diverged: dones contain NaN")


def nonfinite_parts(alg: Any) -> list[str]:
    """The parts of a PPO learner holding a non-finite value, in words ('actor weights', 'critic buffers': a buffer
    is the observation normalizer's running mean and variance); empty when all are finite. One device sync.

    A learner whose weights turned NaN can never recover: the fast finite check skips each update after that (its
    gradients are NaN too) and rsl-rl's own update trains on, so the trial checks once per round and ends itself."""
    groups: dict[str, list[torch.Tensor]] = {}
    for name in ("actor", "critic"):
        module = getattr(alg, f"_raw_{name}", None)  # the uncompiled module where torch.compile wrapped it
        module = getattr(alg, name, None) if module is None else module
        if module is None:
            continue
        groups[f"{name} weights"] = list(module.parameters())
        groups[f"{name} buffers"] = [b for b in module.buffers() if b.is_floating_point()]
    checks = {part: torch.stack([torch.isfinite(t).all() for t in ts]).all() for part, ts in groups.items() if ts}
    if not checks:
        return []
    finite = torch.stack(list(checks.values())).tolist()
    return [part for part, ok in zip(checks, finite, strict=True) if not ok]
