"""Where a sweep's billable seconds went, for run folders side by side (issue 20's before/after table).

    python benchmarks/overhead_shares.py benchmarks/data/h200_confirmed benchmarks/data/h200_overhead/unbroken

Every figure comes from each folder's ``ledger.jsonl`` (each trial's last row): shares are of the study's billable
seconds (every trial, pruned and failed included); "training" is simulation + policy + PPO update
(``sweep.ledger.TRAINING_PHASES``); trials per dollar counts the trials that ran (billed > 0 s) over the study USD;
the recommended config's mean USD to target is on equal terms over its seeds (``sweep.analysis.evidence``), with its
seeds.
Evaluation is also split pass by pass (:func:`pass_seconds`): the last pass of each trial that reached the target,
which runs the whole episode whatever is done, and every other pass. The first trial's bill is split too
(:func:`first_trial`), and so are the seconds outside the phases (:func:`rises_ms`: the planner's answer a
checkpoint, what no phase claimed a round). ``--by-size`` adds a table of evaluation against training per training
env count (:func:`by_size`). ``--every-other`` estimates from each ledger what passes at every other due checkpoint
would have cost (:func:`every_other`).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml

from sweep.analysis.summary import summarize
from sweep.ledger import TRAINING_PHASES, LedgerView, Progress, Row, metrics, read_rows


def shares(run_dir: Path) -> dict[str, str]:
    """One column of the table: the folder's figures as printed."""
    rows = read_rows(run_dir / "ledger.jsonl")
    ends = list(LedgerView.of(rows).last.values())
    billable = sum(float(r.billable_s) for r in ends)
    phase_s: dict[str, float] = {}
    for r in ends:
        for phase, seconds in r.phases_s.items():
            phase_s[phase] = phase_s.get(phase, 0.0) + float(seconds)
    training = sum(phase_s.get(p, 0.0) for p in TRAINING_PHASES)
    s = summarize(rows)
    ran = [r for r in ends if float(r.billable_s) > 0]
    passes = [r for r in rows if r.state == "running"]
    skipped = [r for r in passes if int(r.eval_episodes) == 0]
    out = {
        "billable s (study)": f"{billable:.1f}",
        "study USD": f"{s.total_usd:.4f}",
        "trials run": str(len(ran)),
        "checkpoints (passes skipped)": f"{len(passes)} ({len(skipped)})",
        "evaluation share": _pct(phase_s.get("eval", 0.0), billable),
        "of it: reached trials' last passes, other passes": ", ".join(_pct(x, billable) for x in pass_seconds(rows)),
        "compilation share": _pct(phase_s.get("compile", 0.0), billable),
        "start-up share": _pct(phase_s.get("startup", 0.0), billable),
        "compile + start-up share": _pct(phase_s.get("compile", 0.0) + phase_s.get("startup", 0.0), billable),
        "all non-training share": _pct(billable - training, billable),
        # 'answer' was part of 'other' in ledgers written before it was a phase: '-' there
        "of it: checkpoint, log, answer, other": ", ".join(
            _pct(phase_s[p], billable) if p in phase_s else "-" for p in ("checkpoint", "log", "answer", "other")
        ),
        "median ms: answer a checkpoint, other a round": _answer_other(rows),
        "trials per USD": f"{len(ran) / s.total_usd:.1f}" if s.total_usd > 0 else "-",
        "first trial's start-up s (its parts)": _startup(ends[0]) if ends else "-",
        "first trial: one-time s, first round's training s, training s, billable s": _first(rows),
        "failed trials": "; ".join(f"{r.trial}: {_short(r.reason)}" for r in ends if r.state == "failed") or "none",
    }
    rec = s.recommendation
    if rec is None:
        out["recommended: mean USD to target on equal terms"] = "none reached"
    else:
        c = rec.config
        lo, hi = c.race_lo, c.race_hi
        interval = f" ({lo:.4f}-{hi:.4f})" if lo is not None and hi is not None and len(c.race_usd) > 1 else ""
        out["recommended: mean USD to target on equal terms"] = (
            f"{c.params['num_envs']} x {c.params['num_steps_per_env']}: ${c.race_mean:.4f}{interval}, "
            f"seeds {', '.join(map(str, c.counted_seeds))}"
        )
        best = min(metrics(r).race_usd_to_target for r in ends if r.state == "reached")
        out["cheapest single trial to target, equal terms"] = f"${best:.4f}"
    return out


def pass_seconds(rows: list[Row]) -> tuple[float, float]:
    """(seconds of the last pass of each trial that reached the target, seconds of every other pass), from each
    trial's rows in ledger order (:func:`passes`)."""
    last_reached = others = 0.0
    for trial_rows in by_trial(rows).values():
        rises = [seconds for seconds, _ in passes(trial_rows)]
        if rises and trial_rows[-1].state == "reached":
            last_reached += rises.pop()
        others += sum(rises)
    return last_reached, others


