"""The walk task's rsl-rl config: Isaac Lab's flat Go2 one, under the project's experiment name."""

from isaaclab.utils import configclass
from isaaclab_tasks.core.velocity.config.go2.agents.rsl_rl_ppo_cfg import UnitreeGo2FlatPPORunnerCfg


@configclass
class PPORunnerCfg(UnitreeGo2FlatPPORunnerCfg):
    def __post_init__(self):
        super().__post_init__()
        self.experiment_name = "mydog_walk"
        self.algorithm.entropy_coef = 0.005
