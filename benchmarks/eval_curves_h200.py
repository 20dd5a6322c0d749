"""Held-out curves in full at every checkpoint, past the target: what any rule for when to run a pass would cost.

    python benchmarks/eval_curves_h200.py --out $OUT/eval_curves.jsonl --shapes 4096x12,8192x8 --seeds 1,2,3

For each shape and training seed, a trial as the ``gpu`` profile runs it (the flags of the space's third initial
config, the persistent cache on), except that every checkpoint (every ``eval_every_steps`` control steps per env)
runs a full held-out pass whatever the training episodes say, and the trial trains on for ``--after`` checkpoints
once a pass has reached the target. Each check of a pass (every ``CHECK_EVERY`` steps, as a trial checks) records
the successes and failures so far and the pass's seconds so far, so that the pass a trial runs (stopped once its
verdict is decided) can be read off the full one. One JSON line per checkpoint, written as it ends; a trial that
would start past ``--budget-s`` is not started. Read with ``python benchmarks/eval_policies.py``.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import ExitStack
from pathlib import Path

import torch

from sweep.contract import TrialConfig
from sweep.ledger import PhaseClock
from sweep.trial.evaluation import evaluate, warm_up_panel
from sweep.trial.learner import describe_device, device_sync
from sweep.trial.runner import build, compile_training

#: The space's third initial config's flags (search_spaces/locomotion.yaml): every flag on, the cache on.
FLAGS = {
    "fused_optimizer": True,
    "deferred_episode_stats": True,
    "fast_finite_check": True,
    "lazy_loss_readout": True,
    "buffer_donation": True,
    "cuda_graph_update": True,
    "compile_cache": True,
}


def curve(cfg: TrialConfig, after: int, cap_s: float, write) -> None:
    """Train ``cfg`` round by round with a full pass after each; ``write`` gets one dict per checkpoint."""
    with ExitStack() as stack:
        t0 = time.perf_counter()
        clock = PhaseClock()
        built = build(cfg, clock, None, 0, stack)
        clock.sync = sync = device_sync(built.device, built.env)  # as a trial: the env's and torch's work both end
        compile_training(built)
        policy = built.alg.get_policy()
        warm_up_panel(built.eval_env, policy)
        one_time_s = time.perf_counter() - t0
        trained_s, reached_at, iteration = 0.0, None, 0
        for checkpoint in range(1, 10_000):
            sync()
            t = time.perf_counter()
            iteration += built.trainer(cfg.eval_every)
            sync()
            round_s = time.perf_counter() - t
            trained_s += round_s
            built.trainer.take_mean_return()
            checks: list[list[float]] = []
            signals = {f"on_track_{n}": built.env.on_track_share(n) for n in (100, 250)}
            t = time.perf_counter()

            def record(
                steps: int, finished: torch.Tensor, success: torch.Tensor, t: float = t, checks: list = checks
            ) -> None:
                wins, losses = int(success.sum()), int((finished & ~success).sum())
                checks.append([steps, wins, losses, time.perf_counter() - t])

            result = evaluate(policy, built.eval_env, built.seeds, on_check=record)
            pass_s = time.perf_counter() - t
            write(
                {
                    "shape": f"{cfg.num_envs}x{cfg.num_steps_per_env}",
                    "seed": cfg.seed,
                    "checkpoint": checkpoint,
                    "iteration": iteration,
                    "one_time_s": one_time_s,
                    "round_s": round_s,
                    "train_success": built.trainer.train_success(),
                    **signals,
                    "success": result.rate,
                    "episodes": result.episodes,
                    "pass_s": pass_s,
                    "checks": checks,
                    "device": describe_device(built.device),
                }
            )
            if reached_at is None and result.reached(cfg.target):
                reached_at = checkpoint
            if (reached_at is not None and checkpoint - reached_at >= after) or trained_s > cap_s:
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/eval_curves.jsonl"))
    parser.add_argument("--shapes", default="4096x12,8192x8")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--after", type=int, default=3, help="checkpoints trained past the first that reached")
    parser.add_argument("--cap-s", type=float, default=150.0, help="training seconds after which a trial stops")
    parser.add_argument("--budget-s", type=float, default=480.0, help="start no trial past this many seconds")
    parser.add_argument("--profile", default="gpu")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    def write(line: dict) -> None:
        with open(args.out, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps({k: v for k, v in line.items() if k != "checks"}), flush=True)

    for seed in (int(s) for s in args.seeds.split(",")):
        for shape in args.shapes.split(","):
            if time.perf_counter() - start > args.budget_s:
                print(f"stopped before {shape} seed {seed}: past --budget-s {args.budget_s}", flush=True)
                return
            n, horizon = (int(x) for x in shape.split("x"))
            flags = {k: v for k, v in FLAGS.items() if torch.cuda.is_available() or k != "cuda_graph_update"}
            cfg = TrialConfig(
                profile=args.profile, num_envs=n, num_steps_per_env=horizon, seed=seed, flags=flags
            ).validate()
            curve(cfg, args.after, args.cap_s, write)


if __name__ == "__main__":
    main()
