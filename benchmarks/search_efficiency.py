"""Search efficiency on recorded trials: this planner vs random search vs grid search vs ASHA on mean reward.

Every strategy draws trials from the same recorded table (``benchmarks/record_trials.py``); time and
spend come from the record. The planner, random and grid runs use the real :class:`sweep.planner.Planner`
(Optuna, cost pruning, budget) with an in-process pool; ASHA on mean reward (what Isaac Lab's Ray
tuner optimizes) is successive halving on the training return. For each of ``--reps`` sampler
seeds it reports the study USD spent until a config within 10% (``--within``) of the table's best USD-to-target
was found, and the USD-to-target of the final recommendation; then medians and ratios.

``--initial-from SPACE`` adds a fifth strategy: the planner started on that space file's initial
design (reduced to the table's knobs), as ``sweep.run`` starts on it. It measures the design and
the search together; the plain "planner" row is the search alone.

``--confirm N`` gives the planner strategies a confirmation phase (N seeds per finalist, ``--confirm-top``
candidates and ``--baseline`` ENVSxSTEPS, as recorded): the recommendation is then the config with the lowest mean
over its seeds, and a column shows what the confirmation spent. Off by default, so the figures stay comparable with
runs made before it existed. A table with one recording per config replays the same curve for every seed: there the
confirmation shows its cost, not the spread between seeds.

    python benchmarks/search_efficiency.py benchmarks/data/cpu_grid.json --reps 20
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from sweep import config as config_mod
from sweep import validation
from sweep.backends.replay import load_table
from sweep.contract import FLAG_PREFIX, TrialParams, config_key
from sweep.inline import InlinePool
from sweep.ledger import last_rows, metrics, read_rows, summary_figures
from sweep.planner import Planner
from sweep.prices import resolve
from sweep.summary import summarize

PRICE = resolve("custom", usd_per_hour=3600.0)  # 1 billable second = $1: figures read as seconds too


def table_space(table: dict[str, Any]) -> dict[str, list]:
    """Knob choices of a full-grid table (every combination must be recorded)."""
    trials = table["trials"]
    knobs: dict[str, set] = {}
    for t in trials:
        for k, v in TrialParams.of(t["params"]).as_dict().items():
            if k in ("num_envs", "num_steps_per_env", "num_mini_batches") or k.startswith(FLAG_PREFIX):
                knobs.setdefault(k, set()).add(v)
    return {k: sorted(v) for k, v in knobs.items()}


def best_usd_to_target(table: dict[str, Any], target: float) -> float:
    """The cheapest recorded cost to target (billable seconds x PRICE) over the whole table."""
    best = float("inf")
    for t in table["trials"]:
        for point in t["curve"]:
            if point.get("success") is not None and point["success"] >= target:
                best = min(best, point["billable_s"] * PRICE.usd_per_hour / 3600.0)
                break
    return best


def initial_design(space_file: str, space: dict[str, list]) -> list[dict[str, Any]]:
    """The top-level (GPU) initial design of ``space_file``, each entry reduced to the knobs the table
    varies (a knob recorded at one value takes that value)."""
    import yaml

    entries = yaml.safe_load(Path(space_file).read_text()).get("initial", [])
    knobs = {k for k, choices in space.items() if len(choices) > 1}
    reduced = [{k: v for k, v in entry.items() if k in knobs} for entry in entries]
    return [dict(t) for t in dict.fromkeys(tuple(sorted(e.items())) for e in reduced)]


def run_planner(
    table_path: str,
    space: dict[str, list],
    strategy: str,
    seed: int,
    args: Any,
    initial: list[dict[str, Any]] | None = None,
) -> list[dict]:
    """One study with the real planner (``initial``: the design it starts on); returns its ledger rows."""
    flags = {k[len(FLAG_PREFIX) :]: v for k, v in space.items() if k.startswith(FLAG_PREFIX)}
    data = {
        "backend": "replay",
        "profile": "recorded",
        "backend_options": {"table": table_path, "time_scale": 0.0},
        "knobs": {
            "num_envs": space["num_envs"],
            "num_steps_per_env": space["num_steps_per_env"],
            "num_mini_batches": space.get("num_mini_batches", [4]),
            "flags": flags,
        },
        "target": {"success": args.target},
        "price": {"gpu": "custom", "usd_per_hour": PRICE.usd_per_hour},
        "budget": {"usd": args.budget, "trial_usd": args.trial_cap, "max_trials": args.max_trials},
        "constraints": {"max_update_period_s": 10.0},
        "seeds": {"sampler": seed, "training": seed},
        "sampler": "tpe" if strategy.startswith("planner") else strategy,
        "prune": strategy.startswith("planner"),
        "initial": initial or [],
        "run_id": f"{strategy}-{seed}",
    }
    if getattr(args, "confirm", 1) > 1 and strategy.startswith("planner"):  # callers without the option: none
        data["confirm"] = {"seeds": args.confirm, "top": args.confirm_top, "baseline": args.baseline_params}
    cfg = validation.validate(config_mod.compose(data, {}, "search_efficiency", has_gpu=False))
    with tempfile.TemporaryDirectory() as tmp:
        Planner(cfg, Path(tmp), InlinePool(), PRICE, "recorded", 0.02, poll_s=0.001).run()
        return read_rows(Path(tmp) / "ledger.jsonl")


def baseline_params(table: dict[str, Any], spec: str) -> dict[str, Any]:
    """The baseline ``ENVSxSTEPS`` as recorded in the table (its first such trial's knobs and flags); the table's first
    trial when it has none."""
    envs, steps = (int(x) for x in spec.lower().split("x"))
    trials = table["trials"]
    found = next(
        (t for t in trials if (t["params"]["num_envs"], t["params"]["num_steps_per_env"]) == (envs, steps)), trials[0]
    )
    p = TrialParams.of(found["params"])
    flags = {k: v for k, v in p.flags}
    return {"num_envs": p.num_envs, "num_steps_per_env": p.num_steps_per_env, "flags": flags}


def run_asha(table: dict[str, Any], seed: int, args: Any, eta: int = 3, rungs: int = 3) -> list[dict]:
    """Successive halving on mean training return: the rows it would have paid for, in order."""
    rng = random.Random(seed)
    configs = {}
    for t in table["trials"]:
        configs.setdefault(config_key(t["params"]), []).append(t)
    keys = list(configs)
    rng.shuffle(keys)
    alive = keys[: args.max_trials]
    rows: list[dict] = []
    spent: dict[tuple, float] = {}
    for rung in range(rungs):
        limit = args.trial_cap * 3600.0 / PRICE.usd_per_hour * eta ** (rung - rungs + 1)
        scores = {}
        for key in alive:
            record = configs[key][seed % len(configs[key])]
            upto = [p for p in record["curve"] if p["billable_s"] <= limit] or record["curve"][:1]
            done_s = upto[-1]["billable_s"]
            new = max(0.0, done_s - spent.get(key, 0.0))  # a promoted trial continues where it stopped
            spent[key] = max(spent.get(key, 0.0), done_s)
            reached = next((p for p in upto if (p.get("success") or 0) >= args.target), None)
            rows.append(
                {
                    "key": key,
                    "usd": new * PRICE.usd_per_hour / 3600.0,
                    "usd_to_target": reached["billable_s"] * PRICE.usd_per_hour / 3600.0 if reached else None,
                }
            )
            returns = [p.get("mean_return") for p in upto if p.get("mean_return") is not None]
            scores[key] = returns[-1] if returns else float("-inf")
        alive = sorted(alive, key=lambda k: -scores[k])[: max(1, len(alive) // eta)]
    rows.append({"key": alive[0], "usd": 0.0, "final": True})
    return rows


def usd_until_found(order: list[tuple[float, float | None]], threshold: float) -> tuple[float | None, int]:
    """Cumulative spend over trials in start order until one reached the target within ``threshold``
    (None if none did), and how many paid trials (spend > 0) that took."""
    total, paid = 0.0, 0
    for usd, to_target in order:
        total += usd
        paid += usd > 0
        if to_target is not None and to_target <= threshold:
            return total, paid
    return None, paid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--budget", type=float, default=1e9, help="study budget (recorded seconds = $ here)")
    parser.add_argument("--trial-cap", type=float, default=300.0)
    parser.add_argument("--max-trials", type=int, default=12)
    parser.add_argument("--within", type=float, default=0.10, help="'found' = reached at most (1 + this) x the best")
    parser.add_argument("--initial-from", default="", help="a space file: also run the planner on its initial design")
    parser.add_argument("--confirm", type=int, default=1, help="seeds per finalist in a confirmation (1: none)")
    parser.add_argument("--confirm-top", type=int, default=2, help="candidates confirmed besides the baseline")
    parser.add_argument("--baseline", default="4096x24", help="the confirmation's baseline, ENVSxSTEPS as recorded")
    args = parser.parse_args()
    table = load_table(args.table)
    args.baseline_params = baseline_params(table, args.baseline)
    if args.confirm > 1:
        print(f"planner strategies confirm on {args.confirm} seeds against {args.baseline_params}")
    space = table_space(table)
    best = best_usd_to_target(table, args.target)
    threshold = (1.0 + args.within) * best
    within = f"within {args.within:.0%}"
    print(
        f"table {args.table}: {len(table['trials'])} recorded trials, best USD-to-target {best:.1f} "
        f"(recorded seconds), {within}: <= {threshold:.1f}"
    )
    strategies = ["planner", "random", "grid", "asha"]
    initial = initial_design(args.initial_from, space) if args.initial_from else []
    if initial:
        strategies.insert(1, "planner+initial")
        print(f"planner+initial starts on {args.initial_from}'s initial design, reduced to the table: {initial}")
    found: dict[str, list[float]] = {}
    final: dict[str, list[float]] = {}
    trials: dict[str, list[int]] = {}
    confirmed: dict[str, list[float]] = {}
    for strategy in strategies:
        for seed in range(args.reps):
            if strategy == "asha":
                rows = run_asha(table, seed, args)
                order = [(r["usd"], r.get("usd_to_target")) for r in rows if not r.get("final")]
                winner = next(r["key"] for r in rows if r.get("final"))
                recs = [r for r in rows if r["key"] == winner and r.get("usd_to_target") is not None]
                rec_usd = recs[0]["usd_to_target"] if recs else None
            else:
                design = initial if strategy == "planner+initial" else None
                rows = run_planner(args.table, space, strategy, seed, args, design)
                ends = last_rows(rows)
                order = [(metrics(r)["usd"], metrics(r)["usd_to_target"]) for _, r in sorted(ends.items())]
                if args.confirm > 1 and strategy.startswith("planner"):  # over its seeds; confirmation spend apart
                    s = summarize(rows)
                    rec_usd = s.recommendation.config.mean_usd if s.recommendation is not None else None
                    confirmed.setdefault(strategy, []).append(s.usd_by_phase.get("confirm", 0.0))
                else:
                    figures = summary_figures(rows)
                    rec_usd = (
                        metrics(ends[figures["best_trial"]])["usd_to_target"]
                        if figures["best_trial"] is not None
                        else None
                    )
            spent, paid = usd_until_found(order, threshold)
            found.setdefault(strategy, []).append(spent if spent is not None else float("inf"))
            trials.setdefault(strategy, []).append(paid)
            final.setdefault(strategy, []).append(rec_usd if rec_usd is not None else float("inf"))
    extra = " median confirmation USD |" if confirmed else ""
    print(
        f"\n| strategy | median study USD until {within} of best | found in | median paid trials until then | "
        f"median USD-to-target of the recommendation |{extra}\n|---|---|---|---|---|{'---|' if confirmed else ''}"
    )
    med = {s: statistics.median(v) for s, v in found.items()}
    for s in found:
        hits = sum(v != float("inf") for v in found[s])
        cell = f" {statistics.median(confirmed[s]):.1f} |" if s in confirmed else (" - |" if confirmed else "")
        print(
            f"| {s} | {med[s]:.1f} | {hits}/{len(found[s])} | {statistics.median(trials[s]):.0f} | "
            f"{statistics.median(final[s]):.1f} |{cell}"
        )
    for ours in (s for s in strategies if s.startswith("planner")):
        for other in ("random", "grid", "asha"):
            if med[other] == float("inf"):
                print(f"{other} never got {within} of the best in most runs; {ours} did at {med[ours]:.1f}")
                continue
            ratio = med[other] / med[ours] if med[ours] not in (0, float("inf")) else float("nan")
            print(f"{ours} spends {ratio:.2f}x less than {other} to get {within} of the best")


if __name__ == "__main__":
    main()
