"""Time to target on the ``gpu`` profile: this runner vs stock rsl-rl, plus the simulator-alone rate.

Variants: stock (rsl-rl OnPolicyRunner.learn), flags-off (this runner), exact-flags-on (every
semantics-preserving flag on). Each variant is a full trial (held-out evaluation every
``eval_every_steps``, stop at the target or the cap), written to one ledger; every figure printed
is computed from that ledger.

    python benchmarks/trial_to_target.py --config 4096x24 --cap-s 240 --out reports/bench
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from sweep import perf
from sweep.backends.base import resolve_device, sim_only_rate
from sweep.backends.mjx.locomotion import PROFILES, MjxLocomotionEnv
from sweep.contract import CONTINUE, TrialConfig
from sweep.ledger import LedgerWriter, metrics, read_rows
from sweep.trial.runner import run_trial

VARIANTS = {
    "stock": ("stock", {}),
    "flags-off": ("sweep", {}),
    "exact-flags-on": ("sweep", perf.all_on(exact_only=True)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="4096x24")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--cap-s", type=float, default=240.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    n, horizon = (int(x) for x in args.config.split("x"))
    device = resolve_device("auto")
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    out = Path(args.out)
    ledger_path = out / "ledger.jsonl"
    names = args.variants.split(",")
    with LedgerWriter(ledger_path) as ledger:
        for i, name in enumerate(names):
            mode, flags = VARIANTS[name]
            cfg = TrialConfig(
                profile=args.profile,
                num_envs=n,
                num_steps_per_env=horizon,
                seed=args.seed,
                mode=mode,
                flags={**flags, "compile_cache": True},
                cap_s=args.cap_s,
            ).validate()

            def sink(row, name=name):
                ledger.append(row)
                if row.state == "running":
                    print(f"  {name}: {row.billable_s:6.1f} s  success {row.success:.3f}", flush=True)
                return CONTINUE

            run_trial(cfg, sink, run_id="bench", trial=i, out_dir=out)
    env = MjxLocomotionEnv(n, args.seed, device, PROFILES[args.profile], donate=True)
    sim_sps = sim_only_rate(env, 50 * horizon)
    ends = [r for r in read_rows(ledger_path) if r["state"] != "running"]
    print(f"\n{args.config} on the '{args.profile}' profile, {gpu}; figures from {ledger_path}")
    print(
        "| variant | end | held-out success | training throughput (env steps/s) | wall to target (s) | "
        "training s | compile s | eval s | bottleneck |\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in ends:
        m, ph = metrics(r), r["phases_s"]
        wall = f"{m['wall_to_target_s']:.1f}" if m["wall_to_target_s"] is not None else f"> {m['wall_s']:.0f}"
        success = "n/a" if r["success"] is None else f"{r['success']:.3f}"
        print(
            f"| {names[r['trial']]} | {r['state']} | {success} | "
            f"{m['throughput_sps']:,.0f} | {wall} | "
            f"{m['training_s']:.1f} | {ph['compile']:.1f} | {ph['eval']:.1f} | {m['bottleneck']} |"
        )
    print(f"| simulator alone ({n} envs) | | | {sim_sps:,.0f} | | | | | |")


if __name__ == "__main__":
    main()
