"""Search efficiency on recorded trials: this planner vs random search vs grid search vs ASHA on mean reward.

Every strategy draws trials from the same recorded table (``benchmarks/record_trials.py``); time and
spend come from the record. The planner (``planner``: TPE; ``planner-cost``: the cost-aware proposals of
:mod:`sweep.planner.acquisition`), random and grid runs use the real :class:`sweep.planner.loop.Planner`
(Optuna, cost pruning, budget) with an in-process pool; ASHA on mean reward (what Isaac Lab's Ray
tuner optimizes) is successive halving on the training return.

The truth is the table's own: each config's mean cost to the target over its recorded seeds, on equal terms (one-time
start-up and compilation left out, as the ranking does), per seed that reached it (:func:`config_means`; a seed
that did not reach adds what it spent and no success). A recommendation is *correct* when its config's mean is within
10% (``--within``) of the best config's mean. For each of ``--reps`` sampler seeds and each strategy, the replay
follows the study's recommendation after every trial (:func:`sweep.analysis.summary.summarize`, the rule ``sweep.run``
prints; for ASHA the cheapest trial to the target so far) and reports the study USD spent, every trial counted
(search and confirmation), until the recommendation became correct and stayed so to the study's end; a study that
ends on a wrong config never got there. Medians, the 10th-90th percentiles and the share of studies that ended
correct; and the study USD per correct recommendation (:func:`per_correct`: every study's spend over the studies
that ended correct) with a bootstrap interval, which stays finite where most studies of a strategy end wrong.

``--initial-from SPACE`` adds a strategy: the planner started on that space file's initial design (reduced to the
table's knobs), as ``sweep.run`` starts on it. It measures the design and the search together.

``--num-envs 2048,4096`` replays only those env counts' configs: the complete part of a table still being recorded.

``--confirm N`` gives the planner strategies a confirmation phase (N seeds per finalist, ``--confirm-top``
candidates and ``--baseline`` ENVSxSTEPS, as recorded). A table with one recording per config replays the same
curve for every seed: there the confirmation shows its cost, not the spread between seeds.

``--race-slack`` and ``--intensify`` set the planner's keys of the same names (random and grid search run each config
once, unpruned).

    python benchmarks/search_efficiency.py benchmarks/data/cpu_grid.json --reps 20
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from sweep import config as config_mod
from sweep.analysis.summary import summarize
from sweep.backends.replay import load_table
from sweep.config import validation
from sweep.contract import one_time_s
from sweep.execution.inline import InlinePool
from sweep.ledger import Row, metrics, read_rows
from sweep.params import TrialParams, flag_name, named_flags
from sweep.planner.loop import Planner
from sweep.prices import resolve

PRICE = resolve("custom", usd_per_hour=3600.0)  # 1 billable second = $1: figures read as seconds too


def subset(table: dict[str, Any], num_envs: set[int]) -> dict[str, Any]:
    """The table's recordings of these env counts only: the complete part of a table still being recorded."""
    return {**table, "trials": [t for t in table["trials"] if t["params"]["num_envs"] in num_envs]}


def env_counts(text: str) -> set[int]:
    """``--num-envs``: comma-separated positive integers."""
    counts = {int(n) for n in text.split(",")}
    if min(counts) < 1:
        raise ValueError(text)
    return counts


def table_space(table: dict[str, Any]) -> dict[str, list]:
    """Knob choices of a full-grid table (every combination must be recorded)."""
    trials = table["trials"]
    knobs: dict[str, set] = {}
    for t in trials:
        for k, v in TrialParams.of(t["params"]).as_dict().items():
            if k in ("num_envs", "num_steps_per_env", "num_mini_batches") or flag_name(k) is not None:
                knobs.setdefault(k, set()).add(v)
    return {k: sorted(v) for k, v in knobs.items()}


def record_cost(record: dict[str, Any], target: float) -> tuple[float, bool]:
    """A recorded trial's seconds on equal terms (less start-up and compilation) to the target, or to its end
    when it never reached it; and whether it reached it."""
    for point in record["curve"]:
        if point.get("success") is not None and point["success"] >= target:
            return _equal_terms_s(point), True
    last = record["curve"][-1] if record["curve"] else {"billable_s": record["end"].get("billable_s", 0.0)}
    return _equal_terms_s(last), False


def _equal_terms_s(point: dict[str, Any]) -> float:
    return max(0.0, point["billable_s"] - one_time_s(point.get("phases_s", {})))


def config_means(table: dict[str, Any], target: float) -> dict[tuple, float]:
    """Each config's cost to the target in USD (recorded seconds x PRICE), over its recorded seeds: the seconds all
    its seeds spent on equal terms over the number that reached (the mean over seeds when all did; inf when none)."""
    spent: dict[tuple, float] = {}
    reached: dict[tuple, int] = {}
    for t in table["trials"]:
        key = TrialParams.identity(t["params"])
        seconds, ok = record_cost(t, target)
        spent[key] = spent.get(key, 0.0) + seconds
        reached[key] = reached.get(key, 0) + ok
    usd = PRICE.usd_per_hour / 3600.0
    return {k: spent[k] * usd / reached[k] if reached[k] else float("inf") for k in spent}


