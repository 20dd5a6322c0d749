"""Record real trials as a replay table (``sweep.backends.replay``): a grid run on a GPU, or existing ledgers.

Grid (on the GPU; each trial runs to the target or the cap, no pruning, every checkpoint kept). The cap is on
equal terms: ``--cap-s`` seconds of training past start-up and compilation, so the first trial of a shape in a
process, which compiles, trains as long as the rest (its billable seconds may pass the cap by its one-time
seconds, at most ``ONE_TIME_ALLOWANCE_S``):

    python benchmarks/record_trials.py grid --num-envs 2048,4096,8192 --horizons 8,12,24,32 \
        --flags buffer_donation,cuda_graph_update --seeds 1 --cap-s 90 --out benchmarks/data/h200_grid.json

Every ledger row also goes to ``<out>.jsonl``; the same command run again records only the points
that file does not finish, so a grid longer than one device session is recorded in pieces. A point capped short of
``--cap-s`` seconds on equal terms (as recorded while the cap counted billable seconds) is not finished: it runs
again, and its new recording replaces the old one in the table (the ledger keeps both). On a
machine with several GPUs, one process per GPU shares the points still to run (each trial alone on
its GPU, so its times are its own; its rows go to ``<out>.shard<I>.jsonl``, read by every later run):

    CUDA_VISIBLE_DEVICES=0 python benchmarks/record_trials.py grid ... --shard 0/2 &
    CUDA_VISIBLE_DEVICES=1 python benchmarks/record_trials.py grid ... --shard 1/2

A table is evaluated one way: ``--stepped-passes`` steps held-out passes from Python, as before the env's own loop
(docs/decisions/0007-pass-in-the-simulator-loop.md), for a table begun before it (``h200_grid3``).

From ledgers already written (a sweep's trials are real trials too; pruned ones are kept only up to
where they were stopped, so they are marked ``truncated``):

    python benchmarks/record_trials.py ledgers reports/<run_id>/ledger.jsonl --out benchmarks/data/h200_sweep.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

from sweep.contract import one_time_s
from sweep.ledger import PROGRESS_FIELDS, read_rows

#: Billable seconds past the equal-terms cap that a recorded trial's start-up and compilation may take (cold compiles
#: of one shape measured 15-55 s on an H200): the trial's hard cap is ``--cap-s`` plus this.
ONE_TIME_ALLOWANCE_S = 150.0

#: What a recorded curve keeps of each checkpoint row: its progress, less what belongs to the machine that ran it.
CURVE_KEYS = tuple(k for k in PROGRESS_FIELDS if k not in ("device", "checkpoint", "peak_gpu_gib", "gpu_capacity_gib"))


def ledger_lines(path: Path) -> list[dict]:
    """A ledger's rows as the ledger writes them (JSON objects), every version's lines read alike: what a table is
    built from."""
    return [r.as_json() for r in read_rows(path)]


def table_from_rows(rows: list[dict], device: str, profile: str) -> dict[str, Any]:
    """Group ledger rows by trial into replay records (curve = checkpoint rows, end = the last row)."""
    trials: dict[tuple, dict] = {}
    for r in rows:
        key = (r["run_id"], r["trial"])
        rec = trials.setdefault(key, {"params": r["params"], "seed": r.get("seed", 0), "curve": [], "end": {}})
        if r["state"] == "running":
            rec["curve"].append({k: r.get(k) for k in CURVE_KEYS})
        else:
            rec["end"] = {"state": r["state"], "reason": r.get("reason", ""), "billable_s": r["billable_s"]}
            rec["truncated"] = r["state"] in ("pruned", "failed")
    return {"device": device, "profile": profile, "control_dt_s": 0.02, "trials": list(trials.values())}


def grid(args: argparse.Namespace) -> list[dict]:
    """Run every grid point (and seed) to its end with no pruning; returns all ledger rows.

    Every row is also appended (fsynced) to ``<out>.jsonl`` (``<out>.shard<I>.jsonl`` for a shard); a
    later call with the same ``--out`` keeps the trials those files end and runs only the missing
    points, so a grid can be recorded over several device sessions and GPUs.
    """
    import torch

    from sweep.contract import CONTINUE, TrialConfig
    from sweep.ledger import LedgerWriter
    from sweep.params import trial_params
    from sweep.trial.runner import run_trial

    if args.stepped_passes:
        step_passes_from_python()
    index, count = args.shard
    ledger = ledger_path(args.out, args.shard)
    earlier = ledger_lines(ledger)
    ended = {r["trial"] for r in earlier if r["state"] != "running"}
    mine = [r for r in earlier if r["trial"] in ended]  # a trial cut off mid-way is run again
    ledger.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(ledger, "".join(json.dumps(r, sort_keys=True) + "\n" for r in mine))
    recorded = recorded_rows(args.out, args.cap_s)
    done = {point_key(r["params"], r["seed"]) for r in recorded if r["complete"]}
    short = {point_key(r["params"], r["seed"]) for r in recorded} - done
    next_trial = max(ended, default=-1) + 1
    flags = [f for f in args.flags.split(",") if f]
    configs = [
        TrialConfig(
            profile=args.profile,
            num_envs=n,
            num_steps_per_env=h,
            seed=seed,
            cap_s=args.cap_s + ONE_TIME_ALLOWANCE_S,
            race_cap_s=args.cap_s,
            flags={**dict(zip(flags, values, strict=True)), "compile_cache": True},
            save_checkpoints=False,
        ).validate()
        for n, h, values, seed in itertools.product(
            [int(x) for x in args.num_envs.split(",")],
            [int(x) for x in args.horizons.split(",")],
            itertools.product([False, True], repeat=len(flags)),
            [int(s) for s in args.seeds.split(",")],
        )
    ]
    missing = [c for c in configs if point_key(trial_params(c), c.seed) not in done]
    todo = missing[index::count]
    print(
        f"{len(configs) - len(missing)} of {len(configs)} points recorded ({len(short)} more capped short of "
        f"{args.cap_s:g} s on equal terms, run again); this process runs {len(todo)}",
        flush=True,
    )
    run_id = "grid" if count == 1 else f"grid-shard{index}"
    started = time.monotonic()
    built: set[tuple] = set()
    with LedgerWriter(ledger) as writer:
        for cfg in todo:
            # What the next trial may take: its cap, its last pass, and start-up and compilation (a shape new to
            # this process compiles the simulator, ~15-55 s on an H200; a known one a few seconds).
            shape = (cfg.num_envs, cfg.flags.get("buffer_donation"))
            reserve = 1.1 * args.cap_s + (10.0 if shape in built else 60.0)
            if time.monotonic() - started + reserve > args.stop_after_s:
                print(f"stopping: another trial could run past --stop-after-s {args.stop_after_s:g}", flush=True)
                break
            i, next_trial = next_trial, next_trial + 1

            def keep(row: Any) -> str:
                writer.append(row)
                return CONTINUE

            end = run_trial(cfg, keep, run_id=run_id, trial=i, price_usd_per_hour=1.0, price_label="recorded")
            built.add(shape)
            save(recorded_rows(args.out, args.cap_s), args)  # after every trial: a recording that stops keeps it
            print(
                f"{i:3d} {cfg.num_envs}x{cfg.num_steps_per_env} "
                f"{ {f: cfg.flags[f] for f in flags} } seed {cfg.seed}: {end.state} "
                f"at {end.billable_s:.0f} s (success {end.success})",
                flush=True,
            )
    print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")
    return recorded_rows(args.out, args.cap_s)  # other shards' trials too


def ledger_path(out: str, shard: tuple[int, int]) -> Path:
    """The ledger a grid process appends to: ``<out>.jsonl``, or ``<out>.shard<I>.jsonl`` for shard I."""
    index, count = shard
    return Path(out).with_suffix(".jsonl" if count == 1 else f".shard{index}.jsonl")


def recorded_rows(out: str, cap_s: float) -> list[dict]:
    """The rows of the recording of each point, from ``<out>.jsonl`` and every shard's ledger, each row with
    ``complete`` set (:func:`complete`): a point's last complete trial, else its last trial that ended. A trial run
    again replaces an incomplete one; the ledgers keep both."""
    base = Path(out)
    trials: dict[tuple, list[dict]] = {}  # (file, run_id, trial) -> rows, in the order recorded
    for path in [base.with_suffix(".jsonl"), *sorted(base.parent.glob(f"{base.stem}.shard*.jsonl"))]:
        for r in ledger_lines(path):
            trials.setdefault((path.name, r["run_id"], r["trial"]), []).append(r)
    chosen: dict[str, list[dict]] = {}
    for rows in trials.values():
        if rows[-1]["state"] == "running":
            continue  # cut off mid-way: run again
        ok = complete(rows[-1], cap_s)
        point = point_key(rows[0]["params"], rows[0]["seed"])
        if ok or point not in chosen or not chosen[point][0]["complete"]:
            chosen[point] = [{**r, "complete": ok} for r in rows]
    return [r for rows in chosen.values() for r in rows]


def complete(end: dict, cap_s: float) -> bool:
    """Whether a trial's end row finishes its grid point: it reached, failed, or trained at least ``cap_s`` seconds
    on equal terms (less start-up and compilation) before its cap (a 5% shortfall tolerated). A trial capped on billable
    seconds after a long compile trained less than the others: its point is recorded again."""
    if end["state"] != "capped":
        return True
    return end["billable_s"] - one_time_s(end.get("phases_s", {})) >= 0.95 * cap_s


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (other grid processes read it meanwhile)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def shard(text: str) -> tuple[int, int]:
    """``I/N`` -> (I, N): this process runs every N-th point still to record, from the I-th."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard: expected I/N such as 0/2, got {text!r}") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"--shard: I must be in 0..N-1, got {text!r}")
    return index, count


