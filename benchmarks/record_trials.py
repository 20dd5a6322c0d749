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

Chosen configs instead of the product grid (``--configs``, ``--top``, both: the listed ones first), recorded exactly
as the grid records (the same caps, the compile cache on, the other fields at TrialConfig's defaults). A spec is
``ENVSxSTEPS[:MODE][+FLAG[=VALUE]]...``: ``4096x24:stock`` is legged_gym's default trained by rsl-rl's own
``OnPolicyRunner``; ``--top N --from TABLE`` takes TABLE's N best configs by their table mean cost to the target
(``search_efficiency.config_means``, the yardstick's own rule), best first. ``--held-out`` marks the recording as
held-out: its seeds must be disjoint from those of ``--from``'s trials (checked before anything runs):

    python benchmarks/record_trials.py grid --configs 4096x24:stock --top 16 --from benchmarks/data/h200_grid3.json \
        --held-out --seeds 4,5,6 --cap-s 90 --stepped-passes --out benchmarks/data/h200_grid3_held_out.json

``merge`` adds recordings to an existing table under keys of their own, so that what a replay reads (``trials``)
stays as it was: a held-out recording goes to ``held_out_trials`` (the truth a recommendation is judged against; no
replayed study draws it), any other to ``baseline_trials`` (one config, on the table's own seeds). Device, profile and
control period must be the table's; a (config, seed) point merged before with the same record is skipped, one with
another record is refused:

    python benchmarks/record_trials.py merge benchmarks/data/h200_grid3_held_out.json \
        --into benchmarks/data/h200_grid3.json

From ledgers already written (a sweep's trials are real trials too; pruned ones are kept only up to
where they were stopped, so they are marked ``truncated``):

    python benchmarks/record_trials.py ledgers reports/<run_id>/ledger.jsonl --out benchmarks/data/h200_sweep.json
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sweep.contract import one_time_s
from sweep.errors import ConfigError
from sweep.ledger import PROGRESS_FIELDS, read_rows

#: Billable seconds past the equal-terms cap that a recorded trial's start-up and compilation may take (cold compiles
#: of one shape measured 15-55 s on an H200): the trial's hard cap is ``--cap-s`` plus this.
ONE_TIME_ALLOWANCE_S = 150.0

#: What a recorded curve keeps of each checkpoint row: its progress, less what belongs to the machine that ran it.
CURVE_KEYS = tuple(k for k in PROGRESS_FIELDS if k not in ("device", "checkpoint", "peak_gpu_gib", "gpu_capacity_gib"))

#: Where ``merge`` puts a recording in a table: held-out seeds (never replayed: the truth a recommendation is judged
#: against) and the baseline's seeds on the table's own seeds; ``trials`` is what a replay reads.
HELD_OUT_KEY = "held_out_trials"
BASELINE_KEY = "baseline_trials"


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
    configs = [
        TrialConfig(
            **{**point, "flags": {**point["flags"], "compile_cache": True}},
            profile=args.profile,
            seed=seed,
            cap_s=args.cap_s + ONE_TIME_ALLOWANCE_S,
            race_cap_s=args.cap_s,
            save_checkpoints=False,
        ).validate()
        for point in points(args)
        for seed in seeds(args.seeds)
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
                f"{i:3d} {label(cfg)} seed {cfg.seed}: {end.state} at {end.billable_s:.0f} s (success {end.success})",
                flush=True,
            )
    print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")
    return recorded_rows(args.out, args.cap_s)  # other shards' trials too


def label(cfg: Any) -> str:
    """``4096x12 sweep {'buffer_donation': True}``: a config's shape, mode and the flags it sets off their default."""
    from sweep import perf

    default = perf.resolve({})
    flags = {f: v for f, v in cfg.flags.items() if f != "compile_cache" and v != default[f]}
    return f"{cfg.num_envs}x{cfg.num_steps_per_env} {cfg.mode} {flags}"


def seeds(text: str) -> list[int]:
    """``--seeds``: comma-separated training seeds."""
    return [int(s) for s in text.split(",")]


def points(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The configs to record, in order, as TrialConfig fields (``flags`` without the compile cache): ``--configs``
    then ``--top``'s, each once, or, with neither, the product of ``--num-envs``, ``--horizons`` and ``--flags``."""
    if args.configs or args.top:
        chosen = [parse_config(spec) for spec in args.configs.split(",") if spec]
        if args.top:
            chosen += [params_fields(p) for p in top_configs(load_json(args.from_table), args.top)]
        from sweep.contract import TrialConfig
        from sweep.params import TrialParams

        unique: dict[tuple, dict[str, Any]] = {}
        for p in chosen:  # a config named twice is recorded once, where it was first named
            unique.setdefault(TrialParams.from_config(TrialConfig(**p)).key(), p)
        return list(unique.values())
    flags = [f for f in args.flags.split(",") if f]
    return [
        {"num_envs": n, "num_steps_per_env": h, "flags": dict(zip(flags, values, strict=True))}
        for n, h, values in itertools.product(
            [int(x) for x in args.num_envs.split(",")],
            [int(x) for x in args.horizons.split(",")],
            itertools.product([False, True], repeat=len(flags)),
        )
    ]


def parse_config(spec: str) -> dict[str, Any]:
    """``ENVSxSTEPS[:MODE][+FLAG[=VALUE]]...`` -> TrialConfig fields: ``4096x24:stock`` (rsl-rl's own runner),
    ``4096x12+buffer_donation+cuda_graph_update`` (a flag alone is on; ``+critic_chunk=2`` sets a value)."""
    import yaml

    from sweep import perf

    head, *named = spec.strip().split("+")
    shape, _, mode = head.partition(":")
    try:
        envs, steps = (int(x) for x in shape.lower().split("x"))
        flags = {}
        for item in named:
            name, eq, value = item.partition("=")
            flags[name] = yaml.safe_load(value) if eq else True
        perf.resolve(flags, key=f"--configs {spec}")
    except (ValueError, ConfigError) as exc:
        raise ConfigError(
            f"--configs: {spec!r} is not ENVSxSTEPS[:MODE][+FLAG[=VALUE]]... such as 4096x24:stock ({exc})"
        ) from None
    return {"num_envs": envs, "num_steps_per_env": steps, "mode": mode or "sweep", "flags": flags}


def params_fields(params: Any) -> dict[str, Any]:
    """A recorded config (:class:`sweep.params.TrialParams`) as TrialConfig fields, every flag as recorded."""
    return {
        "num_envs": params.num_envs,
        "num_steps_per_env": params.num_steps_per_env,
        "num_mini_batches": params.num_mini_batches,
        "num_learning_epochs": params.num_learning_epochs,
        "mode": params.mode,
        "flags": {k: v for k, v in params.flags if k != "compile_cache"},
    }


def top_configs(table: dict[str, Any], n: int) -> list[Any]:
    """The table's ``n`` best configs (:class:`sweep.params.TrialParams`), best first: the lowest mean cost to the
    target over their recorded seeds, by the yardstick's own rule (``search_efficiency.config_means``), at the
    target a trial runs to; a tie keeps the table's order."""
    from sweep.contract import TrialConfig
    from sweep.params import TrialParams

    means = sibling("search_efficiency").config_means(table, TrialConfig.target)
    if not 0 < n <= len(means):
        raise ConfigError(f"--top: must be in 1..{len(means)}, the table's configs (got {n})")
    first = {}
    for t in table["trials"]:
        first.setdefault(TrialParams.identity(t["params"]), t["params"])
    return [TrialParams.of(first[k]) for k in sorted(means, key=means.__getitem__)[:n]]


def sibling(name: str) -> Any:
    """``benchmarks/<name>.py`` as a module, however this file was loaded (a script, or a test's loader)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # as an import would: dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def load_json(path: str) -> dict[str, Any]:
    """A table file (its trials under ``trials``)."""
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read a table ({exc})") from None
    if not isinstance(table, dict) or "trials" not in table:
        raise ConfigError(f"{path}: not a recorded table (no 'trials')")
    return table


def check_held_out(args: argparse.Namespace) -> None:
    """``--held-out`` needs ``--from`` and seeds that none of its trials was recorded on; ``--top`` needs ``--from``."""
    if (args.held_out or args.top) and not args.from_table:
        raise ConfigError("--from: the table these configs are chosen from or held out of is required")
    if args.held_out:
        own = {t["seed"] for t in load_json(args.from_table)["trials"]}
        if shared := sorted(own & set(seeds(args.seeds))):
            raise ConfigError(
                f"--seeds: held-out seeds must differ from those of {args.from_table}'s trials ({sorted(own)}); "
                f"{shared} are shared"
            )


def point_identity(record: dict[str, Any]) -> tuple:
    """A recorded trial's config (its one identity) and seed."""
    from sweep.params import TrialParams

    return TrialParams.identity(record["params"]), record["seed"]


def merge(table: dict[str, Any], recording: dict[str, Any], name: str = "the recording") -> tuple[dict, str, int]:
    """``table`` with ``recording``'s trials added under :data:`HELD_OUT_KEY` (a recording marked held-out, on seeds
    none of the table's trials has) or :data:`BASELINE_KEY` (one config, on the table's own seeds); ``trials`` is
    left as it was. Returns (the new table, the key, how many trials were added). A point (config, seed) already in
    the table with an equal record is skipped (merged before); with another record it is refused, as is a recording
    of another device, profile or control period."""
    for key in ("device", "profile", "control_dt_s"):
        if recording.get(key) != table.get(key):
            raise ConfigError(f"{name}: its {key} is {recording.get(key)!r}, the table's {table.get(key)!r}")
    held_out = bool(recording.get("held_out"))
    dest = HELD_OUT_KEY if held_out else BASELINE_KEY
    own = {t["seed"] for t in table["trials"]}
    theirs = {t["seed"] for t in recording["trials"]}
    if held_out and own & theirs:
        raise ConfigError(f"{name}: held-out seeds {sorted(own & theirs)} are seeds of the table's trials")
    if not held_out and not theirs <= own:
        raise ConfigError(
            f"{name}: not marked held-out, so it is a baseline on the table's own seeds {sorted(own)}; "
            f"{sorted(theirs - own)} are not (record held-out seeds with --held-out)"
        )
    known = {point_identity(t): t for key in ("trials", HELD_OUT_KEY, BASELINE_KEY) for t in table.get(key, [])}
    added = []
    for record in recording["trials"]:
        point = point_identity(record)
        if point in known:
            if known[point] != record:
                raise ConfigError(f"{name}: seed {point[1]} of {record['params']} is in the table with another record")
            continue
        known[point] = record
        added.append(record)
    merged = [*table.get(dest, []), *added]
    if dest == BASELINE_KEY and len({point_identity(t)[0] for t in merged}) > 1:
        raise ConfigError(f"{name}: {BASELINE_KEY} holds one config, the baseline; this would make it several")
    return {**table, dest: merged}, dest, len(added)


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
    if getattr(args, "held_out", False):
        table["held_out"] = True
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
    g.add_argument(
        "--configs",
        default="",
        help="comma-separated configs to record instead of the product grid, each ENVSxSTEPS[:MODE][+FLAG[=VALUE]]... "
        "(4096x24:stock: rsl-rl's own runner)",
    )
    g.add_argument("--top", type=int, default=0, help="also record the N best configs of --from by table mean")
    g.add_argument("--from", dest="from_table", default="", help="the table --top and --held-out refer to")
    g.add_argument(
        "--held-out",
        action="store_true",
        help="mark the recording held-out (for merge); its seeds must differ from those of --from's trials",
    )
    led = sub.add_parser("ledgers")
    led.add_argument("paths", nargs="+")
    led.add_argument("--device-name", default="")
    led.add_argument("--profile", default="gpu")
    for p in (g, led):
        p.add_argument("--out", required=True)
    mg = sub.add_parser("merge")
    mg.add_argument("recordings", nargs="+", help="tables written by grid (a held-out one marked so)")
    mg.add_argument("--into", required=True, help="the table file to add them to (rewritten in place)")
    args = parser.parse_args()
    if args.cmd == "merge":
        try:
            table = load_json(args.into)
            for path in args.recordings:
                table, key, added = merge(table, load_json(path), name=path)
                print(f"{path}: {added} trials added to {key} of {args.into} ({len(table[key])} there now)")
        except ConfigError as exc:
            parser.error(str(exc))
        write_atomic(Path(args.into), json.dumps(table, indent=0))  # the spelling save() writes
        return
    if args.cmd == "grid":
        from sweep.contract import check_training_seed

        try:  # before anything is written or run
            [check_training_seed(s, key="--seeds") for s in seeds(args.seeds)]
            check_held_out(args)
            points(args)
        except (ConfigError, ValueError) as exc:
            parser.error(str(exc))
        rows = grid(args)
    else:
        rows = [r for path in args.paths for r in ledger_lines(path)]
    save(rows, args)
    print(f"{len({(r['run_id'], r['trial']) for r in rows})} trials -> {args.out}")


if __name__ == "__main__":
    main()
