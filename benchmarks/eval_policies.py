"""What each rule for when to run a held-out pass costs, on curves measured in full (``eval_curves_h200.py``).

    python benchmarks/eval_policies.py eval_curves.jsonl --gates 0 0.2 0.4 0.6

Every checkpoint of those curves ran a full pass, so the verdict of any pass a rule would run is known, and so is
the later checkpoint where a rule that skipped the first reaching pass would detect the target. For each rule, over
all curves: training seconds to the checkpoint where the target is detected, pass seconds to it (a pass stopped
once its verdict is decided, as a trial's is, read off the full pass's checks; a pass that reached runs in full),
the passes run and the checkpoints of delay against detecting at the first pass that reached. One-time seconds are
the same for every rule and left out. ``oracle`` runs only the first reaching pass: the floor no rule can beat.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from sweep.trial.evaluation import below_target_for_sure, pass_due

TARGET = 0.9


@dataclass(frozen=True)
class Cost:
    """One rule over all curves (seconds summed over them)."""

    training_s: float
    eval_s: float
    passes: int
    delays: int
    """Checkpoints between the first reaching pass and the one the rule detects, summed."""
    undetected: int
    """Curves where the rule never ran a reaching pass."""
    below_steps: tuple[int, ...]
    """Control steps each pass that did not reach ran before its verdict."""

    @property
    def eval_share(self) -> float:
        return self.eval_s / (self.training_s + self.eval_s)


def load(path: Path) -> dict[tuple[str, int], list[dict]]:
    """Checkpoint lines by (shape, seed), in order."""
    curves: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            curves[(row["shape"], row["seed"])].append(row)
    return dict(curves)


def pass_seconds(row: dict, target: float = TARGET) -> tuple[float, int]:
    """A trial's pass at this checkpoint, seconds and control steps: stopped at the first check where it is decided
    below the target, else in full (a pass that reaches is decided only at the time limit)."""
    episodes = row.get("episodes", 256)
    for steps, _wins, losses, seconds in row["checks"]:
        if below_target_for_sure(losses, episodes, target):
            return seconds, steps
    return row["pass_s"], row["checks"][-1][0]


def first_reached(rows: list[dict], target: float = TARGET) -> int | None:
    return next((r["checkpoint"] for r in rows if r["success"] >= target), None)


def run_rule(
    rows: list[dict], gate: float, oracle: bool = False, target: float = TARGET, signal: str = "train_success"
) -> tuple[float, float, list[int], int | None]:
    """Training s, pass s, the steps of each pass run and the detecting checkpoint (None: never) of one curve under
    a gate on a training-side ``signal`` (the training episodes' success share, or another the curves recorded), due
    as a trial decides (:func:`sweep.trial.evaluation.pass_due`: no value means a pass) (``oracle``: only the first
    reaching pass)."""
    training, evaluation, steps = 0.0, 0.0, []
    first = first_reached(rows, target)
    for row in rows:
        training += row["round_s"]
        due = row["checkpoint"] == first if oracle else pass_due(row.get(signal), gate)
        if not due:
            continue
        if row["success"] >= target:
            return training, evaluation + row["pass_s"], [*steps, row["checks"][-1][0]], row["checkpoint"]
        seconds, decided = pass_seconds(row, target)
        evaluation += seconds
        steps.append(decided)
    return training, evaluation, steps, None


def cost(
    curves: dict[tuple[str, int], list[dict]], gate: float, oracle: bool = False, signal: str = "train_success"
) -> Cost:
    training = evaluation = 0.0
    passes = delays = undetected = 0
    below: list[int] = []
    for rows in curves.values():
        t, e, steps, at = run_rule(rows, gate, oracle, signal=signal)
        passes += len(steps)
        below += steps if at is None else steps[:-1]
        if at is None:
            undetected += 1
            continue
        training, evaluation = training + t, evaluation + e
        delays += at - first_reached(rows)
    return Cost(training, evaluation, passes, delays, undetected, tuple(below))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", type=Path)
    parser.add_argument("--gates", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.5, 0.6, 0.7])
    parser.add_argument("--signal", default="train_success", help="the training-side signal the gates read")
    args = parser.parse_args()
    curves = load(args.curves)
    print(f"{len(curves)} curves: " + ", ".join(f"{s} seed {d}" for s, d in curves))
    firsts = {key: first_reached(rows) for key, rows in curves.items()}
    held = [all(r["success"] >= TARGET for r in rows if r["checkpoint"] >= firsts[key]) for key, rows in curves.items()]
    at_first = [r["train_success"] or 0.0 for k, rows in curves.items() for r in rows if r["checkpoint"] == firsts[k]]
    print(
        f"training episodes' success at the first reaching pass: {min(at_first):.2f}-{max(at_first):.2f}; "
        f"every later checkpoint reached too in {sum(held)} of {len(held)} curves"
    )
    print(
        "| rule | training s | pass s | of training + passes | passes | checkpoints late | undetected "
        "| steps of the passes below the target, median |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rules = [(f"gate {g} on {args.signal}", cost(curves, g, signal=args.signal)) for g in args.gates]
    rules.append(("oracle", cost(curves, 0.0, oracle=True)))
    for name, c in rules:
        print(
            f"| {name} | {c.training_s:.1f} | {c.eval_s:.1f} | {100 * c.eval_share:.1f}% | {c.passes} | {c.delays} "
            f"| {c.undetected} | {f'{statistics.median(c.below_steps):.0f}' if c.below_steps else '-'} |"
        )


if __name__ == "__main__":
    main()
