"""Embedded backend: Barkour v0 quadruped velocity tracking on MuJoCo MJX (JAX), exposed to rsl-rl.

The model ships inside the ``mujoco-mjx`` wheel (``mujoco/mjx/test_data/barkour_v0``), so this
backend runs on a fresh machine with no other assets. All envs step in one jitted, vmapped JAX
function; tensors cross to torch through DLPack (no host copies) and finished envs are reset inside
that function, so after the first step nothing recompiles.

Task: follow a commanded base velocity (vx, vy in m/s, yaw rate in rad/s) drawn per episode. An
episode ends by a fall (torso tilt or height) or by the time limit (a time-out). It succeeds when
the robot did not fall and its mean xy-velocity tracking error over the episode is below the
profile's threshold.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import torch
from tensordict import TensorDict

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.errors import ConfigError, require

#: Seconds of simulated time per physics step (MJX's own example task uses the same).
PHYSICS_DT_S = 0.004
#: Physics steps per control step: control period = 5 x 4 ms = 20 ms (50 Hz policy).
SUBSTEPS = 5
OBS_DIM = 50
NUM_ACTIONS = 12


@dataclass(frozen=True)
class TaskParams:
    """Everything that defines one profile of the task (fixed for a trial)."""

    floor: str
    """'flat' (a plane) or 'rough' (the height field shipped with the model, up to 5 cm bumps)."""
    episode_steps: int
    """Time limit in control steps (0.02 s each)."""
    success_threshold_mps: float
    """Success: mean xy-velocity tracking error over the episode below this (m/s), and no fall."""
    cmd_vx: tuple[float, float]
    """Forward velocity command range (m/s)."""
    cmd_vy: tuple[float, float]
    """Lateral velocity command range (m/s)."""
    cmd_yaw: tuple[float, float]
    """Yaw-rate command range (rad/s)."""
    push_every_steps: int = 0
    """Push the torso every this many control steps (0: never)."""
    push_mps: float = 0.0
    """Largest push, as an added xy velocity of the torso (m/s)."""
    spawn_radius_m: float = 0.0
    """Episodes start at a random xy within this radius (rough floor: a different patch each time)."""
    action_scale_rad: float = 0.3
    """Joint target offset per unit action (rad)."""
    gait_hz: float = 0.0
    """Frequency of a trotting reference added to the knee targets (0: none; the policy learns gaits alone)."""
    gait_knee_rad: float = 0.0
    """Knee flexion of the reference at the top of each swing (rad); diagonal legs swing together."""
    description: str = ""


PROFILES: dict[str, TaskParams] = {
    # Calibrated on 2 CPU cores: 256 envs x 24 steps reached 1.0 held-out success after 0.49 M env steps
    # (157 billable s; 0.85 after 0.25 M), with no falls.
    "cpu": TaskParams(
        floor="flat",
        episode_steps=200,
        success_threshold_mps=0.2,
        cmd_vx=(0.0, 0.4),
        cmd_vy=(0.0, 0.0),
        cmd_yaw=(0.0, 0.0),
        gait_hz=2.0,
        gait_knee_rad=0.4,
        description="flat floor, forward commands 0-0.4 m/s, 4 s episodes, trotting reference, mean error < 0.2 m/s",
    ),
    "gpu": TaskParams(
        floor="rough",
        episode_steps=500,
        success_threshold_mps=0.15,
        cmd_vx=(-0.4, 0.8),
        cmd_vy=(-0.3, 0.3),
        cmd_yaw=(-0.6, 0.6),
        push_every_steps=150,
        push_mps=0.3,
        spawn_radius_m=8.0,
        gait_hz=2.0,
        gait_knee_rad=0.4,
        description="rough floor (5 cm height field), pushes every 3 s, 10 s episodes, omnidirectional commands, "
        "trotting reference, mean xy error < 0.15 m/s",
    ),
}


def model_path() -> str:
    """Path of the Barkour v0 MJCF inside the installed ``mujoco-mjx`` wheel."""
    mjx = require("mujoco.mjx")
    path = os.path.join(os.path.dirname(mjx.__file__), "test_data", "barkour_v0", "assets", "barkour_v0_mjx.xml")
    if not os.path.exists(path):
        raise ConfigError(f"backend=mjx_locomotion: model file not found at {path}; reinstall mujoco-mjx==3.17.0")
    return path


def load_model(floor: str) -> Any:
    """Compile the Barkour model for ``floor``: visual meshes dropped, 4 ms physics step."""
    import mujoco

    spec = mujoco.MjSpec.from_file(model_path())
    for geom in list(spec.geoms):  # visual-only geoms never collide: drop them and their meshes
        if geom.contype == 0 and geom.conaffinity == 0 and geom.name != "hfield_floor":
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    if floor == "flat":
        floor_geom = spec.geom("hfield_floor")
        floor_geom.type = mujoco.mjtGeom.mjGEOM_PLANE
        floor_geom.hfieldname = ""
        floor_geom.size = [0.0, 0.0, 0.05]
    spec.option.timestep = PHYSICS_DT_S
    return spec.compile()


class _State(NamedTuple):
    """Batched simulator + task state (leading axis: env)."""

    data: Any
    cmd: Any
    last_action: Any
    steps: Any
    key: Any
    err_sum: Any


def _build_functions(model: Any, params: TaskParams, donate: bool) -> dict[str, Any]:
    """JAX functions of one task instance: reset (by keys), step, observe; all vmapped over envs."""
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    mjx_model = mjx.put_model(model)
    data0 = mjx.make_data(mjx_model)
    key_qpos = jnp.asarray(model.keyframe("standing").qpos)
    default_ctrl = jnp.asarray(model.keyframe("standing").ctrl)
    default_joints = key_qpos[7:]
    ctrl_lo, ctrl_hi = jnp.asarray(model.actuator_ctrlrange[:, 0]), jnp.asarray(model.actuator_ctrlrange[:, 1])
    if params.floor == "rough":
        hf = model.hfield_data.reshape(model.hfield_nrow[0], model.hfield_ncol[0])
        hfield = jnp.asarray(hf) * float(model.hfield_size[0, 2])
        hsize = jnp.asarray(model.hfield_size[0, :2])
    dt = PHYSICS_DT_S * SUBSTEPS

    def rot_inv(q, v):  # rotate world vector v into the frame of unit quaternion q (w, x, y, z)
        w, u = q[0], q[1:]
        return v * (2 * w * w - 1) - 2 * w * jnp.cross(u, v) + 2 * u * jnp.dot(u, v)

    def terrain_height(xy):
        if params.floor != "rough":
            return 0.0
        rc = (xy / hsize + 1.0) * 0.5 * (jnp.asarray(hfield.shape[::-1]) - 1)  # (col, row)
        col, row = jnp.round(rc).astype(jnp.int32)
        return hfield[row, col]

    def uniform(key, lo_hi):
        return jax.random.uniform(key, (), minval=lo_hi[0], maxval=lo_hi[1])

    def reset1(key):
        k = jax.random.split(key, 7)
        xy = jax.random.uniform(k[0], (2,), minval=-1.0, maxval=1.0) * params.spawn_radius_m
        yaw = jax.random.uniform(k[1], (), minval=-jnp.pi, maxval=jnp.pi)
        qpos = key_qpos.at[0:2].set(xy)
        qpos = qpos.at[2].add(terrain_height(xy) + (0.02 if params.floor == "rough" else 0.0))
        qpos = qpos.at[3:7].set(jnp.array([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)]))
        qpos = qpos.at[7:].add(jax.random.uniform(k[2], (NUM_ACTIONS,), minval=-0.05, maxval=0.05))
        cmd = jnp.stack([uniform(k[3], params.cmd_vx), uniform(k[4], params.cmd_vy), uniform(k[5], params.cmd_yaw)])
        return qpos, jnp.zeros(model.nv), cmd, k[6]

    # ctrl order: FL, HL, FR, HR x (abduction, hip, knee); diagonal pairs (FL, HR) and (HL, FR) trot together
    knee_mask = jnp.zeros(NUM_ACTIONS).at[jnp.array([2, 5, 8, 11])].set(1.0)
    leg_offset = jnp.repeat(jnp.array([0.0, jnp.pi, jnp.pi, 0.0]), 3)

    def phase(steps):
        return 2 * jnp.pi * params.gait_hz * steps * PHYSICS_DT_S * SUBSTEPS

    def gait_offset(steps):
        swing = jnp.maximum(0.0, jnp.sin(phase(steps) + leg_offset))
        return params.gait_knee_rad * knee_mask * swing

    def observe1(qpos, qvel, cmd, last_action, steps):
        quat = qpos[3:7]
        v = rot_inv(quat, qvel[0:3])  # world linear velocity -> body frame
        w = qvel[3:6]  # a free joint's angular velocity is already in the body frame
        g = rot_inv(quat, jnp.array([0.0, 0.0, -1.0]))
        cmd_scaled = cmd * jnp.array([2.0, 2.0, 0.25])
        joints = qpos[7:] - default_joints
        clock = jnp.stack([jnp.sin(phase(steps)), jnp.cos(phase(steps))])
        return jnp.concatenate([v * 2.0, w * 0.25, g, cmd_scaled, joints, qvel[6:] * 0.05, last_action, clock])

    def observe(state):
        return jax.vmap(observe1)(state.data.qpos, state.data.qvel, state.cmd, state.last_action, state.steps)

    def restart(state, done, keys):
        """Fresh episodes where ``done``; the stepped state elsewhere (same shapes: no recompile)."""
        qpos, qvel, cmd, key = jax.vmap(reset1)(keys)

        def pick(new, old):
            mask = done.reshape(done.shape + (1,) * (old.ndim - 1))
            return jnp.where(mask, new, old)

        data = state.data.replace(
            qpos=pick(qpos, state.data.qpos),
            qvel=pick(qvel, state.data.qvel),
            qacc_warmstart=pick(jnp.zeros_like(state.data.qacc_warmstart), state.data.qacc_warmstart),
            ctrl=pick(jnp.broadcast_to(default_ctrl, state.data.ctrl.shape), state.data.ctrl),
        )
        zero = jnp.zeros_like
        return _State(
            data=data,
            cmd=pick(cmd, state.cmd),
            last_action=pick(zero(state.last_action), state.last_action),
            steps=jnp.where(done, 0, state.steps),
            key=pick(key, state.key),
            err_sum=jnp.where(done, 0.0, state.err_sum),
        )

    def reset_all(keys):
        n = keys.shape[0]
        data = jax.vmap(lambda _: data0)(jnp.arange(n))
        blank = _State(
            data=data,
            cmd=jnp.zeros((n, 3)),
            last_action=jnp.zeros((n, NUM_ACTIONS)),
            steps=jnp.zeros(n, jnp.int32),
            key=keys,
            err_sum=jnp.zeros(n),
        )
        state = restart(blank, jnp.ones(n, bool), keys)
        return state, observe(state)

    def physics1(data, action, cmd, last_action, steps, key, err_sum):
        ctrl = default_ctrl + params.action_scale_rad * action + gait_offset(steps)
        ctrl = jnp.clip(ctrl, ctrl_lo, ctrl_hi)
        data = data.replace(ctrl=ctrl)
        data = jax.lax.fori_loop(0, SUBSTEPS, lambda _, d: mjx.step(mjx_model, d), data)
        steps = steps + 1
        key, k_push, k_next = jax.random.split(key, 3)
        if params.push_every_steps > 0:
            push = jax.random.uniform(k_push, (2,), minval=-params.push_mps, maxval=params.push_mps)
            hit = (steps % params.push_every_steps) == 0
            data = data.replace(qvel=data.qvel.at[0:2].add(jnp.where(hit, push, 0.0)))
        qpos, qvel = data.qpos, data.qvel
        quat = qpos[3:7] / jnp.linalg.norm(qpos[3:7])
        v = rot_inv(quat, qvel[0:3])
        w = qvel[3:6]
        g = rot_inv(quat, jnp.array([0.0, 0.0, -1.0]))
        err_xy = jnp.linalg.norm(cmd[0:2] - v[0:2])
        err_yaw = cmd[2] - w[2]
        rew = (
            1.5 * jnp.exp(-(err_xy**2) / 0.25)
            + 0.5 * jnp.exp(-(err_yaw**2) / 0.25)
            - 2.0 * v[2] ** 2
            - 0.05 * jnp.sum(w[0:2] ** 2)
            - 5.0 * jnp.sum(g[0:2] ** 2)
            - 1e-5 * jnp.sum(data.actuator_force**2)
            - 0.01 * jnp.sum((action - last_action) ** 2)
        ) * dt
        height = qpos[2] - terrain_height(qpos[0:2])
        fell = (g[2] > -0.5) | (height < 0.1) | ~jnp.all(jnp.isfinite(qpos))
        rew = jnp.where(fell, rew - 2.0, rew)
        err_sum = err_sum + err_xy
        time_out = (steps >= params.episode_steps) & ~fell
        success = ~fell & (err_sum / steps < params.success_threshold_mps)
        return data, rew, fell, time_out, success, steps, k_next, err_sum

    def step(state, actions):
        actions = actions.astype(jnp.float32)
        data, rew, fell, time_out, success, steps, key, err_sum = jax.vmap(physics1)(
            state.data, actions, state.cmd, state.last_action, state.steps, state.key, state.err_sum
        )
        stepped = _State(data, state.cmd, actions, steps, key, err_sum)
        done = fell | time_out
        state = restart(stepped, done, key)
        obs = observe(state)
        flags = jnp.stack([done, time_out, success], axis=-1).astype(jnp.int32)
        return state, obs, rew.astype(jnp.float32), flags

    def sim_only(state, actions):
        return step(state, actions)[0]

    donate_args = (0,) if donate else ()
    return {
        "reset": jax.jit(reset_all),
        "step": jax.jit(step, donate_argnums=donate_args),
        "sim_only": jax.jit(sim_only, donate_argnums=donate_args),
    }


def _train_keys(seed: int, num_envs: int) -> Any:
    """Training randomness: a stream tagged 0, separate by construction from evaluation's (tag 1)."""
    import jax

    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 0), num_envs)


