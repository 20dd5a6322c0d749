"""The cost ledger: append-only rows of phase seconds, env steps and held-out success per trial.

One row per checkpoint and one per trial end (a :class:`~sweep.record.Row`), written as JSON lines, flushed and
fsynced as they happen, so a crash loses nothing already written. Every figure sweep prints is derived from these
rows by :func:`metrics`, the one place where the same-denominator rule lives:

- throughput (env steps/s) = env_steps / training seconds (sim + policy + learn);
- wall-clock (s) = billable seconds: every phase, startup to checkpoint, plus unattributed time;
- USD = billable seconds x price, for every trial (pruned and failed included);
- equal terms (``race_*``) = the same without the one-time start-up and compilation (``ONE_TIME_PHASES``): what
  the pruner and the ranking compare, while the bill and the budget count every second.

A :class:`LedgerView` holds a ledger's rows with each trial's latest row, and keeps what is derived from them until
the next row arrives: the planner, the analysis and the report read one view.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar, overload

from sweep import faults
from sweep.contract import one_time_s
from sweep.prices import usd
from sweep.record import PHASES, EndCause, PhaseSeconds, Progress, Row, TrialState

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
#: The fields of a row that grow as a trial runs (:class:`~sweep.record.Progress`; the rest name the trial, its state
#: and the row's time).
PROGRESS_FIELDS = tuple(f.name for f in fields(Progress))
#: How a trial told without running (:attr:`EndCause.NOT_RUN`) is shown in counts.
NOT_RUN = "not run"


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
    """The study phase the trial belongs to (:data:`~sweep.contract.STUDY_PHASES`)."""
    baseline: bool = False
    """The trial runs the study's baseline config."""

    def row(
        self, state: TrialState, progress: Progress | None = None, reason: str = "", cause: EndCause | None = None
    ) -> Row:
        """A row of this trial in ``state`` with its cumulative figures ``progress`` (none yet: the defaults)."""
        figures = progress if progress is not None else Progress()
        return Row(
            run_id=self.run_id,
            trial=self.trial,
            state=state,
            params=self.params,
            price_usd_per_hour=self.price_usd_per_hour,
            price_label=self.price_label,
            reason=reason,
            cause=cause,
            seed=self.seed,
            phase=self.phase,
            baseline=self.baseline,
            **{f.name: getattr(figures, f.name) for f in fields(Progress)},
        )


@dataclass(frozen=True)
class Metrics:
    """Every derived figure of a row, each over its own denominator (see the module docstring)."""

    training_s: float
    """Seconds of sim + policy + learn (throughput's denominator)."""
    throughput_sps: float
    """Env steps per training second."""
    wall_s: float
    """Billable seconds so far."""
    usd: float
    """Billable seconds x price."""
    bottleneck: str
    one_time_s: float
    """Billable seconds of start-up and compilation."""
    race_usd: float
    """USD so far on equal terms (without start-up and compilation)."""
    wall_to_target_s: float | None
    """Billable seconds when the trial reached the target, else None."""
    usd_to_target: float | None
    """USD when the trial reached the target, else None."""
    race_usd_to_target: float | None
    """The same on equal terms (what the ranking compares)."""


def metrics(row: Row) -> Metrics:
    """Every derived figure of a row, each over its own denominator (see module docstring)."""
    phases = {p: float(row.phases_s.get(p, 0.0)) for p in PHASES}
    training_s = sum(phases[p] for p in TRAINING_PHASES)
    wall_s = float(row.billable_s)
    cost = usd(wall_s, float(row.price_usd_per_hour))
    once = one_time_s(phases)
    race = usd(max(0.0, wall_s - once), float(row.price_usd_per_hour))
    reached = row.state == TrialState.REACHED
    return Metrics(
        training_s=training_s,
        throughput_sps=row.env_steps / training_s if training_s > 0 else 0.0,
        wall_s=wall_s,
        usd=cost,
        bottleneck=bottleneck(phases, row.peak_gpu_gib, row.gpu_capacity_gib),
        one_time_s=once,
        race_usd=race,
        wall_to_target_s=wall_s if reached else None,
        usd_to_target=cost if reached else None,
        race_usd_to_target=race if reached else None,
    )


