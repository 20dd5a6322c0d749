"""Where a held-out pass's seconds go on the GPU, and what XLA's GPU options change (compile and step seconds).

    python benchmarks/eval_step_h200.py --out $OUT/eval_step

For each setting (its ``XLA_FLAGS``, in a fresh process with a cold persistent cache): the seconds to build and
compile the panel env (256 episodes) and legged_gym's training shape (4096 envs), then per control step:

- ``pass``: a full held-out pass as a trial runs it (``sweep.trial.evaluation.evaluate``, a fresh policy, no early
  stop);
- ``bare``: the panel env's step function alone, called from Python with zero actions (no torch, no policy);
- ``scan``: the same step inside one ``jax.lax.scan`` of 50 steps (no per-step dispatch: the GPU's own time);
- ``train``: the 4096-env env's ``step`` with zero actions, as the rollout calls it.

One JSON line per setting goes to ``<out>/eval_step.jsonl``; a setting whose flags XLA refuses is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

#: name -> XLA_FLAGS
SETTINGS = {
    "default": "",
    "command_buffers": "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE "
    "--xla_gpu_graph_min_graph_size=1",
    "autotune_0": "--xla_gpu_autotune_level=0",
    # XLA's compilation on 16 threads (the H200 machine's cores)
    "parallel_compile": "--xla_gpu_force_compilation_parallelism=16",
}
PANEL, TRAIN_ENVS, SCAN_STEPS, REPEATS = 256, 4096, 50, 4


def _per_step(fn, steps: int, sync) -> float:
    """Seconds per step of ``fn`` called ``steps`` times (one warm call first), synchronized at both ends."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    sync()
    return (time.perf_counter() - t0) / steps


def measure() -> dict:
    """One setting, in this process (XLA_FLAGS already set): the figures of the module docstring."""
    import jax
    import jax.numpy as jnp
    import torch

    from sweep.contract import TrialConfig
    from sweep.ledger import PhaseClock
    from sweep.trial.evaluation import evaluate
    from sweep.trial.runner import build

    cfg = TrialConfig(
        profile="gpu",
        num_envs=TRAIN_ENVS,
        num_steps_per_env=24,
        eval_episodes=PANEL,
        seed=3,
        flags={"compile_cache": True},
    ).validate()
    out: dict = {"device": torch.cuda.get_device_name(0)}
    with ExitStack() as stack:
        t0 = time.perf_counter()
        built = build(cfg, PhaseClock(), None, 0, stack)
        t1 = time.perf_counter()
        built.eval_env.warm_up()
        t2 = time.perf_counter()
        built.env.warm_up()
        t3 = time.perf_counter()
        out.update(build_s=t1 - t0, panel_compile_s=t2 - t1, train_compile_s=t3 - t2)

        policy = built.alg.get_policy()
        passes = []
        for _ in range(REPEATS):
            torch.cuda.synchronize()
            ts = time.perf_counter()
            result = evaluate(policy, built.eval_env, built.seeds)
            torch.cuda.synchronize()
            passes.append(((time.perf_counter() - ts) / result.steps, result.steps))
        out["pass_s_per_step"] = min(p[0] for p in passes)
        out["pass_steps"] = passes[0][1]

        env = built.eval_env
        fn = env._fn["step"]
        zeros = jnp.zeros((PANEL, env.num_actions), jnp.float32)
        state = {"s": env._state}

        def bare():
            state["s"] = fn(state["s"], zeros)[0]

        out["bare_s_per_step"] = min(
            _per_step(bare, 200, lambda: jax.block_until_ready(state["s"])) for _ in range(REPEATS)
        )

        @jax.jit
        def scan(s):
            return jax.lax.scan(lambda c, _: (fn(c, zeros)[0], None), s, None, length=SCAN_STEPS)[0]

        t4 = time.perf_counter()
        state["s"] = jax.block_until_ready(scan(state["s"]))
        out["scan_compile_s"] = time.perf_counter() - t4

        def scanned():
            state["s"] = scan(state["s"])

        out["scan_s_per_step"] = (
            min(_per_step(scanned, 4, lambda: jax.block_until_ready(state["s"])) for _ in range(REPEATS)) / SCAN_STEPS
        )

        actions = torch.zeros(TRAIN_ENVS, built.env.num_actions, device=built.device)
        out["train_s_per_step"] = min(
            _per_step(lambda: built.env.step(actions), 100, built.env.synchronize) for _ in range(REPEATS)
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/eval_step"))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure()), flush=True)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.settings:
        home = args.out / f"home-{name}"  # a cold persistent cache per setting
        env = {**os.environ, "HOME": str(home), "XLA_FLAGS": SETTINGS[name]}
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True, timeout=400
        )
        line = {"setting": name, "xla_flags": SETTINGS[name], "process_s": time.perf_counter() - t0}
        if proc.returncode == 0:
            line.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        else:
            line.update(error=proc.stderr.strip().splitlines()[-3:])
        with open(args.out / "eval_step.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