def _panel_keys(seeds: Sequence[int]) -> Any:
    """Evaluation randomness: one key per held-out episode seed, in the stream tagged 1."""
    import jax
    import jax.numpy as jnp

    return jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 1))(jnp.asarray(list(seeds), jnp.uint32))


class MjxLocomotionEnv(TaskEnv):
    """Batched Barkour velocity tracking as an rsl-rl ``VecEnv`` (observations under group 'policy')."""

    def __init__(self, num_envs: int, seed: int, device: str, params: TaskParams, donate: bool = True) -> None:
        import jax

        self.num_envs = num_envs
        self.num_actions = NUM_ACTIONS
        self.max_episode_length = params.episode_steps
        self.control_dt_s = PHYSICS_DT_S * SUBSTEPS
        self.device = device
        self.params = params
        self.cfg = asdict(params)
        self._jax_device = _jax_device_for(device)
        with jax.default_device(self._jax_device):
            self._fn = _build_functions(load_model(params.floor), params, donate)
            self._keys = jax.device_put(_train_keys(seed, num_envs), self._jax_device)
            self._state, obs = self._fn["reset"](self._keys)
        self._obs = self._wrap_obs(obs)

    # -- rsl-rl VecEnv -------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        """Current observations: ``{"policy": (num_envs, OBS_DIM) float32}``."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Advance every env by one control step (20 ms); finished envs restart inside."""
        import jax

        self._state, obs, rew, flags = self._fn["step"](self._state, jax.dlpack.from_dlpack(actions.contiguous()))
        self._obs = self._wrap_obs(obs)
        flags = torch.from_dlpack(flags)
        extras = {"time_outs": flags[:, 1].bool(), "success": flags[:, 2].bool()}
        return self._obs, torch.from_dlpack(rew), flags[:, 0].long(), extras

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Control steps since each env's episode began."""
        return torch.from_dlpack(self._state.steps).long()

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        import jax.numpy as jnp

        steps = jnp.asarray(value.detach().to("cpu").numpy(), jnp.int32)
        self._state = self._state._replace(steps=jax_put(steps, self._jax_device))

    # -- sweep TaskEnv -------------------------------------------------------------------------
    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """Restart env ``i`` from held-out seed ``seeds[i]`` (evaluation only)."""
        import jax

        if len(seeds) != self.num_envs:
            raise ValueError(f"reset_with_seeds needs {self.num_envs} seeds, got {len(seeds)}")
        self._state, obs = self._fn["reset"](jax.device_put(_panel_keys(seeds), self._jax_device))
        self._obs = self._wrap_obs(obs)
        return self._obs

    def warm_up(self) -> None:
        """Compile the step function with one throw-away step, then restore the initial state."""
        self.step(torch.zeros(self.num_envs, self.num_actions, device=self.device))
        self.restart()
        self.synchronize()

    def restart(self) -> None:
        """Return every env to the initial training state of this env's seed (nothing recompiles)."""
        self._state, obs = self._fn["reset"](self._keys)
        self._obs = self._wrap_obs(obs)

    def memory_stats(self) -> dict[str, int]:
        """The simulator device's memory counters (``peak_bytes_in_use`` ...); empty on CPU."""
        return self._jax_device.memory_stats() or {}

    def sim_only_step(self, actions: torch.Tensor) -> None:
        """Step the simulator with no tensors handed back (the throughput limit)."""
        import jax

        self._state = self._fn["sim_only"](self._state, jax.dlpack.from_dlpack(actions.contiguous()))

    def synchronize(self) -> None:
        """Wait for queued simulator work (used at phase boundaries only)."""
        import jax

        jax.block_until_ready(self._state)

    def compiled_step_count(self) -> int:
        """How many versions of the step function XLA has compiled (1 after warm-up: no recompiles)."""
        return self._fn["step"]._cache_size()

    def _wrap_obs(self, obs: Any) -> TensorDict:
        return TensorDict({"policy": torch.from_dlpack(obs)}, batch_size=[self.num_envs], device=self.device)