def point_key(params: dict[str, Any], seed: int) -> str:
    """One grid point and seed, as recorded in a ledger row."""
    return json.dumps({**params, "seed": seed}, sort_keys=True)


def step_passes_from_python() -> None:
    """In this process, MJX envs have no loop of their own: a held-out pass steps the policy from Python."""
    from sweep.backends.mjx.locomotion import MjxLocomotionEnv

    MjxLocomotionEnv.loop_platforms = ()


def save(rows: list[dict], args: argparse.Namespace) -> None:
    """Write the table of ``rows`` to ``args.out``."""
    device = args.device_name or next((r.get("device") for r in rows if r.get("device")), "unknown")
    table = table_from_rows(rows, device, args.profile)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(args.out), json.dumps(table, indent=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grid")
    g.add_argument("--num-envs", default="2048,4096,8192")
    g.add_argument("--horizons", default="12,24,48")
    g.add_argument("--flags", default="fused_optimizer,buffer_donation")
    g.add_argument("--seeds", default="1")
    g.add_argument("--profile", default="gpu")
    g.add_argument("--cap-s", type=float, default=150.0)
    g.add_argument("--device-name", default="")
    g.add_argument(
        "--stop-after-s",
        type=float,
        default=float("inf"),
        help="start no trial that could end later than this many wall seconds after the start (device time limits)",
    )
    g.add_argument("--shard", type=shard, default=(0, 1), help="I/N: run every N-th point to record, from the I-th")
    g.add_argument(
        "--stepped-passes",
        action="store_true",
        help="step held-out passes from Python, not in the env's own loop (as a table begun before that loop was: "
        "one table, one way of evaluating)",
    )
    led = sub.add_parser("ledgers")
    led.add_argument("paths", nargs="+")
    led.add_argument("--device-name", default="")
    led.add_argument("--profile", default="gpu")
    for p in (g, led):
        p.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.cmd == "grid":
        from sweep.contract import check_training_seed
        from sweep.errors import ConfigError

        try:  # before anything is written or run
            [check_training_seed(int(s), key="--seeds") for s in args.seeds.split(",")]
        except (ConfigError, ValueError) as exc:
            parser.error(str(exc))
        rows = grid(args)
    else:
        rows = [r for path in args.paths for r in ledger_lines(path)]
    save(rows, args)
    print(f"{len({(r['run_id'], r['trial']) for r in rows})} trials -> {args.out}")


if __name__ == "__main__":
    main()
