"""The process's Isaac Lab scene: a task's configs loaded with an override line, its one simulation built and wrapped
for rsl-rl (:class:`IsaacLabEnv`), and what must happen before Isaac Lab is imported (the asset root, Kit for the
PhysX preset).

``backend_options.asset_root`` is a local folder with the relative paths of NVIDIA's asset server; Isaac Lab reads
``ISAACSIM_ASSET_ROOT`` once, when ``isaaclab.utils.assets`` is first imported, so it is set before any Isaac Lab
import, in the driver (:meth:`~sweep.backends.isaaclab.backend.IsaacLab.preflight`, before Ray starts: workers
inherit it) and in every worker.

A process hosts one Isaac Lab simulation: the trial's training scene, which no evaluation touches, or in the
evaluation process the held-out panel's own scene (:mod:`sweep.backends.isaaclab.panel`). The success of a finished
episode: :mod:`sweep.backends.isaaclab.success`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from torch import Tensor

from sweep.backends.base import TaskEnv
from sweep.backends.isaaclab.cfg import (
    DEFAULT_PRESET,
    agent_device,
    apply_overrides,
    asset_paths,
    check_built_physics,
    check_physics,
    needs_kit,
    overrides,
    resolve_task_id,
)
from sweep.backends.isaaclab.success import FnRule, SuccessTracker, TermRule, VelocityRule
from sweep.backends.isaaclab.tasks import (
    SuccessSpec,
    TaskFacts,
    import_tasks,
    load_success_fn,
    resolve_success,
    task_facts,
    tasks_modules,
)
from sweep.backends.policy import MlpPolicy
from sweep.errors import ConfigError, MissingExtraError

INSTALL_HINT = (
    "Isaac Lab is not installed: in a Python 3.12 environment run pip install isaaclab==3.0.0, then "
    "pip install -e . 'mujoco==3.12.*' (Isaac Lab 3.0 keeps its torch and mujoco; docs/isaaclab.md) and run sweep there"
)
#: The control period and episode length of Isaac Lab's velocity env (LocomotionVelocityRoughEnvCfg: 5 ms physics x
#: decimation 4, 20 s episodes): what the shipped tasks' listing says, and the control period a config check assumes
#: before the preflight has read the task's own (``IsaacLab.control_dt_s``).
CONTROL_DT_S = 0.005 * 4
EPISODE_STEPS = 1000
ASSET_ROOT_ENV = "ISAACSIM_ASSET_ROOT"

_find_spec = importlib.util.find_spec  # tests replace it to simulate a machine without Isaac Lab
_APP: Any = None  # Kit's SimulationApp: launched at most once per process, never relaunched
_SCENE: IsaacLabEnv | None = None  # the one Isaac Lab env of this process
_FACTS: dict[str, TaskFacts] = {}  # task id -> what its config says, as the preflight read it in this process


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


def check_installed() -> None:
    """Isaac Lab's packages must be importable; the error names the install step."""
    missing = [name for name in ("isaaclab", "isaaclab_tasks", "isaaclab_rl") if _find_spec(name) is None]
    if missing:
        raise MissingExtraError(f"{INSTALL_HINT} (missing: {', '.join(missing)})")


def check_preset(preset: str) -> None:
    """PhysX needs Isaac Sim (Kit); say so in one line instead of letting Kit exit the process."""
    if needs_kit(preset) and _find_spec("isaacsim") is None:
        raise ConfigError(
            f"backend_options.physics_preset={preset}: needs Isaac Sim, which is not installed; use "
            f"physics_preset={DEFAULT_PRESET} (Newton, no Isaac Sim)"
        )


def task_configs(task: str, lines: list[str], modules: tuple[str, ...] = ()) -> tuple[str, Any, Any]:
    """(registered id, env cfg, agent cfg) of a task with ``lines`` applied; registers Isaac Lab's tasks, installed
    projects' and those of ``modules`` (``backend_options.tasks_module``) first.

    An unknown id, a task with no rsl-rl agent config, or one without the preset the lines select, is one line.
    """
    import gymnasium as gym
    from isaaclab_tasks.utils import load_cfg_from_registry, resolve_presets

    own = import_tasks(modules)
    task = resolve_task_id(task, gym.registry.keys(), own)
    env_cfg = load_cfg_from_registry(task, "env_cfg_entry_point")
    if gym.spec(task).kwargs.get("rsl_rl_cfg_entry_point") is None:
        raise ConfigError(f"profile={task}: the task registers no rsl-rl agent config (rsl_rl_cfg_entry_point)")
    agent_cfg = load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")
    try:
        apply_overrides(env_cfg, agent_cfg, lines, resolve_presets)
    except ValueError as exc:  # Isaac Lab's "Unknown preset(s): ..." for a task without the chosen physics
        if "preset" not in str(exc).lower():
            raise
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"profile={task}: {first} (backend_options.physics_preset)") from None
    return task, env_cfg, agent_cfg


