"""Value checks of a composed run configuration, before any compute: ranges, names, the initial design and the
confirmation plan. Every error names the file (or the command line) and the key and says what to do."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from sweep.config import KNOB_NAMES, Confirm, RunConfig
from sweep.config.compose import is_file
from sweep.config.searchers import searcher_target
from sweep.errors import ConfigError
from sweep.params import flag_name


def _knob_choices(cfg: RunConfig, key: str) -> list[Any] | None:
    """The choices of knob ``key`` as an initial-design entry names it (``flags.<name>`` for flags)."""
    name = flag_name(key)
    if name is not None:
        return cfg.knobs.flags.get(name)
    return getattr(cfg.knobs, key) if key in KNOB_NAMES else None


def drop_unfit_initial(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    """The config without the space file's initial-design entries that knobs narrowed on the command line exclude,
    and one note per entry removed. Entries naming unknown knobs stay, for :func:`validate` to reject."""
    kept, notes = [], []
    for i, entry in enumerate(cfg.search.initial):
        outside = {}
        if isinstance(entry, dict):
            outside = {k: v for k, v in entry.items() if (c := _knob_choices(cfg, k)) is not None and v not in c}
        if outside:
            what = ", ".join(f"{k}={v!r}" for k, v in outside.items())
            notes.append(f"search.initial[{i}] of the space skipped: {what} not among the knob's choices")
        else:
            kept.append(entry)
    return replace(cfg, search=replace(cfg.search, initial=kept)), notes


def validate(cfg: RunConfig, cli_keys: Iterable[str] = ()) -> RunConfig:
    """Check values, names and constraints (types are checked when composed); the checked config is the run's
    plan, frozen. Errors name the key and where its value came from: the command line for ``cli_keys`` (the
    dotted keys given there), else the space file."""
    try:
        return _validate(cfg)
    except ConfigError as exc:
        text = str(exc)
        found = re.match(rf"{re.escape(cfg.space)}: ([\w.]+)", text)
        about = (found.group(1), *exc.keys) if found else ()
        if any(_related(a, key) for a in about for key in cli_keys):
            raise ConfigError("command line: " + text[len(cfg.space) + 2 :]) from None
        raise


def _related(a: str, b: str) -> bool:
    """Whether dotted keys ``a`` and ``b`` are the same or one contains the other (``knobs`` / ``knobs.num_envs``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


#: How a baseline trains (``confirm.baseline.mode``): rsl-rl's own runner, or this package's loop.
BASELINE_MODES = ("stock", "sweep")


def confirm_trials(confirm: Confirm) -> int:
    """The most trials a confirmation phase runs: each finalist (the candidates and the baseline) up to its seeds."""
    return (confirm.top + 1) * confirm.seeds if confirm.enabled else 0


def _validate_confirm(cfg: RunConfig) -> None:
    """The confirmation section: counts, shares, and a baseline every knob of which is known. Its values are checked
    even with the confirmation off (``seeds: 1``): a value that means nothing is refused wherever it stands."""
    from sweep import perf

    where, c = cfg.space, cfg.confirm
    if c.seeds < 1:
        raise ConfigError(f"{where}: confirm.seeds: must be >= 1 (1: no confirmation; got {c.seeds})")
    if c.top < 1:
        raise ConfigError(f"{where}: confirm.top: must be >= 1 (the candidates besides the baseline; got {c.top})")
    if not 0 <= c.budget_share < 1:
        raise ConfigError(f"{where}: confirm.budget_share: must be in [0, 1) (got {c.budget_share})")
    if c.race_factor < 1:
        raise ConfigError(f"{where}: confirm.race_factor: must be >= 1 (got {c.race_factor})")
    for key in KNOB_NAMES:
        value = getattr(c.baseline, key)
        if value is not None and value <= 0:
            raise ConfigError(f"{where}: confirm.baseline.{key}: must be a positive integer (got {value})")
    flags = perf.resolve(dict(c.baseline.flags), key=f"{where}: confirm.baseline.flags")
    if c.baseline.mode not in BASELINE_MODES:
        raise ConfigError(
            f"{where}: confirm.baseline.mode: must be one of {list(BASELINE_MODES)} (got {c.baseline.mode!r}): "
            "'stock' trains with rsl-rl's own runner, 'sweep' with this package's loop"
        )
    changed = [n for n in c.baseline.flags if flags[n] != perf.CATALOG[n].default and n not in perf.STOCK_FLAGS]
    if c.baseline.mode == "stock" and changed:
        raise ConfigError(
            f"{where}: confirm.baseline.flags.{changed[0]}: a stock baseline trains with rsl-rl's own runner, "
            f"unchanged, and this flag changes its training; drop it, or set confirm.baseline.mode=sweep to compare "
            "with this package's loop"
        )
    runs = cfg.budget.runs
    if runs is not None and not runs > 0:
        raise ConfigError(f"{where}: budget.runs: must be > 0 baseline runs, or null for no cap in runs (got {runs})")
    later = cfg.budget.later_runs
    if later is not None and not (math.isfinite(later) and later > 0):
        raise ConfigError(
            f"{where}: budget.later_runs: must be a positive number of later training runs, or null for no stop rule "
            f"(got {later})"
        )
    if c.enabled:
        _validate_confirm_plan(cfg)
    if c.enabled or runs is not None:  # the study runs the baseline: every knob of it must be known
        why = "" if c.enabled else f" (budget.runs={runs:g} counts in runs of the baseline, which the study runs)"
        for key in KNOB_NAMES:
            if getattr(c.baseline, key) is None and len(getattr(cfg.knobs, key)) != 1:
                raise ConfigError(
                    f"{where}: confirm.baseline.{key}: the space has several choices {getattr(cfg.knobs, key)}; "
                    f"name the baseline's value{why}",
                    keys=() if c.enabled else ("budget.runs",),
                )


def _validate_confirm_plan(cfg: RunConfig) -> None:
    """A confirmation that can run: seeds left for it, and a share of the budget that fits one trial."""
    from sweep.contract import RESERVE_MARGIN

    where, c = cfg.space, cfg.confirm
    if cfg.search.intensify >= c.seeds:
        # a finalist the search already ran on every seed would get no confirmation trial, and rank as unconfirmed
        raise ConfigError(
            f"{where}: search.intensify: {cfg.search.intensify} search seeds for the leader leave the confirmation "
            f"nothing to add (confirm.seeds {c.seeds}); set search.intensify below confirm.seeds, or confirm.seeds=1"
        )
    if cfg.budget.usd * c.budget_share < cfg.budget.trial_usd * RESERVE_MARGIN and c.budget_share > 0:
        raise ConfigError(
            f"{where}: confirm.budget_share: {c.budget_share:g} of budget.usd keeps "
            f"${cfg.budget.usd * c.budget_share:g}, "
            f"less than one trial's reservation (budget.trial_usd {cfg.budget.trial_usd:g} plus "
            f"{RESERVE_MARGIN - 1:.0%}); raise the share or the budget, or set confirm.seeds=1",
            keys=("budget.usd", "budget.trial_usd"),
        )


#: A run folder's name: one plain path component, so that ``out/<run_id>`` stays inside ``out``.
RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=@-]{0,127}")
#: ``workers.address``: Ray's 'auto', or host:port (optionally ray://).
ADDRESS = re.compile(r"auto|(ray://)?[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?:\d{1,5}")
#: ``workers.host``: an IPv4 address or a host name.
HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")


