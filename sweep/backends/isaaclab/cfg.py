"""Isaac Lab 3.0 configuration without a simulator: knobs -> Hydra overrides, task ids, the assets a task needs.

Nothing here imports Isaac Lab; :mod:`sweep.backends.isaaclab.backend` hands the config objects in. The same override
lines configure sweep's trials and Isaac Lab's own trainer (``python -m isaaclab train --rl_library rsl_rl ...``), so a
recommendation replays there unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from sweep.errors import ConfigError

#: Physics presets sweep runs: Newton with the MuJoCo-Warp solver (kit-less, Isaac Lab 3.0's default for the
#: velocity tasks) or PhysX (needs Isaac Sim and its Kit app).
PHYSICS_PRESETS = ("newton_mjwarp", "physx")
DEFAULT_PRESET = "newton_mjwarp"
#: ``backend_options`` keys of the Isaac Lab backend (fixed for a run, never swept).
KNOBS = ("physics_preset", "gpu_max_num_partitions", "newton_cuda_graph", "asset_root", "env", "tasks_module")
#: Velocity tasks of Isaac Lab 3.0.0 with the ANYmal-D robot, and what each is.
_RULE = "success: no fall, mean xy error < 0.5 m/s and yaw error < 0.4 rad/s"
TASKS = {
    "Isaac-Velocity-Flat-AnymalD": f"ANYmal D, flat plane, velocity + heading commands, pushes, {_RULE}",
    "Isaac-Velocity-Rough-AnymalD": f"ANYmal D, rough terrain with curriculum, same commands, {_RULE}",
}
#: How Isaac Lab 3.0's task ids begin: its core tasks and those of its contrib package (A1, ANYmal-C, Spot, ...).
TASK_PREFIXES = ("Isaac-", "IsaacContrib-")
#: The train command of Isaac Lab 3.0's wheel (it ships no scripts/ folder); overrides follow it. It registers Isaac
#: Lab's tasks and those of installed projects (their ``isaaclab.tasks`` entry points).
TRAIN_COMMAND = "python -m isaaclab train --rl_library rsl_rl"
#: A project's own trainer script, which imports its task package before it trains (the path Isaac Lab's project
#: template gave it): the command of a task that ``backend_options.tasks_module`` registers.
TRAIN_SCRIPT = "scripts/rsl_rl/train.py"
#: A dotted module name (``backend_options.tasks_module``).
MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

#: Fields declared by isaaclab_rl.rsl_rl's runner and PPO config classes (rl_cfg.py): a perf flag acting through one
#: of them is an ``agent.`` override; any other setting of a trial is ``rsl_rl_only``.
RUNNER_FIELDS = frozenset(
    "class_name seed device num_steps_per_env init_at_random_ep_len max_iterations empirical_normalization "  # noqa: SIM905
    "obs_groups clip_actions check_for_nan save_interval experiment_name run_name logger neptune_project "
    "wandb_project resume load_run load_checkpoint actor critic algorithm torch_compile_mode policy".split()
)
ALGORITHM_FIELDS = frozenset(
    "class_name num_learning_epochs num_mini_batches learning_rate schedule gamma lam entropy_coef desired_kl "  # noqa: SIM905
    "max_grad_norm optimizer value_loss_coef use_clipped_value_loss clip_param normalize_advantage_per_mini_batch "
    "share_cnn_encoders use_mixed_precision rnd_cfg symmetry_cfg".split()
)
#: How the ``rsl_rl_only`` settings reach a trial, written beside them in recommended.yaml.
RSL_RL_ONLY_NOTE = (
    "sweep's own training loop applies these on top of `agent` (sweep.perf: its PPO subclass with these flags, and "
    "the loop's own switches); they are not fields of Isaac Lab's agent config, so Isaac Lab's trainer, given the "
    "override line, trains with rsl-rl's PPO as `agent` says and none of these (it also turns TF32 on for its run)"
)


def check_knobs(knobs: dict[str, Any]) -> dict[str, Any]:
    """Validate the Isaac-only options (absent ones keep their defaults); errors name the key."""
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise ConfigError(f"backend_options: unknown Isaac Lab option(s) {unknown}; valid: {', '.join(KNOBS)}")
    preset = knobs.get("physics_preset", DEFAULT_PRESET)
    if preset not in PHYSICS_PRESETS:
        raise ConfigError(f"backend_options.physics_preset: must be one of {list(PHYSICS_PRESETS)} (got {preset!r})")
    parts, graph = knobs.get("gpu_max_num_partitions"), knobs.get("newton_cuda_graph")
    if parts is not None and (preset != "physx" or isinstance(parts, bool) or parts not in (1, 2, 4, 8, 16, 32)):
        raise ConfigError(f"backend_options.gpu_max_num_partitions={parts!r}: PhysX only, a power of 2 in [1, 32]")
    if graph is not None and (preset != "newton_mjwarp" or not isinstance(graph, bool)):
        raise ConfigError(f"backend_options.newton_cuda_graph={graph!r}: true or false, with newton_mjwarp only")
    root = knobs.get("asset_root")
    if root is not None and (not isinstance(root, str) or not root):
        raise ConfigError(f"backend_options.asset_root={root!r}: a folder path, or null for Isaac Lab's downloads")
    env = knobs.get("env")
    if env is not None and not isinstance(env, dict):
        raise ConfigError(f"backend_options.env={env!r}: a mapping of task settings, e.g. {{episode_length_s: 10}}")
    modules = knobs.get("tasks_module")
    listed = [modules] if isinstance(modules, str) else modules
    if modules is not None and not (
        isinstance(listed, list) and listed and all(isinstance(m, str) and MODULE.fullmatch(m) for m in listed)
    ):
        raise ConfigError(
            f"backend_options.tasks_module={modules!r}: the module that registers your tasks (e.g. "
            "my_project.tasks), or a list of them"
        )
    return dict(knobs)


def needs_kit(physics_preset: str) -> bool:
    """Whether the task must run inside Kit: PhysX does (Isaac Sim); the Newton MJWarp preset runs kit-less."""
    return physics_preset != "newton_mjwarp"


def _flatten(tree: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def overrides(
    num_envs: int,
    num_steps_per_env: int | None,
    seed: int,
    knobs: dict[str, Any],
    agent: dict[str, Any] | None = None,
    **ppo: int,
) -> list[str]:
    """Hydra overrides (``presets=``, ``env.*``, ``agent.*``) for Isaac Lab 3.0's trainer; ``None`` is omitted.

    ``ppo``: ``num_mini_batches`` / ``num_learning_epochs`` (``agent.algorithm.*``). ``agent``: further fields of
    the agent config by dotted path (what the perf flags set, :func:`flag_settings`). The preset comes first: it
    replaces a whole config section before scalars land in it. ``knobs["env"]`` (nested task settings, e.g.
    ``{sim: {physics: {solver_cfg: {njmax: 200}}}}``) become ``env.*`` lines after sweep's own.
    """
    knobs = check_knobs(knobs)
    values = {
        "env.scene.num_envs": num_envs,
        "env.sim.physics.gpu_max_num_partitions": knobs.get("gpu_max_num_partitions"),
        "env.sim.physics.use_cuda_graph": knobs.get("newton_cuda_graph"),
        **dict(_flatten(knobs.get("env") or {}, "env.")),
        "agent.num_steps_per_env": num_steps_per_env,
        **{f"agent.algorithm.{name}": value for name, value in ppo.items()},
        **{f"agent.{path}": value for path, value in (agent or {}).items()},
        "agent.seed": seed,
    }
    head = [f"presets={knobs.get('physics_preset', DEFAULT_PRESET)}"]
    return head + [f"{key}={_hydra(value)}" for key, value in values.items() if value is not None]


def trial_knobs(cfg: Any) -> dict[str, Any]:
    """The Isaac Lab options of a trial config (``backend_options`` keys of :data:`KNOBS`), checked."""
    return check_knobs({k: v for k, v in cfg.backend_options.items() if k in KNOBS})


def trial_overrides(cfg: Any, flags: dict[str, Any]) -> list[str]:
    """Every override a trial of ``cfg`` (a TrialConfig) sets, for its training scene and its agent config alike:
    the swept knobs, the seed, the task settings and the agent fields that the resolved perf ``flags`` set. The
    exported line is this list, so Isaac Lab's trainer applies exactly what the trial applied."""
    fields, _ = flag_settings(flags)
    ppo = {"num_mini_batches": cfg.num_mini_batches, "num_learning_epochs": cfg.num_learning_epochs}
    return overrides(cfg.num_envs, cfg.num_steps_per_env, cfg.seed, trial_knobs(cfg), agent=fields, **ppo)


