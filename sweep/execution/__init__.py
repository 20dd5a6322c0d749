"""Where trials run, driver side: Ray actors, one per GPU or CPU slot (:mod:`~sweep.execution.workers`), the same
interface in threads for replayed trials (:mod:`~sweep.execution.inline`), and the compile-ahead helpers beside
them (:mod:`~sweep.execution.precompile`, :mod:`~sweep.execution.preload`). Workers only run trials and send rows."""

from sweep.execution.inline import InlinePool
from sweep.execution.workers import WorkerPool, wait_ready

__all__ = ["InlinePool", "WorkerPool", "wait_ready"]
