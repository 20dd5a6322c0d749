"""Isaac Lab 3.0 backend: an Isaac Lab velocity task wrapped for rsl-rl 5.5.1 and sweep's trial contract.

A profile *is* an Isaac Lab 3.0 gym task id (``Isaac-Velocity-Flat-AnymalD``). Physics is Newton with the MuJoCo-Warp
solver by default: no Isaac Sim, no Kit. Only :meth:`IsaacLab.make_env` and :meth:`IsaacLab.preflight` import Isaac
Lab (absent: a :class:`MissingExtraError` naming the install step). The knobs become Hydra override strings
(:mod:`sweep.backends.isaaclab.cfg`, also exported for Isaac Lab's trainer), applied to the configs that the task's
``env_cfg_entry_point`` / ``rsl_rl_cfg_entry_point`` name, then ``gym.make`` and ``RslRlVecEnvWrapper``.

``backend_options.asset_root`` is a local folder with the relative paths of NVIDIA's asset server; Isaac Lab reads
``ISAACSIM_ASSET_ROOT`` once, when ``isaaclab.utils.assets`` is first imported, so it is set before any Isaac Lab
import, in the driver (:meth:`IsaacLab.preflight`, before Ray starts: workers inherit it) and in every worker.

Evaluation shares the training scene: a process hosts one Isaac Lab simulation (one stage, one physics scene), so a
trial's second ``make_env`` (the held-out panel) is a view of the first env's first ``eval_episodes`` envs.
``reset_with_seeds`` reseeds Isaac Lab with the panel's first seed (``env.reset(seed=...)``) and resets every env,
the others get zero actions meanwhile. So an evaluation steps the whole scene, and the panel is fixed by (first
seed, ``num_envs``) as Isaac Lab draws every env's randomness from one generator. The first training step after an
evaluation reseeds the scene from the training seed's stream and resets it, so no training episode ever draws from a
held-out seed's generator (that one step acts on the evaluation's last observation).

Success of a finished episode: no termination but the time-out (no fall), and per-step mean errors of the
``base_velocity`` command (what its ``error_vel_xy`` / ``error_vel_yaw`` metrics accumulate) below 0.5 m/s and
0.4 rad/s, Isaac Lab 3.0's ``Metrics/success_rate`` thresholds for quadrupeds. Isaac Lab's own metric has no
"did not fall" condition; the sums are kept here because Isaac Lab zeroes its metric in the reset, before ``step``
returns.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from torch import Tensor

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.backends.isaaclab.cfg import (
    DEFAULT_PRESET,
    KNOBS,
    TASKS,
    TRAIN_COMMAND,
    apply_overrides,
    asset_paths,
    check_knobs,
    check_physics,
    missing_assets,
    needs_kit,
    overrides,
    parse_override,
    renamed_task,
    resolve_task_id,
    split_agent_config,
)
from sweep.errors import ConfigError, MissingExtraError

INSTALL_HINT = (
    "Isaac Lab is not installed: in a Python 3.12 environment run pip install isaaclab==3.0.0, then "
    "pip install -e . 'mujoco==3.12.*' (Isaac Lab 3.0 keeps its torch and mujoco; docs/isaaclab.md) and run sweep there"
)
CONTROL_DT_S = 0.005 * 4  # Isaac Lab's velocity env (LocomotionVelocityRoughEnvCfg): 5 ms physics x decimation 4
EPISODE_STEPS = 1000  # its 20 s episodes at 50 Hz
#: Success thresholds on the episode's per-step mean tracking errors (Isaac Lab 3.0's quadruped defaults).
MAX_ERR_XY_MPS = 0.5
MAX_ERR_YAW_RADPS = 0.4
ASSET_ROOT_ENV = "ISAACSIM_ASSET_ROOT"

_find_spec = importlib.util.find_spec  # tests replace it to simulate a machine without Isaac Lab
_APP: Any = None  # Kit's SimulationApp: launched at most once per process, never relaunched
_SCENE: _Scene | None = None  # the one Isaac Lab env of this process


def use_asset_root(root: str | None) -> None:
    """Point Isaac Lab at a local asset root (absolute path) before it is imported; ``None`` keeps its downloads.

    Isaac Lab reads the variable once; a process that already imported it with another root cannot switch.
    """
    if root is None:
        return
    path = Path(root).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"backend_options.asset_root={root}: no such folder; give the local asset root or null")
    loaded = sys.modules.get("isaaclab.utils.assets")
    if loaded is not None and getattr(loaded, "NUCLEUS_ASSET_ROOT_DIR", None) != str(path):
        raise ConfigError(
            f"backend_options.asset_root={root}: Isaac Lab was already imported in this process with the root "
            f"{getattr(loaded, 'NUCLEUS_ASSET_ROOT_DIR', None)}; set {ASSET_ROOT_ENV} before starting Python"
        )
    os.environ[ASSET_ROOT_ENV] = str(path)


def _check_preset(preset: str) -> None:
    """PhysX needs Isaac Sim (Kit); say so in one line instead of letting Kit exit the process."""
    if needs_kit(preset) and _find_spec("isaacsim") is None:
        raise ConfigError(
            f"backend_options.physics_preset={preset}: needs Isaac Sim, which is not installed; use "
            f"physics_preset={DEFAULT_PRESET} (Newton, no Isaac Sim)"
        )


def _task_configs(task: str, lines: list[str]) -> tuple[str, Any, Any]:
    """(registered id, env cfg, agent cfg) with ``lines`` applied; imports Isaac Lab's task registry."""
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers the tasks in gym's registry)
    from isaaclab_tasks.utils import load_cfg_from_registry, resolve_presets

    task = resolve_task_id(task, gym.registry.keys())
    env_cfg = load_cfg_from_registry(task, "env_cfg_entry_point")
    agent_cfg = load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")
    apply_overrides(env_cfg, agent_cfg, lines, resolve_presets)
    return task, env_cfg, agent_cfg


