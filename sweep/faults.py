"""Named points at which the driver can be killed on purpose, to check that a kill anywhere loses nothing.

``SWEEP_FAULT=<point>:<n>`` makes ``sweep.run`` (which alone arms it: workers and other entry points never do) kill
itself with SIGKILL the ``n``-th time it reaches ``point``: no handler, no ``finally``, no flush runs, as when a
machine loses power or the kernel kills the process. Unarmed, a point costs one comparison. The reliability tests
and ``benchmarks/kill_soak.py`` pick the points and counts from a seeded generator and resume after each kill.
"""

from __future__ import annotations

import os
import signal

from sweep.errors import ConfigError

#: Each point and where it lies.
POINTS = {
    "lock": "the run folder just taken, nothing written yet",
    "lock.beat": "a heartbeat written beside the lock, not yet renamed over it",
    "lock.takeover": "a dead driver's lock claimed, this driver's not yet renamed over it",
    "orphans": "a dead driver's trial just closed on resume, the next not yet",
    "dispatch": "a trial asked and its config recorded in the study, not yet sent to a worker",
    "checkpoint": "a checkpoint row in the ledger, the worker not yet answered",
    "ledger.write": "a row about to be appended to the ledger",
    "ledger.torn": "half of a row appended to the ledger",
    "ledger.synced": "a row appended and fsynced, nothing done after it",
    "tell": "a trial's end row in the ledger, Optuna not yet told",
    "confirm": "the confirmation begun, or one of its trials about to be dispatched",
    "report": "the study over: before recommended.yaml, between it and report.html, after both",
}

_armed: tuple[str, int] | None = None
_hits: dict[str, int] = {}


def arm(spec: str | None = None) -> None:
    """Arm this process with ``spec`` (``<point>:<n>``; default: ``$SWEEP_FAULT``); nothing when it is empty."""
    global _armed
    spec = os.environ.get("SWEEP_FAULT", "") if spec is None else spec
    if not spec:
        return
    name, _, count = spec.rpartition(":")
    if name not in POINTS or not count.isdigit() or int(count) < 1:
        raise ConfigError(f"SWEEP_FAULT={spec}: expected <point>:<n> with n >= 1 and a point of {', '.join(POINTS)}")
    _armed = (name, int(count))
    _hits.clear()


def reached(name: str) -> bool:
    """Count a pass through point ``name``; True on the pass the armed fault names (the caller then does its part
    of the damage, such as half a row, and calls :func:`die`)."""
    if _armed is None or _armed[0] != name:
        return False
    _hits[name] = _hits.get(name, 0) + 1
    return _hits[name] == _armed[1]


def die() -> None:
    """SIGKILL this process."""
    os.kill(os.getpid(), signal.SIGKILL)


def point(name: str) -> None:
    """Die here if the armed fault names this pass through ``name``."""
    if reached(name):
        die()
