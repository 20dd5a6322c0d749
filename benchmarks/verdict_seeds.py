"""What a decided verdict costs: how many seeds of the best config and of the baseline the recommendation's
``vs_baseline`` needs before its 95% interval lies wholly below 1, and what those seeds cost in baseline runs.

The recommendation is compared with the baseline by :func:`sweep.analysis.evidence.ratio_interval` (the delta
method on log means, the two sides' spread pooled), over the seeds each side trained. This script draws ``n`` seeds
per side with replacement from the table's recordings of the two (every recording of the best config by held-out
mean, replayed and held-out; every recording of the baseline) and counts how often the interval's upper end lies
below 1. The seeds of such a verdict cost ``n x (1 + ratio)`` baseline runs, the ratio being the two sides' mean
costs: a study that ends with a decided verdict spends at least that, besides its search, its probes and the
baseline's start-up. Costs as the yardstick reads them (:func:`search_efficiency.record_cost`: equal terms, one-time
start-up and compilation left out).

Then whether the interval holds what it says (:func:`coverage`): seeds drawn lognormal around the two sides' mean
costs, the best config's spread of log cost the table's within-config spread pooled over its configs
(:func:`pooled_sigma`), the baseline's its own recordings' spread; how often the interval holds the true ratio and
how often it is decided, against Welch's unpooled interval (:func:`welch_interval`, what the verdict used before
docs/decisions/0025-pooled-verdict.md).

    python benchmarks/verdict_seeds.py benchmarks/data/h200_grid3.json --seeds 2,3,4,5
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported by the tests

from search_efficiency import baseline_key, record_cost, truth

from sweep.analysis.evidence import ratio_interval, t975
from sweep.backends.replay import BASELINE, HELD_OUT, load_table
from sweep.errors import SweepError
from sweep.params import TrialParams


@dataclass(frozen=True)
class Verdict:
    """``n`` seeds a side: how often the verdict is decided, and what its seeds cost."""

    n: int
    decided: float
    """Share of the resamples whose 95% interval of best / baseline lies wholly below 1."""
    runs: float
    """What ``n`` seeds of each side cost, in baseline runs: ``n x (1 + ratio)``."""

    def line(self) -> str:
        return (
            f"{self.n} seeds a side: decided (upper bound below 1) in {self.decided:.0%} of resamples; "
            f"those seeds cost {self.runs:.1f} baseline runs"
        )


def sides(table: dict[str, Any], target: float, within: float) -> tuple[list[float], list[float]]:
    """The costs (equal-terms seconds) of every recording of the best config by held-out mean, and of the
    baseline's, the recordings that did not reach the target left out."""
    held = truth(table, target, within).held_out
    base = baseline_key(table)
    best_key = min((k for k in held if k != base), key=held.__getitem__)
    best, baseline = [], []
    for record in [*table["trials"], *table.get(HELD_OUT, []), *table.get(BASELINE, [])]:
        cost, reached = record_cost(record, target)
        key = TrialParams.identity(record["params"])
        if reached and key == best_key:
            best.append(cost)
        elif reached and key == base:
            baseline.append(cost)
    return best, baseline


def verdicts(best: list[float], baseline: list[float], ns: list[int], resamples: int, seed: int) -> list[Verdict]:
    """For each ``n`` of ``ns``: :class:`Verdict` from ``resamples`` draws of ``n`` costs a side, with replacement."""
    if len(best) < 2 or len(baseline) < 2:
        raise ValueError(
            f"too few recordings to resample: {len(best)} of the best config, {len(baseline)} of the baseline"
        )
    ratio = ratio_interval(tuple(best), tuple(baseline))[0]
    rng = random.Random(seed)
    out = []
    for n in ns:
        hits = 0
        for _ in range(resamples):
            a = tuple(rng.choice(best) for _ in range(n))
            b = tuple(rng.choice(baseline) for _ in range(n))
            hi = ratio_interval(a, b)[2]
            hits += hi is not None and hi < 1.0
        out.append(Verdict(n, hits / resamples, n * (1.0 + ratio)))
    return out


def log_costs(table: dict[str, Any], target: float) -> dict[tuple, list[float]]:
    """Log cost to the target (equal-terms seconds) of every recording that reached, replayed, baseline and held-out,
    by config."""
    out: dict[tuple, list[float]] = {}
    for record in [*table["trials"], *table.get(BASELINE, []), *table.get(HELD_OUT, [])]:
        cost, reached = record_cost(record, target)
        if reached and cost > 0:
            out.setdefault(TrialParams.identity(record["params"]), []).append(math.log(cost))
    return out


def pooled_sigma(logs: dict[Any, list[float]]) -> float:
    """The spread of log cost within a config, pooled over configs with two or more recordings."""
    spread = [(v, statistics.fmean(v)) for v in logs.values() if len(v) > 1]
    squares = sum((x - mean) ** 2 for v, mean in spread for x in v)
    dof = sum(len(v) - 1 for v, _ in spread)
    if dof == 0:
        raise ValueError("no config with two recordings that reached: no spread to pool")
    return math.sqrt(squares / dof)


