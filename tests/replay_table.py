"""A synthetic recorded table for planner tests (planner logic only: never what the main command runs)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from sweep.trial.evaluation import wilson_interval


def curve(rate: float, step_s: float, n: int, env_steps: int) -> list[dict]:
    """Success rising by ``rate`` per checkpoint, one checkpoint every ``step_s`` billable seconds."""
    rows = []
    for i in range(1, n + 1):
        billable = i * step_s
        success = min(1.0, 0.1 + rate * i)
        lo, hi = wilson_interval(round(success * 256), 256)
        rows.append(
            {
                "iteration": 10 * i,
                "env_steps": env_steps * i,
                "billable_s": billable,
                "phases_s": {"sim": 0.6 * billable, "learn": 0.2 * billable, "eval": 0.2 * billable},
                "success": success,
                "success_lo": lo,
                "success_hi": hi,
                "eval_episodes": 256,
            }
        )
    return rows


def write_table(path: Path, mini_batches: tuple[int, ...] = (4,)) -> Path:
    """Four configs per mini-batch count: two reach the target at different costs, two learn too slowly."""
    trials = []
    speeds = {(64, 8): 0.20, (64, 16): 0.10, (128, 8): 0.02, (128, 16): 0.01}
    for ((envs, horizon), rate), batches, seed in itertools.product(speeds.items(), mini_batches, range(2)):
        trials.append(
            {
                "params": {"num_envs": envs, "num_steps_per_env": horizon, "num_mini_batches": batches},
                "seed": seed,
                "curve": curve(rate, step_s=2.0 + seed * 0.1, n=40, env_steps=envs * horizon * 10),
            }
        )
    path.write_text(json.dumps({"profile": "recorded", "control_dt_s": 0.02, "device": "synthetic", "trials": trials}))
    return path


def reaching_curve(cost_s: float, compile_s: float = 0.0, points: int = 4) -> list[dict]:
    """A curve that meets the target (0.95 held-out success) at its last checkpoint, ``cost_s`` billable seconds in,
    ``compile_s`` of them one-time compilation (left out of the cost on equal terms)."""
    rows = []
    for i in range(1, points + 1):
        billable = cost_s * i / points
        success = 0.95 if i == points else 0.2 * i
        training = billable - compile_s if billable > compile_s else 0.0
        rows.append(
            {
                "iteration": 10 * i,
                "env_steps": 1000 * i,
                "billable_s": billable,
                "phases_s": {"compile": min(compile_s, billable), "sim": 0.8 * training, "eval": 0.2 * training},
                "success": success,
                "success_lo": success - 0.02,
                "success_hi": min(1.0, success + 0.02),
                "eval_episodes": 256,
            }
        )
    return rows


def write_seeded_table(path: Path, costs: dict[tuple[int, int], dict[int, float]], compile_s: float = 0.0) -> Path:
    """A table with known per-seed costs: ``costs[(num_envs, num_steps_per_env)][seed]`` is the billable seconds at
    which that seed of that config reaches the target (replay serves a trial the recording of its own seed)."""
    trials = [
        {
            "params": {"num_envs": envs, "num_steps_per_env": horizon, "num_mini_batches": 4},
            "seed": seed,
            "curve": reaching_curve(cost, compile_s),
        }
        for (envs, horizon), by_seed in costs.items()
        for seed, cost in by_seed.items()
    ]
    path.write_text(json.dumps({"profile": "recorded", "control_dt_s": 0.02, "device": "synthetic", "trials": trials}))
    return path


#: The stock baseline of :func:`write_yardstick_table`: rsl-rl's own runner at 128 x 16.
STOCK_BASELINE = {"num_envs": 128, "num_steps_per_env": 16, "num_mini_batches": 4, "mode": "stock"}


def write_yardstick_table(
    path: Path,
    costs: dict[tuple[int, int], dict[int, float]],
    baseline: dict[int, float],
    held_out: dict[tuple[int, int] | str, dict[int, float]] | None = None,
) -> Path:
    """A table with the keys the yardstick reads: ``trials`` (``costs[(envs, steps)][seed]``, this package's loop),
    ``baseline_trials`` (the stock baseline, :data:`STOCK_BASELINE`, ``baseline[seed]``) and ``held_out_trials``
    (``held_out[(envs, steps)][seed]``, or ``held_out["baseline"][seed]`` for the baseline): each the billable seconds
    at which that recording reaches the target."""

    def record(params: dict, seed: int, cost: float) -> dict:
        return {"params": params, "seed": seed, "curve": reaching_curve(cost), "end": {}, "truncated": False}

    def config(envs: int, horizon: int) -> dict:
        return {"num_envs": envs, "num_steps_per_env": horizon, "num_mini_batches": 4}

    held = [
        record(STOCK_BASELINE if k == "baseline" else config(*k), seed, cost)
        for k, by_seed in (held_out or {}).items()
        for seed, cost in by_seed.items()
    ]
    table = {
        "profile": "recorded",
        "control_dt_s": 0.02,
        "device": "synthetic",
        "trials": [record(config(*k), s, c) for k, by_seed in costs.items() for s, c in by_seed.items()],
        "baseline_trials": [record(STOCK_BASELINE, s, c) for s, c in baseline.items()],
        "held_out_trials": held,
    }
    path.write_text(json.dumps(table))
    return path