def check_run_id(run_id: str, where: str) -> None:
    """Refuse a ``run_id`` that is not one plain folder name (``..``, ``a/b``, ``/abs``): the run folder is always
    ``out/<run_id>``, inside the folder the user chose."""
    if not RUN_ID.fullmatch(run_id):
        raise ConfigError(
            f"{where}: run_id: {run_id!r} is not a folder name: use letters, digits and . _ + = @ - (at most 128, "
            "not starting with '.' or '-'); the run folder is always out/<run_id>"
        )


def _non_finite(value: Any, key: str) -> str | None:
    """The dotted key of the first NaN or infinite number in ``value`` (a dataclass, mapping or list), or None."""
    if is_dataclass(value):
        found = (_non_finite(getattr(value, f.name), f"{key}.{f.name}" if key else f.name) for f in fields(value))
    elif isinstance(value, dict):
        found = (_non_finite(v, f"{key}.{k}") for k, v in value.items())
    elif isinstance(value, list):
        found = (_non_finite(v, f"{key}[{i}]") for i, v in enumerate(value))
    else:
        return key if isinstance(value, float) and not math.isfinite(value) else None
    return next((k for k in found if k is not None), None)


def _mistyped(value: Any, hint: Any, key: str) -> str | None:
    """The first value inside ``value`` whose type its schema ``hint`` does not allow, as 'key: what', or None.
    OmegaConf checks a field's own type but not the elements of its lists and mappings (``[{a: 1}]`` passes as a
    ``list[int]``)."""
    if is_dataclass(hint):
        hints = get_type_hints(hint)
        found = (
            _mistyped(getattr(value, f.name), hints[f.name], f"{key}.{f.name}" if key else f.name) for f in fields(hint)
        )
        return next((k for k in found if k is not None), None)
    origin, args = get_origin(hint), get_args(hint)
    if origin is list and args and args[0] is int:
        bad = [v for v in value if not isinstance(v, int) or isinstance(v, bool)]
        return f"{key}: expected whole numbers, got {bad[0]!r}" if bad else None
    if origin is dict and args and get_origin(args[1]) is list:
        bad = [k for k, v in value.items() if not isinstance(v, list)]
        return f"{key}.{bad[0]}: expected a list of choices, got {value[bad[0]]!r}" if bad else None
    return None