def needed_assets(env_cfg: Any) -> list[str]:
    """Files under the asset root that the task loads: every path in its config, plus the plane terrain's ground."""
    from isaaclab.sim import GroundPlaneCfg
    from isaaclab.utils.assets import NUCLEUS_ASSET_ROOT_DIR

    paths = asset_paths(env_cfg, NUCLEUS_ASSET_ROOT_DIR)
    terrain = getattr(env_cfg.scene, "terrain", None)
    if getattr(terrain, "terrain_type", None) == "plane":  # the terrain importer spawns a default ground plane
        paths.append(GroundPlaneCfg().usd_path)
    return sorted(set(paths))


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

    def on_track(self, min_steps: int, n: int | None = None) -> float | None:
        """Of the first ``n`` envs (None: all) at least ``min_steps`` control steps into their episode, the share
        whose mean errors so far are under both thresholds: the success rule applied now (one host read). None: no
        env is that far in."""
        running = self.steps[:n] >= min_steps
        counts = torch.stack([running.sum(), (running & self._good()[:n]).sum()]).tolist()
        return counts[1] / counts[0] if counts[0] else None

    def _good(self) -> Tensor:
        """Per env: the running episode's mean xy and yaw errors so far are under the thresholds."""
        steps = self.steps.clamp(min=1.0)
        return (self.err_xy_sum / steps < MAX_ERR_XY_MPS) & (self.err_yaw_sum / steps < MAX_ERR_YAW_RADPS)


@dataclass
class _Scene:
    """The one Isaac Lab env of a process, shared by a trial's training env and its evaluation view."""

    key: tuple[Any, ...]
    wrapper: Any
    tracker: SuccessTracker
    measure: Callable[[], tuple[Tensor, Tensor]]
    """(command, base velocity) now, (num_envs, 3) each: vx, vy (m/s), yaw rate (rad/s), base frame."""
    training_seed: int = 0
    """Seed of the trial's training stream; reseeds after an evaluation derive from it."""
    evaluated: int = 0
    """Evaluations so far; the training stream is reseeded once after each."""
    reseeded: int = 0