def load_task(task: str, lines: list[str], knobs: dict[str, Any], rule: dict[str, Any]) -> tuple[Any, Any, SuccessSpec]:
    """(env cfg, agent cfg, success rule) of ``task`` with the override ``lines`` and the ``knobs``' task modules: its
    physics the preset asked for, the rule (``success_term`` / ``success_fn``, or none) resolved against the task.
    Records the task's facts for :meth:`~sweep.backends.isaaclab.backend.IsaacLab.control_dt_s`."""
    import gymnasium as gym

    task, env_cfg, agent_cfg = task_configs(task, lines, tasks_modules(knobs))
    check_physics(env_cfg, knobs.get("physics_preset", DEFAULT_PRESET))
    facts = task_facts(task, gym.spec(task).entry_point, env_cfg)
    _FACTS[task] = facts
    return env_cfg, agent_cfg, resolve_success(facts, rule)


def needed_assets(env_cfg: Any) -> list[str]:
    """Files under the asset root that the task loads: every path in its config, plus the plane terrain's ground."""
    from isaaclab.sim import GroundPlaneCfg
    from isaaclab.utils.assets import NUCLEUS_ASSET_ROOT_DIR

    paths = asset_paths(env_cfg, NUCLEUS_ASSET_ROOT_DIR)
    terrain = getattr(env_cfg.scene, "terrain", None)
    if getattr(terrain, "terrain_type", None) == "plane":  # the terrain importer spawns a default ground plane
        paths.append(GroundPlaneCfg().usd_path)
    return sorted(set(paths))


def task_agent_config(task: str, lines: list[str], device: str, modules: tuple[str, ...] = ()) -> dict[str, Any]:
    """The rsl-rl config of ``task`` as Isaac Lab's trainer builds it: the registered agent config with the override
    ``lines`` applied, ``agent.device``, ``handle_deprecated_rsl_rl_cfg`` for the installed rsl-rl, then ``to_dict``
    (tuples stay tuples, as the trainer's ``params/agent.yaml`` keeps them). ``modules``: the task modules to import
    (``backend_options.tasks_module``)."""
    from isaaclab.utils import to_dict
    from isaaclab_rl.rsl_rl import check_rsl_rl_version, handle_deprecated_rsl_rl_cfg

    _, _, agent_cfg = task_configs(task, lines, modules)
    agent_cfg.device = agent_device(device)
    return to_dict(handle_deprecated_rsl_rl_cfg(agent_cfg, check_rsl_rl_version()))


