"""Helpers of ``benchmarks/isaaclab_h200.sh``, reading run folders only.

``python benchmarks/isaaclab_target.py LEDGER``: the sweep's target from a calibration trial's ledger, the best
held-out success its checkpoints reached within ``--within-s`` training seconds (about 2 minutes), rounded down to
0.05 and kept in [0.5, 0.9]: a good config reaches it in about that time, so the sweep can separate configs.

``python benchmarks/isaaclab_target.py --override RUN_DIR``: the Isaac Lab override line of the run's best trial
(highest held-out success), for a run that found no config at the target (so wrote no recommended.yaml).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import yaml

from sweep.backends.isaaclab_cfg import overrides
from sweep.ledger import metrics


def rows(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def target(ledger: Path, within_s: float) -> float:
    """Best held-out success within ``within_s`` training seconds, rounded down to 0.05, clipped to [0.5, 0.9]."""
    reached = [r["success"] for r in rows(ledger) if r["success"] is not None and metrics(r)["training_s"] <= within_s]
    best = max(reached, default=0.5)
    return min(0.9, max(0.5, math.floor(best * 20 + 1e-9) / 20))


def best_override(run_dir: Path) -> str:
    """The override line of the trial with the highest held-out success in ``run_dir``."""
    options = yaml.safe_load((run_dir / "config.yaml").read_text())["backend_options"]
    best = max((r for r in rows(run_dir / "ledger.jsonl") if r["success"] is not None), key=lambda r: r["success"])
    p = best["params"]
    ppo = {"num_mini_batches": p["num_mini_batches"], "num_learning_epochs": p["num_learning_epochs"]}
    return " ".join(overrides(p["num_envs"], p["num_steps_per_env"], best["seed"], options, **ppo))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a calibration ledger, or a run folder with --override")
    parser.add_argument("--override", action="store_true", help="print the best trial's override line")
    parser.add_argument("--within-s", type=float, default=120.0, help="training seconds (default 120)")
    args = parser.parse_args()
    print(best_override(args.path) if args.override else f"{target(args.path, args.within_s):.2f}")
