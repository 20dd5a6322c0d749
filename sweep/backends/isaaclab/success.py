"""The success of an Isaac Lab task's episodes, counted on the device after every step, by one of three rules
(:class:`sweep.backends.isaaclab.tasks.SuccessSpec` says which):

- velocity (the default, tasks with a velocity command): no termination but the time-out (no fall), and the
  episode's per-step mean errors of the command under the command's own success thresholds (those of Isaac Lab 3.0's
  ``Metrics/success_rate``, 0.5 m/s and 0.4 rad/s unless the task sets others, which has no "did not fall"
  condition). The error sums are kept here, per env, because Isaac Lab zeroes its own metric in the reset, before
  ``step`` returns;
- term (``target.success_term``): the episode ended by that termination term (the termination manager keeps each
  term's value of the last step through the reset);
- fn (``target.success_fn``): the task's own ``function(env, ended)``; what the reset clears, the task records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

#: Success thresholds on the episode's per-step mean tracking errors (Isaac Lab 3.0's quadruped defaults).
MAX_ERR_XY_MPS = 0.5
MAX_ERR_YAW_RADPS = 0.4


class SuccessTracker:
    """Per-env sums of the velocity-tracking errors over the running episode; device tensors, no host sync."""

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device,
        max_xy: float = MAX_ERR_XY_MPS,
        max_yaw: float = MAX_ERR_YAW_RADPS,
    ) -> None:
        self.num_envs, self.device, self.max_xy, self.max_yaw = num_envs, device, max_xy, max_yaw
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
        return (self.err_xy_sum / steps < self.max_xy) & (self.err_yaw_sum / steps < self.max_yaw)


def _torch_view(array: Any) -> Tensor:
    """A torch view of an Isaac Lab 3.0 data array (a ``ProxyArray`` or a plain warp array), no copy."""
    if hasattr(array, "torch"):
        return array.torch
    import warp as wp

    return wp.to_torch(array)


class VelocityRule:
    """The default rule on an Isaac Lab env (``env``: the unwrapped env): its velocity command ``command`` tracked."""

    def __init__(self, env: Any, command: str, thresholds: tuple[float, float], num_envs: int, device: str) -> None:
        term = env.command_manager.get_term(command)
        self._command, self._data = term, env.scene[term.cfg.asset_name].data
        self.tracker = SuccessTracker(num_envs, device, *thresholds)

    def measure(self) -> tuple[Tensor, Tensor]:
        """(command, base velocity) now, (num_envs, 3) each: vx, vy (m/s), yaw rate (rad/s), base frame."""
        lin, ang = _torch_view(self._data.root_lin_vel_b), _torch_view(self._data.root_ang_vel_b)
        return self._command.command, torch.cat([lin[:, :2], ang[:, 2:3]], dim=1)

    def update(self, env: Any, dones: Tensor) -> Tensor:
        return self.tracker.update(*self.measure(), dones, env.reset_terminated)

    def reset(self) -> None:
        self.tracker.reset()

    def on_track(self, min_steps: int) -> float | None:
        return self.tracker.on_track(min_steps)


class TermRule:
    """``target.success_term``: an episode succeeded when its last step fired the termination term ``term``."""

    def __init__(self, term: str) -> None:
        self.term = term

    def update(self, env: Any, dones: Tensor) -> Tensor:
        return dones.bool() & env.termination_manager.get_term(self.term).bool()

    def reset(self) -> None:
        """Nothing is kept between steps."""

    def on_track(self, min_steps: int) -> float | None:
        return None  # the rule says nothing before an episode ends


class FnRule:
    """``target.success_fn``: ``fn(env, ended)`` after every step; its failure names it (``spec``)."""

    def __init__(self, fn: Callable[..., Any], spec: str) -> None:
        self.fn, self.spec = fn, spec

    def update(self, env: Any, dones: Tensor) -> Tensor:
        ended = dones.bool()
        try:
            answer = self.fn(env, ended)
        except Exception as exc:
            text = str(exc).strip().splitlines()
            raise RuntimeError(
                f"target.success_fn={self.spec} raised {type(exc).__name__}" + (f": {text[0]}" if text else "")
            ) from exc
        if not (isinstance(answer, Tensor) and answer.dtype == torch.bool and answer.shape == ended.shape):
            what = f"a {answer.dtype} tensor of shape {tuple(answer.shape)}" if isinstance(answer, Tensor) else answer
            raise RuntimeError(
                f"target.success_fn={self.spec} returned {what!s:.80}; it must return a bool tensor of shape "
                f"({ended.shape[0]},), one value per env"
            )
        return ended & answer.to(ended.device)

    def reset(self) -> None:
        """Nothing is kept here: the task keeps what its function reads."""

    def on_track(self, min_steps: int) -> float | None:
        return None
