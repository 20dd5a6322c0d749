"""Isaac Lab 3.0 backend: an Isaac Lab velocity task wrapped for rsl-rl 5.5.1 and sweep's trial contract.

A profile *is* an Isaac Lab gym task id. Only :meth:`IsaacLab.make_env` imports Isaac Lab (absent: a
:class:`MissingExtraError` naming the install step): it turns the knobs into Hydra override strings (:func:`overrides`,
also exported for Isaac Lab's train script), launches Kit headless only if :func:`needs_kit`, loads the task's
``env_cfg_entry_point`` / ``rsl_rl_cfg_entry_point`` from gym's registry, resolves presets, applies the overrides
(:func:`apply_overrides`; not ``parse_env_cfg``: in 3.0 it reads ``sys.argv``), then ``gym.make`` and the wrapper.

Evaluation shares the training scene: a process hosts one Isaac Lab simulation (one stage, one physics scene), so a
trial's second ``make_env`` (the held-out panel) is a view of the first env's first ``eval_episodes`` envs.
``reset_with_seeds`` reseeds Isaac Lab with the panel's first seed (``env.reset(seed=...)``) and resets every env,
the others get zero actions meanwhile. So an evaluation steps the whole scene, the panel is fixed by (first seed,
``num_envs``) as Isaac Lab draws every env's randomness from one generator, and training resumes from its end state.

Success of a finished episode: no termination but the time-out (no fall), and per-step mean errors of the
``base_velocity`` command (what its ``error_vel_xy`` / ``error_vel_yaw`` metrics accumulate) below 0.5 m/s and
0.4 rad/s, Isaac Lab 3.0's ``Metrics/success_rate`` thresholds for quadrupeds (isaac-sim/IsaacLab#5415). The sums
are kept here: Isaac Lab zeroes its metric in the reset, before ``step`` returns. Not exercised on a real install.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import yaml
from tensordict import TensorDict
from torch import Tensor

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.errors import ConfigError, MissingExtraError

INSTALL_HINT = (
    "Isaac Lab is not installed: follow https://isaac-sim.github.io/IsaacLab (Isaac Lab 3.0 with rsl-rl-lib 5.x), "
    "then run sweep in that Python environment"
)
CONTROL_DT_S = 0.005 * 4  # Isaac Lab's velocity env (LocomotionVelocityRoughEnvCfg): 5 ms physics x decimation 4
EPISODE_STEPS = 1000  # its 20 s episodes at 50 Hz
#: Success thresholds on the episode's per-step mean tracking errors (Isaac Lab 3.0's quadruped defaults).
MAX_ERR_XY_MPS = 0.5
MAX_ERR_YAW_RADPS = 0.4
#: Isaac Lab's rsl-rl train script, relative to an Isaac Lab checkout; it takes the overrides as trailing arguments.
TRAIN_SCRIPT = "scripts/reinforcement_learning/rsl_rl/train.py"
PHYSICS_PRESETS = ("physx", "newton_mjwarp")
KNOBS = ("gpu_max_num_partitions", "physics_preset", "newton_cuda_graph")
_RULE = "20 s episodes; success: no fall, mean xy error < 0.5 m/s and yaw error < 0.4 rad/s"
TASKS = {
    "Isaac-Velocity-Flat-Anymal-D-v0": f"ANYmal D, flat plane, velocity + heading commands, pushes, {_RULE}",
    "Isaac-Velocity-Rough-Anymal-D-v0": f"ANYmal D, rough terrain with curriculum, same commands, {_RULE}",
}
#: Fields declared by isaaclab_rl.rsl_rl's config classes (rl_cfg.py); anything else goes to ``rsl_rl_only``.
RUNNER_FIELDS = frozenset(
    "class_name seed device num_steps_per_env max_iterations empirical_normalization obs_groups clip_actions "  # noqa: SIM905
    "save_interval experiment_name run_name logger neptune_project wandb_project resume load_run load_checkpoint "
    "actor critic algorithm policy".split()
)
ALGORITHM_FIELDS = frozenset(
    "class_name num_learning_epochs num_mini_batches learning_rate schedule gamma lam entropy_coef desired_kl "  # noqa: SIM905
    "max_grad_norm optimizer value_loss_coef use_clipped_value_loss clip_param normalize_advantage_per_mini_batch "
    "share_cnn_encoders rnd_cfg symmetry_cfg".split()
)
MODEL_FIELDS = frozenset(
    "class_name hidden_dims activation obs_normalization distribution_cfg stochastic init_noise_std "  # noqa: SIM905
    "noise_std_type state_dependent_std".split()
)

_find_spec = importlib.util.find_spec  # tests replace it to simulate a machine without Isaac Lab
_APP: Any = None  # Kit's SimulationApp: launched at most once per process, never relaunched
_SCENE: _Scene | None = None  # the one Isaac Lab env of this process


def check_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Validate the Isaac-only knobs (absent ones keep the task's defaults); errors name the key."""
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise ConfigError(f"backend_options: unknown Isaac Lab knob(s) {unknown}; valid: {', '.join(KNOBS)}")
    preset = knobs.get("physics_preset", "physx")
    if preset not in PHYSICS_PRESETS:
        raise ConfigError(f"backend_options.physics_preset: must be one of {list(PHYSICS_PRESETS)} (got {preset!r})")
    parts, graph = knobs.get("gpu_max_num_partitions"), knobs.get("newton_cuda_graph")
    if parts is not None and (preset != "physx" or isinstance(parts, bool) or parts not in (1, 2, 4, 8, 16, 32)):
        raise ConfigError(f"backend_options.gpu_max_num_partitions={parts!r}: PhysX only, a power of 2 in [1, 32]")
    if graph is not None and (preset != "newton_mjwarp" or not isinstance(graph, bool)):
        raise ConfigError(f"backend_options.newton_cuda_graph={graph!r}: true or false, with newton_mjwarp only")
    return dict(knobs)


