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

import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import torch
from tensordict import TensorDict

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.backends.mjx import compiled as mjx_compiled
from sweep.backends.mjx.task import (
    MJX_IMPORT_NOISE,
    NUM_ACTIONS,
    PHYSICS_DT_S,
    SUBSTEPS,
    TaskParams,
    panel_keys,
    train_keys,
)
from sweep.backends.policy import MlpPolicy, PolicyShape
from sweep.errors import ConfigError, require

#: The mujoco / mujoco-mjx release (major.minor) this task was calibrated and tested with.
TESTED_MUJOCO = "3.17"


PROFILES: dict[str, TaskParams] = {
    # Backward commands: the trotting reference alone walks an untrained policy forward, which met the forward
    # commands, so held-out success measured little learning; backward, an untrained policy fails and a trained one
    # passes (docs/decisions/0017-cpu-profile-commands.md; benchmarks/profile_calibration.py checks a variant).
    "cpu": TaskParams(
        floor="flat",
        episode_steps=200,
        success_threshold_mps=0.2,
        cmd_vx=(-0.2, -0.05),
        cmd_vy=(0.0, 0.0),
        cmd_yaw=(0.0, 0.0),
        gait_hz=2.0,
        gait_knee_rad=0.4,
        description="flat floor, backward commands 0.05-0.2 m/s, 4 s episodes, trotting reference, "
        "mean error < 0.2 m/s",
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


class MjxLocomotionEnv(TaskEnv):
    """Batched Barkour velocity tracking as an rsl-rl ``VecEnv`` (observations under group 'policy')."""

    loop_platforms: tuple[str, ...] = ("gpu",)
    """Devices whose envs run held-out passes in their own loop (:meth:`policy_steps`; an env's ``policy_loop``).
    GPUs only: there a pass stepped from Python waits on dispatch, which the loop saves; on a CPU the simulation
    dominates a pass, and the loop is one more compile where a 256-env panel otherwise shares the 256-env training
    step's (docs/decisions/0007-pass-in-the-simulator-loop.md)."""

    def __init__(self, num_envs: int, seed: int, device: str, params: TaskParams, donate: bool = False) -> None:
        import jax

        self.num_envs = num_envs
        self.num_actions = NUM_ACTIONS
        self.max_episode_length = params.episode_steps
        self.control_dt_s = PHYSICS_DT_S * SUBSTEPS
        self.device = device
        self.params = params
        self.cfg = asdict(params)
        self._jax_device = _jax_device_for(device)
        self._shape = (params, donate, self._jax_device, num_envs)
        self._pass: tuple | None = None  # a pass in the env's own loop: policy, its arrays, finished, success
        self.policy_loop = self._jax_device.platform in self.loop_platforms
        self._fn = mjx_compiled.shape_functions(*self._shape)
        mjx_compiled.compiled(*self._shape, "reset")
        self._keys = jax.device_put(train_keys(seed, num_envs), self._jax_device)
        self.restart()  # outside the default-device context, as every later call: reset traces once per shape

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
        extras = {"time_outs": flags[:, 1].bool(), "success": flags[:, 2].bool(), "cannot_succeed": flags[:, 3].bool()}
        return self._obs, torch.from_dlpack(rew), flags[:, 0].long(), extras

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Control steps since each env's episode began."""
        return torch.from_dlpack(self._state.steps).long()

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        import jax

        steps = value.detach().to("cpu", torch.int32).numpy()
        self._state = self._state._replace(steps=jax.device_put(steps, self._jax_device))  # committed: no recompile

    # -- sweep TaskEnv -------------------------------------------------------------------------
    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """Restart env ``i`` from held-out seed ``seeds[i]`` (evaluation only)."""
        import jax

        if len(seeds) != self.num_envs:
            raise ValueError(f"reset_with_seeds needs {self.num_envs} seeds, got {len(seeds)}")
        self._state, obs = self._fn["reset"](jax.device_put(panel_keys(seeds), self._jax_device))
        self._obs, self._pass = self._wrap_obs(obs), None
        return self._obs

    def warm_up(self) -> None:
        """Compile the step function with one throw-away step, then restore the initial state."""
        mjx_compiled.compiled(*self._shape, "step")
        self.step(torch.zeros(self.num_envs, self.num_actions, device=self.device))
        self.restart()
        self.synchronize()

    def policy_steps(self, policy: MlpPolicy, steps: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``steps`` control steps of ``policy`` in one device loop (:func:`sweep.backends.mjx.task.policy_loop`);
        None when :attr:`policy_loop` is off (a CPU device).
        Every input of the loop is JAX's own memory (a loop's inputs are copied by CUDA-graph memcpy nodes, which
        refuse memory from torch's allocator): the policy is copied in once per pass, the masks stay here."""
        import jax
        import numpy as np

        if not self.policy_loop:
            return None
        if self._pass is None or self._pass[0] is not policy:
            zeros = jax.device_put(np.zeros(self.num_envs, bool), self._jax_device)
            self._pass = (policy, _arrays(policy, self._jax_device), zeros, zeros)
        _, arrays, finished, success = self._pass
        loop = mjx_compiled.loop_function(*self._shape, policy.shape(steps))
        self._state, obs, finished, success = loop(self._state, self._obs_jax, finished, success, arrays)
        self._obs = self._wrap_obs(obs)
        self._pass = (policy, arrays, finished, success)
        return torch.from_dlpack(finished), torch.from_dlpack(success)

    def compile_policy_steps(self, shape: PolicyShape) -> bool:
        """Compile the policy loop of ``shape`` for this env's shape (nothing runs); False where it has none."""
        if self.policy_loop:
            mjx_compiled.compiled_loop(*self._shape, shape)
        return self.policy_loop

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

    def on_track_share(self, min_steps: int) -> float | None:
        """Of the envs ``min_steps`` or more into their episode, the share whose mean xy tracking error so far is
        under the profile's threshold (one that fell has restarted: never counted); two arrays copied to the host."""
        import numpy as np

        steps, errors = np.asarray(self._state.steps), np.asarray(self._state.err_sum)
        running = steps >= min_steps
        if not running.any():
            return None
        return float((errors[running] < self.params.success_threshold_mps * steps[running]).mean())

    def synchronize(self) -> None:
        """Wait for queued simulator work (used at phase boundaries only)."""
        import jax

        jax.block_until_ready(self._state)

    def compiled_step_count(self) -> int:
        """Versions of the step function compiled in this process (one per env shape: none after warm-up)."""
        return self._fn["step"]._cache_size()

    def _wrap_obs(self, obs: Any) -> TensorDict:
        self._obs_jax = obs
        return TensorDict({"policy": torch.from_dlpack(obs)}, batch_size=[self.num_envs], device=self.device)


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


def _arrays(policy: MlpPolicy, device: Any) -> dict[str, Any]:
    """The policy's tensors as JAX arrays of their own on ``device``, in :func:`mjx_task.policy_loop`'s layout."""
    import jax
    import numpy as np

    def put(t: torch.Tensor | float) -> Any:
        host = np.float32(t) if isinstance(t, float) else t.detach().to("cpu", torch.float32).numpy().copy()
        return jax.device_put(host, device)

    layers = tuple((put(w), put(b)) for w, b in policy.layers)
    return {"mean": put(policy.mean), "std": put(policy.std), "eps": put(policy.eps), "layers": layers}


class MjxLocomotion(Backend):
    """Registry entry ``mjx_locomotion``: the embedded default backend."""

    name = "mjx_locomotion"
    success_rule = "no fall before the time limit and mean xy-velocity tracking error below the profile threshold"
    knobs = ("buffer_donation",)
    # flatbuffers: jax.export imports it only when the compile cache serializes a compiled step (every trial)
    requires = ("jax", "mujoco", "mujoco.mjx", "flatbuffers")
    import_noise = {"mujoco.mjx": MJX_IMPORT_NOISE}
    xla_cache = True

    def profiles(self) -> dict[str, Profile]:
        return {
            name: Profile(name, p.episode_steps, p.success_threshold_mps, p.description) for name, p in PROFILES.items()
        }

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> MjxLocomotionEnv:
        if profile not in PROFILES:
            raise ConfigError(f"profile: unknown profile {profile!r}; valid profiles: {', '.join(sorted(PROFILES))}")
        unknown = set(knobs) - set(self.knobs)
        if unknown:
            raise ConfigError(f"knobs: unknown mjx_locomotion knob(s) {sorted(unknown)}; valid: {list(self.knobs)}")
        require("jax")
        return MjxLocomotionEnv(
            num_envs, seed, device, PROFILES[profile], donate=bool(knobs.get("buffer_donation", False))
        )

    def preload(
        self, num_envs: int, device: str, profile: str, policy: PolicyShape | None = None, **knobs: object
    ) -> None:
        require("jax")
        import jax

        shape = (PROFILES[profile], bool(knobs.get("buffer_donation", False)), _jax_device_for(device), num_envs)
        # what a pass runs on this device (MjxLocomotionEnv.policy_loop): the panel's loop, or else the step
        loop = policy is not None and shape[2].platform in MjxLocomotionEnv.loop_platforms
        if not loop:  # the step first, the longest compile: beside a trial's env build (trial.runner.compile_ahead)
            mjx_compiled.compiled(*shape, "step")
        mjx_compiled.compiled(*shape, "reset")
        keys = [train_keys(0, num_envs)]  # and the env's key functions
        if policy is not None:
            keys.append(panel_keys([0] * num_envs))
        if loop:
            mjx_compiled.compiled_loop(*shape, policy)
        jax.block_until_ready(jax.device_put(keys, shape[2]))

    def control_dt_s(self, profile: str) -> float:
        return PHYSICS_DT_S * SUBSTEPS

    def preflight(self, profile: str, options: dict[str, Any], success: dict[str, str] | None = None) -> None:
        """Say once, on stderr, when the installed mujoco is not the tested one (the task may train differently)."""
        note = untested_mujoco()
        if note:
            print(f"sweep: warning: {note}", file=sys.stderr, flush=True)

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {name: version(name) for name in ("mujoco", "mujoco-mjx", "jax")}


def untested_mujoco() -> str | None:
    """A one-line note when mujoco / mujoco-mjx are not the release this task was calibrated and tested with."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = {name: version(name) for name in ("mujoco", "mujoco-mjx")}
    except PackageNotFoundError:
        return None  # make_env names the install step
    off = {name: v for name, v in found.items() if not v.startswith(TESTED_MUJOCO + ".")}
    if not off:
        return None
    have = ", ".join(f"{name} {v}" for name, v in off.items())
    return (
        f"{have} installed; backend mjx_locomotion was tested with {TESTED_MUJOCO}.x (its task and calibration may "
        f"differ): pip install mujoco=={TESTED_MUJOCO}.0 mujoco-mjx=={TESTED_MUJOCO}.0"
    )


def with_overrides(profile: str, **fields: Any) -> TaskParams:
    """A copy of a profile with some fields changed (tests and calibration)."""
    return replace(PROFILES[profile], **fields)
