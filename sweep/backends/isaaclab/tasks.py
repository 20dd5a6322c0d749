"""Which tasks exist and what a task is: the modules that register users' own tasks, what a task's config says (its
control period, episode length, velocity command and termination terms), and the success rule it is judged by.

Isaac Lab 3.0's trainer (``python -m isaaclab train``) registers ``isaaclab_tasks`` and the task packages of installed
projects (the ``isaaclab.tasks`` entry points that its project template declares); a project's own trainer script
imports its package itself. A trial registers the same, plus the modules of ``backend_options.tasks_module``, in
every process that loads a task: the driver's preflight, the trial's and the held-out panel's.

A task's own success rule (``target.success_term``, ``target.success_fn``) is checked here, before any trial: the
term must be one of the task's termination terms, the function must import and take ``(env, ended)``. Without one,
the task must have a velocity command, which the default rule reads (:mod:`sweep.backends.isaaclab.success`).
Importing this module imports no Isaac Lab.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sweep.errors import ConfigError

#: The entry-point group through which installed projects register their Isaac Lab tasks (Isaac Lab 3.0's template
#: writes it into the project's ``pyproject.toml``; its trainer loads every one).
ENTRY_POINTS = "isaaclab.tasks"
#: The command term the default success rule reads when a task has several velocity commands.
VELOCITY_COMMAND = "base_velocity"
#: Isaac Lab 3.0's velocity-command success thresholds (``UniformVelocityCommandCfg``'s defaults), m/s and rad/s.
DEFAULT_THRESHOLDS = (0.5, 0.4)
#: Gym's entry point of the manager-based workflow; any other is a direct-workflow env class.
MANAGER_BASED = "isaaclab.envs:ManagerBasedRLEnv"

_OWN: dict[str, tuple[str, ...]] = {}  # module -> the ids it registered, recorded at its first import here
_ENTRY_POINTS_LOADED = False


def tasks_modules(knobs: dict[str, Any]) -> tuple[str, ...]:
    """``backend_options.tasks_module`` as a tuple of module names (a name or a list of them; none: ``()``)."""
    value = knobs.get("tasks_module")
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _load_entry_points() -> None:
    """Import the task packages that installed projects declare, as Isaac Lab's trainer does."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        try:
            entry.load()
        except Exception as exc:  # Isaac Lab's trainer would stop on it too
            raise ConfigError(
                f"the installed Isaac Lab task package {entry.value} (entry point '{entry.name}' of {ENTRY_POINTS}) "
                f"does not import ({_first_line(exc)}); fix or uninstall that project"
            ) from None
    _ENTRY_POINTS_LOADED = True