def training_reseed(seed: int, k: int) -> int:
    """The k-th reseed of a trial's training stream (k >= 1): below 2**31, so never a held-out panel seed."""
    return (seed * 1_000_003 + k) % 2**31


class IsaacLabEnv(TaskEnv):
    """An Isaac Lab task as a ``TaskEnv``: the training env (owner) or a view of its first ``num_envs`` envs."""

    def __init__(self, scene: _Scene, num_envs: int, owner: bool) -> None:
        w = scene.wrapper
        self._scene, self._owner, self._full, self.num_envs = scene, owner, int(w.num_envs), num_envs
        self.num_actions, self.max_episode_length = int(w.num_actions), int(w.max_episode_length)
        self.device, self.cfg, self.control_dt_s = str(w.device), w.cfg, float(w.unwrapped.step_dt)

    def _head(self, x: Any) -> Any:
        return x if self.num_envs == self._full else x[: self.num_envs]

    def get_observations(self) -> TensorDict:
        """The task's observation groups (``policy``, ...), (num_envs, dim) each."""
        return self._head(self._scene.wrapper.get_observations())

    def step(self, actions: Tensor) -> tuple[TensorDict, Tensor, Tensor, dict]:
        """One control step (0.02 s) of the whole scene; a view pads the other envs' actions with zeros."""
        scene = self._scene
        if self._owner and scene.reseeded < scene.evaluated:  # training resumes after a held-out pass
            scene.reseeded = scene.evaluated
            scene.wrapper.unwrapped.reset(seed=training_reseed(scene.training_seed, scene.reseeded))
            scene.tracker.reset()
        if self.num_envs < self._full:
            actions = torch.cat([actions, actions.new_zeros(self._full - self.num_envs, self.num_actions)])
        obs, rewards, dones, extras = scene.wrapper.step(actions)
        env = scene.wrapper.unwrapped
        success = scene.tracker.update(*scene.measure(), dones, env.reset_terminated)
        time_outs = extras.get("time_outs", env.reset_time_outs)
        extras = {**extras, "time_outs": self._head(time_outs), "success": self._head(success)}
        return self._head(obs), self._head(rewards), self._head(dones), extras

    @property
    def episode_length_buf(self) -> Tensor:
        """Control steps since each env's episode began."""
        return self._head(self._scene.wrapper.episode_length_buf)

    @episode_length_buf.setter
    def episode_length_buf(self, value: Tensor) -> None:
        self._scene.wrapper.episode_length_buf[: self.num_envs] = value

    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """Reseed Isaac Lab with ``seeds[0]`` and reset every env of the scene (see the module docstring)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset_with_seeds needs {self.num_envs} seeds, got {len(seeds)}")
        self._scene.wrapper.unwrapped.reset(seed=int(seeds[0]))
        self._scene.tracker.reset()
        self._scene.evaluated += 1
        return self.get_observations()

    def on_track_share(self, min_steps: int) -> float | None:
        """Of this env's envs ``min_steps`` or more into their episode, the share on track for a success
        (:meth:`SuccessTracker.on_track`; one that fell has restarted: never counted)."""
        return self._scene.tracker.on_track(min_steps, self.num_envs)

    def synchronize(self) -> None:
        """Wait for queued GPU work (phase boundaries only)."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        """The owner closes the Isaac Lab env (Kit stays up: it cannot restart in a process); a view does nothing."""
        global _SCENE
        if self._owner and _SCENE is self._scene:
            _SCENE = None
            self._scene.wrapper.close()


def _launch_kit_if_needed(physics_preset: str, device: str) -> None:
    """Start Kit headless once per process, before any Isaac Lab task module is imported."""
    global _APP
    if _APP is not None or not needs_kit(physics_preset):
        return
    _check_preset(physics_preset)
    if "isaaclab_tasks" in sys.modules:  # a kit-less trial imported them, and Kit must start first
        raise ConfigError("backend_options.physics_preset: physx after newton_mjwarp in one process; use separate runs")
    from isaaclab.app import AppLauncher

    _APP = AppLauncher(headless=True, device=device).app


def _torch_view(array: Any) -> Tensor:
    """A torch view of an Isaac Lab 3.0 data array (a ``ProxyArray`` or a plain warp array), no copy."""
    if hasattr(array, "torch"):
        return array.torch
    import warp as wp

    return wp.to_torch(array)


def _build_scene(key: tuple[Any, ...], task: str, num_envs: int, seed: int, device: str, knobs: dict) -> _Scene:
    """Resolve the task's configs, apply the overrides, build and wrap the env (the only place building Isaac Lab).

    Isaac Lab and Kit end the process on some failures (``SystemExit``); that becomes an error naming the step, so
    the trial ends ``failed`` with its seconds billed and the worker lives on.
    """
    IsaacLab.check_installed()
    use_asset_root(knobs.get("asset_root"))
    preset = knobs.get("physics_preset", DEFAULT_PRESET)
    try:
        _launch_kit_if_needed(preset, device)
        import gymnasium as gym
        from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

        task, env_cfg, agent_cfg = _task_configs(task, overrides(num_envs, None, seed, knobs))
        check_physics(env_cfg, preset)
        env_cfg.seed, env_cfg.sim.device = seed, device
        wrapper = RslRlVecEnvWrapper(gym.make(task, cfg=env_cfg), clip_actions=getattr(agent_cfg, "clip_actions", None))
    except SystemExit as exc:
        raise RuntimeError(f"Isaac Lab exited (SystemExit {exc.code}) while building {task} with {preset}") from None
    term = wrapper.unwrapped.command_manager.get_term("base_velocity")
    data = wrapper.unwrapped.scene[term.cfg.asset_name].data

    def measure() -> tuple[Tensor, Tensor]:
        lin, ang = _torch_view(data.root_lin_vel_b), _torch_view(data.root_ang_vel_b)
        return term.command, torch.cat([lin[:, :2], ang[:, 2:3]], dim=1)

    return _Scene(key, wrapper, SuccessTracker(num_envs, wrapper.device), measure, training_seed=seed)


class IsaacLab(Backend):
    """Registry entry ``isaaclab``: Isaac Lab 3.0 velocity tasks through ``RslRlVecEnvWrapper``."""

    name = "isaaclab"
    success_rule = (
        "no termination other than the time-out (no fall) and per-step mean velocity-command tracking errors below "
        f"{MAX_ERR_XY_MPS} m/s (xy) and {MAX_ERR_YAW_RADPS} rad/s (yaw), as Isaac Lab 3.0's success metric"
    )
    knobs = KNOBS

    def profiles(self) -> dict[str, Profile]:
        """Isaac Lab 3.0 task ids; each is a velocity env: 20 s episodes at 50 Hz = 1000 control steps."""
        return {name: Profile(name, EPISODE_STEPS, MAX_ERR_XY_MPS, text) for name, text in TASKS.items()}

    def check_profile(self, profile: str, key: str = "profile") -> None:
        """A 2.x id names its 3.0 id; other ids are checked against Isaac Lab's registry by :meth:`preflight`."""
        new = renamed_task(profile, TASKS)
        if new is not None:
            raise ConfigError(f"{key}={profile}: an Isaac Lab 2.x task id; Isaac Lab 3.0 registers it as {new}")
        if profile not in TASKS and not profile.startswith("Isaac-"):
            raise ConfigError(f"{key}: '{profile}' is not an Isaac Lab task id; e.g. {', '.join(TASKS)}")

    def preflight(self, profile: str, options: dict[str, Any]) -> None:
        """Before any compute: Isaac Lab importable, preset runnable, task registered, every asset file present.

        Sets ``ISAACSIM_ASSET_ROOT`` for this process and the workers it starts. Missing assets are one line each.
        """
        self.check_installed()
        knobs = check_knobs({k: v for k, v in options.items() if k in KNOBS})
        use_asset_root(knobs.get("asset_root"))
        _check_preset(knobs.get("physics_preset", DEFAULT_PRESET))
        if needs_kit(knobs.get("physics_preset", DEFAULT_PRESET)):
            return  # a task's config cannot be loaded before Kit starts, and Kit starts in the workers only
        _, env_cfg, _ = _task_configs(profile, overrides(1, None, 0, knobs))
        root = knobs.get("asset_root")
        if root is not None:
            missing = missing_assets(needed_assets(env_cfg), Path(os.environ[ASSET_ROOT_ENV]))
            if missing:
                lines = "\n".join(f"  missing: {path}" for path in missing)
                raise ConfigError(
                    f"backend_options.asset_root={root}: {len(missing)} file(s) the task {profile} loads are not "
                    f"there:\n{lines}\nput them under the root (same relative paths as Isaac Lab's asset server)"
                )

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> IsaacLabEnv:
        """The training env (a process's first call) or a view of it (later calls); knobs from ``backend_options``."""
        global _SCENE
        self.check_profile(profile)
        knobs = check_knobs(dict(knobs))
        key = (profile, device, repr(sorted(knobs.items())))
        if _SCENE is None:
            _SCENE = _build_scene(key, profile, num_envs, seed, device, knobs)
            return IsaacLabEnv(_SCENE, num_envs, owner=True)
        if _SCENE.key != key:
            raise ConfigError(f"make_env {key}: this process already hosts {_SCENE.key}; close that env first")
        if num_envs > (full := _SCENE.wrapper.num_envs):
            raise ConfigError(f"target.eval_episodes={num_envs} > num_envs={full}: evaluation uses the training scene")
        return IsaacLabEnv(_SCENE, num_envs, owner=False)

    @staticmethod
    def check_installed() -> None:
        """Isaac Lab's packages must be importable; the error names the install step."""
        missing = [name for name in ("isaaclab", "isaaclab_tasks", "isaaclab_rl") if _find_spec(name) is None]
        if missing:
            raise MissingExtraError(f"{INSTALL_HINT} (missing: {', '.join(missing)})")

    def control_dt_s(self, profile: str) -> float:
        """0.02 s for every velocity task: decimation 4 x 0.005 s physics step."""
        return CONTROL_DT_S

    def versions(self) -> dict[str, str]:
        """isaaclab / newton / isaacsim versions when importable, else ``{"isaaclab": "not installed"}``."""
        from importlib.metadata import distributions

        if _find_spec("isaaclab") is None:
            return {"isaaclab": "not installed"}
        found = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
        names = ("isaaclab", "newton", "mujoco-warp", "warp-lang", "isaacsim")
        return {name: found[name] for name in names if name in found}

    def export_section(self, cfg: Any, agent_cfg: dict[str, Any]) -> dict[str, Any]:
        """recommended.yaml's ``isaaclab`` section from the trial's config and the rsl-rl ``agent_cfg`` it trained
        with: task, override line, declared-only agent/env, the rest apart."""
        from sweep import perf

        knobs = check_knobs({k: v for k, v in cfg.backend_options.items() if k in KNOBS})
        flags = perf.resolve(cfg.flags)
        agent, rsl_rl_only = split_agent_config(agent_cfg)
        agent["seed"] = cfg.seed
        rsl_rl_only["perf_flags"] = flags
        ppo = {"num_mini_batches": cfg.num_mini_batches, "num_learning_epochs": cfg.num_learning_epochs}
        lines = overrides(cfg.num_envs, cfg.num_steps_per_env, cfg.seed, knobs, **ppo)
        env: dict[str, Any] = {}  # exactly the env.* overrides, nested
        for root, path, value in map(parse_override, lines):
            if root == "env":
                functools.reduce(lambda node, name: node.setdefault(name, {}), path[:-1], env)[path[-1]] = value
        line = " ".join(lines)
        section = {"task": cfg.profile, "physics_preset": knobs.get("physics_preset", DEFAULT_PRESET), "override": line}
        section["command"] = f"{TRAIN_COMMAND} --task {cfg.profile} {line}"
        if knobs.get("asset_root"):
            section["asset_root"] = knobs["asset_root"]  # ISAACSIM_ASSET_ROOT for the trainer, as the trials had
        return {"isaaclab": {**section, "agent": agent, "env": env, "rsl_rl_only": rsl_rl_only}}
