"""The cost ledger: append-only rows of phase seconds, env steps and held-out success per trial.

One row per checkpoint and one per trial end, written as JSON lines, flushed and fsynced as they
happen, so a crash loses nothing already written. Every figure sweep prints is derived from these
rows by :func:`metrics`, the one place where the same-denominator rule lives:

- throughput (env steps/s) = env_steps / training seconds (sim + policy + learn);
- wall-clock (s) = billable seconds: every phase, startup to checkpoint, plus unattributed time;
- USD = billable seconds x price, for every trial (pruned and failed included);
- equal terms (``race_*``) = the same without the one-time start-up and compilation (:data:`ONE_TIME_PHASES`):
  what the pruner and the ranking compare, while the bill and the budget count every second.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep import faults
from sweep.contract import EndCause, TrialState, end_cause, one_time_s
from sweep.prices import usd

#: Phases of a trial, in the order they happen; each is a ``<phase>_s`` column (seconds, cumulative). 'answer' is
#: the wait at each checkpoint for the planner's answer (the row sent, the decision back); 'other' is what no
#: phase claimed (the training side's signals read, the loop's own Python between phases).
PHASES = ("startup", "compile", "sim", "policy", "learn", "log", "eval", "checkpoint", "answer", "other")
TRAINING_PHASES = ("sim", "policy", "learn")
#: Peak device memory above this share of capacity labels a trial memory-bound.
MEMORY_BOUND_SHARE = 0.9
_BOTTLENECK = {
    "sim": "sim-bound",
    "policy": "learner-bound",
    "learn": "learner-bound",
    "eval": "eval-bound",
    "log": "logging-bound",
    "checkpoint": "logging-bound",
    "startup": "compile-bound",
    "compile": "compile-bound",
    "answer": "overhead-bound",
    "other": "overhead-bound",
}


@dataclass
class Row:
    """One ledger row; seconds and steps are cumulative from the trial's start."""

    run_id: str
    trial: int
    state: str
    """'running' for a checkpoint, else how the trial ended: reached / capped / pruned / failed."""
    params: dict[str, Any]
    """The trial's knobs (num_envs, num_steps_per_env, perf flags, ...)."""
    iteration: int
    env_steps: int
    billable_s: float
    """Seconds billed so far: from the trial's start to this row, all phases and gaps included."""
    phases_s: dict[str, float]
    """Seconds per phase (keys from PHASES); 'other' is billable time no phase claimed."""
    price_usd_per_hour: float
    price_label: str
    success: float | None = None
    """Held-out success rate at this checkpoint (None when not evaluated)."""
    success_lo: float | None = None
    success_hi: float | None = None
    success_max: float | None = None
    """Set when the pass stopped as soon as its verdict was decided: the most a full pass could have measured.
    ``success`` is then None below the target (the pass counted too few episodes to estimate the rate) and the
    count so far at or above it; ``success_lo`` / ``success_hi`` bound what a full pass would have measured."""
    eval_episodes: int = 0
    peak_gpu_gib: float | None = None
    gpu_capacity_gib: float | None = None
    skipped_updates: int = 0
    """Updates skipped because the gradient norm was not finite (fast finite check)."""
    mean_return: float | None = None
    """Mean return of training episodes finished since the last row (None if none finished)."""
    train_success: float | None = None
    """Training side: success share of the training episodes finished since the last row (stochastic policy);
    a signal of progress, never the held-out measure (None where the runner does not count it)."""
    on_track: float | None = None
    """Training side, at this checkpoint: the share of the training envs at least 100 control steps into an episode
    that would count as a success if it ended now (:meth:`sweep.backends.base.TaskEnv.on_track_share`; stochastic
    policy). It follows the policy as it is, where ``train_success`` lags it by the episodes still running; not the
    held-out measure either (None where the env does not say)."""
    reason: str = ""
    """Why the trial ended this way, in words (an end row)."""
    cause: str = ""
    """Why the trial ended, as a :class:`~sweep.contract.EndCause` (an end row; '' on a checkpoint row, and in ledgers
    written before causes were recorded: :func:`~sweep.contract.end_cause` reads those)."""
    device: str = ""
    gpu: str = ""
    """Which GPU the trial ran on, ``<host>:<index>`` (:func:`sweep.trial.learner.gpu_slot`); '' on a CPU."""
    seed: int = 0
    checkpoint: str = ""
    """The trial's checkpoint file as of this row, relative to the run folder ('' when none is kept): the one
    saved at its latest evaluation; on a 'reached' row, the checkpoint that reached the target."""
    phase: str = "search"
    """Which phase of the study the trial belongs to (:data:`STUDY_PHASES`): 'search' (the planner exploring) or
    'confirm' (a finalist re-run on a further training seed); rows written before phases existed read as 'search'."""
    baseline: bool = False
    """The trial ran the study's baseline config (what the recommendation is compared with)."""
    startup_parts_s: dict[str, float] = field(default_factory=dict)
    """Where the 'startup' phase's seconds went (the backend's import, each env's construction, the learner's), so a
    slow first start-up can be told apart; empty where the runner does not break it down."""
    wall_time: float = field(default_factory=time.time)
    """Unix time the row was written (s)."""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True, allow_nan=True)


