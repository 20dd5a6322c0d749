"""The stand task on the Unitree Go2."""

import gymnasium as gym

from . import agents

gym.register(
    id="Mydog-Stand-GO2-Direct",
    entry_point=f"{__name__}.env:StandEnv",
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": f"{__name__}.env_cfg:StandEnvCfg",
        "default_agent": "rsl_rl",
        "rsl_rl_cfg_entry_point": f"{agents.__name__}.rsl_rl_ppo_cfg:PPORunnerCfg",
    },
)