def _validate_names(cfg: RunConfig) -> None:
    """Numbers that are numbers, and the strings that name folders and addresses."""
    where = cfg.space
    wrong = _mistyped(cfg, RunConfig, "")
    if wrong:
        raise ConfigError(f"{where}: {wrong}")
    bad = _non_finite(cfg, "")
    if bad:
        raise ConfigError(f"{where}: {bad}: must be a finite number (NaN and infinity mean nothing here)")
    if cfg.run_id:  # empty: a timestamp
        check_run_id(cfg.run_id, where)
    if not cfg.out.strip():
        raise ConfigError(f"{where}: out: empty; give the folder the run folders go under (default: reports)")
    if cfg.workers.address is not None and not ADDRESS.fullmatch(cfg.workers.address):
        raise ConfigError(
            f"{where}: workers.address: {cfg.workers.address!r} is not a Ray address; use auto or host:port "
            "(null: a local Ray)"
        )
    if not HOST.fullmatch(cfg.workers.host):
        raise ConfigError(f"{where}: workers.host: {cfg.workers.host!r} is not an address or host name")
    if not 0 <= cfg.seeds.sampler < 2**32:
        raise ConfigError(f"{where}: seeds.sampler: must be in [0, 2**32) (got {cfg.seeds.sampler})")


def _validate_success_rule(cfg: RunConfig, backend: Any) -> None:
    """``target.success_term`` / ``target.success_fn``: their form, one at most, and a backend that takes a task's own
    rule; what they name (a term of the task, a function that imports) is checked by the backend's preflight."""
    from sweep.contract import check_success_rule, success_rule

    rule = success_rule(cfg.target)
    check_success_rule(rule, where=f"{cfg.space}: target.")
    for key in rule:
        if key not in backend.success_keys:
            raise ConfigError(
                f"{cfg.space}: target.{key}: backend {cfg.backend} judges success by its own rule "
                f"({backend.success_rule}); a task's own rule is an Isaac Lab option (backend: isaaclab)"
            )


