"""A held-out pass stepped from Python against the same pass in the env's own device loop, on the GPU.

    HOME=/tmp/eval_loop python benchmarks/eval_loop_h200.py --out $OUT/eval_loop.jsonl

In one process with the persistent cache in ``$HOME`` (empty for cold compile figures): builds a trial of
legged_gym's shape (4096 envs x 24 steps, ``gpu`` profile, 256-episode panel), then times the compilation of the
panel's step (what a stepped pass runs) and of its policy loop (:meth:`TaskEnv.policy_steps`, 50 control steps per
call), then full passes of the fresh policy (no early stop) alternately stepped and looped, ``--repeats`` each.
Both passes must give the same result. One JSON line: seconds per control step of each (best and median), their
ratio, the compile seconds and the results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path


def measure(repeats: int) -> dict:
    import torch

    from sweep import perf
    from sweep.backends.policy import mlp_policy
    from sweep.contract import TrialConfig
    from sweep.ledger import PhaseClock
    from sweep.trial.evaluation import CHECK_EVERY, evaluate
    from sweep.trial.learner import describe_device
    from sweep.trial.runner import build

    cfg = TrialConfig(
        profile="gpu", num_envs=4096, num_steps_per_env=24, eval_episodes=256, seed=3, flags={"compile_cache": True}
    ).validate()
    perf.enable_compile_cache()
    with ExitStack() as stack:
        built = build(cfg, PhaseClock(), None, 0, stack)
        out: dict = {"device": describe_device(built.device)}
        sync = torch.cuda.synchronize if built.device.startswith("cuda") else (lambda: None)
        policy, panel = built.alg.get_policy(), built.eval_env
        t0 = time.perf_counter()
        panel.warm_up()
        t1 = time.perf_counter()
        panel.policy_loop = True  # as on a GPU (a CPU run of this script compares the two ways too)
        assert panel.compile_policy_steps(mlp_policy(policy).shape(CHECK_EVERY))
        t2 = time.perf_counter()
        out.update(step_compile_s=t1 - t0, loop_compile_s=t2 - t1)
        per_step: dict[str, list[float]] = {"stepped": [], "loop": []}
        results: dict[str, set] = {"stepped": set(), "loop": set()}
        for _ in range(repeats + 1):  # the first round warms up both
            for name, looped in (("stepped", False), ("loop", True)):
                panel.policy_loop = looped
                sync()
                ts = time.perf_counter()
                result = evaluate(policy, panel, built.seeds)
                sync()
                per_step[name].append((time.perf_counter() - ts) / result.steps)
                results[name].add((result.successes, result.steps))
        for name, times in per_step.items():
            out[f"{name}_s_per_step_best"] = min(times[1:])
            out[f"{name}_s_per_step_median"] = statistics.median(times[1:])
            out[f"{name}_results"] = sorted(results[name])
        out["loop_over_stepped_median"] = out["loop_s_per_step_median"] / out["stepped_s_per_step_median"]
        out["same_results"] = results["stepped"] == results["loop"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/eval_loop.jsonl"))
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    line = measure(args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