def initial_design(space_file: str, space: dict[str, list]) -> list[dict[str, Any]]:
    """The top-level (GPU) initial design of ``space_file``, each entry reduced to the knobs the table
    varies (a knob recorded at one value takes that value)."""
    import yaml

    entries = (yaml.safe_load(Path(space_file).read_text()).get("search") or {}).get("initial", [])
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
) -> list[Row]:
    """One study with the real planner (``initial``: the design it starts on); returns its ledger rows."""
    flags = named_flags(space)
    ours = strategy.startswith("planner")  # random and grid search: each config once, no pruning
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
        "search": {
            "sampler": ("cost" if "cost" in strategy else "tpe") if ours else strategy,
            "prune": ours,
            "race_slack": getattr(args, "race_slack", None) or config_mod.Search.race_slack,
            "intensify": (getattr(args, "intensify", None) or config_mod.Search.intensify) if ours else 1,
            "initial": initial or [],
        },
        "run_id": f"{strategy}-{seed}",
    }
    if getattr(args, "confirm", 1) > 1 and ours:  # callers without the option: none
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
    """Successive halving on mean training return: the stretches it would have paid for, in order."""
    rng = random.Random(seed)
    configs = {}
    for t in table["trials"]:
        configs.setdefault(TrialParams.identity(t["params"]), []).append(t)
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
    return rows


def planner_trace(rows: list[Row]) -> list[tuple[float, tuple | None]]:
    """After each trial's end, in ledger order: the study USD spent so far (every trial, search and confirmation)
    and the config ``sweep.run`` would recommend from the ledger up to there (None while there is none)."""
    trace = []
    spent = 0.0
    for i, r in enumerate(rows):
        if not r.ended or not r.ran:  # a config told without running costs nothing
            continue
        spent += metrics(r).usd
        rec = summarize(rows[: i + 1]).recommendation
        trace.append((spent, TrialParams.identity(rec.config.params) if rec is not None else None))
    return trace


def asha_trace(rows: list[dict]) -> list[tuple[float, tuple | None]]:
    """ASHA's trace: after each paid stretch, the USD so far and the cheapest config to the target so far."""
    trace = []
    spent, best = 0.0, None
    for r in rows:
        spent += r["usd"]
        if r["usd_to_target"] is not None and (best is None or r["usd_to_target"] < best[0]):
            best = (r["usd_to_target"], r["key"])
        trace.append((spent, best[1] if best is not None else None))
    return trace


def usd_to_correct(trace: list[tuple[float, tuple | None]], correct: set[tuple]) -> tuple[float, int]:
    """The study USD at the trial after which the recommendation was in ``correct`` to the end, and how many trials
    that took; (inf, all trials) when the study ended on a wrong config or none."""
    at, n = float("inf"), len(trace)
    for i, (spent, key) in enumerate(trace):
        if key not in correct:
            at, n = float("inf"), len(trace)
        elif at == float("inf"):
            at, n = spent, i + 1
    return at, n


def per_correct(to_correct: list[float], total: list[float]) -> float:
    """Study USD per correct recommendation: what every study spent, to its correct recommendation or (ended wrong) to
    its end, over the studies that ended correct (inf: none did). The expected running time of black-box optimizer
    benchmarks (COCO's ERT), which stays finite where a median of 'never' does not; a study that ended wrong counts
    all it spent and delivers nothing."""
    paid = sum(c if c != float("inf") else t for c, t in zip(to_correct, total, strict=True))
    wins = sum(c != float("inf") for c in to_correct)
    return paid / wins if wins else float("inf")