def _validate(cfg: RunConfig) -> RunConfig:
    from sweep import perf
    from sweep.backends import get_backend

    where = cfg.space
    _validate_names(cfg)
    for key in KNOB_NAMES:
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
    if cfg.search.race_slack < 1:
        raise ConfigError(
            f"{where}: search.race_slack: must be >= 1 (1: race at the best known cost; got {cfg.search.race_slack})"
        )
    if not 1 <= cfg.search.intensify <= cfg.budget.max_trials:
        raise ConfigError(
            f"{where}: search.intensify: must be in [1, budget.max_trials] (1: a config runs once in the search; got "
            f"{cfg.search.intensify})"
        )
    for key, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{where}: {key}: must be > 0 (got {value})")
    if cfg.search.prior and not is_file(Path(cfg.search.prior).expanduser() / "ledger.jsonl"):
        raise ConfigError(
            f"{where}: search.prior: {cfg.search.prior} holds no ledger.jsonl; give the run folder of an earlier "
            "study of the same task (reports/<run_id>)"
        )
    if not 0 < cfg.target.success <= 1:
        raise ConfigError(f"{where}: target.success: must be in (0, 1] (got {cfg.target.success})")
    if not 0 <= cfg.target.eval_gate < cfg.target.success:
        raise ConfigError(
            f"{where}: target.eval_gate: must be in [0, target.success) (got {cfg.target.eval_gate} with "
            f"target.success {cfg.target.success}): set it below the target, or 0 to evaluate at every checkpoint",
            keys=("target.success",),
        )
    from sweep.contract import EVAL_SEED_BASE, GATE_SIGNALS, check_training_seed

    if cfg.target.eval_gate_signal not in GATE_SIGNALS:
        raise ConfigError(
            f"{where}: target.eval_gate_signal: must be one of {list(GATE_SIGNALS)} "
            f"(got {cfg.target.eval_gate_signal!r})"
        )
    # The backend after the checks of plain values: building it imports torch (about a second)
    backend = get_backend(cfg.backend, key=f"{where}: backend")
    if cfg.profile != "auto":
        backend.check_profile(cfg.profile, key=f"{where}: profile")
    _validate_success_rule(cfg, backend)
    if not 0 < cfg.constraints.memory_share <= 1:
        raise ConfigError(f"{where}: constraints.memory_share: must be in (0, 1] (got {cfg.constraints.memory_share})")
    check_training_seed(cfg.seeds.training, key=f"{where}: seeds.training")
    trials = cfg.budget.max_trials + confirm_trials(cfg.confirm)
    if cfg.seeds.training + trials > EVAL_SEED_BASE:
        also = f" + confirmation trials ({confirm_trials(cfg.confirm)})" if cfg.confirm.enabled else ""
        raise ConfigError(
            f"{where}: seeds.training: trial k trains with seeds.training + k, so {cfg.seeds.training} + "
            f"budget.max_trials ({cfg.budget.max_trials}){also} would reach the held-out seeds (from "
            f"{EVAL_SEED_BASE}); use a seed below {EVAL_SEED_BASE - trials}",
            keys=("budget.max_trials", "confirm.seeds", "confirm.top"),
        )
    from sweep.contract import RESERVE_MARGIN

    if cfg.budget.trial_usd * RESERVE_MARGIN > cfg.budget.usd:
        raise ConfigError(
            f"{where}: budget.trial_usd ({cfg.budget.trial_usd:g}) plus its {RESERVE_MARGIN - 1:.0%} overrun reserve "
            f"exceeds budget.usd ({cfg.budget.usd:g}), so no trial could start; raise the study budget or lower "
            "the per-trial cap",
            keys=("budget.usd",),
        )
    _validate_confirm(cfg)
    if cfg.workers.num < 0:
        raise ConfigError(f"{where}: workers.num: must be >= 0 (got {cfg.workers.num})")
    from sweep import checkpoints

    checkpoints.check_keep(cfg.checkpoints, key=f"{where}: checkpoints")
    searcher_target(cfg.search.sampler, key=f"{where}: search.sampler")
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
            f"{where}: constraints.max_update_period_s: no config can satisfy it: the shortest horizon in "
            f"knobs.num_steps_per_env ({min(cfg.knobs.num_steps_per_env)} steps) takes {period:g} s; raise the bound "
            "or add shorter horizons",
            keys=("knobs.num_steps_per_env",),
        )
    for i, initial in enumerate(cfg.search.initial):
        if not isinstance(initial, dict):
            raise ConfigError(f"{where}: search.initial[{i}]: expected a mapping of knob values")
        for key, value in initial.items():
            choices = _knob_choices(cfg, key)
            if choices is None:
                what = "not a swept flag; add it to knobs.flags" if flag_name(key) is not None else "unknown knob"
                raise ConfigError(f"{where}: search.initial[{i}].{key}: {what}")
            if value not in choices:
                raise ConfigError(
                    f"{where}: search.initial[{i}].{key}: {value!r} is not among the choices {choices}; "
                    "change the initial design (search.initial=[...]) or add the value to the knob"
                )
    return cfg