def rises_ms(rows: list[Row], phase: str, to_checkpoint: bool) -> list[float]:
    """Milliseconds of ``phase`` from each checkpoint row to the trial's next row (``to_checkpoint``: to its next
    checkpoint row only, so a whole round). For 'answer', the wait for the planner's answer to that checkpoint."""
    out: list[float] = []
    for trial_rows in by_trial(rows).values():
        for row, after in itertools.pairwise(trial_rows):
            if row.state == "running" and (after.state == "running" or not to_checkpoint):
                rise = float(after.phases_s.get(phase, 0.0)) - float(row.phases_s.get(phase, 0.0))
                out.append(rise * 1e3)
    return out


def by_trial(rows: list[Row]) -> dict[int, list[Row]]:
    """Each trial's rows, in ledger order."""
    out: dict[int, list[Row]] = {}
    for r in rows:
        out.setdefault(int(r.trial), []).append(r)
    return out


def passes(trial_rows: list[Row]) -> list[tuple[float, float]]:
    """(seconds, training s of the round before it) of each of a trial's passes: each rise of its 'eval' phase
    between two of its rows."""
    out: list[tuple[float, float]] = []
    for before, row in zip([Progress(), *trial_rows], trial_rows, strict=False):  # nothing before the first row
        rise = float(row.phases_s.get("eval", 0.0)) - float(before.phases_s.get("eval", 0.0))
        if rise > 0:
            out.append((rise, training_s(row) - training_s(before)))
    return out


def training_s(row: Progress) -> float:
    """A row's training seconds so far (:data:`sweep.ledger.TRAINING_PHASES`)."""
    return sum(float(row.phases_s.get(p, 0.0)) for p in TRAINING_PHASES)


def first_trial(rows: list[Row]) -> tuple[float, float, float, float]:
    """The study's first trial: (start-up + compilation s, training s up to its first checkpoint, training s, billable
    s), from its last row and its first checkpoint's."""
    mine = by_trial(rows)[int(rows[0].trial)]
    last, first = mine[-1], next((r for r in mine if r.state == "running"), mine[-1])
    one_time = float(last.phases_s.get("startup", 0.0)) + float(last.phases_s.get("compile", 0.0))
    return one_time, training_s(first), training_s(last), float(last.billable_s)


def by_size(rows: list[Row], eval_every_steps: int) -> dict[int, dict[str, float]]:
    """Per training env count: trials, training s, evaluation s, passes, evaluation's share of training +
    evaluation, and a round's mean training s (each trial's training s per iteration times the iterations of its
    round, ``eval_every_steps / num_steps_per_env`` as :attr:`sweep.contract.TrialConfig.eval_every`)."""
    out: dict[int, dict[str, float]] = {}
    for trial_rows in by_trial(rows).values():
        last, params = trial_rows[-1], trial_rows[-1].params
        if int(last.iteration) <= 0:
            continue  # ended before an iteration: no round to speak of
        size = out.setdefault(
            int(params["num_envs"]), dict.fromkeys(("trials", "training_s", "eval_s", "passes", "round_s"), 0.0)
        )
        size["trials"] += 1
        size["training_s"] += training_s(last)
        size["eval_s"] += float(last.phases_s.get("eval", 0.0))
        size["passes"] += len(passes(trial_rows))
        every = max(1, round(eval_every_steps / int(params["num_steps_per_env"])))
        size["round_s"] += training_s(last) / int(last.iteration) * every
    for size in out.values():
        size["eval_share"] = size["eval_s"] / (size["training_s"] + size["eval_s"])
        size["round_s"] /= size["trials"]
    return out


def flag_trials(rows: list[Row], flag: str) -> tuple[int, list[str]]:
    """(trials that ran with ``flags.<flag>`` on, the reasons of those of them that failed)."""
    on = [r for r in LedgerView.of(rows).last.values() if r.params.get(f"flags.{flag}") and float(r.billable_s) > 0]
    return len(on), [r.reason for r in on if r.state == "failed"]


@dataclass
class Estimate:
    """Seconds of a sweep now and under the policy: billable, held-out evaluation, training."""

    billable_s: float
    eval_s: float
    training_s: float
    new_billable_s: float
    new_eval_s: float
    new_training_s: float
    extra_rounds: int
    passes: int
    new_passes: int


