"""Isaac Lab's flat Go2 velocity task made the project's own: slower commands (half the ranges), tracking weighted more,
a smoother gait."""

from isaaclab.utils import configclass
from isaaclab_tasks.core.velocity.config.go2.flat_env_cfg import UnitreeGo2FlatEnvCfg


@configclass
class WalkEnvCfg(UnitreeGo2FlatEnvCfg):
    def __post_init__(self):
        super().__post_init__()
        ranges = self.commands.base_velocity.ranges
        ranges.lin_vel_x, ranges.lin_vel_y, ranges.ang_vel_z = (-0.5, 0.5), (-0.5, 0.5), (-0.5, 0.5)
        self.rewards.track_lin_vel_xy_exp.weight = 2.0
        self.rewards.track_ang_vel_z_exp.weight = 1.0
        self.rewards.action_rate_l2.weight = -0.01
        self.rewards.feet_air_time.weight = 0.5
