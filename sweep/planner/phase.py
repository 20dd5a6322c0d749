"""Where a study stands: one :class:`Phase`, why it is there, and the answers of whoever proposes trials when it has
none to give (:class:`Wait`, :class:`Done`).

A study searches, may confirm its finalists, drains and ends::

    SEARCH --Done--> DRAINING --(nothing runs)--> CONFIRMATION --Done--> DRAINING --(nothing runs)--> OVER
       |                 |                            |                                                 ^
       +-----------------+----- stop (budget spent, Ctrl-C, trials failing the same way) ---------------+

In SEARCH and CONFIRMATION trials start; in DRAINING none starts and the running ones end on their own (a drained
search moves on to the confirmation when there is one); OVER is the study's end: a trial still running is stopped at
its next checkpoint and billed, and the loop returns once none runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Phase(str, Enum):
    """A study's phase (a ``str``: the progress view and the tests read it as text)."""

    SEARCH = "search"
    """The searcher proposes configs (:mod:`sweep.planner.searchers`)."""
    CONFIRMATION = "confirmation"
    """The finalists run again on further training seeds (:mod:`sweep.planner.confirm`)."""
    DRAINING = "draining"
    """No trial starts; the running ones end on their own."""
    OVER = "over"
    """The study has ended; a trial still running is stopped."""


@dataclass(frozen=True)
class Wait:
    """No trial to start now: asked again once a running trial has sent a row (e.g. a confirmation round's last
    trials still run). With nothing running there is nothing to wait for: the phase is then over, for ``reason``."""

    reason: str


@dataclass(frozen=True)
class Done:
    """No trial to start, ever, in this phase: it drains, for ``reason`` (every feasible config tried, the
    confirmation complete, ...)."""

    reason: str


@dataclass
class StudyPhase:
    """One study's phase and why; every change goes through a method here, and each is logged."""

    now: Phase = Phase.SEARCH
    why: str = ""
    """Why the study left its last working phase, or ended; '' while it searches or confirms."""
    work: Phase = Phase.SEARCH
    """The working phase last entered (SEARCH or CONFIRMATION): what DRAINING drains and the progress view shows."""
    log: list[tuple[Phase, str]] = field(default_factory=list)
    """Every change, in order: the phase entered and why."""

    @property
    def starts(self) -> bool:
        """Whether trials may start."""
        return self.now in (Phase.SEARCH, Phase.CONFIRMATION)

    def close(self, why: str) -> None:
        """The working phase starts nothing more; its running trials go on to their own end."""
        self._enter(Phase.DRAINING, why)

    def confirm(self) -> None:
        """The search has drained (or a resumed study was confirming): the confirmation runs."""
        self.work = Phase.CONFIRMATION
        self._enter(Phase.CONFIRMATION, "")

    def finish(self, why: str | None = None) -> None:
        """Nothing runs and nothing follows: the study is over (``why`` replaces the drain's reason if given)."""
        if why is not None or self.now is not Phase.OVER:
            self._enter(Phase.OVER, self.why if why is None else why)

    def stop(self, why: str, *, override: bool = False) -> None:
        """The study ends now and its running trials are stopped; the first reason stands unless ``override``
        (Ctrl-C, which says what the user did)."""
        if self.now is not Phase.OVER or override:
            self._enter(Phase.OVER, why)

    def _enter(self, phase: Phase, why: str) -> None:
        self.now, self.why = phase, why
        self.log.append((phase, why))


__all__ = ["Done", "Phase", "StudyPhase", "Wait"]