def bottleneck(phases_s: Mapping[str, float], peak_gib: float | None = None, capacity_gib: float | None = None) -> str:
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

    def append(self, row: Row) -> None:
        data = row.to_json().encode() + b"\n"
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
    """A ledger line's JSON object, or None for a torn, corrupt or foreign line."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and "trial" in data and "billable_s" in data else None


def read_rows(path: str | Path) -> list[Row]:
    """All rows of a ledger file (:meth:`Row.of`, every version's lines); a torn or corrupt line is skipped
    (:func:`repair` moves it aside), never raised."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [Row.of(data) for line in f if line.strip() and (data := _parse(line)) is not None]


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


T = TypeVar("T")


class LedgerView(Sequence[Row]):
    """A ledger's rows in order, with each trial's latest row (its totals so far; its end row once it has ended),
    kept as rows arrive (:meth:`add`). What is derived from the rows (:meth:`derived`: the per-config statistics, the
    summary) is computed once and kept until the next row: the report builds one view, the planner keeps one as it
    writes, and the analysis reads either."""

    def __init__(self, rows: Iterable[Row] = ()) -> None:
        self._rows: list[Row] = []
        self.last: dict[int, Row] = {}
        """Each trial's latest row, by trial number."""
        self._derived: dict[tuple, Any] = {}
        for row in rows:
            self.add(row)

    @classmethod
    def of(cls, rows: Iterable[Row]) -> LedgerView:
        """``rows`` as a view (a view is itself)."""
        return rows if isinstance(rows, LedgerView) else cls(rows)

    def add(self, row: Row) -> None:
        """One more row (the ledger's next)."""
        self._rows.append(row)
        self.last[row.trial] = row
        self._derived.clear()

    def ends(self) -> dict[int, Row]:
        """The end row of every trial that ended, by trial number."""
        return {t: r for t, r in self.last.items() if r.ended}

    def of_trial(self, trial: int) -> list[Row]:
        """The rows of one trial, oldest first."""
        return [r for r in self._rows if r.trial == trial]

    def derived(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(self, *args)``, computed once until the next row arrives."""
        key = (fn, *args)
        if key not in self._derived:
            self._derived[key] = fn(self, *args)
        return self._derived[key]

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self._rows[index]

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def end_label(row: Row) -> str:
    """A trial's state for counts shown to people: 'not run' for a config told PRUNED without running
    (:attr:`EndCause.NOT_RUN`: infeasible, or a repeat of one already run), else the ledger state."""
    return row.state.value if row.ran else NOT_RUN


@dataclass(frozen=True)
class StudyFigures:
    """Study-level figures from the ledger (USD)."""

    total_usd: float
    """Every trial's spend, pruned and failed included."""
    usd_by_state: dict[str, float]
    """Spend by the state each trial is in (its latest row)."""
    pruned_failed_share: float
    """Share of the spend on pruned and failed trials (0-1)."""
    best_trial: int | None
    """The cheapest trial to the target on equal terms (one-time phases left out); None when none reached."""
    pareto: list[int]
    """Trials on the (USD, wall-clock) to target Pareto front."""
    trials: int
    usd_per_reaching_trial: float | None


def summary_figures(rows: Iterable[Row]) -> StudyFigures:
    """Study-level figures from the ledger: spend by state, best cost to target, Pareto set."""
    ends = LedgerView.of(rows).last
    by_state: dict[str, float] = {}
    for r in ends.values():
        by_state[r.state.value] = by_state.get(r.state.value, 0.0) + metrics(r).usd
    reached = []
    for t, r in ends.items():
        if r.state == TrialState.REACHED:
            m = metrics(r)
            reached.append((m.race_usd_to_target, m.usd_to_target, m.wall_to_target_s, t))
    reached.sort()
    pareto, best_wall = [], float("inf")
    for _race, _cost, wall, t in sorted(reached, key=lambda x: (x[1], x[2])):
        if wall < best_wall:
            pareto.append(t)
            best_wall = wall
    total = sum(by_state.values())
    pruned_failed = by_state.get(TrialState.PRUNED.value, 0.0) + by_state.get(TrialState.FAILED.value, 0.0)
    return StudyFigures(
        total_usd=total,
        usd_by_state=by_state,
        pruned_failed_share=pruned_failed / total if total else 0.0,
        best_trial=reached[0][3] if reached else None,
        pareto=pareto,
        trials=len(ends),
        usd_per_reaching_trial=total / len(reached) if reached else None,
    )


def frame(rows: Iterable[Row]) -> Any:
    """A pandas view: one line per row as the ledger writes it, params flattened as ``p.<knob>``, each phase as
    ``<phase>_s``, metrics added."""
    import pandas as pd

    records = []
    for row in rows:
        rec = {k: v for k, v in row.as_json().items() if k not in ("params", "phases_s")}
        rec.update({f"p.{k}": v for k, v in row.params.items()})
        rec.update({f"{p}_s": float(row.phases_s.get(p, 0.0)) for p in PHASES})
        rec.update(asdict(metrics(row)))
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

    def snapshot(self) -> tuple[float, PhaseSeconds]:
        """(billable seconds, seconds per phase with the unclaimed remainder as 'other')."""
        billable = self.billable_s()
        phases = dict(self.seconds)
        phases["other"] = max(0.0, billable - sum(v for k, v in phases.items() if k != "other"))
        return billable, PhaseSeconds.of(phases)