def import_tasks(modules: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Register every task a trial may name: Isaac Lab's, installed projects', and those the ``modules`` register;
    returns each module's ids. A module that does not import is one line naming ``backend_options.tasks_module``."""
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers Isaac Lab's own tasks)

    _load_entry_points()
    for module in modules:
        if module in _OWN:
            continue
        before = set(gym.registry)
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or whatever the project's own code raised while registering
            raise ConfigError(
                f"backend_options.tasks_module={module}: does not import ({_first_line(exc)}); make it importable "
                "where sweep runs (pip install -e <your project>, or PYTHONPATH)"
            ) from None
        mine = {
            name
            for name, spec in gym.registry.items()
            if any(str(v).startswith(f"{module}.") for v in (spec.entry_point, *spec.kwargs.values()))
        }
        _OWN[module] = tuple(sorted(mine | (set(gym.registry) - before)))
    return {module: _OWN[module] for module in modules}


@dataclass(frozen=True)
class TaskFacts:
    """What a task's registered config says, read before anything is built."""

    task: str
    workflow: str
    """``manager-based`` (``ManagerBasedRLEnv`` with a config) or ``direct`` (a ``DirectRLEnv`` subclass)."""
    control_dt_s: float
    """Seconds per control step: the physics step (``sim.dt``) times ``decimation``."""
    episode_steps: int
    """Control steps of a full episode (``episode_length_s``, rounded up as Isaac Lab does)."""
    velocity_command: str | None
    """The command term the default success rule reads (a ``UniformVelocityCommandCfg``); None: none."""
    thresholds: tuple[float, float]
    """Its success thresholds on the episode's mean errors: xy (m/s), yaw (rad/s)."""
    terminations: tuple[str, ...]
    """The termination terms of a manager-based task (``TerminationsCfg``); a direct task names none."""


def _items(node: Any) -> list[tuple[str, Any]]:
    """The set fields of a config node (a configclass), in order."""
    if node is None or not dataclasses.is_dataclass(node):
        return []
    return [(f.name, getattr(node, f.name, None)) for f in dataclasses.fields(node) if getattr(node, f.name, None)]


def task_facts(task: str, entry_point: str, env_cfg: Any) -> TaskFacts:
    """The :class:`TaskFacts` of ``task`` from its gym ``entry_point`` and its env config (presets resolved)."""
    from isaaclab.envs.mdp import UniformVelocityCommandCfg

    dt = float(env_cfg.sim.dt) * int(env_cfg.decimation)
    manager = str(entry_point) == MANAGER_BASED
    commands = [(name, c) for name, c in _items(getattr(env_cfg, "commands", None))]
    velocity = [(name, c) for name, c in commands if isinstance(c, UniformVelocityCommandCfg)]
    velocity.sort(key=lambda item: item[0] != VELOCITY_COMMAND)  # base_velocity first, as Isaac Lab names it
    thresholds = DEFAULT_THRESHOLDS
    if velocity:
        cmd = velocity[0][1]
        thresholds = (float(cmd.vel_xy_success_threshold), float(cmd.vel_yaw_success_threshold))
    return TaskFacts(
        task=task,
        workflow="manager-based" if manager else "direct",
        control_dt_s=dt,
        episode_steps=math.ceil(float(env_cfg.episode_length_s) / dt),
        velocity_command=velocity[0][0] if velocity else None,
        thresholds=thresholds,
        terminations=tuple(name for name, _ in _items(getattr(env_cfg, "terminations", None))) if manager else (),
    )


@dataclass(frozen=True)
class SuccessSpec:
    """The success rule a task is judged by, resolved against the task: which, and in words."""

    kind: str
    """``velocity`` (the default), ``term`` (``target.success_term``) or ``fn`` (``target.success_fn``)."""
    name: str
    """The velocity command's name, the termination term's, or ``module:function``."""
    thresholds: tuple[float, float] = DEFAULT_THRESHOLDS

    @property
    def key(self) -> str:
        """The space's key that names it (the default rule: none)."""
        return {"term": "target.success_term", "fn": "target.success_fn"}.get(self.kind, "")

    @property
    def text(self) -> str:
        """The rule in words, for recommended.yaml and the report."""
        return success_words(self.kind, self.name, self.thresholds)


def success_words(kind: str, name: str, thresholds: tuple[float, float] = DEFAULT_THRESHOLDS) -> str:
    """A success rule in words (``kind``, ``name``: as :class:`SuccessSpec`)."""
    if kind == "term":
        return f"the episode ended by the task's termination term '{name}' (target.success_term)"
    if kind == "fn":
        return f"{name}(env, ended) was true for the episode at its last step (target.success_fn)"
    return (
        f"no termination other than the time-out (no fall) and per-step mean errors of the '{name}' velocity command "
        f"below {thresholds[0]:g} m/s (xy) and {thresholds[1]:g} rad/s (yaw), the command's own success thresholds"
    )


def resolve_success(facts: TaskFacts, rule: dict[str, Any]) -> SuccessSpec:
    """The rule ``rule`` (``success_term`` / ``success_fn``, or none: the default) of the task, checked against it;
    a rule that cannot apply is one line naming its key."""
    if "success_term" in rule:
        term = str(rule["success_term"])
        if facts.workflow != "manager-based":
            raise ConfigError(
                f"target.success_term={term}: {facts.task} is a direct-workflow task (a DirectRLEnv), whose "
                "terminations have no names; judge it with target.success_fn=module:function"
            )
        if term not in facts.terminations:
            raise ConfigError(
                f"target.success_term={term}: {facts.task} has no termination term '{term}'; its terms: "
                f"{', '.join(facts.terminations) or 'none'}"
            )
        return SuccessSpec("term", term)
    if "success_fn" in rule:
        load_success_fn(str(rule["success_fn"]))
        return SuccessSpec("fn", str(rule["success_fn"]))
    if facts.velocity_command is None:
        terms = f" (its terms: {', '.join(facts.terminations)})" if facts.terminations else ""
        how = (
            f"target.success_term=<termination term>{terms} or target.success_fn=module:function"
            if facts.workflow == "manager-based"
            else "target.success_fn=module:function (a direct-workflow task)"
        )
        raise ConfigError(
            f"profile={facts.task}: the task has no velocity command ({VELOCITY_COMMAND}), which the default success "
            f"rule reads; name its own rule: {how}"
        )
    return SuccessSpec("velocity", facts.velocity_command, facts.thresholds)


def load_success_fn(spec: str) -> Callable[..., Any]:
    """The function ``module:function`` names, importable and callable as ``function(env, ended)``; else one line
    naming ``target.success_fn``."""
    key = f"target.success_fn={spec}"
    module_name, _, path = spec.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"{key}: module {module_name} does not import ({_first_line(exc)}); make it importable where sweep runs"
        ) from None
    for part in path.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"{key}: {module_name} has no '{path}'")
        found = getattr(found, part)
    if not callable(found):
        raise ConfigError(f"{key}: '{path}' is a {type(found).__name__}, not a function")
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise ConfigError(
            f"{key}: it is {path}{inspect.signature(found)}; a success function takes (env, ended) and returns a "
            "bool tensor, True where an ended episode succeeded"
        ) from None
    except ValueError:  # no signature to read (a builtin): it is called and its answer checked at each step
        pass
    return found