class IsaacLabEnv(TaskEnv):
    """An Isaac Lab task as a ``TaskEnv``: a trial's training scene, or (``panel``) the held-out panel's own scene
    in the evaluation process. Only a panel is ever reset with held-out seeds.

    ``env_cfg`` is the config the scene was built from; ``physics`` what the built scene runs, ``"<config
    class>/<manager class>"`` (e.g. ``NewtonCfg/NewtonMJWarpManager``); ``success`` the rule its episodes are judged
    by (default: the velocity rule on ``base_velocity``).
    """

    def __init__(
        self, wrapper: Any, env_cfg: Any, physics: str, panel: bool = False, success: SuccessSpec | None = None
    ) -> None:
        self.wrapper, self.env_cfg, self.physics, self.panel = wrapper, env_cfg, physics, panel
        self.num_envs, self.num_actions = int(wrapper.num_envs), int(wrapper.num_actions)
        self.max_episode_length = int(wrapper.max_episode_length)
        self.device, self.cfg, self.control_dt_s = str(wrapper.device), wrapper.cfg, float(wrapper.unwrapped.step_dt)
        self.success = success or SuccessSpec("velocity", "base_velocity")
        self.rule = make_rule(self.success, wrapper.unwrapped, self.num_envs, self.device)
        self._obs: TensorDict | None = None
        self._finished = self._success = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    @property
    def tracker(self) -> SuccessTracker:
        """The velocity rule's error sums (the default rule only)."""
        return self.rule.tracker

    def get_observations(self) -> TensorDict:
        """The task's observation groups (``policy``, ...), (num_envs, dim) each."""
        return self.wrapper.get_observations()

    def step(self, actions: Tensor) -> tuple[TensorDict, Tensor, Tensor, dict]:
        """One control step of the scene; ``extras`` gains ``time_outs`` and ``success`` (the task's rule)."""
        obs, rewards, dones, extras = self.wrapper.step(actions)
        env = self.wrapper.unwrapped
        success = self.rule.update(env, dones)
        extras = {**extras, "time_outs": extras.get("time_outs", env.reset_time_outs), "success": success}
        return obs, rewards, dones, extras

    @property
    def episode_length_buf(self) -> Tensor:
        """Control steps since each env's episode began."""
        return self.wrapper.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: Tensor) -> None:
        self.wrapper.episode_length_buf = value  # rsl-rl's random start writes here, as its runner does

    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """A panel only: reseed Isaac Lab with ``seeds[0]`` and reset every env of the scene. Isaac Lab draws every
        env's randomness from one generator, so the panel is fixed by (first seed, ``num_envs``)."""
        if not self.panel:
            raise RuntimeError("the training scene is never reset with held-out seeds: the panel has its own scene")
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset_with_seeds needs {self.num_envs} seeds, got {len(seeds)}")
        with torch.inference_mode():  # as every step of a pass (and of Isaac Lab's own player) runs
            self.wrapper.unwrapped.reset(seed=int(seeds[0]))
        self.rule.reset()
        self._finished = self._success = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._obs = self.get_observations()
        return self._obs

    @torch.inference_mode()
    def policy_steps(self, policy: MlpPolicy, steps: int) -> tuple[Tensor, Tensor]:
        """Run ``steps`` control steps of the deterministic ``policy`` on the panel; (finished, succeeded) since
        :meth:`reset_with_seeds`, each env's first episode only (the rules of
        :func:`sweep.trial.evaluation.evaluate`)."""
        if self._obs is None:
            raise RuntimeError("policy_steps before reset_with_seeds")
        obs, finished, success = self._obs, self._finished, self._success
        for _ in range(steps):
            obs, _, dones, extras = self.step(policy(obs["policy"]))
            new = dones.bool() & ~finished
            success = success | (new & extras["success"])
            finished = finished | new
        self._obs, self._finished, self._success = obs, finished, success
        return finished, success

    def warm_up(self) -> None:
        """A panel: one zero-action step, so that what a first step loads (Warp kernels) is loaded before the first
        pass, which resets every env anyway. A training scene is left as it is: the task's trainer takes no such
        step before its first rollout."""
        if self.panel:
            with torch.inference_mode():
                self.step(torch.zeros(self.num_envs, self.num_actions, device=self.device))

    def on_track_share(self, min_steps: int) -> float | None:
        """Of the envs ``min_steps`` or more into their episode, the share on track for a success
        (:meth:`SuccessTracker.on_track`; one that fell has restarted: never counted); None under a task's own rule,
        which says nothing before an episode ends."""
        return self.rule.on_track(min_steps)

    def kernel_load_s(self) -> float:
        """Seconds Warp spent loading kernel modules in this process (:func:`kernel_load_s`)."""
        return kernel_load_s()

    def synchronize(self) -> None:
        """Wait for queued GPU work (phase boundaries only)."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        """Close the Isaac Lab env (Kit stays up: it cannot restart in a process)."""
        global _SCENE
        if _SCENE is self:
            _SCENE = None
        self.wrapper.close()


#: Seconds spent in Warp module loads that did work (:func:`kernel_load_s`); None until the meter is in place.
_KERNEL_LOAD_S: list[float] | None = None
#: A load quicker than this found its module loaded already (Warp's check on every launch), not counted.
_LOAD_WORK_S = 1e-3
#: After this many launches in a row that loaded nothing, the meter takes itself out of Warp's launch path (it costs
#: about 0.6 us a launch): a scene's kernels load within its first steps.
_QUIET_LAUNCHES = 50_000


def kernel_load_s() -> float:
    """Seconds this process has spent in Warp's ``Module.load`` compiling a kernel module (or reading it from Warp's
    disk cache), which Warp does at a module's first launch: on a fresh machine a scene's first steps pay tens of
    seconds of it. The meter wraps ``Module.load`` the first time this is called (0.0 before, and where this Warp
    has no such method) and puts the original back after :data:`_QUIET_LAUNCHES` launches in a row that loaded
    nothing; a load that found its module loaded already is not counted."""
    global _KERNEL_LOAD_S
    if _KERNEL_LOAD_S is None:
        _KERNEL_LOAD_S = [0.0]
        try:
            from warp._src.context import Module
        except ImportError:
            return 0.0
        load, total, quiet = Module.load, _KERNEL_LOAD_S, [0]

        def timed_load(self: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return load(self, *args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                if spent > _LOAD_WORK_S:
                    total[0] += spent
                    quiet[0] = 0
                else:
                    quiet[0] += 1
                    if quiet[0] >= _QUIET_LAUNCHES:
                        Module.load = load

        Module.load = timed_load
    return _KERNEL_LOAD_S[0]


def make_rule(spec: SuccessSpec, env: Any, num_envs: int, device: str) -> VelocityRule | TermRule | FnRule:
    """The rule ``spec`` names, counting on the unwrapped Isaac Lab ``env`` (``num_envs`` envs on ``device``)."""
    if spec.kind == "term":
        return TermRule(spec.name)
    if spec.kind == "fn":
        return FnRule(load_success_fn(spec.name), spec.name)
    return VelocityRule(env, spec.name, spec.thresholds, num_envs, device)


def rule_keys(rule: Any) -> dict[str, Any]:
    """The keys of a trial's own success rule (``success_term`` / ``success_fn``) in what the runner hands over."""
    return {k: v for k, v in (rule or {}).items() if k in ("success_term", "success_fn")}


