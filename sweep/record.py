"""The record a trial leaves: one ledger row, typed, and the one reader and writer of its JSON line.

A :class:`Row` travels as itself from the trial that builds it, through Ray and the pool, to the planner, the
ledger, the analysis and the report. Its state and why it ended are enums (:class:`TrialState`, :class:`EndCause`),
its phase seconds a :class:`PhaseSeconds`. :meth:`Row.of` reads every ledger line sweep has written, the older
formats included (no ``cause``, no ``phase``, no ``startup_parts_s``); :meth:`Row.as_json` writes the line as it
always was, key for key. Nothing else turns a ledger line into a row or names a row's fields as text.

Below :mod:`sweep.contract`, which speaks of rows in its protocols; imports nothing of sweep.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any


class _Text(str, Enum):
    """An enum whose members are their text wherever they are written: in JSON, f-strings and ``str()`` (as
    ``enum.StrEnum``, which Python 3.10 lacks)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class TrialState(_Text):
    """A ledger row's ``state`` (a ``str``: rows are JSON): 'running' on a checkpoint row, how the trial ended on
    its end row."""

    RUNNING = "running"
    REACHED = "reached"
    """Its held-out success met the target."""
    CAPPED = "capped"
    """Stopped before the target by a cap: its own, the race's, or the study's end (:class:`EndCause` says which)."""
    PRUNED = "pruned"
    """Stopped by the planner on cost, or told without running (:attr:`EndCause.NOT_RUN`)."""
    FAILED = "failed"
    """It could not go on: an exception, a non-finite value, out of memory, a lost worker or driver."""


END_STATES = (TrialState.REACHED, TrialState.CAPPED, TrialState.PRUNED, TrialState.FAILED)


class EndCause(_Text):
    """Why a trial ended: an end row's ``cause``. It decides whether the trial is a seed of its config (the
    recommendation's mean) and whether a resumed study runs it again."""

    REACHED = "reached"
    """Its held-out success met the target."""
    CAP = "cap"
    """Its own per-trial cap (``budget.trial_usd``)."""
    RACE_CAP = "race_cap"
    """The race cap: the search leader's mean cost to target times ``race_slack``."""
    PRUNED = "pruned"
    """Pruned by the planner: it could not beat the best cost to target."""
    NOT_RUN = "not_run"
    """Told to the sampler without running: infeasible, or a repeat of a config already run."""
    STUDY_END = "study_end"
    """Stopped by the study's end: its budget spent, or Ctrl-C."""
    DRIVER_STOPPED = "driver_stopped"
    """Closed on resume: the driver died while it ran."""
    WORKER_LOST = "worker_lost"
    """Its worker died."""
    FAILED = "failed"
    """An exception, a non-finite value, out of memory (the reason says which)."""
    PROBE = "probe"
    """A throughput probe, over after its first round of training: it measured env steps per training second, no
    cost to target (no seed of its config)."""

    @property
    def censored(self) -> bool:
        """Stopped on cost before the target after running: its cost to target is more than it spent."""
        return self in (EndCause.CAP, EndCause.RACE_CAP, EndCause.PRUNED)

    @property
    def by_study(self) -> bool:
        """Ended through no doing of its config: no seed of it, and a resumed study runs it again (a lost worker,
        which could recur, is not excused)."""
        return self in (EndCause.STUDY_END, EndCause.DRIVER_STOPPED)


def recorded_cause(state: TrialState, reason: str, billable_s: float) -> EndCause | None:
    """Why a trial ended, for a record written before causes were recorded (a ledger row, a recorded table's end):
    its state and the opening words of its reason say it. None for a 'running' row."""
    if state == TrialState.RUNNING:
        return None
    if state == TrialState.REACHED:
        return EndCause.REACHED
    if state == TrialState.PRUNED:
        return EndCause.PRUNED if float(billable_s) > 0 else EndCause.NOT_RUN
    if state == TrialState.CAPPED:
        if reason.startswith("per-trial cap of "):
            return EndCause.CAP
        return EndCause.RACE_CAP if reason.startswith("capped at the best known cost") else EndCause.STUDY_END
    if reason.startswith("driver stopped"):
        return EndCause.DRIVER_STOPPED
    return EndCause.WORKER_LOST if reason.startswith("worker lost") else EndCause.FAILED


