"""What the search-efficiency yardstick can tell apart: how often a study that recommends the truly best config is
judged correct at all.

A recommendation is correct when its config's held-out mean cost to the target is within 10% (``--within``) of the
best held-out mean (:func:`search_efficiency.truth`). Three measurements from the table bound how fine that is:

- **Checkpoints** (:func:`gap_shares`). A recording's cost to the target is read at the first held-out pass at or
  past the target; the target was crossed somewhere after the checkpoint before it (after the last pass evaluated,
  where the held-out gate skipped some). The share of the cost in that stretch is one recording's resolution.
- **Exact-flag twins** (:func:`twins`). Configs that differ only in flags docs/perf-flags.md calls exact learn the
  same per env step; their held-out means, on the same held-out seeds, differ by what the seeds and the GPU's run to
  run variation make of one config.
- **The ceiling** (:func:`ceiling`). Each config with held-out recordings costs ``exp(mu + sigma z)`` per recording:
  ``mu`` its mean log cost over every recording (replayed and held-out), ``sigma`` the spread of log cost within a
  config, pooled (:func:`pooled_sigma`). Each resample draws ``n`` held-out seeds per config anew and asks whether
  the config of lowest ``mu`` (what a study that knew every config's mean would recommend) lies within the
  tolerance of the lowest drawn mean. The share of such resamples is the most any strategy can expect to be judged
  correct on a truth of ``n`` seeds; taking the configs' sample means for their true means spreads them wider than
  they are, so the bound is generous.

Costs as the yardstick reads them (:func:`search_efficiency.record_cost`: equal terms, one-time start-up and
compilation left out); recordings that never reached the target are left out.

    python benchmarks/yardstick_resolution.py benchmarks/data/h200_grid3.json --seeds 3,6,10,20
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported by the tests

from search_efficiency import equal_terms_s, truth
from verdict_seeds import log_costs, pooled_sigma, resampling_parser, seed_counts

from sweep import perf
from sweep.backends.replay import HELD_OUT, load_table
from sweep.errors import SweepError


def gap_shares(record: dict[str, Any], target: float) -> tuple[float, float] | None:
    """Where a recording crossed the target, as shares of its cost to the target (equal terms): the stretch since the
    checkpoint before the pass that saw it, and since the last pass evaluated below the target (the held-out gate
    skips passes; all of the cost when none came before). None when it never reached."""
    before = evaluated = 0.0
    for point in record["curve"]:
        success = point.get("success")
        at = equal_terms_s(point)
        if success is not None and success >= target:
            return ((at - before) / at, (at - evaluated) / at) if at > 0 else None
        before = at
        if success is not None:
            evaluated = at
    return None


def learning_key(key: tuple) -> tuple:
    """A config's identity without its exact flags (docs/perf-flags.md): configs that share it learn the same per env
    step."""
    exact = set(perf.all_on(exact_only=True))
    return (*key[:-1], tuple(kv for kv in key[-1] if kv[0] not in exact))


def twins(held: dict[tuple, float]) -> list[tuple[tuple, list[float]]]:
    """Held-out means of configs that differ only in exact flags: (one of them, their means, lowest first), for each
    such group of two or more."""
    groups: dict[tuple, list[tuple]] = {}
    for key in held:
        groups.setdefault(learning_key(key), []).append(key)
    return [(keys[0], sorted(held[k] for k in keys)) for keys in groups.values() if len(keys) > 1]


def ceiling(mus: dict[Any, float], sigma: float, n: int, within: float, resamples: int, seed: int) -> float:
    """The share of ``resamples`` truths of ``n`` held-out seeds a config in which the config of lowest ``mu`` is
    correct (its drawn mean within ``within`` of the lowest drawn mean); costs lognormal, ``exp(mu + sigma z)``."""
    if len(mus) < 2:
        raise ValueError("fewer than two configs: nothing to tell apart")
    rng = random.Random(seed)
    best = min(mus, key=mus.__getitem__)
    hits = 0
    for _ in range(resamples):
        drawn = {k: statistics.fmean(math.exp(rng.gauss(mu, sigma)) for _ in range(n)) for k, mu in mus.items()}
        hits += drawn[best] <= (1.0 + within) * min(drawn.values())
    return hits / resamples


def shape(key: tuple) -> str:
    return f"{key[0]} x {key[1]}"


def quartiles(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4)
    return f"{q[0]:.0%}-{q[2]:.0%}"


def main(argv: list[str] | None = None) -> None:
    parser = resampling_parser(__doc__, "3,6,10,20", "held-out seeds a config to try, comma-separated", 20000)
    args = parser.parse_args(argv)
    ns = seed_counts(parser, args.seeds, 1)
    try:
        table = load_table(args.table)
        t = truth(table, args.target, args.within)
        configs = {k: v for k, v in log_costs(table, args.target).items() if k != t.baseline}
        sigma = pooled_sigma(configs)
        mus = {k: statistics.fmean(configs[k]) for k in t.held_out if k in configs}
        shares = [ceiling(mus, sigma, n, args.within, args.resamples, args.rng_seed) for n in ns]
    except SweepError as exc:  # an unreadable table: the message names it
        sys.exit(f"error: {exc}")
    except ValueError as exc:  # a table that cannot judge
        sys.exit(f"error: {args.table}: {exc}")
    gaps = [g for r in table["trials"] + table.get(HELD_OUT, []) if (g := gap_shares(r, args.target)) is not None]
    spacing, unseen = ([g[i] for g in gaps] for i in (0, 1))
    print(
        f"{args.table}: {len(mus)} configs with held-out recordings, the best held-out mean {t.best:.1f} s, "
        f"{len(t.correct)} within {args.within:.0%} of it"
    )
    print(
        f"checkpoints: the target was crossed after the checkpoint before the pass that saw it, a median "
        f"{statistics.median(spacing):.0%} of a recording's cost earlier (quartiles {quartiles(spacing)}); after the "
        f"last pass evaluated, the gate's skipped passes counted, {statistics.median(unseen):.0%} (quartiles "
        f"{quartiles(unseen)}); {len(gaps)} recordings"
    )
    for key, means in twins(t.held_out):
        print(
            f"exact-flag twins {shape(key)} (flags otherwise alike): held-out means "
            f"{', '.join(f'{m:.1f}' for m in means)} s, {means[-1] / means[0]:.2f}x apart"
        )
    recordings = sum(map(len, configs.values()))
    print(f"spread: sd of log cost within a config {sigma:.3f} ({recordings} recordings of {len(configs)} configs)")
    for n, share in zip(ns, shares, strict=True):
        print(
            f"ceiling, {n} held-out seeds a config: the config of lowest mean judged correct in {share:.0%} of "
            f"{args.resamples} resampled truths"
        )


if __name__ == "__main__":
    main()
