"""Run configuration: a search-space YAML + command-line overrides -> one frozen dataclass, types checked.

The dataclasses are OmegaConf's structured schema: OmegaConf merges the layers and checks keys and types, and
:func:`sweep.validation.validate` checks values, both before the first simulator second; every error names the
file (or the command line) and the key and says what to do. A space file may hold ``when_gpu:`` and ``when_cpu:``
blocks merged over its top level depending on the machine, so one file gives sensible defaults on both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import BooleanNode, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from sweep.errors import ConfigError

#: Where ``space=<name>`` is looked up (besides a path to a file).
SPACES_DIR = Path(__file__).resolve().parent / "spaces"  # shipped inside the package (package data)

T = TypeVar("T")


@dataclass(frozen=True)
class Knobs:
    """What the planner may choose; each value is a list of choices (one element: fixed)."""

    num_envs: list[int] = field(default_factory=lambda: [4096])
    """Parallel environments."""
    num_steps_per_env: list[int] = field(default_factory=lambda: [24])
    """Rollout horizon in control steps per env per PPO iteration."""
    num_mini_batches: list[int] = field(default_factory=lambda: [4])
    """PPO mini-batches per epoch."""
    flags: dict[str, list[Any]] = field(default_factory=dict)
    """Performance flags: name -> choices (see sweep.perf.CATALOG); absent flags keep their defaults."""


@dataclass(frozen=True)
class Target:
    """What 'trained' means."""

    success: float = 0.9
    """Held-out success rate that a trial must reach."""
    eval_episodes: int = 256
    """Held-out episodes per evaluation."""
    eval_every_steps: int = 240
    """Control steps per env between evaluations."""
    eval_gate: float = 0.0
    """A checkpoint's held-out pass is skipped while the training-side signal ``eval_gate_signal`` is below this (0:
    a pass at every checkpoint). A pass always runs at the cap. Calibrate it per task from a ledger's signal beside
    its held-out passes (the space file says what was measured)."""
    eval_gate_signal: str = "train_success"
    """Which training-side signal ``eval_gate`` reads: ``train_success`` (the success share of the training episodes
    that ended since the last checkpoint) or ``on_track`` (of the training envs under way, the share that would
    succeed if they ended now; an env that does not give it runs every pass; see README)."""


@dataclass(frozen=True)
class Budget:
    """Money limits; the study budget counts every trial, pruned and failed included."""

    usd: float = 5.0
    """Study budget (USD)."""
    trial_usd: float = 0.5
    """Per-trial cap (USD); a trial that has not reached the target by then ends 'capped'."""
    max_trials: int = 100
    """Upper bound on trials, whatever the budget."""


@dataclass(frozen=True)
class PriceChoice:
    """How seconds become dollars."""

    gpu: str = "auto"
    """Row of sweep/prices.yaml ('h200', 'h100', 'a100', 'l40s', 'cpu') or 'auto' (detect)."""
    kind: str = "on_demand"
    """'on_demand' or 'spot'."""
    usd_per_hour: float | None = None
    """Explicit price per device-hour; overrides the table."""


@dataclass(frozen=True)
class Workers:
    """Where trials run."""

    address: str | None = None
    """None: start a local Ray (bound to 127.0.0.1); 'auto' or 'host:port': join an existing cluster."""
    num: int = 0
    """Worker actors (0: one per GPU, or one per ``cpus_per_trial`` CPUs without GPUs)."""
    cpus_per_trial: int = 2
    """CPU cores per trial on a CPU-only cluster (XLA uses them all)."""
    host: str = "127.0.0.1"
    """Interface a local Ray binds to; change it only on a trusted network."""
    dashboard: bool = False
    """Start Ray's dashboard (on ``host``)."""


@dataclass(frozen=True)
class Constraints:
    """Configs the planner never runs (told to the sampler as infeasible)."""

    max_update_period_s: float = 1.0
    """Largest simulated time between policy updates: horizon x control period (s)."""
    memory_share: float = 0.9
    """Largest share of device memory a config may be estimated to use."""


@dataclass(frozen=True)
class Seeds:
    """Randomness of the search itself."""

    sampler: int = 0
    """Optuna sampler seed."""
    training: int = 1
    """Training seed of trial 0; trial k trains with ``training + k``."""