def every_other(rows: list[Row]) -> Estimate:
    """The sweep's seconds now, and as estimated under this policy: of a trial's checkpoints whose pass was due (the
    ones where a pass ran), run the pass at the 1st, 3rd, 5th ... and skip the others, keeping the policy's weights
    of a skipped one; a trial's last pass (its cap's, or its end's) always runs. When a pass reaches the target, the
    skipped checkpoint just before it is evaluated too (a look back), so that the trial's cost to the target is
    measured at the same checkpoint as now. When the first pass that reached was one the policy skips, the trial
    trains one round more, and that round's pass and the look back at the skipped one both run.

    Taken from the ledger as they ran: the trials, each pass's seconds and verdict, each round's training seconds
    (the round before the stop, for the extra one). Assumed: the extra round's pass reaches (the skipped one before
    it did), and it costs what the reaching pass cost. The planner's answers are taken as they came, though fewer
    points on a curve may change when it prunes: an estimate, not a replay."""
    ends = list(LedgerView.of(rows).last.values())
    billable = sum(float(r.billable_s) for r in ends)
    eval_now = sum(float(r.phases_s.get("eval", 0.0)) for r in ends)
    training_now = sum(training_s(r) for r in ends)
    eval_new, extra_s, extra_rounds, n_now, n_new = 0.0, 0.0, 0, 0, 0
    for trial_rows in by_trial(rows).values():
        ran = passes(trial_rows)
        n_now += len(ran)
        if not ran:
            continue
        reached = trial_rows[-1].state == "reached"  # its verdict is its last pass's
        last = len(ran) - 1  # 0-based index of the trial's last pass
        kept = [i for i in range(len(ran)) if i % 2 == 0 or i == last]
        if reached and last % 2 == 1:  # the reaching pass is one the policy skips: one round more
            seconds, round_s = ran[last]
            kept = [i for i in kept if i != last]
            eval_new += sum(ran[i][0] for i in kept) + seconds + seconds  # the extra round's pass, the look back
            n_new += len(kept) + 2
            extra_s += round_s
            extra_rounds += 1
            continue
        if reached and last >= 1 and (last - 1) not in kept:  # look back at the skipped checkpoint before it
            kept.append(last - 1)
        eval_new += sum(ran[i][0] for i in kept)
        n_new += len(kept)
    new_billable = billable - eval_now + eval_new + extra_s
    return Estimate(
        billable, eval_now, training_now, new_billable, eval_new, training_now + extra_s, extra_rounds, n_now, n_new
    )


def _first(rows: list[Row]) -> str:
    return ", ".join(f"{x:.1f}" for x in first_trial(rows)) if rows else "-"


def _short(reason: str, chars: int = 100) -> str:
    return reason if len(reason) <= chars else reason[:chars].rstrip() + "..."


def _startup(row: Row) -> str:
    """A trial's start-up seconds, with where they went where its rows say (``startup_parts_s``)."""
    parts = row.startup_parts_s or {}
    detail = ", ".join(f"{name} {seconds:.1f}" for name, seconds in parts.items())
    return f"{row.phases_s.get('startup', 0.0):.1f}" + (f" ({detail})" if detail else "")


def _answer_other(rows: list[Row]) -> str:
    """The median ms of 'answer' a checkpoint ('-' where the ledger has no answer phase) and of 'other' a round."""
    answer = _median(rises_ms(rows, "answer", False)) if any("answer" in r.phases_s for r in rows) else "-"
    return f"{answer}, {_median(rises_ms(rows, 'other', True))}"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders, each with a ledger.jsonl")
    parser.add_argument("--by-size", action="store_true", help="also evaluation against training per env count")
    parser.add_argument("--flag", help="only count, over all the runs, the trials with this perf flag on that failed")
    parser.add_argument("--every-other", action="store_true", help="only estimate passes at every other checkpoint")
    args = parser.parse_args()
    if args.every_other:
        print(
            "| run | billable s now, estimated | evaluation share now, estimated | non-training share now, estimated "
            "| passes now, estimated | extra rounds |"
        )
        print("|---|---|---|---|---|---|")
        for run in args.runs:
            e = every_other(read_rows(run / "ledger.jsonl"))
            print(
                f"| `{run.name}` | {e.billable_s:.1f}, {e.new_billable_s:.1f} | {_pct(e.eval_s, e.billable_s)}, "
                f"{_pct(e.new_eval_s, e.new_billable_s)} | {_pct(e.billable_s - e.training_s, e.billable_s)}, "
                f"{_pct(e.new_billable_s - e.new_training_s, e.new_billable_s)} | {e.passes}, {e.new_passes} | "
                f"{e.extra_rounds} |"
            )
        return
    if args.flag:
        counts = [flag_trials(read_rows(run / "ledger.jsonl"), args.flag) for run in args.runs]
        failed = [reason for _, reasons in counts for reason in reasons]
        print(
            f"{len(args.runs)} runs: {sum(n for n, _ in counts)} trials with flags.{args.flag} on, {len(failed)} failed"
        )
        for reason in failed:
            print(f"  {_short(reason)}")
        return
    columns = {str(run): shares(run) for run in args.runs}
    keys = list(next(iter(columns.values())))
    print("| | " + " | ".join(f"`{name}`" for name in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for key in keys:
        print(f"| {key} | " + " | ".join(col.get(key, "-") for col in columns.values()) + " |")
    if args.by_size:
        print("\n| run | envs | trials | round training s (mean) | passes | evaluation s | of training + evaluation |")
        print("|---|---|---|---|---|---|---|")
        for run in args.runs:
            every = int(yaml.safe_load((run / "config.yaml").read_text())["target"]["eval_every_steps"])
            for n, f in sorted(by_size(read_rows(run / "ledger.jsonl"), every).items()):
                print(
                    f"| `{run.name}` | {n} | {f['trials']:.0f} | {f['round_s']:.2f} | {f['passes']:.0f} | "
                    f"{f['eval_s']:.1f} | {100 * f['eval_share']:.1f}% |"
                )


if __name__ == "__main__":
    main()
