"""How much a recorded trial's early training signals say about its cost to the target: whether a search could rank
configs on stretches stopped well before the target (cheaper evidence per config, so more configs for one budget).

For each signal and level, over the table's recordings that reached the target and crossed the level first: where
the level is crossed (the spend then, on equal terms, as a share of the cost to target: the median), and how well
that spend predicts the cost to target (the correlation of their logs; the geometric standard deviation of cost over
early spend, the error of the best constant-ratio estimate, against that of the cost itself, which is what knowing
nothing leaves). Costs as the yardstick reads them (:func:`search_efficiency.record_cost`: seconds on equal terms,
one-time start-up and compilation left out). Signals are the training side's checkpoint figures (``train_success``,
``mean_return``, ``on_track``): never the held-out measure, which a stopped pass does not give below the target.

    python benchmarks/early_signals.py benchmarks/data/h200_grid3.json train_success=0.1,0.3,0.5 mean_return=8,13
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported by the tests

from search_efficiency import equal_terms_s, record_cost

from sweep.backends.replay import BASELINE, load_table

SIGNALS = ("train_success", "mean_return", "on_track")


@dataclass(frozen=True)
class EarlySignal:
    """What crossing ``level`` of ``signal`` says about a recording's cost to the target."""

    signal: str
    level: float
    recordings: int
    """Recordings that reached the target and crossed the level at a checkpoint with training spend (the rest left
    out)."""
    share: float
    """Median of the spend when the level was first crossed over the cost to target."""
    log_corr: float
    """Correlation of log early spend with log cost to target, over those recordings."""
    spread: float
    """Geometric standard deviation of cost to target / early spend: the error of the best constant-ratio estimate."""
    cost_spread: float
    """Geometric standard deviation of the cost to target itself, over the same recordings."""

    def line(self) -> str:
        return (
            f"{self.signal} >= {self.level:g}: {self.recordings} recordings, crossed at {self.share:.0%} of the cost "
            f"to target (median); log correlation {self.log_corr:.2f}; cost / early spend x/{self.spread:.2f} "
            f"against the cost's own x/{self.cost_spread:.2f}"
        )


def first_crossing_s(record: dict[str, Any], signal: str, level: float) -> float | None:
    """Seconds on equal terms at the recording's first checkpoint whose ``signal`` is at least ``level``."""
    for point in record["curve"]:
        value = point.get(signal)
        if value is not None and value >= level:
            return equal_terms_s(point)
    return None


def early_signal(records: list[dict[str, Any]], target: float, signal: str, level: float) -> EarlySignal | None:
    """``signal`` at ``level`` over ``records`` (:class:`EarlySignal`); None with fewer than 3 recordings to judge."""
    pairs = []
    for record in records:
        cost, reached = record_cost(record, target)
        early = first_crossing_s(record, signal, level)
        if reached and early is not None and early > 0 and cost > 0:
            pairs.append((math.log(early), math.log(cost)))
    if len(pairs) < 3:
        return None
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    sx, sy = statistics.pstdev(xs), statistics.pstdev(ys)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    cov = statistics.fmean((x - mx) * (y - my) for x, y in pairs)
    return EarlySignal(
        signal,
        level,
        len(pairs),
        statistics.median(math.exp(x - y) for x, y in pairs),
        cov / (sx * sy) if sx > 0 and sy > 0 else 0.0,
        math.exp(statistics.pstdev([y - x for x, y in pairs])),
        math.exp(sy),
    )


def levels(text: str) -> tuple[str, list[float]]:
    """'train_success=0.1,0.3' -> ('train_success', [0.1, 0.3])."""
    name, _, values = text.partition("=")
    if name not in SIGNALS:
        raise argparse.ArgumentTypeError(f"unknown signal {name!r}; signals: {', '.join(SIGNALS)}")
    try:
        return name, [float(v) for v in values.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: levels are numbers, e.g. train_success=0.1,0.3") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("signals", nargs="+", type=levels, help="SIGNAL=LEVEL,LEVEL,... e.g. train_success=0.1,0.3")
    parser.add_argument("--target", type=float, default=0.9)
    args = parser.parse_args()
    table = load_table(args.table)
    records = [*table["trials"], *table.get(BASELINE, [])]  # replayed ones; held-out recordings stay unread
    print(f"table {args.table}: {len(records)} recordings (its replayed trials and the baseline's)")
    for name, values in args.signals:
        for level in values:
            found = early_signal(records, args.target, name, level)
            print(found.line() if found else f"{name} >= {level:g}: fewer than 3 recordings cross it and reach")


if __name__ == "__main__":
    main()