def needs_kit(physics_preset: str) -> bool:
    """Whether the task must run inside Kit: PhysX does (Isaac Sim); the Newton MJWarp preset runs kit-less."""
    return physics_preset != "newton_mjwarp"


def overrides(num_envs: int, num_steps_per_env: int | None, seed: int, knobs: dict[str, Any], **ppo: int) -> list[str]:
    """Hydra overrides (``presets=``, ``env.*``, ``agent.*``) for Isaac Lab 3.0's train script; ``None`` is omitted.

    ``ppo``: ``num_mini_batches`` / ``num_learning_epochs`` (``agent.algorithm.*``). The preset comes first: it
    replaces a whole config section before scalars land in it. ``agent.seed`` suffices: the train script copies it.
    """
    knobs = check_knobs(knobs)
    values = {
        "env.scene.num_envs": num_envs,
        "env.sim.physics.gpu_max_num_partitions": knobs.get("gpu_max_num_partitions"),
        "env.sim.physics.use_cuda_graph": knobs.get("newton_cuda_graph"),
        "agent.num_steps_per_env": num_steps_per_env,
        **{f"agent.algorithm.{name}": value for name, value in ppo.items()},
        "agent.seed": seed,
    }
    head = ["presets=newton_mjwarp"] if knobs.get("physics_preset") == "newton_mjwarp" else []
    return head + [f"{key}={str(value).lower()}" for key, value in values.items() if value is not None]  # true/false


def parse_override(line: str) -> tuple[str, tuple[str, ...], Any]:
    """``"env.scene.num_envs=4096"`` -> ``("env", ("scene", "num_envs"), 4096)``; ``presets=a,b`` -> the names."""
    key, sep, raw = line.partition("=")
    root, *path = key.split(".")
    if key == "presets" and sep:
        return "presets", (), tuple(raw.split(","))
    if not sep or root not in ("env", "agent") or not path:
        raise ConfigError(f"override '{line}': expected env.<path>=value, agent.<path>=value or presets=<names>")
    return root, tuple(path), yaml.safe_load(raw)  # Hydra's scalars read as YAML's: 4096, 0.5, true, null, text


def apply_overrides(env_cfg: Any, agent_cfg: Any, lines: Iterable[str], resolve: Callable | None = None) -> None:
    """Apply override strings to Isaac Lab config objects in place: presets first, then each scalar.

    ``resolve`` is ``isaaclab_tasks.utils.resolve_presets`` (3.0); it runs even with no preset selected, because a
    3.0 config keeps its ``PresetCfg`` nodes until they are resolved to their defaults.
    """
    roots = {"env": env_cfg, "agent": agent_cfg}
    parsed = [(line, *parse_override(line)) for line in lines]
    selected = {name for _, root, _, names in parsed if root == "presets" for name in names}
    if resolve is not None:
        for cfg in roots.values():
            resolve(cfg, selected)
    elif selected:
        raise ConfigError(f"presets={','.join(sorted(selected))}: this Isaac Lab has no presets; use Isaac Lab 3.0")
    for line, root, path, value in parsed:
        if root == "presets":
            continue
        node = roots[root]
        for i, name in enumerate(path):
            is_dict = isinstance(node, dict)
            if not (name in node if is_dict else hasattr(node, name)):
                raise ConfigError(f"override {line}: {type(node).__name__} has no '{name}'; fix backend_options")
            if i < len(path) - 1:
                node = node[name] if is_dict else getattr(node, name)
            elif is_dict:
                node[name] = value
            else:
                setattr(node, name, value)


