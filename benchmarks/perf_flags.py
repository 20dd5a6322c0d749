"""Performance flags, each measured against stock rsl-rl in one run (GPU; runs on CPU too, slowly).

For each config (default 4096 x 24 and 16384 x 24 on the ``gpu`` profile): stock rsl-rl
``OnPolicyRunner.learn``, this runner with all flags off, each flag alone, all flags on, and the
simulator alone (the limit). Same env seed, same torch seed, same iterations. Reports env steps
per training second (sim + policy + learn, as the ledger counts it) and the ratio to stock measured
in this run, plus the phase breakdown of each variant.

    python benchmarks/perf_flags.py --iters 30 --warmup 5 --out perf_flags.json

``--out`` writes the measurements as JSON (the command, the GPU, the versions, each variant's rate and phases, the
simulator alone), rewritten after every variant so that a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import traceback
from typing import Any

import torch

from sweep import perf
from sweep.backends.base import resolve_device, sim_only_rate
from sweep.backends.mjx.locomotion import PROFILES, MjxLocomotionEnv
from sweep.contract import TrialConfig
from sweep.ledger import PHASES, TRAINING_PHASES, PhaseClock
from sweep.trial.learner import build_learner, device_sync


def variants() -> list[tuple[str, str, dict[str, Any]]]:
    """(name, mode, flags): stock, all off, each flag alone, all on."""
    out = [("stock rsl-rl", "stock", {}), ("runner (all flags off)", "sweep", {})]
    for name, flag in perf.CATALOG.items():
        value = flag.choices[-1] if name != "log_every" else 0
        out.append((f"{name}={value}", "sweep", {name: value}))
    out.append(("all exact flags on", "sweep", perf.all_on(exact_only=True)))
    out.append(
        ("exact flags + cuda_graph_update", "sweep", {**perf.all_on(exact_only=True), "cuda_graph_update": True})
    )
    out.append(("all flags on", "sweep", perf.all_on()))
    return out


def measure(env: Any, device: str, mode: str, flags: dict, n: int, horizon: int, iters: int, warmup: int) -> dict:
    """Train ``warmup`` then ``iters`` iterations on a restarted env; training-second rate of the timed part."""
    env.restart()
    clock = PhaseClock(device_sync(device, env))
    cfg = TrialConfig(profile="gpu", num_envs=n, num_steps_per_env=horizon, seed=1, mode=mode, flags=flags)
    flags = perf.Flags.of(flags)
    perf.apply_to_process(flags)
    trainer, alg = build_learner(cfg, env, device, flags, clock)
    perf.warm_up(alg, env, flags)
    trainer(warmup)
    clock.seconds.update(dict.fromkeys(PHASES, 0.0))
    trainer(iters)
    training_s = sum(clock.seconds[p] for p in TRAINING_PHASES)
    steps = n * horizon * iters
    return {"env_steps": steps, "training_s": training_s, "sps": steps / training_s, "phases_s": dict(clock.seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="4096x24,16384x24")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--only", default="", help="comma-separated variant names to run (default: all)")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    device = resolve_device(args.device)
    perf.enable_compile_cache()
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    results: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/perf_flags.py", *sys.argv[1:]]),
        "device": gpu,
        "versions": versions(),
        "iters": args.iters,
        "warmup": args.warmup,
        "configs": {},
    }
    for spec in args.configs.split(","):
        n, horizon = (int(x) for x in spec.split("x"))
        envs = {d: MjxLocomotionEnv(n, 1, device, PROFILES["gpu"], donate=d) for d in (False, True)}
        limit = sim_only_rate(envs[True], horizon * args.iters)  # first: a run cut short still has the limit
        rows: dict[str, Any] = {}
        results["configs"][spec] = {"variants": rows, "sim_only_sps": limit}
        for name, mode, flags in variants():
            if args.only and name.split("=")[0] not in args.only.split(","):
                continue
            env = envs[bool(perf.resolve(flags)["buffer_donation"])]
            try:
                rows[name] = measure(env, device, mode, flags, n, horizon, args.iters, args.warmup)
            except Exception as exc:  # report the variant as failed, measure the others
                traceback.print_exc()
                print(f"{spec} {name}: failed ({type(exc).__name__}: {exc})", flush=True)
                continue
            print(f"{spec} {name:40s} {rows[name]['sps']:12,.0f} env steps/s", flush=True)
            save(results, args.out)  # a run cut short keeps what it measured
        stock = rows.get("stock rsl-rl", {}).get("sps")
        print(f"\n{spec} on {gpu}: env steps per training second, ratio to stock rsl-rl measured in this run")
        print(
            "| variant | env steps/s | x stock | of simulator alone | sim s | policy s | learn s | log s |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        for name, r in rows.items():
            ratio = f"{r['sps'] / stock:.2f}" if stock else "n/a"
            ph = r["phases_s"]
            print(
                f"| {name} | {r['sps']:,.0f} | {ratio} | {r['sps'] / limit:.0%} | {ph['sim']:.2f} | {ph['policy']:.2f} "
                f"| {ph['learn']:.2f} | {ph['log']:.2f} |"
            )
        print(f"| simulator alone (the limit) | {limit:,.0f} | {limit / stock:.2f} | 100% | | | | |" if stock else "")
        for env in envs.values():
            env.close()


def versions() -> dict[str, str]:
    """The versions of what a measurement ran on (a data file says what made it)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in ("torch", "jax", "mujoco", "mujoco-mjx", "rsl-rl-lib"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def save(results: dict[str, Any], path: str) -> None:
    """Write the results so far to ``path`` (nothing without one)."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
