"""The jitted JAX functions of the embedded quadruped task: reset, step (physics, rewards, falls,
time-outs, success) and observations, all vmapped over envs; plus the tagged random streams.

Training randomness comes from a stream tagged 0 and held-out evaluation from one tagged 1, so the
two can never meet whatever the seeds. See :mod:`sweep.backends.mjx.locomotion` for the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sweep.errors import import_quietly

#: Seconds of simulated time per physics step (MJX's own example task uses the same).
PHYSICS_DT_S = 0.004
#: Physics steps per control step: control period = 5 x 4 ms = 20 ms (50 Hz policy).
SUBSTEPS = 5
OBS_DIM = 50
NUM_ACTIONS = 12
#: What ``import mujoco.mjx`` prints where Warp is not installed: MJX's optional Warp path, which this task (JAX)
#: does not use; kept off the screen so a run's first line is sweep's own.
MJX_IMPORT_NOISE = ("Failed to import warp:", "Failed to import mujoco_warp:")


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


class State(NamedTuple):
    """Batched simulator + task state (leading axis: env)."""

    data: Any
    cmd: Any
    last_action: Any
    steps: Any
    key: Any
    err_sum: Any


def build_functions(model: Any, params: TaskParams, donate: bool) -> dict[str, Any]:
    """JAX functions of one task instance: reset (by keys), step, simulation-only step, all vmapped over envs;
    and ``treedef``, the pytree structure of their :class:`State`."""
    import jax
    import jax.numpy as jnp

    mjx = import_quietly("mujoco.mjx", MJX_IMPORT_NOISE)
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
        return State(
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
        blank = State(
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
        stepped = State(data, state.cmd, actions, steps, key, err_sum)
        done = fell | time_out
        # A running episode whose summed tracking error already reaches threshold x episode length can no longer
        # end below the threshold: its failure is decided (an evaluation pass may count it now).
        hopeless = ~done & (err_sum >= params.success_threshold_mps * params.episode_steps)
        state = restart(stepped, done, key)
        obs = observe(state)
        flags = jnp.stack([done, time_out, success, hopeless], axis=-1).astype(jnp.int32)
        return state, obs, rew.astype(jnp.float32), flags

    def sim_only(state, actions):
        return step(state, actions)[0]

    donate_args = (0,) if donate else ()
    zero = jnp.zeros(())
    return {
        "treedef": jax.tree_util.tree_structure(State(data0, zero, zero, zero, zero, zero)),
        "reset": jax.jit(reset_all),
        "step": jax.jit(step, donate_argnums=donate_args),
        "sim_only": jax.jit(sim_only, donate_argnums=donate_args),
    }


def policy_loop(step: Any, activation: str, steps: int) -> Any:
    """A jitted ``(state, obs, finished, success, policy) -> (state, obs, finished, success)``: ``steps`` control
    steps of a deterministic MLP policy and ``step`` in one device loop, counting each env's first finished episode
    as :func:`sweep.trial.evaluation.evaluate` does (a success where it ended with one; a finished failure where it
    ended without, or where its failure is already decided). ``policy``: ``mean``, ``std``, ``eps`` and ``layers``
    ((weight (out, in), bias) pairs) of :class:`sweep.backends.policy.MlpPolicy`; f32 matmuls at full precision, as
    torch's default. The state is donated."""
    import jax
    import jax.numpy as jnp

    act = {"elu": jax.nn.elu, "relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}[activation]

    def actions(policy, obs):
        x = (obs - policy["mean"]) / (policy["std"] + policy["eps"])
        for i, (weight, bias) in enumerate(policy["layers"]):
            x = jnp.dot(x, weight.T, precision=jax.lax.Precision.HIGHEST) + bias
            if i < len(policy["layers"]) - 1:
                x = act(x)
        return x

    def loop(state, obs, finished, success, policy):
        def body(carry, _):
            state, obs, finished, success = carry
            state, obs, _, flags = step(state, actions(policy, obs))
            new = (flags[:, 0] > 0) & ~finished
            success = success | (new & (flags[:, 2] > 0))
            finished = finished | new | (flags[:, 3] > 0)
            return (state, obs, finished, success), None

        return jax.lax.scan(body, (state, obs, finished, success), None, length=steps)[0]

    return jax.jit(loop, donate_argnums=(0,))


def train_keys(seed: int, num_envs: int) -> Any:
    """Training randomness: a stream tagged 0, separate by construction from evaluation's (tag 1)."""
    import jax

    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 0), num_envs)


def panel_keys(seeds: Sequence[int]) -> Any:
    """Evaluation randomness: one key per held-out episode seed, in the stream tagged 1."""
    import jax
    import jax.numpy as jnp

    return jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 1))(jnp.asarray(list(seeds), jnp.uint32))
