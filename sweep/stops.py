"""How the driver stops on a signal: SIGINT (Ctrl-C), SIGTERM (a scheduler, ``docker stop``, ``timeout``) and SIGHUP
(a closed terminal) end the study alike.

The first stop signal raises ``KeyboardInterrupt`` in the main thread and is remembered, even where Ray's client code
defers or swallows the exception (the planner's loop asks :func:`requested`); the planner then bills and closes the
running trials, and ``sweep.run`` writes the report and exits with 128 + the signal's number (130 for Ctrl-C). Later
signals only add to the record: the stop already under way is not cut short. Inside :func:`held` (a section that
must finish once begun) a first signal raises nothing; it is acted on at the loop's next check.

``ray.init`` sets its own SIGTERM handler (and Ray's core worker one that prints a stack dump), so ``sweep.run``
installs these handlers again once its worker pool is up.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Each stop signal and how the ledger's reasons name it.
SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}

_received: list[int] = []
_held = 0


def _handler(signum: int, frame: Any) -> None:
    first = not _received
    _received.append(signum)
    if first and not _held:
        raise KeyboardInterrupt


def install() -> dict[int, Any]:
    """Route the stop signals to this module; returns the handlers they had (for :func:`restore`)."""
    return {sig: signal.signal(sig, _handler) for sig in SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def requested() -> str:
    """The name of the first stop signal received ('Ctrl-C', 'SIGTERM', 'SIGHUP'), or '' while none was."""
    return SIGNALS[_received[0]] if _received else ""


def exit_status() -> int:
    """128 + the first stop signal's number (130 when none was recorded: a bare KeyboardInterrupt)."""
    return 128 + (_received[0] if _received else signal.SIGINT)


@contextmanager
def held() -> Iterator[None]:
    """A section a stop signal must not cut short: the signal is recorded, and acted on after."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1


def reset() -> None:
    """Forget the signals received (for a process that runs more than one study, such as a test)."""
    _received.clear()