def per_correct_interval(
    to_correct: list[float], total: list[float], draws: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of :func:`per_correct` over the studies (resampled with replacement)."""
    rng, n = random.Random(seed), len(to_correct)
    values = []
    for _ in range(draws):
        pick = [rng.randrange(n) for _ in range(n)]
        values.append(per_correct([to_correct[i] for i in pick], [total[i] for i in pick]))
    values.sort()
    return values[int(0.025 * (draws - 1))], values[int(0.975 * (draws - 1))]


def spread(values: list[float]) -> str:
    """'median (p10-p90)' of ``values`` (percentiles by nearest rank; inf prints as such)."""
    v = sorted(values)
    lo, hi = (v[round(q * (len(v) - 1))] for q in (0.1, 0.9))
    return f"{statistics.median(v):.1f} ({lo:.1f}-{hi:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--budget", type=float, default=1e9, help="study budget (recorded seconds = $ here)")
    parser.add_argument("--trial-cap", type=float, default=300.0)
    parser.add_argument("--max-trials", type=int, default=12)
    parser.add_argument(
        "--within", type=float, default=0.10, help="correct = a config's mean at most (1 + this) x the best"
    )
    parser.add_argument("--initial-from", default="", help="a space file: also run the planner on its initial design")
    parser.add_argument("--strategies", default="", help="comma-separated subset of the strategies to run")
    parser.add_argument("--confirm", type=int, default=1, help="seeds per finalist in a confirmation (1: none)")
    parser.add_argument("--race-slack", type=float, default=None, help="the planner's race_slack (default: sweep's)")
    parser.add_argument("--intensify", type=int, default=None, help="the planner's intensify (default: sweep's)")
    parser.add_argument("--confirm-top", type=int, default=2, help="candidates confirmed besides the baseline")
    parser.add_argument("--baseline", default="4096x24", help="the confirmation's baseline, ENVSxSTEPS as recorded")
    parser.add_argument(
        "--num-envs", type=env_counts, default=None, help="replay only these env counts, comma-separated (default: all)"
    )
    args = parser.parse_args()
    table = load_table(args.table)
    if args.num_envs:  # the replay backend reads the table from a file: the subset gets one for this run
        table = subset(table, args.num_envs)
        scratch = tempfile.TemporaryDirectory()
        args.table = str(Path(scratch.name) / Path(args.table).name)
        Path(args.table).write_text(json.dumps(table))
        print(f"replaying the table's configs of {sorted(args.num_envs)} envs: {len(table['trials'])} recordings")
    args.baseline_params = baseline_params(table, args.baseline)
    if args.confirm > 1:
        print(f"planner strategies confirm on {args.confirm} seeds against {args.baseline_params}")
    space = table_space(table)
    means = config_means(table, args.target)
    best = min(means.values())
    correct = {k for k, v in means.items() if v <= (1.0 + args.within) * best}
    counts = {len([t for t in table["trials"] if TrialParams.identity(t["params"]) == k]) for k in means}
    seeds = "-".join(str(n) for n in sorted(counts))
    within = f"within {args.within:.0%}"
    print(
        f"table {args.table}: {len(means)} configs, seeds per config: {seeds}; best mean "
        f"cost to target {best:.1f} (recorded seconds, equal terms); {len(correct)} configs {within} of it"
    )
    strategies = ["planner", "planner-cost", "random", "grid", "asha"]
    initial = initial_design(args.initial_from, space) if args.initial_from else []
    if initial:
        strategies[2:2] = ["planner+initial", "planner-cost+initial"]
        print(f"planner+initial starts on {args.initial_from}'s initial design, reduced to the table: {initial}")
    if args.strategies:
        strategies = [s for s in strategies if s in args.strategies.split(",")]
    to_correct: dict[str, list[float]] = {}
    trials: dict[str, list[int]] = {}
    total: dict[str, list[float]] = {}
    ended_correct: dict[str, int] = {}
    for strategy in strategies:
        for seed in range(args.reps):
            if strategy == "asha":
                trace = asha_trace(run_asha(table, seed, args))
            else:
                design = initial if strategy.endswith("+initial") else None
                trace = planner_trace(run_planner(args.table, space, strategy, seed, args, design))
            usd, n = usd_to_correct(trace, correct)
            to_correct.setdefault(strategy, []).append(usd)
            trials.setdefault(strategy, []).append(n)
            total.setdefault(strategy, []).append(trace[-1][0] if trace else 0.0)
            ended_correct[strategy] = ended_correct.get(strategy, 0) + (usd != float("inf"))
    print(
        "\n| strategy | study USD to a correct recommendation, median (p10-p90) | ended correct | "
        "trials until then, median | study USD in all, median | study USD per correct recommendation (95% "
        "bootstrap) |\n|---|---|---|---|---|---|"
    )
    ert = {s: per_correct(to_correct[s], total[s]) for s in strategies}
    med = {s: statistics.median(v) for s, v in to_correct.items()}
    for s in strategies:
        print(
            f"| {s} | {spread(to_correct[s])} | {ended_correct[s]}/{args.reps} | {statistics.median(trials[s]):.0f} | "
            f"{statistics.median(total[s]):.1f} | {ert[s]:.1f} "
            "({:.1f}-{:.1f}) |".format(*per_correct_interval(to_correct[s], total[s]))
        )
    for ours in (s for s in strategies if s.startswith("planner")):
        for other in (s for s in ("random", "grid", "asha") if s in strategies):
            if med[ours] == float("inf"):
                print(f"{ours} ended on a wrong config in most runs")
                break
            if med[other] == float("inf"):
                print(f"{other} ended on a wrong config in most runs; {ours} got there for {med[ours]:.1f}")
                continue
            print(f"{ours} spends {med[other] / med[ours]:.2f}x less than {other} to a correct recommendation")
        for other in (s for s in ("random", "grid", "asha") if s in strategies):
            print(f"{ours} spends {ert[other] / ert[ours]:.2f}x less than {other} per correct recommendation")


if __name__ == "__main__":
    main()