#: Phases of a trial, in the order they happen (:class:`PhaseSeconds`). 'answer' is the wait at each checkpoint for
#: the planner's answer (the row sent, the decision back); 'other' is what no phase claimed (the training side's
#: signals read, the loop's own Python between phases).
PHASES = ("startup", "compile", "sim", "policy", "learn", "log", "eval", "checkpoint", "answer", "other")


@dataclass(frozen=True)
class PhaseSeconds(Mapping[str, float]):
    """A row's seconds per phase, cumulative from the trial's start; read by attribute, or as a read-only mapping
    over the phases the row records (a row written before a phase existed, or by the planner for a trial it closed
    itself, records fewer; a phase it does not record is 0)."""

    startup: float = 0.0
    """Building the envs, the policy and PPO (and importing the simulator)."""
    compile: float = 0.0
    """JAX/XLA and torch.compile compilation, and the other warm-ups."""
    sim: float = 0.0
    """Stepping the simulator in the rollout."""
    policy: float = 0.0
    """The policy's inference in the rollout."""
    learn: float = 0.0
    """The PPO update."""
    log: float = 0.0
    """Reading and reporting losses, TensorBoard scalars."""
    eval: float = 0.0
    """Held-out passes."""
    checkpoint: float = 0.0
    """Saving the model."""
    answer: float = 0.0
    """Waiting for the planner's answer to a checkpoint row."""
    other: float = 0.0
    """Billable time no phase claimed."""
    recorded: tuple[str, ...] = PHASES
    """The phases the row records, in :data:`PHASES` order (the keys of its ``phases_s``)."""

    @classmethod
    def of(cls, seconds: Mapping[str, float] | None) -> PhaseSeconds:
        """From a mapping of phase names to seconds (a ledger line's ``phases_s``, a phase clock's): the phases it
        names are recorded; an unknown name is an error."""
        if isinstance(seconds, PhaseSeconds):
            return seconds
        given = dict(seconds or {})
        unknown = sorted(set(given) - set(PHASES))
        if unknown:
            raise ValueError(f"unknown phase(s) {unknown}; phases: {', '.join(PHASES)}")
        return cls(**given, recorded=tuple(p for p in PHASES if p in given))

    def plus(self, phase: str, seconds: float) -> PhaseSeconds:
        """These seconds with ``seconds`` more in ``phase`` (recorded from now on)."""
        recorded = tuple(p for p in PHASES if p in self.recorded or p == phase)
        return replace(self, recorded=recorded, **{phase: self.get(phase, 0.0) + seconds})

    def __getitem__(self, phase: str) -> float:
        if phase not in self.recorded:
            raise KeyError(phase)
        return getattr(self, phase)

    def __iter__(self) -> Iterator[str]:
        return iter(self.recorded)

    def __len__(self) -> int:
        return len(self.recorded)

    def as_dict(self) -> dict[str, float]:
        """The recorded phases as the ledger writes them."""
        return {p: getattr(self, p) for p in self.recorded}


#: No phase recorded: a trial closed before it ran, or a placeholder.
NO_PHASES = PhaseSeconds.of({})


@dataclass(frozen=True, kw_only=True)
class Progress:
    """A trial's cumulative figures as of one row (a ledger row's progress, a recorded table's curve point); what the
    trial, the replay and the planner closing a trial hand to :meth:`sweep.ledger.TrialRows.row`."""

    iteration: int = 0
    env_steps: int = 0
    billable_s: float = 0.0
    """Seconds billed so far: from the trial's start to this row, all phases and gaps included."""
    phases_s: PhaseSeconds = NO_PHASES
    """Seconds per phase; 'other' is billable time no phase claimed."""
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
    device: str = ""
    gpu: str = ""
    """Which GPU the trial ran on, ``<host>:<index>`` (:func:`sweep.trial.learner.gpu_slot`); '' on a CPU."""
    checkpoint: str | None = ""
    """The trial's checkpoint file as of this row, relative to the run folder ('' when none is kept): the one
    saved at its latest evaluation; on a 'reached' row, the checkpoint that reached the target. None: a row written
    before rows named their checkpoint (the trial's own file, where there is one, is its latest)."""
    startup_parts_s: Mapping[str, float] | None = field(default_factory=dict)
    """Where the 'startup' phase's seconds went (the backend's import, each env's construction, the learner's), so a
    slow first start-up can be told apart; empty where the runner does not break it down (null in recorded tables
    that did not record it)."""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Progress:
        """The progress recorded in ``data`` (a JSON object: a ledger line, a recorded table's curve point): the
        fields it has, the others at their defaults; other keys are not read."""
        known = {f.name for f in fields(Progress)}
        given = {k: v for k, v in data.items() if k in known}
        if "phases_s" in given:
            given["phases_s"] = PhaseSeconds.of(given["phases_s"])
        return Progress(**given)

    @property
    def progress(self) -> Progress:
        """These figures alone (a row's progress, to build another row of its trial from)."""
        return Progress(**{f.name: getattr(self, f.name) for f in fields(Progress)})