def check_physics(env_cfg: Any, physics_preset: str) -> None:
    """Refuse to run a physics backend other than the one asked for (a task without that preset)."""
    physics = getattr(getattr(env_cfg, "sim", None), "physics", None)
    if physics is None and physics_preset == "physx":
        return  # Isaac Lab 2.x: PhysX is the only backend; its settings live in sim.physx
    if ("newton" if physics_preset == "newton_mjwarp" else "physx") not in type(physics).__name__.lower():
        raise ConfigError(f"backend_options.physics_preset={physics_preset}: the task has {type(physics).__name__}")


def resolve_task_id(task: str, registered: Iterable[str]) -> str:
    """The registered gym id for ``task``: as given, else without ``-v0``; otherwise an error listing close ids."""
    names = set(registered)
    for candidate in (task, task.removesuffix("-v0")):
        if candidate in names:
            return candidate
    close = difflib.get_close_matches(task, sorted(names), n=3)
    raise ConfigError(f"profile={task}: not in gym's registry after importing isaaclab_tasks; close ids: {close}")


def split_agent_config(train_cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """sweep's rsl-rl config -> (what Isaac Lab's config classes declare, the rest keyed by dotted path)."""
    declared: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in train_cfg.items():
        allowed = {"algorithm": ALGORITHM_FIELDS, "actor": MODEL_FIELDS, "critic": MODEL_FIELDS}.get(key)
        if allowed is not None:
            declared[key] = {k: v for k, v in value.items() if k in allowed}
            extra.update({f"{key}.{k}": v for k, v in value.items() if k not in allowed})
        elif key != "save_interval":  # sweep never saves through the runner: meaningless to Isaac Lab
            (declared if key in RUNNER_FIELDS else extra)[key] = value
    algorithm = declared.get("algorithm", {})
    if algorithm.get("class_name", "PPO") != "PPO":  # sweep's FastPPO; Isaac Lab's runner builds rsl-rl's PPO
        extra["algorithm.class_name"] = algorithm["class_name"]
        algorithm["class_name"] = "PPO"
    return declared, extra


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
        steps = self.steps.clamp(min=1.0)
        good = (self.err_xy_sum / steps < MAX_ERR_XY_MPS) & (self.err_yaw_sum / steps < MAX_ERR_YAW_RADPS)
        live = (~done).float()
        self.err_xy_sum = (self.err_xy_sum + torch.linalg.norm(command[:, :2] - velocity[:, :2], dim=-1)) * live
        self.err_yaw_sum = (self.err_yaw_sum + (command[:, 2] - velocity[:, 2]).abs()) * live
        self.steps = (self.steps + 1.0) * live
        return done & ~terminated.bool() & good


@dataclass
class _Scene:
    """The one Isaac Lab env of a process, shared by a trial's training env and its evaluation view."""

    key: tuple[Any, ...]
    wrapper: Any
    tracker: SuccessTracker
    measure: Callable[[], tuple[Tensor, Tensor]]
    """(command, base velocity) now, (num_envs, 3) each: vx, vy (m/s), yaw rate (rad/s), base frame."""


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
        if self.num_envs < self._full:
            actions = torch.cat([actions, actions.new_zeros(self._full - self.num_envs, self.num_actions)])
        obs, rewards, dones, extras = self._scene.wrapper.step(actions)
        env = self._scene.wrapper.unwrapped
        success = self._scene.tracker.update(*self._scene.measure(), dones, env.reset_terminated)
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
        return self.get_observations()

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
    if "isaaclab_tasks" in sys.modules:  # a kit-less trial imported them, and Kit must start first
        raise ConfigError("backend_options.physics_preset: physx after newton_mjwarp in one process; use separate runs")
    from isaaclab.app import AppLauncher

    _APP = AppLauncher(headless=True, device=device).app


def _build_scene(key: tuple[Any, ...], task: str, num_envs: int, seed: int, device: str, knobs: dict) -> _Scene:
    """Resolve the task's configs, apply the overrides, build and wrap the env (the only place importing Isaac Lab)."""
    IsaacLab.check_installed()
    preset = knobs.get("physics_preset", "physx")
    _launch_kit_if_needed(preset, device)
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers the tasks in gym's registry)
    import warp as wp
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

    utils = importlib.import_module("isaaclab_tasks.utils")
    task = resolve_task_id(task, gym.registry.keys())
    env_cfg = utils.load_cfg_from_registry(task, "env_cfg_entry_point")
    agent_cfg = utils.load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")
    resolve = getattr(utils, "resolve_presets", None)  # Isaac Lab 2.x has no presets
    apply_overrides(env_cfg, agent_cfg, overrides(num_envs, None, seed, knobs), resolve)
    check_physics(env_cfg, preset)
    env_cfg.seed, env_cfg.sim.device = seed, device
    wrapper = RslRlVecEnvWrapper(gym.make(task, cfg=env_cfg), clip_actions=getattr(agent_cfg, "clip_actions", None))
    term = wrapper.unwrapped.command_manager.get_term("base_velocity")
    data = wrapper.unwrapped.scene[term.cfg.asset_name].data

    def measure() -> tuple[Tensor, Tensor]:  # 3.0 asset data are warp arrays: torch views, no copy
        lin, ang = wp.to_torch(data.root_lin_vel_b), wp.to_torch(data.root_ang_vel_b)
        return term.command, torch.cat([lin[:, :2], ang[:, 2:3]], dim=1)

    return _Scene(key, wrapper, SuccessTracker(num_envs, wrapper.device), measure)


class IsaacLab(Backend):
    """Registry entry ``isaaclab``: Isaac Lab 3.0 velocity tasks through ``RslRlVecEnvWrapper``."""

    name = "isaaclab"
    success_rule = (
        "no termination other than the time-out (no fall) and per-step mean velocity-command tracking errors below "
        f"{MAX_ERR_XY_MPS} m/s (xy) and {MAX_ERR_YAW_RADPS} rad/s (yaw), as Isaac Lab 3.0's success metric"
    )
    knobs = KNOBS

    def profiles(self) -> dict[str, Profile]:
        """Isaac Lab task ids; each is a velocity env: 20 s episodes at 50 Hz = 1000 control steps."""
        return {name: Profile(name, EPISODE_STEPS, MAX_ERR_XY_MPS, text) for name, text in TASKS.items()}

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> IsaacLabEnv:
        """The training env (a process's first call) or a view of it (later calls); knobs from ``backend_options``."""
        global _SCENE
        if profile not in TASKS:
            raise ConfigError(f"profile: unknown Isaac Lab task '{profile}'; valid: {', '.join(TASKS)}")
        knobs = check_knobs(dict(knobs))
        key = (profile, device, tuple(sorted(knobs.items())))
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
        """isaaclab / isaacsim versions when importable, else ``{"isaaclab": "not installed"}``."""
        from importlib.metadata import distributions

        if _find_spec("isaaclab") is None:
            return {"isaaclab": "not installed"}
        found = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
        return {name: found.get(name, "unknown") for name in ("isaaclab", "isaacsim") if _find_spec(name) is not None}

    def export_section(self, cfg: Any) -> dict[str, Any]:
        """recommended.yaml's ``isaaclab`` section: task, override line, declared-only agent/env, the rest apart."""
        from sweep import perf
        from sweep.export import implied_agent_config

        knobs = check_knobs({k: v for k, v in cfg.backend_options.items() if k in KNOBS})
        flags = perf.resolve(cfg.flags)
        agent, rsl_rl_only = split_agent_config(implied_agent_config(cfg))
        agent["seed"] = cfg.seed
        rsl_rl_only["perf_flags"] = flags
        ppo = {"num_mini_batches": cfg.num_mini_batches, "num_learning_epochs": cfg.num_learning_epochs}
        lines = overrides(cfg.num_envs, cfg.num_steps_per_env, cfg.seed, knobs, **ppo)
        env: dict[str, Any] = {}  # exactly the env.* overrides, nested
        for root, path, value in map(parse_override, lines):
            if root == "env":
                functools.reduce(lambda node, name: node.setdefault(name, {}), path[:-1], env)[path[-1]] = value
        line = " ".join(lines)
        section = {"task": cfg.profile, "physics_preset": knobs.get("physics_preset", "physx"), "override": line}
        section["command"] = f"python {TRAIN_SCRIPT} --task={cfg.profile} --headless {line}"
        return {"isaaclab": {**section, "agent": agent, "env": env, "rsl_rl_only": rsl_rl_only}}
