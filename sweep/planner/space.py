"""A validated search space -> Optuna suggestions, trial configs and constraint checks."""

from __future__ import annotations

from typing import Any

import sweep.params as params_mod
from sweep.config import KNOB_NAMES, RunConfig
from sweep.contract import SCREEN_ITERATIONS, TrialConfig
from sweep.errors import ConfigError
from sweep.params import TrialParams, flag_key, trial_params


def choices(cfg: RunConfig) -> dict[str, list[Any]]:
    """Every searchable parameter name -> its choices (fixed ones have a single choice); a flag the search holds
    (:func:`probed_flags`) has its held setting only."""
    out: dict[str, list[Any]] = {k: list(getattr(cfg.knobs, k)) for k in KNOB_NAMES}
    out.update({flag_key(name): list(values) for name, values in cfg.knobs.flags.items()})
    out.update({flag_key(name): [held] for name, (held, _) in probed_flags(cfg).items()})
    return out


def probed_flags(cfg: RunConfig) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """With ``search.probe``: the exact flags (docs/perf-flags.md: nothing learned per env step changes) that the
    space gives several settings and that have a fast setting among them (``perf.all_on(exact_only=True)``): name ->
    (that setting, which the search holds, the space's other settings, which a probe tries on the leader's shape)."""
    if not cfg.search.probe:
        return {}
    from sweep import perf

    fast = perf.all_on(exact_only=True)
    return {
        name: (fast[name], tuple(v for v in values if v != fast[name]))
        for name, values in cfg.knobs.flags.items()
        if len(values) > 1 and name in fast and fast[name] in values
    }


def in_space(params: dict[str, Any]) -> bool:
    """Whether a ledger row's config can be a point of the search space: a stock run (rsl-rl's own runner, the
    baseline's) never is, whatever its knobs."""
    return TrialParams.of(params).mode == "sweep"


def suggest(trial: Any, cfg: RunConfig) -> dict[str, Any]:
    """Ask the Optuna trial for one value per parameter (categorical: choices may be uneven)."""
    return {name: trial.suggest_categorical(name, values) for name, values in choices(cfg).items()}


def grid_points(cfg: RunConfig, seed: int) -> list[dict[str, Any]]:
    """Every combination of the choices, in an order shuffled by ``seed`` (grid search)."""
    import itertools
    import random

    names, values = zip(*choices(cfg).items(), strict=True)
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    random.Random(seed).shuffle(points)
    return points


def baseline_params(cfg: RunConfig) -> dict[str, Any]:
    """The baseline of ``confirm.baseline`` as a full suggestion (``flags.<name>`` for flags, and its ``mode``): what
    it leaves out takes the space's value where the space fixes one, else (flags) the catalog default, rsl-rl's
    behaviour. A stock baseline (rsl-rl's own runner) takes from the space only the flags a stock run may carry
    (``perf.STOCK_FLAGS``): a space that fixes a training flag does not change what a user runs without sweep."""
    from sweep import perf

    base = cfg.confirm.baseline
    out: dict[str, Any] = {}
    for key in KNOB_NAMES:
        value = getattr(base, key)
        out[key] = int(value if value is not None else getattr(cfg.knobs, key)[0])
    stock = base.mode == "stock"
    fixed = {
        name: values[0]
        for name, values in cfg.knobs.flags.items()
        if len(values) == 1 and (not stock or name in perf.STOCK_FLAGS)
    }
    flags = perf.resolve({**fixed, **dict(base.flags)}, key="confirm.baseline.flags")
    out.update({flag_key(name): value for name, value in flags.items()})
    out["mode"] = base.mode
    return out