def _launch_kit_if_needed(physics_preset: str, device: str) -> None:
    """Start Kit headless once per process, before any Isaac Lab task module is imported."""
    global _APP
    if _APP is not None or not needs_kit(physics_preset):
        return
    check_preset(physics_preset)
    if "isaaclab_tasks" in sys.modules:  # a kit-less trial imported them, and Kit must start first
        raise ConfigError("backend_options.physics_preset: physx after newton_mjwarp in one process; use separate runs")
    from isaaclab.app import AppLauncher

    _APP = AppLauncher(headless=True, device=device).app


def build_env(
    task: str, num_envs: int, seed: int, device: str, knobs: dict, panel: bool = False, rule: dict | None = None
) -> IsaacLabEnv:
    """Resolve the task's configs, apply the overrides, build and wrap the env (the only place building Isaac Lab);
    the process's one scene, judged by ``rule`` (``success_term`` / ``success_fn``; none: the default). The built
    scene must run the physics preset asked for.

    Isaac Lab and Kit end the process on some failures (``SystemExit``); that becomes an error naming the step, so
    the trial ends ``failed`` with its seconds billed and the worker lives on.
    """
    global _SCENE
    if _SCENE is not None:
        raise ConfigError(
            f"make_env {task}: this process already hosts an Isaac Lab scene (one simulation per process); close it "
            "first (the held-out panel runs in its own process: make_eval_env)"
        )
    check_installed()
    use_asset_root(knobs.get("asset_root"))
    preset = knobs.get("physics_preset", DEFAULT_PRESET)
    try:
        _launch_kit_if_needed(preset, device)
        import gymnasium as gym
        from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

        env_cfg, agent_cfg, success = load_task(task, overrides(num_envs, None, seed, knobs), knobs, rule or {})
        env_cfg.seed, env_cfg.sim.device = seed, device
        wrapper = RslRlVecEnvWrapper(gym.make(task, cfg=env_cfg), clip_actions=getattr(agent_cfg, "clip_actions", None))
    except SystemExit as exc:
        raise RuntimeError(f"Isaac Lab exited (SystemExit {exc.code}) while building {task} with {preset}") from None
    sim = wrapper.unwrapped.sim
    manager = sim.physics_manager
    try:
        physics = check_built_physics(
            preset, type(sim.cfg.physics).__name__, getattr(manager, "__name__", type(manager).__name__)
        )
    except RuntimeError:
        wrapper.close()
        raise
    try:
        _SCENE = IsaacLabEnv(wrapper, env_cfg, physics, panel=panel, success=success)
    except BaseException:
        wrapper.close()
        raise
    return _SCENE
