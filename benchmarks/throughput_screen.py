"""Whether a throughput screen could buy a cold search its breadth: each config's env steps per second, measured
over a short stretch, with env steps to the target learnt from the few configs a study trains.

A config's cost to the target is its env steps to the target over its throughput. Throughput is cheap to measure (a
stretch of seconds, as the planner's probes do for the exact flags); steps to the target costs a trial each. This
script asks, on a recorded table, how well ``steps / throughput`` ranks the configs the search chooses among (the
exact flags held on, as the probes leave them: ``--held flags.buffer_donation=true``) when the steps are fitted on
``k`` configs trained at random, and what the screen itself would cost:

- per config: its mean first-checkpoint throughput (env steps over seconds on equal terms), its mean env steps and
  cost to the target over the table's replayed recordings, and whether its held-out mean is correct (within 10% of
  the best, as :func:`search_efficiency.truth` judges);
- per ``k`` (``--trained``): over ``--draws`` draws of ``k`` configs (one random recording each), ``log steps`` fitted
  by least squares on ``log num_envs`` and ``log num_steps_per_env`` (only the mean while ``k`` is below 3, the
  slopes shrunk towards 0 by ``--ridge``); the untried configs ranked by fitted steps over their throughput; how
  often a correct config is among the ``k`` trained or the next ``m`` (``--then``), against ``k + m`` configs trained
  uninformed;
- the screen's cost: every config's first stretch (what the table recorded: its first checkpoint) in baseline runs,
  and the one-time seconds of a shape new to a worker that it would add (the median over recordings that paid one).

It reads recordings only: no study is replayed. The planner's own screen (``search.screen``) is measured by
``search_efficiency.py --screen``; it fits a Gaussian process with a trend, not this script's two slopes.

    python benchmarks/throughput_screen.py benchmarks/data/h200_grid3.json
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported by the tests

from search_efficiency import PRICE, USD_PER_S, equal_terms_s, truth

from sweep.backends.replay import load_table
from sweep.cli import parse_overrides
from sweep.contract import one_time_s
from sweep.errors import SweepError
from sweep.params import TrialParams

PAID_S = 1.0
"""One-time seconds above which a recording is taken to have paid a shape new to its worker (the rest, hundredths of
a second, are a warm worker's bookkeeping)."""


@dataclass(frozen=True)
class Screened:
    """One config of the screened slice, from its replayed recordings."""

    key: tuple
    params: dict[str, Any]
    num_envs: int
    horizon: int
    sps: float
    """Mean env steps per second on equal terms over each recording's first checkpoint."""
    first_s: float
    """Mean seconds on equal terms to the first checkpoint: what screening it costs, one-time seconds aside."""
    steps: list[float]
    """Each recording's env steps at its first checkpoint at or above the target (recordings that never reached it
    left out)."""
    cost_s: float
    """Mean seconds on equal terms to the target over the recordings that reached it."""
    correct: bool


def held(text: str) -> dict[str, Any]:
    """``key=value,...`` as the params the slice holds, read as the command line reads overrides
    (:func:`sweep.cli.parse_overrides`); each value ``true``, ``false`` or a number."""
    try:
        out = parse_overrides([part for part in text.split(",") if part])
    except SweepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    for key, value in out.items():
        if not isinstance(value, (bool, int, float)):
            raise argparse.ArgumentTypeError(f"{key}={value}: expected key=value, the value true, false or a number")
    return out


def counts(text: str) -> list[int]:
    """``1,2,3`` as positive integers."""
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas, such as 1,2,3")
    return out


def reach(record: dict[str, Any], target: float) -> tuple[float, float] | None:
    """(env steps, seconds on equal terms) at the recording's first checkpoint at or above ``target``; None if never."""
    for point in record["curve"]:
        if point.get("success") is not None and point["success"] >= target:
            return float(point["env_steps"]), equal_terms_s(point)
    return None


def screened(table: dict[str, Any], holds: dict[str, Any], target: float, within: float) -> list[Screened]:
    """The configs whose params match ``holds``, each as :class:`Screened`, fastest first."""
    correct = truth(table, target, within).correct
    by_key: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for t in table["trials"]:
        if t["curve"] and all(t["params"].get(k) == v for k, v in holds.items()):
            by_key[TrialParams.identity(t["params"])].append(t)
    out = []
    for key, records in by_key.items():
        firsts = [(r["curve"][0]["env_steps"], equal_terms_s(r["curve"][0])) for r in records]
        reached = [x for x in (reach(r, target) for r in records) if x is not None]
        params = records[0]["params"]
        out.append(
            Screened(
                key=key,
                params=params,
                num_envs=int(params["num_envs"]),
                horizon=int(params["num_steps_per_env"]),
                sps=statistics.fmean(steps / s for steps, s in firsts if s > 0),
                first_s=statistics.fmean(s for _, s in firsts),
                steps=[steps for steps, _ in reached],
                cost_s=statistics.fmean(s for _, s in reached) if reached else math.inf,
                correct=key in correct,
            )
        )
    return sorted(out, key=lambda c: -c.sps)


def fit(points: list[tuple[float, float, float]], ridge: float) -> tuple[float, float, float]:
    """(c, a, b) of ``log steps = c + a log num_envs + b log horizon`` over ``points`` of (num_envs, horizon,
    steps), least squares with the slopes shrunk towards 0 by ``ridge`` (in the logs' centred units); the slopes are
    0 with fewer than 3 points."""
    xs = [(math.log(n), math.log(h)) for n, h, _ in points]
    ys = [math.log(s) for _, _, s in points]
    my = statistics.fmean(ys)
    if len(points) < 3:
        return my, 0.0, 0.0
    mx = [statistics.fmean(x[i] for x in xs) for i in (0, 1)]
    d = [(x[0] - mx[0], x[1] - mx[1]) for x in xs]
    s00 = sum(u * u for u, _ in d) + ridge
    s11 = sum(v * v for _, v in d) + ridge
    s01 = sum(u * v for u, v in d)
    r0 = sum(u * (y - my) for (u, _), y in zip(d, ys, strict=True))
    r1 = sum(v * (y - my) for (_, v), y in zip(d, ys, strict=True))
    det = s00 * s11 - s01 * s01
    a = (r0 * s11 - r1 * s01) / det
    b = (r1 * s00 - r0 * s01) / det
    return my - a * mx[0] - b * mx[1], a, b


def hit_rate(configs: list[Screened], k: int, m: int, draws: int, ridge: float, seed: int) -> float:
    """The share of ``draws`` in which a correct config is among ``k`` configs trained at random (one random
    recording each) or the ``m`` untried ones that fitted steps over measured throughput ranks cheapest."""
    rng = random.Random(seed)
    trainable = [c for c in configs if c.steps]
    hits = 0
    for _ in range(draws):
        trained = rng.sample(trainable, k)
        if any(c.correct for c in trained):
            hits += 1
            continue
        c0, a, b = fit([(c.num_envs, c.horizon, rng.choice(c.steps)) for c in trained], ridge)
        names = {c.key for c in trained}
        rest = sorted(
            (c for c in configs if c.key not in names),
            key=lambda c: math.exp(c0 + a * math.log(c.num_envs) + b * math.log(c.horizon)) / c.sps,
        )
        hits += any(c.correct for c in rest[:m])
    return hits / draws


def uninformed(n: int, total: int, correct: int) -> float:
    """The chance that ``n`` of ``total`` configs drawn at random include one of ``correct``."""
    return 1.0 - math.comb(total - correct, n) / math.comb(total, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table")
    ap.add_argument("--held", type=held, default="flags.buffer_donation=true", help="params the screened slice holds")
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--within", type=float, default=0.1)
    ap.add_argument("--trained", type=counts, default="1,2,3,4", help="configs trained at random first (k)")
    ap.add_argument("--then", type=int, default=1, help="untried configs trained by the ranking after them (m)")
    ap.add_argument("--ridge", type=float, default=0.5)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    table = load_table(args.table)
    try:
        configs = screened(table, args.held, args.target, args.within)
        run_s = truth(table, args.target, args.within).unit_usd / USD_PER_S
    except ValueError as exc:
        ap.error(f"{args.table}: {exc}")
    trainable = sum(1 for c in configs if c.steps)
    if trainable < max(args.trained) or len(configs) < max(args.trained) + args.then:
        ap.error(
            f"--held: {len(configs)} configs hold it ({trainable} reached the target), too few for --trained "
            f"{max(args.trained)} and --then {args.then}"
        )
    shown = ",".join(f"{k}={str(v).lower()}" for k, v in args.held.items())
    print(
        f"{len(configs)} configs hold {shown}; {sum(c.correct for c in configs)} correct; one baseline run "
        f"{run_s:.1f} s ({PRICE.usd_per_hour / 3600:g} $/s: seconds read as dollars)"
    )
    varied = sorted(
        k
        for k in configs[0].params
        if k not in ("num_envs", "num_steps_per_env") and len({str(c.params[k]) for c in configs}) > 1
    )
    print(f"num_envs x horizon, {', '.join(varied)}: env steps/s over the first checkpoint; env steps and s to target")
    for c in configs:
        steps = statistics.fmean(c.steps) / 1e6 if c.steps else math.nan
        flags = " ".join(str(c.params[k]).lower() for k in varied)
        print(
            f"  {c.num_envs:>5} x {c.horizon:<2} {flags:<6} {c.sps:>8.0f}  {steps:5.1f} M  {c.cost_s:5.1f} s"
            f"{'  correct' if c.correct else ''}"
        )
    one_time = [
        one_time_s(r["curve"][0]["phases_s"])
        for r in table["trials"]
        if r["curve"] and one_time_s(r["curve"][0]["phases_s"]) > PAID_S
    ]
    first = sum(c.first_s for c in configs)
    print(
        f"screen: every config's first stretch {first:.1f} s = {first / run_s:.2f} baseline runs; a shape new to a "
        f"worker adds {statistics.median(one_time):.1f} s one-time (median of {len(one_time)} recordings that paid one)"
    )
    n_correct = sum(c.correct for c in configs)
    for k in args.trained:
        rate = hit_rate(configs, k, args.then, args.draws, args.ridge, args.seed)
        print(
            f"trained {k} at random, then the screen's {args.then}: a correct config trained in {rate:.0%} of "
            f"{args.draws} draws; {k + args.then} uninformed: {uninformed(k + args.then, len(configs), n_correct):.0%}"
        )


if __name__ == "__main__":
    main()