def _dotted(agent: dict[str, Any]) -> dict[str, Any]:
    """An agent config's top-level keys and its ``algorithm``'s as dotted paths (``algorithm.gamma``)."""
    out = {key: value for key, value in agent.items() if key != "algorithm"}
    out.update({f"algorithm.{key}": value for key, value in agent.get("algorithm", {}).items()})
    return out


def flag_settings(flags: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the resolved perf ``flags`` change in an rsl-rl agent config, by dotted path, split in two: (fields of
    Isaac Lab's config, set as ``agent.`` overrides; the rest, ``rsl_rl_only``). A flag at its default changes
    nothing, so the task's own value stands. The one mapping of flags to config keys is
    :func:`sweep.perf.apply_to_agent_config`; this reads what it writes."""
    from sweep import perf

    def written(resolved: dict[str, Any]) -> dict[str, Any]:
        probe: dict[str, Any] = {"algorithm": {}}
        perf.apply_to_agent_config(probe, resolved)
        return _dotted(probe)

    default = written(perf.resolve({}))
    changed = {k: v for k, v in written(flags).items() if k not in default or default[k] != v}
    fields: dict[str, Any] = {}
    only: dict[str, Any] = {}
    for path, value in changed.items():
        head, _, leaf = path.partition(".")
        # the PPO class is a field, but sweep's subclass is no value Isaac Lab's trainer is meant to build
        declared = (leaf in ALGORITHM_FIELDS and leaf != "class_name") if leaf else head in RUNNER_FIELDS
        (fields if declared else only)[path] = value
    return fields, only


def with_rsl_rl_only(agent: dict[str, Any], only: dict[str, Any]) -> dict[str, Any]:
    """A copy of Isaac Lab's agent config (``to_dict``'s dict) with the ``rsl_rl_only`` settings applied: what
    sweep's own loop hands rsl-rl."""
    import copy

    out = copy.deepcopy(agent)
    for path, value in only.items():
        head, _, leaf = path.partition(".")
        if leaf:
            out[head][leaf] = copy.deepcopy(value)
        else:
            out[head] = copy.deepcopy(value)
    return out


def _hydra(value: Any) -> str:
    """A value as Hydra reads it back (true/false, numbers, plain strings)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_override(line: str) -> tuple[str, tuple[str, ...], Any]:
    """``"env.scene.num_envs=4096"`` -> ``("env", ("scene", "num_envs"), 4096)``; ``presets=a,b`` -> the names."""
    key, sep, raw = line.partition("=")
    root, *path = key.split(".")
    if key == "presets" and sep:
        return "presets", (), tuple(raw.split(","))
    if not sep or root not in ("env", "agent") or not path:
        raise ConfigError(f"override '{line}': expected env.<path>=value, agent.<path>=value or presets=<names>")
    return root, tuple(path), yaml.safe_load(raw)  # Hydra's scalars read as YAML's: 4096, 0.5, true, null, text


def apply_overrides(env_cfg: Any, agent_cfg: Any, lines: Iterable[str], resolve: Callable) -> None:
    """Apply override strings to Isaac Lab config objects in place: presets first, then each scalar.

    ``resolve`` is ``isaaclab_tasks.utils.resolve_presets``; it runs even with no preset selected, because a 3.0
    config keeps its ``PresetCfg`` nodes until they are resolved to their defaults.
    """
    roots = {"env": env_cfg, "agent": agent_cfg}
    parsed = [(line, *parse_override(line)) for line in lines]
    selected = {name for _, root, _, names in parsed if root == "presets" for name in names}
    for cfg in roots.values():
        resolve(cfg, selected)
    for line, root, path, value in parsed:
        if root == "presets":
            continue
        node = roots[root]
        for i, name in enumerate(path):
            is_dict = isinstance(node, dict)
            if not (name in node if is_dict else hasattr(node, name)):
                where = "backend_options.env" if root == "env" else "the knobs"
                raise ConfigError(f"override {line}: {type(node).__name__} has no '{name}'; fix {where}")
            if i < len(path) - 1:
                node = node[name] if is_dict else getattr(node, name)
            elif is_dict:
                node[name] = value
            else:
                setattr(node, name, value)


def check_physics(env_cfg: Any, physics_preset: str) -> None:
    """Refuse to run a physics backend other than the one asked for (a task without that preset)."""
    physics = type(getattr(env_cfg.sim, "physics", None)).__name__
    if ("newton" if physics_preset == "newton_mjwarp" else "physx") not in physics.lower():
        raise ConfigError(f"backend_options.physics_preset={physics_preset}: the task has {physics}")


def check_built_physics(physics_preset: str, physics_cfg: str, manager: str) -> str:
    """The physics a built scene runs, ``"<config class>/<manager class>"``, if it is the preset asked for (a contrib
    flat task defaults to PhysX: only the preset's override makes it Newton); else an error naming both."""
    want = ("newton", "mjwarp") if physics_preset == "newton_mjwarp" else ("physx", "physx")
    built = f"{physics_cfg}/{manager}"
    if want[0] not in physics_cfg.lower() or want[1] not in manager.lower():
        raise RuntimeError(f"backend_options.physics_preset={physics_preset}: the built scene runs {built}")
    return built


def velocity_tasks(registered: Iterable[str]) -> list[str]:
    """The registered velocity task ids, core and contrib."""
    return sorted(n for n in set(registered) if n.startswith(TASK_PREFIXES) and "-Velocity-" in n)


def _squash(task: str) -> str:
    return re.sub(r"[^a-z0-9]", "", task.lower().removesuffix("-v0"))


def renamed_task(task: str, known: Iterable[str]) -> str | None:
    """The Isaac Lab 3.0 id of a 2.x id (``Isaac-Velocity-Flat-Anymal-D-v0`` -> ``Isaac-Velocity-Flat-AnymalD``)."""
    matches = [name for name in known if name != task and _squash(name) == _squash(task)]
    return matches[0] if matches else None


def resolve_task_id(task: str, registered: Iterable[str], own: dict[str, tuple[str, ...]] | None = None) -> str:
    """``task`` if registered; a 2.x id is one line naming its 3.0 id; an unknown one lists the ids that the user's
    modules registered (``own``: module -> ids, from ``backend_options.tasks_module``), or without any, Isaac Lab's
    velocity tasks and the key that names a project's own."""
    names = sorted(set(registered))
    if task in names:
        return task
    new = renamed_task(task, names)
    if new is not None:
        raise ConfigError(f"profile={task}: an Isaac Lab 2.x task id; Isaac Lab 3.0 registers it as profile={new}")
    if own:
        listed = "; ".join(f"{module}: {', '.join(ids) or 'none'}" for module, ids in own.items())
        raise ConfigError(f"profile={task}: not a registered task; backend_options.tasks_module registered {listed}")
    raise ConfigError(
        f"profile={task}: not a registered Isaac Lab task; velocity tasks: {', '.join(velocity_tasks(names))} (your "
        "own project's task: name the module that registers it, backend_options.tasks_module=<module>)"
    )


#: What an Isaac Lab task id looks like (gym's ``Name-v0`` convention: a dash at least), checked before Isaac Lab
#: is imported; whether it is registered is the preflight's question.
TASK_ID = re.compile(r"[A-Za-z0-9_.:/]+-[A-Za-z0-9_.:/-]+")


#: Config fields that only rendering reads (materials, debug markers, lights): kit-less training loads none of them.
RENDER_ONLY = re.compile(r"visual|marker|light|texture")


def asset_paths(cfg: Any, prefix: str) -> list[str]:
    """Every string under ``cfg`` (configclass / dict / list tree) that starts with ``prefix``: the task's files.

    Subtrees under a field named like :data:`RENDER_ONLY` are skipped: nothing is rendered in training.
    """
    found: set[str] = set()
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if node.startswith(prefix):
                found.add(node)
            return
        if id(node) in seen or node is None or isinstance(node, (int, float, bool, type)):
            return
        seen.add(id(node))
        if isinstance(node, dict):
            children: Iterable[tuple[Any, Any]] = node.items()
        elif isinstance(node, (list, tuple, set)):
            children = ((None, child) for child in node)
        elif dataclasses.is_dataclass(node):
            children = ((f.name, getattr(node, f.name, None)) for f in dataclasses.fields(node))
        else:
            return
        for name, child in children:
            if not (isinstance(name, str) and RENDER_ONLY.search(name)):
                walk(child)

    walk(cfg)
    return sorted(found)


def missing_assets(paths: Iterable[str], root: Path) -> list[str]:
    """The paths (under ``root``) that are not files, as paths relative to ``root``."""
    return [str(Path(p).relative_to(root)) for p in paths if not Path(p).is_file()]


def split_agent_config(train_cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What sweep's loop handed rsl-rl -> (Isaac Lab's agent config, the ``rsl_rl_only`` settings by dotted path):
    the inverse of :func:`with_rsl_rl_only` (keys and their order as Isaac Lab's ``to_dict`` gave them)."""
    import copy

    agent = copy.deepcopy(train_cfg)
    only: dict[str, Any] = {}
    algorithm = agent.get("algorithm", {})
    for key in [k for k in algorithm if k not in ALGORITHM_FIELDS]:
        only[f"algorithm.{key}"] = algorithm.pop(key)
    if algorithm.get("class_name", "PPO") != "PPO":  # sweep's FastPPO; Isaac Lab's runner builds rsl-rl's PPO
        only["algorithm.class_name"] = algorithm["class_name"]
        algorithm["class_name"] = "PPO"
    for key in [k for k in agent if k not in RUNNER_FIELDS]:
        only[key] = agent.pop(key)
    return agent, only


def agent_device(device: str) -> str:
    """The device as Isaac Lab's agent config names it: ``cuda`` is ``cuda:0`` (a worker sees its GPU as index 0)."""
    return "cuda:0" if device == "cuda" else device
