"""Run configuration: a search-space YAML + command-line overrides -> one validated, frozen dataclass.

The dataclasses are OmegaConf's structured schema: OmegaConf merges the layers and checks keys and types,
:func:`validate` checks values, both before the first simulator second; every error names the file (or the
command line) and the key and says what to do. A space file may hold ``when_gpu:`` and ``when_cpu:`` blocks
merged over its top level depending on the machine, so one file gives sensible defaults on both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
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
    """A checkpoint's held-out pass is skipped while the success share of the training episodes since the last
    checkpoint is below this (0: a pass at every checkpoint). A pass always runs at the cap. Calibrate it per task
    from a ledger's ``train_success`` beside its held-out passes (the space file says what was measured)."""


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
    sampler: str = "tpe"
    """'tpe' (Optuna TPE with constraints), 'random' or 'grid'."""
    prune: bool = True
    """Stop trials that cannot beat the best known cost to target."""
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
    dotted ``overrides``, merged in that order and type-checked (values are checked by :func:`validate`)."""
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


def _knob_choices(cfg: RunConfig, key: str) -> list[Any] | None:
    """The choices of knob ``key`` as an initial-design entry names it (``flags.<name>`` for flags)."""
    if key.startswith("flags."):
        return cfg.knobs.flags.get(key[len("flags.") :])
    return getattr(cfg.knobs, key) if key in ("num_envs", "num_steps_per_env", "num_mini_batches") else None


def drop_unfit_initial(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    """The config without the space file's initial-design entries that knobs narrowed on the command line exclude,
    and one note per entry removed. Entries naming unknown knobs stay, for :func:`validate` to reject."""
    kept, notes = [], []
    for i, entry in enumerate(cfg.initial):
        outside = {}
        if isinstance(entry, dict):
            outside = {k: v for k, v in entry.items() if (c := _knob_choices(cfg, k)) is not None and v not in c}
        if outside:
            what = ", ".join(f"{k}={v!r}" for k, v in outside.items())
            notes.append(f"initial[{i}] of the space skipped: {what} not among the knob's choices")
        else:
            kept.append(entry)
    return replace(cfg, initial=kept), notes


def validate(cfg: RunConfig, cli_keys: Iterable[str] = ()) -> RunConfig:
    """Check values, names and constraints (types are checked when composed); the checked config is the run's
    plan, frozen. Errors name the key and where its value came from: the command line for ``cli_keys`` (the
    dotted keys given there), else the space file."""
    try:
        return _validate(cfg)
    except ConfigError as exc:
        text = str(exc)
        found = re.match(rf"{re.escape(cfg.space)}: ([\w.]+)", text)
        if found and any(_related(found.group(1), key) for key in cli_keys):
            raise ConfigError("command line: " + text[len(cfg.space) + 2 :]) from None
        raise


def _related(a: str, b: str) -> bool:
    """Whether dotted keys ``a`` and ``b`` are the same or one contains the other (``knobs`` / ``knobs.num_envs``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def confirm_trials(confirm: Confirm) -> int:
    """The most trials a confirmation phase runs: each finalist (the candidates and the baseline) up to its seeds."""
    return (confirm.top + 1) * confirm.seeds if confirm.enabled else 0


def _validate_confirm(cfg: RunConfig) -> None:
    """The confirmation section: counts, shares, and a baseline every knob of which is known."""
    from sweep import perf
    from sweep.scheduler import RESERVE_MARGIN

    where, c = cfg.space, cfg.confirm
    if c.seeds < 1:
        raise ConfigError(f"{where}: confirm.seeds: must be >= 1 (1: no confirmation; got {c.seeds})")
    if not c.enabled:
        return
    if c.top < 1:
        raise ConfigError(f"{where}: confirm.top: must be >= 1 (the candidates besides the baseline; got {c.top})")
    if not 0 <= c.budget_share < 1:
        raise ConfigError(f"{where}: confirm.budget_share: must be in [0, 1) (got {c.budget_share})")
    if c.race_factor < 1:
        raise ConfigError(f"{where}: confirm.race_factor: must be >= 1 (got {c.race_factor})")
    if cfg.budget.usd * c.budget_share < cfg.budget.trial_usd * RESERVE_MARGIN and c.budget_share > 0:
        raise ConfigError(
            f"{where}: confirm.budget_share: {c.budget_share:g} of budget.usd keeps "
            f"${cfg.budget.usd * c.budget_share:g}, "
            f"less than one trial's reservation (budget.trial_usd {cfg.budget.trial_usd:g} plus "
            f"{RESERVE_MARGIN - 1:.0%}); raise the share or the budget, or set confirm.seeds=1"
        )
    for key in ("num_envs", "num_steps_per_env", "num_mini_batches"):
        value = getattr(c.baseline, key)
        if value is None and len(getattr(cfg.knobs, key)) != 1:
            raise ConfigError(
                f"{where}: confirm.baseline.{key}: the space has several choices {getattr(cfg.knobs, key)}; "
                "name the baseline's value"
            )
        if value is not None and value <= 0:
            raise ConfigError(f"{where}: confirm.baseline.{key}: must be a positive integer (got {value})")
    perf.resolve(dict(c.baseline.flags), key=f"{where}: confirm.baseline.flags")


def _validate(cfg: RunConfig) -> RunConfig:
    from sweep import perf
    from sweep.backends import get_backend

    where = cfg.space
    backend = get_backend(cfg.backend, key=f"{where}: backend")
    if cfg.profile != "auto":
        backend.check_profile(cfg.profile, key=f"{where}: profile")
    for key in ("num_envs", "num_steps_per_env", "num_mini_batches"):
        choices = getattr(cfg.knobs, key)
        if not choices:
            raise ConfigError(f"{where}: knobs.{key}: no choices; give at least one value")
        bad = [c for c in choices if c <= 0]
        if bad:
            raise ConfigError(f"{where}: knobs.{key}: every choice must be a positive integer (got {bad})")
        if len(set(choices)) != len(choices):
            raise ConfigError(f"{where}: knobs.{key}: duplicate choices {choices}")
    for name, choices in cfg.knobs.flags.items():
        if not choices:
            raise ConfigError(f"{where}: knobs.flags.{name}: give a non-empty list of choices")
        for choice in choices:
            perf.resolve({name: choice}, key=f"{where}: knobs.flags")
        if len({repr(c) for c in choices}) != len(choices):
            raise ConfigError(f"{where}: knobs.flags.{name}: duplicate choices {choices}")
    positive = {
        "target.eval_episodes": cfg.target.eval_episodes,
        "target.eval_every_steps": cfg.target.eval_every_steps,
        "budget.usd": cfg.budget.usd,
        "budget.trial_usd": cfg.budget.trial_usd,
        "budget.max_trials": cfg.budget.max_trials,
        "workers.cpus_per_trial": cfg.workers.cpus_per_trial,
        "constraints.max_update_period_s": cfg.constraints.max_update_period_s,
    }
    for key, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{where}: {key}: must be > 0 (got {value})")
    if not 0 < cfg.target.success <= 1:
        raise ConfigError(f"{where}: target.success: must be in (0, 1] (got {cfg.target.success})")
    if not 0 <= cfg.target.eval_gate < cfg.target.success:
        raise ConfigError(
            f"{where}: target.eval_gate: must be in [0, target.success) (got {cfg.target.eval_gate}); 0 evaluates at "
            "every checkpoint"
        )
    if not 0 < cfg.constraints.memory_share <= 1:
        raise ConfigError(f"{where}: constraints.memory_share: must be in (0, 1] (got {cfg.constraints.memory_share})")
    from sweep.evaluation import EVAL_SEED_BASE, check_training_seed

    check_training_seed(cfg.seeds.training, key=f"{where}: seeds.training")
    trials = cfg.budget.max_trials + confirm_trials(cfg.confirm)
    if cfg.seeds.training + trials > EVAL_SEED_BASE:
        also = f" + confirmation trials ({confirm_trials(cfg.confirm)})" if cfg.confirm.enabled else ""
        raise ConfigError(
            f"{where}: seeds.training: trial k trains with seeds.training + k, so {cfg.seeds.training} + "
            f"budget.max_trials ({cfg.budget.max_trials}){also} would reach the held-out seeds (from "
            f"{EVAL_SEED_BASE}); use a seed below {EVAL_SEED_BASE - trials}"
        )
    _validate_confirm(cfg)
    if cfg.workers.num < 0:
        raise ConfigError(f"{where}: workers.num: must be >= 0 (got {cfg.workers.num})")
    from sweep.scheduler import RESERVE_MARGIN

    if cfg.budget.trial_usd * RESERVE_MARGIN > cfg.budget.usd:
        raise ConfigError(
            f"{where}: budget.trial_usd ({cfg.budget.trial_usd:g}) plus its {RESERVE_MARGIN - 1:.0%} overrun reserve "
            f"exceeds budget.usd ({cfg.budget.usd:g}), so no trial could start; raise the study budget or lower "
            "the per-trial cap"
        )
    from sweep import checkpoints

    checkpoints.check_keep(cfg.checkpoints, key=f"{where}: checkpoints")
    if cfg.sampler not in ("tpe", "random", "grid"):
        raise ConfigError(f"{where}: sampler: must be 'tpe', 'random' or 'grid' (got {cfg.sampler!r})")
    if cfg.price.gpu != "auto" or cfg.price.usd_per_hour is not None:
        from sweep import prices

        prices.resolve(
            cfg.price.gpu if cfg.price.gpu != "auto" else "custom",
            cfg.price.kind,
            cfg.price.usd_per_hour,
            key=f"{where}: price",
        )
    period = min(cfg.knobs.num_steps_per_env) * backend.control_dt_s(cfg.profile if cfg.profile != "auto" else "cpu")
    if period > cfg.constraints.max_update_period_s:
        raise ConfigError(
            f"{where}: constraints.max_update_period_s: no config can satisfy it: the shortest horizon "
            f"({min(cfg.knobs.num_steps_per_env)} steps) takes {period:g} s; raise the bound or add shorter horizons"
        )
    for i, initial in enumerate(cfg.initial):
        if not isinstance(initial, dict):
            raise ConfigError(f"{where}: initial[{i}]: expected a mapping of knob values")
        for key, value in initial.items():
            choices = _knob_choices(cfg, key)
            if choices is None:
                what = "not a swept flag; add it to knobs.flags" if key.startswith("flags.") else "unknown knob"
                raise ConfigError(f"{where}: initial[{i}].{key}: {what}")
            if value not in choices:
                raise ConfigError(
                    f"{where}: initial[{i}].{key}: {value!r} is not among the choices {choices}; "
                    "change the initial design (initial=[...]) or add the value to the knob"
                )
    return cfg