@dataclass(frozen=True)
class Baseline:
    """The config a recommendation is compared with (e.g. legged_gym's 4096 x 24 with stock rsl-rl). It need not lie
    in the space. A base knob left null takes the space's value where the space fixes one (a single choice); a flag
    left out takes the space's value where the space fixes one, else rsl-rl's behaviour (the catalog default)."""

    num_envs: int | None = None
    num_steps_per_env: int | None = None
    num_mini_batches: int | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    """Performance flags by name (see sweep.perf.CATALOG)."""


@dataclass(frozen=True)
class Confirm:
    """The confirmation phase: after the search, its best configs and the baseline run on further training seeds,
    raced, and the recommendation is the config with the lowest mean cost to target over its seeds."""

    seeds: int = 1
    """Seeds per finalist, its search seed included; 1: no confirmation (the recommendation is the search's cheapest
    trial). The shipped spaces ask for more."""
    top: int = 2
    """Candidates confirmed besides the baseline: the search's best configs."""
    budget_share: float = 0.3
    """Share of ``budget.usd`` kept for confirmation: the search starts no trial that would commit more than the
    rest (0-1; what the search leaves unspent goes to confirmation too)."""
    race_factor: float = 1.5
    """A candidate with at least 2 seeds whose mean cost exceeds this times the leader's gets no more seeds."""
    baseline: Baseline = field(default_factory=Baseline)
    """The config the recommendation is compared with; it always gets its seeds."""

    @property
    def enabled(self) -> bool:
        return self.seeds > 1


