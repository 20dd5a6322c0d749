"""The stand task: reward for base height; an episode succeeds when the Go2 stands at its end (:func:`stood_up`)."""

from __future__ import annotations

import torch
import warp as wp
from isaaclab.envs import DirectRLEnv

from .env_cfg import StandEnvCfg


class StandEnv(DirectRLEnv):
    cfg: StandEnvCfg

    def __init__(self, cfg: StandEnvCfg, render_mode: str | None = None, **kwargs):
        super().__init__(cfg, render_mode, **kwargs)
        self._robot = self.scene["robot"]
        self._actions = torch.zeros(self.num_envs, self.cfg.action_space, device=self.device)
        self._targets = self._robot.data.default_joint_pos.torch.clone()
        self.held_steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        """Control steps in a row, up to now, with the base at or above ``stand_height``."""
        self.held_at_end = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        """``held_steps`` at the end of each env's last finished episode: the reset clears ``held_steps`` before
        ``step`` returns, so the task keeps what its success function reads."""

    def _height(self) -> torch.Tensor:
        return self._robot.data.root_pos_w.torch[:, 2]

    def _pre_physics_step(self, actions: torch.Tensor):
        self._actions = actions.clone()
        self._targets = self._robot.data.default_joint_pos.torch + self.cfg.action_scale * self._actions

    def _apply_action(self):
        self._robot.set_joint_position_target_index(target=self._targets)

    def _get_observations(self) -> dict:
        data = self._robot.data
        obs = torch.cat(
            [
                (self._height() - self.cfg.stand_height).unsqueeze(1),
                data.root_lin_vel_b.torch,
                data.root_ang_vel_b.torch,
                data.projected_gravity_b.torch,
                data.joint_pos.torch - data.default_joint_pos.torch,
                data.joint_vel.torch * 0.05,
                self._actions,
            ],
            dim=-1,
        )
        return {"policy": obs}

    def _get_rewards(self) -> torch.Tensor:
        height = (self._height() / self.cfg.stand_height).clamp(max=1.5)
        tilt = torch.sum(torch.square(self._robot.data.projected_gravity_b.torch[:, :2]), dim=1)
        return (height - 0.5 * tilt - 0.01 * torch.sum(torch.square(self._actions), dim=1)) * self.step_dt

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        standing = self._height() >= self.cfg.stand_height
        self.held_steps.add_(1).mul_(standing)
        fell_over = self._robot.data.projected_gravity_b.torch[:, 2] > 0.0
        time_out = self.episode_length_buf >= self.max_episode_length - 1
        return fell_over, time_out

    def _reset_idx(self, env_ids: torch.Tensor | None):
        if env_ids is None:
            env_ids = wp.to_torch(self._robot._ALL_INDICES)
        self.held_at_end[env_ids] = self.held_steps[env_ids]
        self.held_steps[env_ids] = 0
        self._robot.reset(env_ids)
        super()._reset_idx(env_ids)
        self._actions[env_ids] = 0.0
        pose = self._robot.data.default_root_pose.torch[env_ids].clone()
        pose[:, :3] += self.scene.env_origins[env_ids]
        self._robot.write_root_pose_to_sim_index(root_pose=pose, env_ids=env_ids)
        self._robot.write_root_velocity_to_sim_index(
            root_velocity=self._robot.data.default_root_vel.torch[env_ids], env_ids=env_ids
        )
        self._robot.write_joint_position_to_sim_index(
            position=self._robot.data.default_joint_pos.torch[env_ids], env_ids=env_ids
        )
        self._robot.write_joint_velocity_to_sim_index(
            velocity=self._robot.data.default_joint_vel.torch[env_ids], env_ids=env_ids
        )


def stood_up(env: StandEnv, ended: torch.Tensor) -> torch.Tensor:
    """The task's success rule (``target.success_fn``): an ended episode succeeded when the Go2 stood for at least
    ``hold_steps`` control steps at its end."""
    return env.held_at_end >= env.cfg.hold_steps
