"""Load a study's env shapes into a GPU worker ahead of its trials, while the GPU trains.

A trial whose env shape is new to its worker process loaded it at its start, billed, even with the shape in the
persistent cache, and many trials of a sweep meet such a shape (docs/decisions/0013-preload-thread.md). So each GPU
worker runs one thread beside its trials that loads the study's shapes into the process
(:meth:`sweep.backends.base.Backend.preload`: compiled or read from the persistent cache, no env built), in the
order the trials meet them (:func:`sweep.execution.precompile.worker_plan`): the first trial's held-out panel and
training shape at once, the panel compiled beside that trial's own training envs, and every other shape once the
ahead-of-time compiler's line (``precompile.jsonl``) says it is in the persistent cache. A trial that meets a shape
the thread is loading waits for it rather than loading it a second time. Each shape loaded, or the error that
stopped the thread, is a line in ``preload.jsonl`` in the run folder. The thread's seconds overlap billed trial
seconds and are not billed again; whatever it slows a trial by is in that trial's bill.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

#: Seconds between two reads of the compiler's lines.
POLL_S = 1.0

_thread: threading.Thread | None = None
_guard = threading.Lock()


def shape_key(num_envs: int, knobs: dict[str, Any]) -> tuple[int, str]:
    """A hashable key for one env shape (``num_envs``, backend knobs)."""
    return int(num_envs), json.dumps(knobs, sort_keys=True)


def ready(path: Path) -> set[tuple[int, str]]:
    """The shapes the ahead-of-time compiler has put in the persistent cache so far (its lines in ``path``)."""
    if not path.exists():
        return set()
    found = set()
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            entry = json.loads(line)
            found.add(shape_key(entry["num_envs"], entry["knobs"]))
    return found


def run(plan: dict[str, Any], poll_s: float = POLL_S, give_up_s: float | None = None) -> list[tuple[int, str]]:
    """Load every shape of ``plan`` in order (the first ``at_once`` at once, the others once ready); the shapes
    loaded.

    ``plan``: ``backend``, ``profile``, ``device``, ``shapes`` ([num_envs, knobs] pairs), ``at_once`` (default 1)
    and ``ready`` (the compiler's ``precompile.jsonl``). Returns when all are loaded, or after ``give_up_s``
    seconds of waiting.
    """
    from sweep import perf
    from sweep.backends import get_backend
    from sweep.backends.base import resolve_device
    from sweep.backends.policy import planned
    from sweep.perf.graphs import CAPTURING

    perf.enable_compile_cache()  # before the first compile, as every trial of the plan (JAX reads it once)
    backend = get_backend(plan["backend"])
    device = resolve_device(plan["device"])
    pending = [(int(n), dict(k)) for n, k in plan["shapes"]]
    at_once = {shape_key(*s) for s in pending[: int(plan.get("at_once", 1))]}
    loaded: list[tuple[int, str]] = []
    deadline = None if give_up_s is None else time.monotonic() + give_up_s
    while pending:
        built = ready(Path(plan["ready"]))
        due = next((s for s in pending if shape_key(*s) in at_once or shape_key(*s) in built), None)
        if due is None:
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(poll_s)
            continue
        pending.remove(due)
        t0 = time.perf_counter()
        with CAPTURING:  # never beside a trial's CUDA-graph capture
            backend.preload(due[0], device, plan["profile"], planned(plan, due[0]), **due[1])
        loaded.append(shape_key(*due))
        _note(plan, {"num_envs": due[0], "knobs": due[1], "seconds": time.perf_counter() - t0, "at": time.time()})
    return loaded


def _note(plan: dict[str, Any], line: dict[str, Any]) -> None:
    """One JSON line in ``preload.jsonl`` beside the compiler's lines (``pid``: which worker process)."""
    with open(Path(plan["ready"]).with_name("preload.jsonl"), "a") as f:
        f.write(json.dumps({**line, "pid": os.getpid()}) + "\n")  # one short write: workers' lines do not interleave


def start(plan: dict[str, Any]) -> None:
    """Start this process's loading thread for ``plan`` (once: a worker's later calls leave it running)."""
    global _thread
    with _guard:
        if _thread is not None:
            return
        _thread = threading.Thread(target=_background, args=(plan,), name="sweep-preload", daemon=True)
        _thread.start()


def _background(plan: dict[str, Any]) -> None:
    with contextlib.suppress(OSError, AttributeError):  # below the trials' priority, where the OS allows it
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    try:
        run(plan)
    except Exception as exc:  # a trial then loads its shape itself, as without this thread
        with contextlib.suppress(OSError):
            _note(plan, {"stopped": f"{type(exc).__name__}: {exc}", "at": time.time()})