def trial_config(
    params: dict[str, Any],
    cfg: RunConfig,
    profile: str,
    seed: int,
    cap_s: float,
    race_cap_s: float | None = None,
    phase: str = "search",
    baseline: bool = False,
) -> TrialConfig:
    """The TrialConfig a worker runs for these params (``cap_s``, ``race_cap_s``, ``phase``, ``baseline``: see
    :class:`TrialConfig`), the study's settings for the rest (:func:`sweep.params.trial_config`; a ``mode`` among the
    params, the baseline's, picks the runner). A screen trial's one round is :data:`SCREEN_ITERATIONS` long."""
    every = cfg.target.eval_every_steps
    if phase == "screen":
        every = SCREEN_ITERATIONS * int(params["num_steps_per_env"])
    return params_mod.trial_config(
        params,
        backend=cfg.backend,
        profile=profile,
        seed=seed,
        target=cfg.target.success,
        eval_episodes=cfg.target.eval_episodes,
        eval_every_steps=every,
        eval_gate=cfg.target.eval_gate,
        eval_gate_signal=cfg.target.eval_gate_signal,
        success_term=cfg.target.success_term,
        success_fn=cfg.target.success_fn,
        cap_s=cap_s,
        race_cap_s=race_cap_s,
        device=cfg.device,
        backend_options=dict(cfg.backend_options),
        checkpoints=cfg.checkpoints,
        phase=phase,
        baseline=baseline,
    )


def violations(
    params: dict[str, Any], cfg: RunConfig, control_dt_s: float, memory_gib: float | None
) -> dict[str, float]:
    """Constraint values (> 0: infeasible) for Optuna's ``Trial.set_constraint``; nothing is run to get them."""
    period = int(params["num_steps_per_env"]) * control_dt_s
    out = {"update_period_s": period - cfg.constraints.max_update_period_s}
    if memory_gib:
        from sweep.backends import get_backend  # imports torch: only where the device's memory is known

        estimate = get_backend(cfg.backend).memory_gib(
            int(params["num_envs"]), int(params["num_steps_per_env"]), cfg.target.eval_episodes
        )
        out["memory_gib"] = estimate - cfg.constraints.memory_share * memory_gib
    samples = int(params["num_envs"]) * int(params["num_steps_per_env"])
    out["mini_batches"] = float(int(params["num_mini_batches"]) - samples)
    return out


#: The keys that set each constraint of :func:`violations`.
CONSTRAINT_KEYS = {
    "update_period_s": ("knobs.num_steps_per_env", "constraints.max_update_period_s"),
    "memory_gib": ("knobs.num_envs", "knobs.num_steps_per_env", "target.eval_episodes", "constraints.memory_share"),
    "mini_batches": ("knobs.num_mini_batches", "knobs.num_envs", "knobs.num_steps_per_env"),
}


def infeasible_reason(found: dict[str, float]) -> str:
    """One line naming the violated constraints."""
    parts = [f"{k} over its bound by {v:g}" for k, v in found.items() if v > 0]
    return "infeasible: " + "; ".join(parts)


def untried_points(
    cfg: RunConfig, tried: set, profile: str, control_dt_s: float, memory_gib: float | None, salt: int
) -> list[dict[str, Any]]:
    """Every feasible config whose knobs (``config_key``) are not in ``tried``, as suggestions, in an order shuffled
    by the sampler seed and ``salt``."""
    out = []
    for point in grid_points(cfg, cfg.seeds.sampler + salt):
        found = violations(point, cfg, control_dt_s, memory_gib)
        knobs = trial_params(trial_config(point, cfg, profile, 0, 1.0))
        if not any(v > 0 for v in found.values()) and TrialParams.identity(knobs) not in tried:
            out.append(point)
    return out


def feasible_count(cfg: RunConfig, control_dt_s: float, memory_gib: float | None) -> int:
    """How many configs of the space satisfy the constraints; none is a config error (nothing could run)."""
    points = grid_points(cfg, 0)
    found = [violations(p, cfg, control_dt_s, memory_gib) for p in points]
    count = sum(not any(v > 0 for v in f.values()) for f in found)
    if count == 0:
        closest = min(found, key=lambda f: sum(max(v, 0.0) for v in f.values()))
        keys = sorted({key for name, v in closest.items() if v > 0 for key in CONSTRAINT_KEYS[name]})
        raise ConfigError(
            f"{cfg.space}: no config of the space satisfies the constraints "
            f"(the closest is {infeasible_reason(closest)}); change {', '.join(keys)}",
            keys=tuple(keys),
        )
    return count
