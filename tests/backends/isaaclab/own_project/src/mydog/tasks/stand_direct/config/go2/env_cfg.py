"""The stand task's config: the Go2 starts crouched on flat ground; actions move its joint targets from the crouch."""

import isaaclab.sim as sim_utils
from isaaclab.envs import DirectRLEnvCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sim import SimulationCfg
from isaaclab.terrains import TerrainImporterCfg
from isaaclab.utils import configclass, replace
from isaaclab_assets.robots.unitree import UNITREE_GO2_CFG
from isaaclab_tasks.core.velocity.velocity_env_cfg import RoughPhysicsCfg

#: The crouch every episode starts from: legs folded, the base low.
CROUCH = {".*L_hip_joint": 0.0, ".*R_hip_joint": 0.0, ".*_thigh_joint": 1.3, ".*_calf_joint": -2.6}


@configclass
class StandSceneCfg(InteractiveSceneCfg):
    terrain = TerrainImporterCfg(
        prim_path="/World/ground",
        terrain_type="plane",
        collision_group=-1,
        physics_material=sim_utils.RigidBodyMaterialCfg(static_friction=1.0, dynamic_friction=1.0),
    )
    robot = replace(
        UNITREE_GO2_CFG,
        prim_path="{ENV_REGEX_NS}/Robot",
        init_state=replace(UNITREE_GO2_CFG.init_state, pos=(0.0, 0.0, 0.2), joint_pos=CROUCH),
    )


@configclass
class StandEnvCfg(DirectRLEnvCfg):
    episode_length_s = 2.0
    decimation = 4
    action_space = 12
    observation_space = 46
    state_space = 0
    action_scale = 1.0
    """Radians of joint target per unit of action, around the crouch."""
    stand_height = 0.14
    """Base height (m) that counts as standing."""
    hold_steps = 10
    """Control steps the robot must stand at the end of an episode for it to count as stood up."""

    sim: SimulationCfg = SimulationCfg(dt=0.005, render_interval=4, physics=RoughPhysicsCfg())
    scene: StandSceneCfg = StandSceneCfg(num_envs=1024, env_spacing=2.0)

    def __post_init__(self):
        self.sim.use_newton_actuators = True  # the DC motors run in the physics, as in Isaac Lab's Go2 task
        self.sim.physics.newton_mjwarp.solver_cfg.njmax = 150  # a crouch touches the ground with legs as well as feet
        self.sim.physics.newton_mjwarp.solver_cfg.nconmax = 60
