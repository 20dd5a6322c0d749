"""Does a held-out pass hide behind training? A pass run in a thread beside a round of training, against both alone.

    HOME=/tmp/eval_beside python benchmarks/eval_beside_h200.py --out $OUT/eval_beside.jsonl

For each ``--shapes`` entry (``envs x steps``, ``gpu`` profile, 256-episode panel, seed 3) in one process: builds the
trial, compiles its step and its panel's policy loop, trains one round (``eval_every`` iterations) to warm up, then
``--repeats`` times, in turn: a round of training alone (``a``), a full pass of a copy of the policy alone (``b``), and
the same round with the same kind of pass started in a thread at its start (``c``: until both ended). One JSON line
per shape: medians of each, the share of the pass's seconds that the overlap hid (``(a + b - c) / b``), the round's
and the pass's own seconds when overlapped over alone, and whether the pass gave the same result alone and beside.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from contextlib import ExitStack
from pathlib import Path


def measure(num_envs: int, steps: int, repeats: int, profile: str) -> dict:
    import torch

    from sweep import perf
    from sweep.backends.policy import MlpPolicy, mlp_policy
    from sweep.contract import TrialConfig
    from sweep.ledger import PhaseClock
    from sweep.trial.evaluation import evaluate, warm_up_panel
    from sweep.trial.learner import describe_device, device_sync
    from sweep.trial.runner import build, compile_training

    cfg = TrialConfig(
        profile=profile,
        num_envs=num_envs,
        num_steps_per_env=steps,
        eval_episodes=256,
        seed=3,
        flags={"compile_cache": True},
    ).validate()
    perf.enable_compile_cache()
    clock = PhaseClock()
    with ExitStack() as stack:
        built = build(cfg, clock, None, 0, stack)
        clock.sync = device_sync(built.device, built.env)
        sync = torch.cuda.synchronize if built.device.startswith("cuda") else (lambda: None)
        compile_training(built)
        panel = built.eval_env
        warm_up_panel(panel, built.alg.get_policy())

        def train_round() -> None:
            built.trainer(cfg.eval_every, lambda: False)
            sync()

        def snapshot() -> MlpPolicy:
            policy = mlp_policy(built.alg.get_policy()).copy()
            sync()
            return policy

        train_round()
        seconds: dict[str, list[float]] = {"a": [], "b": [], "c": [], "c_round": [], "c_pass": []}
        same = True
        for _ in range(repeats):
            t = time.perf_counter()
            train_round()
            seconds["a"].append(time.perf_counter() - t)

            policy = snapshot()
            t = time.perf_counter()
            first = evaluate(policy, panel, built.seeds)
            sync()
            seconds["b"].append(time.perf_counter() - t)

            ended: dict[str, float] = {}
            beside: list = []

            def run_pass(p: MlpPolicy, results: list, ends: dict[str, float]) -> None:
                results.append(evaluate(p, panel, built.seeds))
                sync()
                ends["pass"] = time.perf_counter()

            thread = threading.Thread(target=run_pass, args=(policy, beside, ended))
            t = time.perf_counter()
            thread.start()
            train_round()
            round_end = time.perf_counter()
            thread.join()
            end = time.perf_counter()
            seconds["c"].append(end - t)
            seconds["c_round"].append(round_end - t)
            seconds["c_pass"].append(ended["pass"] - t)
            same &= beside[0] == first
        med = {k: statistics.median(v) for k, v in seconds.items()}
        return {
            "device": describe_device(built.device),
            "shape": f"{num_envs} x {steps}",
            "eval_every": cfg.eval_every,
            "repeats": repeats,
            "round_alone_s": med["a"],
            "pass_alone_s": med["b"],
            "both_beside_s": med["c"],
            "hidden_share_of_pass": (med["a"] + med["b"] - med["c"]) / med["b"],
            "round_beside_over_alone": med["c_round"] / med["a"],
            "pass_beside_over_alone": med["c_pass"] / med["b"],
            "same_result": same,
            "raw": seconds,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/eval_beside.jsonl"))
    parser.add_argument("--shapes", default="4096x12,8192x8", help="comma-separated envs x steps per env")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", default="gpu")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes.split(","):
        envs, steps = (int(x) for x in shape.split("x"))
        line = measure(envs, steps, args.repeats, args.profile)
        with open(args.out, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps({k: v for k, v in line.items() if k != "raw"}), flush=True)


if __name__ == "__main__":
    main()
