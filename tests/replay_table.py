"""A synthetic recorded table for planner tests (planner logic only: never what the main command runs)."""

from __future__ import annotations

import json
from pathlib import Path

from sweep.evaluation import wilson_interval


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


def write_table(path: Path) -> Path:
    """Four configs: two reach the target at different costs, two learn too slowly."""
    trials = []
    speeds = {(64, 8): 0.20, (64, 16): 0.10, (128, 8): 0.02, (128, 16): 0.01}
    for (envs, horizon), rate in speeds.items():
        for seed in range(2):
            trials.append(
                {
                    "params": {"num_envs": envs, "num_steps_per_env": horizon, "num_mini_batches": 4},
                    "seed": seed,
                    "curve": curve(rate, step_s=2.0 + seed * 0.1, n=40, env_steps=envs * horizon * 10),
                }
            )
    path.write_text(json.dumps({"profile": "recorded", "control_dt_s": 0.02, "device": "synthetic", "trials": trials}))
    return path
