"""The success rule of an Isaac Lab velocity task's episode, counted on the device: no termination but the time-out
(no fall), and the episode's per-step mean errors of the ``base_velocity`` command under Isaac Lab 3.0's quadruped
thresholds (those of its ``Metrics/success_rate``, which has no "did not fall" condition). The error sums are kept
here, per env, because Isaac Lab zeroes its own metric in the reset, before ``step`` returns."""

from __future__ import annotations

import torch
from torch import Tensor

#: Success thresholds on the episode's per-step mean tracking errors (Isaac Lab 3.0's quadruped defaults).
MAX_ERR_XY_MPS = 0.5
MAX_ERR_YAW_RADPS = 0.4


class SuccessTracker:
    """Per-env sums of the velocity-tracking errors over the running episode; device tensors, no host sync."""

    def __init__(self, num_envs: int, device: str | torch.device) -> None:
        self.num_envs, self.device = num_envs, device
        self.reset()

    def reset(self) -> None:
        """Forget every running episode (reallocated, not zeroed in place: they may be inference tensors)."""
        self.err_xy_sum, self.err_yaw_sum, self.steps = torch.zeros(3, self.num_envs, device=self.device)

    def update(self, command: Tensor, velocity: Tensor, dones: Tensor, terminated: Tensor) -> Tensor:
        """Success (bool, (num_envs,)) of episodes ended this step, then add this step's errors.

        ``command``, ``velocity`` (after the step): (num_envs, 3), vx, vy (m/s), yaw rate (rad/s), base frame. A
        finished env already shows its next episode: it is judged on the sums so far, which then restart at zero.
        """
        done = dones.bool()
        good = self._good()
        live = (~done).float()
        self.err_xy_sum = (self.err_xy_sum + torch.linalg.norm(command[:, :2] - velocity[:, :2], dim=-1)) * live
        self.err_yaw_sum = (self.err_yaw_sum + (command[:, 2] - velocity[:, 2]).abs()) * live
        self.steps = (self.steps + 1.0) * live
        return done & ~terminated.bool() & good

    def on_track(self, min_steps: int) -> float | None:
        """Of the envs at least ``min_steps`` control steps into their episode, the share whose mean errors so far
        are under both thresholds: the success rule applied now (one host read). None: no env is that far in."""
        running = self.steps >= min_steps
        counts = torch.stack([running.sum(), (running & self._good()).sum()]).tolist()
        return counts[1] / counts[0] if counts[0] else None

    def _good(self) -> Tensor:
        """Per env: the running episode's mean xy and yaw errors so far are under the thresholds."""
        steps = self.steps.clamp(min=1.0)
        return (self.err_xy_sum / steps < MAX_ERR_XY_MPS) & (self.err_yaw_sum / steps < MAX_ERR_YAW_RADPS)