def jax_put(x: Any, device: Any) -> Any:
    """Commit ``x`` to ``device`` (uncommitted arrays would make jit recompile)."""
    import jax

    return jax.device_put(x, device)


def _jax_device_for(device: str) -> Any:
    """The JAX device that shares memory with torch ``device`` ('cpu', 'cuda', 'cuda:1')."""
    import jax

    if device.startswith("cuda"):
        gpus = jax.devices("gpu") if jax.default_backend() == "gpu" else []
        if not gpus:
            raise ConfigError(f"device={device}: JAX sees no GPU; install jax with CUDA or use device=cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        return gpus[index]
    return jax.devices("cpu")[0]


class MjxLocomotion(Backend):
    """Registry entry ``mjx_locomotion``: the embedded default backend."""

    name = "mjx_locomotion"
    success_rule = "no fall before the time limit and mean xy-velocity tracking error below the profile threshold"
    knobs = ("buffer_donation",)

    def profiles(self) -> dict[str, Profile]:
        return {
            name: Profile(name, p.episode_steps, p.success_threshold_mps, p.description) for name, p in PROFILES.items()
        }

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> MjxLocomotionEnv:
        if profile not in PROFILES:
            raise ConfigError(f"profile: unknown profile '{profile}'; valid profiles: {', '.join(sorted(PROFILES))}")
        unknown = set(knobs) - set(self.knobs)
        if unknown:
            raise ConfigError(f"knobs: unknown mjx_locomotion knob(s) {sorted(unknown)}; valid: {list(self.knobs)}")
        require("jax")
        return MjxLocomotionEnv(
            num_envs, seed, device, PROFILES[profile], donate=bool(knobs.get("buffer_donation", True))
        )

    def control_dt_s(self, profile: str) -> float:
        return PHYSICS_DT_S * SUBSTEPS

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {name: version(name) for name in ("mujoco", "mujoco-mjx", "jax")}


def with_overrides(profile: str, **fields: Any) -> TaskParams:
    """A copy of a profile with some fields changed (tests and calibration)."""
    return replace(PROFILES[profile], **fields)