#: The fields of a row that grow as a trial runs (the rest name the trial, its state and the row's time).
PROGRESS_FIELDS = (
    "iteration",
    "env_steps",
    "billable_s",
    "phases_s",
    "success",
    "success_lo",
    "success_hi",
    "success_max",
    "eval_episodes",
    "peak_gpu_gib",
    "gpu_capacity_gib",
    "skipped_updates",
    "mean_return",
    "train_success",
    "on_track",
    "device",
    "gpu",
    "checkpoint",
    "startup_parts_s",
)
#: A trial's progress before its first row.
START = {"iteration": 0, "env_steps": 0, "billable_s": 0.0, "phases_s": {}}


@dataclass(frozen=True)
class TrialRows:
    """What every row of one trial shares; :meth:`row` is the one place a trial's rows are built (by the trial,
    the replayed trial and the planner closing a trial itself)."""

    run_id: str
    trial: int
    params: dict[str, Any]
    seed: int
    price_usd_per_hour: float
    price_label: str
    phase: str = "search"
    """The study phase the trial belongs to (:data:`STUDY_PHASES`)."""
    baseline: bool = False
    """The trial runs the study's baseline config."""

    def row(self, state: str, progress: dict[str, Any], reason: str = "", cause: EndCause | None = None) -> Row:
        """A row of this trial in ``state``: ``progress`` holds its cumulative figures (keys of
        :data:`PROGRESS_FIELDS`; others are ignored, absent ones take their defaults)."""
        figures = {**START, **{k: v for k, v in progress.items() if k in PROGRESS_FIELDS}}
        figures["phases_s"] = dict(figures["phases_s"])
        return Row(
            run_id=self.run_id,
            trial=self.trial,
            state=state,
            params=self.params,
            price_usd_per_hour=self.price_usd_per_hour,
            price_label=self.price_label,
            reason=reason,
            cause=cause.value if cause is not None else "",
            seed=self.seed,
            phase=self.phase,
            baseline=self.baseline,
            **figures,
        )


def metrics(row: Row | dict) -> dict[str, Any]:
    """Every derived figure of a row, each over its own denominator (see module docstring)."""
    r = row if isinstance(row, dict) else row.__dict__
    phases = {p: float(r["phases_s"].get(p, 0.0)) for p in PHASES}
    training_s = sum(phases[p] for p in TRAINING_PHASES)
    out = {
        "training_s": training_s,
        "throughput_sps": r["env_steps"] / training_s if training_s > 0 else 0.0,
        "wall_s": float(r["billable_s"]),
        "usd": usd(float(r["billable_s"]), float(r["price_usd_per_hour"])),
        "bottleneck": bottleneck(phases, r.get("peak_gpu_gib"), r.get("gpu_capacity_gib")),
    }
    out["one_time_s"] = one_time_s(phases)
    out["race_usd"] = usd(max(0.0, out["wall_s"] - out["one_time_s"]), float(r["price_usd_per_hour"]))
    reached = r["state"] == TrialState.REACHED
    out["wall_to_target_s"] = out["wall_s"] if reached else None
    out["usd_to_target"] = out["usd"] if reached else None
    out["race_usd_to_target"] = out["race_usd"] if reached else None
    return out


def bottleneck(phases_s: dict[str, float], peak_gib: float | None = None, capacity_gib: float | None = None) -> str:
    """Label a trial by its largest phase, or 'memory-bound' when peak memory nears capacity."""
    if peak_gib and capacity_gib and peak_gib >= MEMORY_BOUND_SHARE * capacity_gib:
        return "memory-bound"
    by_label: dict[str, float] = {}
    for phase, seconds in phases_s.items():
        label = _BOTTLENECK[phase]
        by_label[label] = by_label.get(label, 0.0) + seconds
    if not by_label or max(by_label.values()) <= 0:
        return "n/a"
    return max(by_label, key=by_label.__getitem__)


class LedgerWriter:
    """Appends rows to a JSON-lines file; each row is flushed and fsynced before ``append`` returns."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair(self.path)
        self._file = open(self.path, "a+b")  # noqa: SIM115 (kept open for the run)
        self._file.seek(0, os.SEEK_END)
        if self._file.tell() > 0:  # a torn last line (power cut) must not swallow the next row
            self._file.seek(-1, os.SEEK_END)
            if self._file.read(1) != b"\n":
                self._file.write(b"\n")
        self._file.seek(0, os.SEEK_END)

    def append(self, row: Row | dict) -> None:
        line = row.to_json() if isinstance(row, Row) else json.dumps(row, sort_keys=True)
        data = line.encode() + b"\n"
        faults.point("ledger.write")
        if faults.reached("ledger.torn"):  # a kill mid-write: what a resume must repair
            self._file.write(data[: len(data) // 2])
            self._file.flush()
            faults.die()
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())
        faults.point("ledger.synced")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse(line: str) -> dict | None:
    """A ledger row, or None for a torn, corrupt or foreign line."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) and "trial" in row and "billable_s" in row else None


