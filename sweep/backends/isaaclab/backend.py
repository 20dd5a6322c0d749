"""Isaac Lab 3.0 backend: an Isaac Lab velocity task wrapped for rsl-rl 5.5.1 and sweep's trial contract.

A profile *is* an Isaac Lab 3.0 gym task id (``Isaac-Velocity-Flat-AnymalD``, ``IsaacContrib-Velocity-Flat-UnitreeA1``).
Physics is Newton with the MuJoCo-Warp solver by default: no Isaac Sim, no Kit; the built scene is checked to run the
preset asked for. Only :meth:`IsaacLab.make_env`, :meth:`IsaacLab.preflight` and :meth:`IsaacLab.agent_config` import
Isaac Lab (absent: a :class:`MissingExtraError` naming the install step). The knobs become Hydra override strings
(:mod:`sweep.backends.isaaclab.cfg`, also exported for Isaac Lab's trainer), applied to the configs that the task's
``env_cfg_entry_point`` / ``rsl_rl_cfg_entry_point`` name, then ``gym.make`` and ``RslRlVecEnvWrapper``.

A trial trains as the task's own trainer (``python -m isaaclab train``) would with the same override line: its rsl-rl
config is the task's registered agent config with the line applied, passed through Isaac Lab's
``handle_deprecated_rsl_rl_cfg`` and ``to_dict``; only the perf flags that are no field of it are added
(``rsl_rl_only``), and episode lengths start at random as the config's ``init_at_random_ep_len`` says. The trial folder
keeps ``params/agent.yaml`` and ``params/env.yaml`` as the trainer writes them.

The scene a process hosts (the task's configs, the built env, the asset root): :mod:`sweep.backends.isaaclab.scene`.
The held-out panel runs in a scene of its own in another process (:mod:`sweep.backends.isaaclab.evaluation`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import sweep.backends.isaaclab.scene as scene
from sweep.backends.base import Backend, Profile, TaskEnv, resolve_device
from sweep.backends.isaaclab.cfg import (
    DEFAULT_PRESET,
    KNOBS,
    RSL_RL_ONLY_NOTE,
    TASK_ID,
    TASKS,
    TRAIN_COMMAND,
    TRAIN_SCRIPT,
    check_knobs,
    check_physics,
    flag_settings,
    missing_assets,
    needs_kit,
    overrides,
    parse_override,
    renamed_task,
    split_agent_config,
    trial_knobs,
    trial_overrides,
    with_rsl_rl_only,
)
from sweep.backends.isaaclab.params import PARAMS_DIR, plain, read_params, write_params
from sweep.backends.isaaclab.success import (
    MAX_ERR_XY_MPS,
    MAX_ERR_YAW_RADPS,
)
from sweep.backends.isaaclab.tasks import (
    resolve_success,
    success_words,
    task_facts,
    tasks_modules,
)
from sweep.contract import success_rule
from sweep.errors import ConfigError


class IsaacLab(Backend):
    """Registry entry ``isaaclab``: Isaac Lab 3.0 tasks, Isaac Lab's own and a project's own, through
    ``RslRlVecEnvWrapper``."""

    name = "isaaclab"
    success_rule = (
        "no termination other than the time-out (no fall) and per-step mean velocity-command tracking errors below "
        f"the command's own success thresholds ({MAX_ERR_XY_MPS} m/s xy and {MAX_ERR_YAW_RADPS} rad/s yaw in Isaac Lab "
        "3.0's quadruped tasks), as Isaac Lab 3.0's success metric"
    )
    knobs = KNOBS
    success_keys = ("success_term", "success_fn")

    def profiles(self) -> dict[str, Profile]:
        """Isaac Lab 3.0 task ids; each is a velocity env: 20 s episodes at 50 Hz = 1000 control steps."""
        return {name: Profile(name, scene.EPISODE_STEPS, MAX_ERR_XY_MPS, text) for name, text in TASKS.items()}

    def check_profile(self, profile: str, key: str = "profile") -> None:
        """A 2.x id names its 3.0 id; any other id that reads like a task id (Isaac Lab's, or a project's own that
        ``backend_options.tasks_module`` registers) is checked against the registry by :meth:`preflight`."""
        new = renamed_task(profile, TASKS)
        if new is not None:
            raise ConfigError(f"{key}={profile}: an Isaac Lab 2.x task id; Isaac Lab 3.0 registers it as {new}")
        if not TASK_ID.fullmatch(profile):
            raise ConfigError(
                f"{key}: '{profile}' is not an Isaac Lab task id; e.g. {', '.join(TASKS)}, or your own project's"
            )

    def preflight(self, profile: str, options: dict[str, Any], success: dict[str, str] | None = None) -> None:
        """Before any compute: Isaac Lab importable, preset runnable, the task modules import, a registered task with
        an rsl-rl agent config, a success rule that applies to it (``success``: ``success_term`` / ``success_fn``;
        none: the velocity rule, for a task with a velocity command), every asset file present.

        Sets ``ISAACSIM_ASSET_ROOT`` for this process and the workers it starts. Missing assets are one line each.
        """
        self.check_installed()
        knobs = check_knobs({k: v for k, v in options.items() if k in KNOBS})
        scene.use_asset_root(knobs.get("asset_root"))
        scene.check_preset(knobs.get("physics_preset", DEFAULT_PRESET))
        if needs_kit(knobs.get("physics_preset", DEFAULT_PRESET)):
            return  # a task's config cannot be loaded before Kit starts, and Kit starts in the workers only
        env_cfg, _, _ = scene.load_task(profile, overrides(1, None, 0, knobs), knobs, success or {})
        root = knobs.get("asset_root")
        if root is not None:
            missing = missing_assets(scene.needed_assets(env_cfg), Path(os.environ[scene.ASSET_ROOT_ENV]))
            if missing:
                raise ConfigError(
                    f"backend_options.asset_root={root}: {len(missing)} file(s) the task {profile} loads are not "
                    f"there (missing: {', '.join(missing)}); put them under the root (same relative paths as Isaac "
                    "Lab's asset server)"
                )

    def starter_space(self, profile: str, options: dict[str, Any], success: dict[str, str] | None = None) -> str:
        """The starter space of ``profile`` (:mod:`sweep.backends.isaaclab.starter`) from its registered configs, the
        modules of ``options['tasks_module']`` imported first; a rule given (``success``) is checked against the task,
        none is left for the user to name where the task has no velocity command."""
        import gymnasium as gym

        from sweep.backends.isaaclab.starter import starter_space

        self.check_installed()
        knobs = check_knobs({k: v for k, v in options.items() if k in KNOBS})
        scene.use_asset_root(knobs.get("asset_root"))
        preset = knobs.get("physics_preset", DEFAULT_PRESET)
        modules = tasks_modules(knobs)
        task, env_cfg, agent_cfg = scene.task_configs(profile, [f"presets={preset}"], modules)
        check_physics(env_cfg, preset)
        spec = gym.spec(task)
        facts = task_facts(task, spec.entry_point, env_cfg)
        if success:
            resolve_success(facts, success)
        entries = (str(spec.kwargs["env_cfg_entry_point"]), str(spec.kwargs["rsl_rl_cfg_entry_point"]))
        mini_batches = int(agent_cfg.algorithm.num_mini_batches)
        horizon = int(agent_cfg.num_steps_per_env)
        return starter_space(
            facts, int(env_cfg.scene.num_envs), horizon, mini_batches, modules, dict(success or {}), entries
        )

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> scene.IsaacLabEnv:
        """The process's training scene; knobs from ``backend_options``. A second live scene in one process is an
        error (Isaac Lab hosts one simulation per process)."""
        self.check_profile(profile)
        options = dict(knobs)
        rule = options.pop("success", None)  # the task's own rule, when the trial names one (trial.runner.build)
        return scene.build_env(profile, num_envs, seed, device, check_knobs(options), rule=scene.rule_keys(rule))

    def make_eval_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> TaskEnv:
        """The held-out panel's scene of ``num_envs`` envs, in an evaluation process of its own (started, or kept
        from this worker's last trial); the training ``seed`` is not used: the scene is built from the panel's first
        seed, and every pass reseeds it with that seed."""
        from sweep.backends.isaaclab.evaluation import open_panel

        self.check_profile(profile)
        options = dict(knobs)
        rule = options.pop("success", None)
        return open_panel(profile, num_envs, device, check_knobs(options), rule)

    def agent_config(self, cfg: Any, flags: dict[str, Any], trial_dir: Path | None = None) -> dict[str, Any]:
        """What rsl-rl gets in a trial of ``cfg``: the task's agent config built as Isaac Lab's trainer builds it with
        the trial's override line (:func:`scene.task_agent_config`), plus the ``rsl_rl_only`` settings of the perf
        ``flags``. ``trial_dir``: read the agent config its trial recorded (``params/agent.yaml``) where it did."""
        saved = None if trial_dir is None else Path(trial_dir) / PARAMS_DIR / "agent.yaml"
        if saved is not None and saved.is_file():
            agent = read_params(saved)
        else:
            scene.use_asset_root(trial_knobs(cfg).get("asset_root"))
            self.check_installed()
            lines, modules = trial_overrides(cfg, flags), tasks_modules(trial_knobs(cfg))
            agent = scene.task_agent_config(cfg.profile, lines, resolve_device(cfg.device), modules)
        return with_rsl_rl_only(agent, flag_settings(flags)[1])

    def record_configs(self, train_cfg: dict[str, Any], env: TaskEnv, folder: Path) -> None:
        """``params/agent.yaml`` (Isaac Lab's part of ``train_cfg``) and ``params/env.yaml`` (the scene's env config)
        in the trial ``folder``, written as Isaac Lab's trainer writes its own."""
        from isaaclab.utils import to_dict

        write_params(folder / PARAMS_DIR / "agent.yaml", split_agent_config(train_cfg)[0])
        write_params(folder / PARAMS_DIR / "env.yaml", to_dict(env.env_cfg))

    @staticmethod
    def check_installed() -> None:
        """Isaac Lab's packages must be importable; the error names the install step."""
        scene.check_installed()

    def control_dt_s(self, profile: str) -> float:
        """The task's own control period (``sim.dt`` x ``decimation``) once the preflight has read its config in this
        process; before that, the velocity tasks' 0.02 s."""
        facts = scene._FACTS.get(profile)
        return facts.control_dt_s if facts is not None else scene.CONTROL_DT_S

    def success_text(self, cfg: Any) -> str:
        """The rule a trial of ``cfg`` is judged by, in words: the task's own where the trial names one."""
        rule = success_rule(cfg)
        if not rule:
            return self.success_rule
        key, name = next(iter(rule.items()))
        return success_words("term" if key == "success_term" else "fn", name)

    def versions(self) -> dict[str, str]:
        """isaaclab / newton / isaacsim versions when importable, else ``{"isaaclab": "not installed"}``."""
        from importlib.metadata import distributions

        if scene._find_spec("isaaclab") is None:
            return {"isaaclab": "not installed"}
        found = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
        names = ("isaaclab", "newton", "mujoco-warp", "warp-lang", "isaacsim")
        return {name: found[name] for name in names if name in found}

    def export_section(self, cfg: Any, agent_cfg: dict[str, Any]) -> dict[str, Any]:
        """recommended.yaml's ``agent`` (Isaac Lab's agent config the trial trained with) and ``isaaclab`` section
        (task, override line, trainer command, the ``env`` overrides nested, ``rsl_rl_only`` with how it applies),
        from the trial's config and the rsl-rl ``agent_cfg`` it trained with (:meth:`agent_config`)."""
        from sweep import perf

        knobs = trial_knobs(cfg)
        agent, only = split_agent_config(agent_cfg)
        lines = trial_overrides(cfg, perf.resolve(cfg.flags))
        env: dict[str, Any] = {}  # exactly the env.* overrides, nested
        for root, path, value in map(parse_override, lines):
            if root == "env":
                functools.reduce(lambda node, name: node.setdefault(name, {}), path[:-1], env)[path[-1]] = value
        line = " ".join(lines)
        section = {"task": cfg.profile, "physics_preset": knobs.get("physics_preset", DEFAULT_PRESET), "override": line}
        modules = tasks_modules(knobs)
        # a task that tasks_module registers trains with the project's own script, which imports the module first
        section["command"] = f"{f'python {TRAIN_SCRIPT}' if modules else TRAIN_COMMAND} --task {cfg.profile} {line}"
        if modules:
            section["tasks_module"] = list(modules)
            section["trainer"] = (
                f"{TRAIN_SCRIPT}: your project's trainer, which imports {', '.join(modules)} and then trains as "
                "Isaac Lab's rsl-rl trainer does; with your project installed (its isaaclab.tasks entry point) the "
                f"same line runs in {TRAIN_COMMAND}"
            )
        rule = success_rule(cfg)
        section["success"] = {"rule": self.success_text(cfg)}
        section["success"]["source"] = (
            " ".join(f"target.{key}={value}" for key, value in rule.items())
            if rule
            else "the default: the task's velocity command (base_velocity) and its success thresholds"
        )
        if knobs.get("asset_root"):
            section["asset_root"] = knobs["asset_root"]  # ISAACSIM_ASSET_ROOT for the trainer, as the trials had
        rsl_rl_only = {"how": RSL_RL_ONLY_NOTE, **plain(only), "perf_flags": perf.resolve(cfg.flags)}
        agent = plain(agent)
        return {"agent": agent, "isaaclab": {**section, "agent": agent, "env": env, "rsl_rl_only": rsl_rl_only}}

    def trainer_command(self, doc: dict[str, Any]) -> str | None:
        """The ``command`` of ``recommended.yaml``'s ``isaaclab`` section: Isaac Lab's trainer on the task with the
        recommended config's override line (:meth:`export_section`)."""
        section = doc.get("isaaclab")
        command = section.get("command") if isinstance(section, dict) else None
        return str(command) if command else None
