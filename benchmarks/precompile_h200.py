"""How soon the precompiler has the GPU space's env shapes ready, cold cache, with 1 process and with n side by side.

    python benchmarks/precompile_h200.py --jobs 1 4 --out $OUT/precompile

For each process count: a fresh cache folder (HOME), the plan ``sweep.run`` would start for ``space=locomotion``
on this machine (``sweep.execution.precompile.start``), waited for to the end; prints when each shape was ready
(seconds after the start, in plan order) and the seconds until the last one, and keeps each run's ``precompile.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from sweep import config
from sweep.config import validation
from sweep.execution import precompile


def run(n: int, out: Path) -> list[dict]:
    """One cold run of the plan with ``n`` processes; its lines, each with ``ready_s`` after the start."""
    folder = out / f"jobs{n}"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(folder / "home")  # a cold persistent cache for the children
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=True))
    t0 = time.time()
    procs = precompile.start(cfg, folder, "gpu", has_gpu=True, n=n)
    for proc in procs:
        proc.wait()
    lines = [json.loads(line) for line in (folder / "precompile.jsonl").read_text().splitlines()]
    for line in lines:
        line["ready_s"] = line["at"] - t0
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--out", type=Path, default=Path("reports/precompile"))
    args = parser.parse_args()
    home = os.environ.get("HOME", "")
    for n in args.jobs:
        lines = run(n, args.out)
        ready = ", ".join(
            f"{ln['num_envs']}/{'on' if ln['knobs'].get('buffer_donation') else 'off'} {ln['ready_s']:.0f}"
            for ln in sorted(lines, key=lambda ln: ln["ready_s"])
        )
        print(
            f"jobs {n}: {len(lines)} shapes, last ready after {max(ln['ready_s'] for ln in lines):.1f} s; "
            f"ready (envs/donation s): {ready}",
            flush=True,
        )
    os.environ["HOME"] = home


if __name__ == "__main__":
    main()