@dataclass(frozen=True)
class RunConfig:
    """Everything ``python -m sweep.run`` needs."""

    space: str = "locomotion"
    """Search-space name (sweep/spaces/<name>.yaml) or path."""
    backend: str = "mjx_locomotion"
    profile: str = "auto"
    """Task profile; 'auto' picks 'gpu' with a GPU, 'cpu' without."""
    device: str = "auto"
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. ``table`` and ``time_scale`` of the replay backend)."""
    knobs: Knobs = field(default_factory=Knobs)
    target: Target = field(default_factory=Target)
    budget: Budget = field(default_factory=Budget)
    price: PriceChoice = field(default_factory=PriceChoice)
    workers: Workers = field(default_factory=Workers)
    constraints: Constraints = field(default_factory=Constraints)
    seeds: Seeds = field(default_factory=Seeds)
    confirm: Confirm = field(default_factory=Confirm)
    sampler: str = "cost"
    """'tpe' (Optuna TPE with constraints), 'cost' (:mod:`sweep.acquisition`: expected improvement per dollar
    from every trial's cost or partial curve), 'random' or 'grid'."""
    prune: bool = True
    """Stop trials that cannot beat the best known cost to target."""
    race_slack: float = 1.5
    """With ``prune``, a search trial is capped and pruned at this many times the leader's mean cost to target on
    equal terms (>= 1); while each config has one seed, the best known cost, the luckiest seed so far. One seed's cost
    varies up to 2x at a fixed config: at 1 a lucky seed of a worse config caps the best config's trials short of the
    target (benchmarks/RESULTS.md 5e)."""
    intensify: int = 1
    """Search trials a config runs, each on a new training seed, once it leads the search (the lowest mean cost to
    target on equal terms) before the search tries further configs (>= 1; 1: every config once). The race bar is
    then the leader's mean cost, not one lucky seed's (benchmarks/RESULTS.md 5f)."""
    checkpoints: str = "all"
    """Checkpoints kept in trials/NNNN/ when trials end: 'all' (every trial's latest, as before) or 'reached'
    (only trials that reached the target). A reached trial's checkpoint is never deleted."""
    initial: list[Any] = field(default_factory=list)
    """Configs tried first (e.g. legged_gym's 4096 x 24), each a mapping of knob values (checked by validate)."""
    out: str = "reports"
    """Folder under which reports/<run_id>/ is written."""
    run_id: str = ""
    """Name of the run folder (default: a timestamp)."""
    resume: str = ""
    """A previous run folder to continue (same study, same ledger, budget already spent)."""


def find_space(name: str) -> Path:
    """A space name or path -> the YAML file; an unknown one lists the shipped spaces."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or os.sep in name:
        if not as_path.is_file():
            raise ConfigError(f"space={name}: file not found")
        return as_path
    path = SPACES_DIR / f"{name}.yaml"
    if not path.is_file():
        shipped = sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))
        raise ConfigError(f"space={name}: no such search space; shipped: {', '.join(shipped)} (or give a .yaml path)")
    return path


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping; syntax errors name the file and line."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: YAML syntax error ({getattr(exc, 'problem', exc)}); fix the file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    return data


def compose(data: dict[str, Any], overrides: dict[str, Any], source: str, has_gpu: bool) -> RunConfig:
    """A space file's mapping, its ``when_gpu``/``when_cpu`` block for this machine, then the command line's
    dotted ``overrides``, merged in that order and type-checked (:func:`sweep.validation.validate` checks values)."""
    if any(key.split(".")[0] in ("when_gpu", "when_cpu") for key in overrides):
        raise ConfigError("when_gpu/when_cpu: set those in the space file; on the command line set the key itself")
    data = dict(data)
    blocks = {name: data.pop(name, None) or {} for name in ("when_gpu", "when_cpu")}
    name = "when_gpu" if has_gpu else "when_cpu"
    if not isinstance(blocks[name], dict):
        raise ConfigError(f"{source}: {name}: expected a mapping of keys, got {blocks[name]!r}")
    return structured(RunConfig, [(data, source), (blocks[name], source), (nested(overrides), "command line")])


def structured(schema: type[T], layers: list[tuple[Any, str]]) -> T:
    """An instance of dataclass ``schema``: each ``(mapping, where)`` layer merged over its defaults in turn
    by OmegaConf, which checks keys and types; an error names ``where`` (a file, the command line) and the key."""
    conf = _writable(OmegaConf.structured(schema))
    where = ""
    try:
        for data, where in layers:
            conf = OmegaConf.merge(conf, _fit(conf, data, where))
        return OmegaConf.to_object(conf)
    except OmegaConfBaseException as exc:
        raise _error(exc, where) from None


def _writable(node: Any) -> Any:
    """``node`` and every config below it made writable: OmegaConf marks a frozen dataclass's config read-only,
    and 2.3 refuses to merge into it (2.4 copies); the result is frozen again by ``to_object``."""
    OmegaConf.set_readonly(node, False)
    for child in node.values() if OmegaConf.is_dict(node) else node:
        if OmegaConf.is_config(child):
            _writable(child)
    return node


def _error(exc: OmegaConfBaseException, where: str) -> ConfigError:
    """OmegaConf's error as one line that starts with ``where`` and names the dotted key."""
    if isinstance(exc, ConfigKeyError) and exc.parent_node is not None:  # struct mode: not a field
        valid = ", ".join(map(str, exc.parent_node.keys()))
        return ConfigError(f"{where}: unknown key '{exc.full_key}'; valid keys: {valid}")
    text = str(exc).splitlines()[0]
    return ConfigError(f"{where}: {exc.full_key}: {text}" if exc.full_key else f"{where}: {text}")


def _fit(schema: DictConfig, data: Any, where: str, key: str = "") -> dict[Any, Any]:
    """``data`` in the shape ``schema`` has, before OmegaConf checks types: a section must be a mapping, and a
    scalar given for a list becomes its one choice (``knobs.num_envs=256`` -> ``[256]``)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: {key}: expected a mapping of keys, got {data!r}")
    out = dict(data)
    for name, value in data.items():
        node = schema.get(name)
        switch = name in schema and isinstance(schema._get_node(name), BooleanNode)
        if switch and value is not None and not isinstance(value, bool):
            # OmegaConf would read 2 or -7 as true: only true and false mean a switch's state
            raise ConfigError(f"{where}: {key + '.' if key else ''}{name}: expected true or false, got {value!r}")
        if isinstance(node, ListConfig) and value is not None and not isinstance(value, list):
            out[name] = [value]
        elif isinstance(node, DictConfig):
            out[name] = _fit(node, value, where, f"{key}.{name}" if key else str(name))
    return out


def nested(overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted command-line keys as one nested mapping: ``{"budget.usd": 3}`` -> ``{"budget": {"usd": 3}}``."""
    conf = OmegaConf.create()
    for key, value in overrides.items():
        try:
            OmegaConf.update(conf, key, value)
        except OmegaConfBaseException as exc:
            raise _error(exc, "command line") from None
    return OmegaConf.to_container(conf)


def load(space: str, overrides: dict[str, Any], has_gpu: bool) -> RunConfig:
    """Read the space file and apply command-line overrides, types checked; nothing is run."""
    path = find_space(space)
    return replace(compose(read_yaml(path), overrides, str(path), has_gpu), space=str(path))