def read_rows(path: str | Path) -> list[dict]:
    """All rows of a ledger file; a torn or corrupt line is skipped (:func:`repair` moves it aside), never raised."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [row for line in f if line.strip() and (row := _parse(line)) is not None]


def repair(path: str | Path) -> str | None:
    """Move the ledger's torn or corrupt lines to ``<ledger>.torn`` (kept, appended) and rewrite the ledger without
    them, atomically; says so in one line on stderr and returns it, or None when every line is a row. No row is
    lost. Writers, resumes and the report call it, so the line appears once, where the damage is first met."""
    path = Path(path)
    if not path.exists():
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    bad = [number for number, line in enumerate(lines, 1) if _parse(line) is None]
    if not bad:
        return None
    torn = path.with_name(path.name + ".torn")
    with open(torn, "a", encoding="utf-8") as f:
        f.writelines(lines[n - 1] for n in bad)
    tmp, skip = path.with_name(path.name + ".tmp"), set(bad)
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(line for n, line in enumerate(lines, 1) if n not in skip)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    where = ", ".join(map(str, bad))
    note = f"{path}: moved {len(bad)} torn line(s) (line {where}; a crash mid-write) to {torn}; every row is kept"
    with contextlib.suppress(OSError):  # a closed stderr must not cost the repair
        print(f"sweep: {note}", file=sys.stderr, flush=True)
    return note


def last_rows(rows: Iterable[dict]) -> dict[int, dict]:
    """The latest row of every trial (its totals so far), keyed by trial number."""
    out: dict[int, dict] = {}
    for row in rows:
        out[int(row["trial"])] = row
    return out


def end_label(row: dict) -> str:
    """A trial's state for counts shown to people: 'not run' for a config told PRUNED without running
    (infeasible, or a repeat of one already run), else the ledger state."""
    return "not run" if end_cause(row) == EndCause.NOT_RUN else row["state"]


def summary_figures(rows: list[dict]) -> dict[str, Any]:
    """Study-level figures from the ledger: spend by state, best cost to target, Pareto set."""
    ends = last_rows(rows)
    by_state: dict[str, float] = {}
    for r in ends.values():
        by_state[r["state"]] = by_state.get(r["state"], 0.0) + metrics(r)["usd"]
    reached = sorted(
        (metrics(r)["race_usd_to_target"], metrics(r)["usd_to_target"], metrics(r)["wall_to_target_s"], t)
        for t, r in ends.items()
        if r["state"] == TrialState.REACHED
    )
    pareto, best_wall = [], float("inf")
    for _race, _cost, wall, t in sorted(reached, key=lambda x: (x[1], x[2])):
        if wall < best_wall:
            pareto.append(t)
            best_wall = wall
    total = sum(by_state.values())
    return {
        "total_usd": total,
        "usd_by_state": by_state,
        "pruned_failed_share": (by_state.get("pruned", 0.0) + by_state.get("failed", 0.0)) / total if total else 0.0,
        "best_trial": reached[0][3] if reached else None,  # the cheapest on equal terms (one-time phases left out)
        "pareto": pareto,
        "trials": len(ends),
        "usd_per_reaching_trial": total / len(reached) if reached else None,
    }


def frame(rows: Iterable[dict]) -> Any:
    """A pandas view: one line per row, params flattened as ``p.<knob>``, metrics added."""
    import pandas as pd

    records = []
    for row in rows:
        rec = {k: v for k, v in row.items() if k not in ("params", "phases_s")}
        rec.update({f"p.{k}": v for k, v in row["params"].items()})
        rec.update({f"{p}_s": float(row["phases_s"].get(p, 0.0)) for p in PHASES})
        rec.update(metrics(row))
        records.append(rec)
    return pd.DataFrame.from_records(records)


class PhaseClock:
    """Seconds per phase; the device is synchronized only when a phase starts and ends."""

    def __init__(self, sync: Callable[[], None] = lambda: None) -> None:
        self.sync = sync
        self.start = time.perf_counter()
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.seconds[name] += time.perf_counter() - t0

    def add(self, name: str, seconds: float) -> None:
        """Move ``seconds`` measured inside another phase into ``name`` (e.g. policy out of sim)."""
        self.seconds[name] += seconds

    def billable_s(self) -> float:
        """Seconds since the trial started: the bill, whatever phase they belong to."""
        return time.perf_counter() - self.start

    def snapshot(self) -> tuple[float, dict[str, float]]:
        """(billable seconds, seconds per phase with the unclaimed remainder as 'other')."""
        billable = self.billable_s()
        phases = dict(self.seconds)
        phases["other"] = max(0.0, billable - sum(v for k, v in phases.items() if k != "other"))
        return billable, phases