@dataclass(frozen=True, kw_only=True)
class Row(Progress):
    """One ledger row; seconds and steps are cumulative from the trial's start."""

    run_id: str
    trial: int
    state: TrialState
    """'running' for a checkpoint, else how the trial ended: reached / capped / pruned / failed."""
    params: dict[str, Any]
    """The trial's config as the ledger records it (backend, profile, knobs, ``flags.<name>``; the spelling of the
    ledger that wrote it: :class:`sweep.params.TrialParams` reads every one)."""
    price_usd_per_hour: float
    price_label: str
    reason: str = ""
    """Why the trial ended this way, in words (an end row)."""
    cause: EndCause | None = None
    """Why the trial ended (None on a checkpoint row). An end row given none (a ledger written before causes were
    recorded) has the one its state and reason say (:func:`recorded_cause`)."""
    seed: int = 0
    phase: str = "search"
    """Which phase of the study the trial belongs to (:data:`sweep.contract.STUDY_PHASES`): 'screen' (a config's
    throughput over a few iterations, ``search.screen``), 'search' (the planner exploring), 'probe' (a throughput
    probe of an exact flag) or 'confirm' (a finalist re-run on a further training seed); rows written before phases
    existed read as 'search'."""
    baseline: bool = False
    """The trial ran the study's baseline config (what the recommendation is compared with)."""
    piece: int = 0
    """Which driver of the run wrote the row: 0 the first, one more for each resume (``resume=``); a row written
    before pieces were counted reads 0."""
    fresh_worker: bool = False
    """The trial was the first its worker ran, so it paid the worker's whole start-up (a scene built on cold caches,
    the held-out panel's process started); False in rows written before this was recorded."""
    wall_time: float = field(default_factory=time.time)
    """Unix time the row was written (s)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", TrialState(self.state))
        object.__setattr__(self, "phases_s", PhaseSeconds.of(self.phases_s))
        cause = EndCause(self.cause) if self.cause else recorded_cause(self.state, self.reason, self.billable_s)
        object.__setattr__(self, "cause", cause)

    @property
    def ended(self) -> bool:
        """An end row (the trial's last)."""
        return self.state != TrialState.RUNNING

    @property
    def ran(self) -> bool:
        """The trial ran: anything but a config told without running (:attr:`EndCause.NOT_RUN`)."""
        return self.cause != EndCause.NOT_RUN

    @property
    def censored(self) -> bool:
        """It stopped without reaching because of its cost (pruned after running, or at its own cap or the race
        cap; not at the study's end): a censored seed, whose cost to target is more than it spent."""
        return self.cause is not None and self.cause.censored

    @property
    def by_study(self) -> bool:
        """It ended through no doing of its config (:attr:`EndCause.by_study`)."""
        return self.cause is not None and self.cause.by_study

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Row:
        """The one reader: a ledger line's JSON object as a row, whatever version of sweep wrote it. A field the line
        lacks takes its default (``phase`` 'search', no ``startup_parts_s``, ...); an end row without a ``cause`` has
        the one its state and reason say (:func:`recorded_cause`)."""
        given = {k: v for k, v in data.items() if k in {f.name for f in fields(Row)}}
        given["trial"] = int(given["trial"])
        given["reason"] = str(given.get("reason", ""))
        defaults = (("run_id", ""), ("params", {}), ("price_usd_per_hour", 0.0), ("price_label", ""))
        for name, empty in (*defaults, ("wall_time", 0.0), ("checkpoint", None)):  # the last two: not recorded
            given.setdefault(name, empty)
        return cls(**given)  # an end row without a cause gets its recorded one (__post_init__)

    def as_json(self) -> dict[str, Any]:
        """The one writer: the row as its ledger line's JSON object (every field; the enums as their text, no cause
        as '', the recorded phases)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(state=self.state.value, cause=self.cause.value if self.cause is not None else "")
        out.update(phases_s=self.phases_s.as_dict())
        return out

    def to_json(self) -> str:
        """The row's ledger line (without its newline)."""
        return json.dumps(self.as_json(), sort_keys=True, allow_nan=True)