def welch_interval(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float]:
    """(lo, hi): the 95% interval of mean(a) / mean(b) by the delta method on log means, each side's own spread,
    Welch-Satterthwaite degrees of freedom (rounded down): what the verdict used before decision 0025; 2 values a
    side at least."""
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / (len(a) * ma**2), statistics.variance(b) / (len(b) * mb**2)
    if va + vb == 0:
        return ma / mb, ma / mb
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t975(max(1, math.floor(dof))) * math.sqrt(va + vb)
    return ma / mb * math.exp(-half), ma / mb * math.exp(half)


@dataclass(frozen=True)
class Coverage:
    """``n`` seeds a side drawn lognormal: how often each interval holds the true ratio, and how often it is
    decided (its upper end below 1)."""

    n: int
    pooled: float
    welch: float
    pooled_decided: float
    welch_decided: float

    def line(self) -> str:
        return (
            f"{self.n} seeds a side, lognormal: the pooled interval holds the true ratio in {self.pooled:.1%} of "
            f"draws, decided in {self.pooled_decided:.0%}; Welch's in {self.welch:.1%}, decided in "
            f"{self.welch_decided:.0%}"
        )


def coverage(sd_best: float, sd_base: float, ratio: float, ns: list[int], draws: int, seed: int) -> list[Coverage]:
    """For each ``n`` of ``ns``: :class:`Coverage` over ``draws`` draws of ``n`` costs a side, lognormal with those
    spreads of log cost and means in the ratio ``ratio`` (the best config's over the baseline's)."""
    rng = random.Random(seed)
    mu_best, mu_base = math.log(ratio) - sd_best**2 / 2, -(sd_base**2) / 2  # lognormal means: ratio and 1
    out = []
    for n in ns:
        held = {"pooled": 0, "welch": 0}
        decided = {"pooled": 0, "welch": 0}
        for _ in range(draws):
            a = tuple(math.exp(rng.gauss(mu_best, sd_best)) for _ in range(n))
            b = tuple(math.exp(rng.gauss(mu_base, sd_base)) for _ in range(n))
            for name, (lo, hi) in (("pooled", ratio_interval(a, b)[1:]), ("welch", welch_interval(a, b))):
                held[name] += lo <= ratio <= hi
                decided[name] += hi < 1.0
        share = {k: v / draws for k, v in held.items()}
        out.append(Coverage(n, share["pooled"], share["welch"], decided["pooled"] / draws, decided["welch"] / draws))
    return out


def resampling_parser(doc: str, seeds: str, seeds_help: str, resamples: int) -> argparse.ArgumentParser:
    """The arguments of the benchmarks that resample a table with held-out recordings (this one and
    ``yardstick_resolution.py``): the table, the seed counts to try, the target, the tolerance, the resamples."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("table", help="a recorded table with held-out recordings (record_trials.py)")
    parser.add_argument("--seeds", default=seeds, help=seeds_help)
    parser.add_argument("--target", type=float, default=0.9, help="held-out success the recordings count to")
    parser.add_argument("--within", type=float, default=0.1, help="the yardstick's tolerance")
    parser.add_argument("--resamples", type=int, default=resamples)
    parser.add_argument("--rng-seed", type=int, default=0)
    return parser


def seed_counts(parser: argparse.ArgumentParser, text: str, least: int) -> list[int]:
    """``--seeds``, comma-separated whole numbers of at least ``least``; else one line from ``parser``."""
    try:
        ns = [int(s) for s in text.split(",")]
    except ValueError:
        parser.error(f"--seeds: whole numbers separated by commas (got {text!r})")
    if not ns or min(ns) < least:
        parser.error(f"--seeds: each at least {least} (got {text!r})")
    return ns


def main(argv: list[str] | None = None) -> None:
    parser = resampling_parser(
        __doc__, "2,3,4,5", "seeds a side to try, comma-separated (at least 2, the fewest an interval needs)", 10000
    )
    args = parser.parse_args(argv)
    ns = seed_counts(parser, args.seeds, 2)
    try:
        table = load_table(args.table)
        best, baseline = sides(table, args.target, args.within)
        found = verdicts(best, baseline, ns, args.resamples, args.rng_seed)
        base = baseline_key(table)
        sd_best = pooled_sigma({k: v for k, v in log_costs(table, args.target).items() if k != base})
        sd_base = statistics.stdev(math.log(x) for x in baseline)
        ratio = statistics.fmean(best) / statistics.fmean(baseline)
        held = coverage(sd_best, sd_base, ratio, ns, args.resamples, args.rng_seed)
    except SweepError as exc:  # an unreadable table: the message names it
        sys.exit(f"error: {exc}")
    except ValueError as exc:  # a table that cannot judge
        sys.exit(f"error: {args.table}: {exc}")
    print(
        f"{args.table}: best config by held-out mean, {len(best)} recordings; baseline, {len(baseline)}; "
        f"best / baseline {ratio_interval(tuple(best), tuple(baseline))[0]:.2f}; {args.resamples} resamples"
    )
    for verdict in found:
        print(verdict.line())
    print(f"sd of log cost: {sd_best:.3f} within a config (pooled over the table's), {sd_base:.3f} the baseline's")
    for line in held:
        print(line.line())


if __name__ == "__main__":
    main()
