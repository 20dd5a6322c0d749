"""An in-process worker pool: the planner's pool interface with trials run in threads of this process.

For replayed trials (the replay backend serves them from a recorded table, no simulator): the search-efficiency
benchmark and the planner's tests run real Optuna studies through it without Ray. Real trials use
:class:`sweep.execution.workers.WorkerPool`.
"""

from __future__ import annotations

import threading
from typing import Any

from sweep.contract import CONTINUE, Row, TrialConfig, TrialState
from sweep.trial.runner import runner_for


class InlinePool:
    """The planner's pool interface, trials run in threads of this process (replayed trials only)."""

    size = 1

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.lock = threading.Lock()
        self.answers: dict[tuple[int, int], tuple[threading.Event, list[str]]] = {}
        self.threads: dict[int, threading.Thread] = {}
        self.busy: set[int] = set()
        """Trials holding a slot: freed when their rows are drained after the thread ended, as the Ray pool frees
        an actor when the driver collects its result (a trial's end row is read with its slot's release)."""
        self.arrived = threading.Event()
        self.fresh: set[int] = set()
        """The first trial submitted: one process for every trial, started once."""

    def idle(self) -> int:
        return self.size - len(self.busy)

    def submit(self, trial: int, cfg: TrialConfig, run_id: str, price: Any, out_dir: str) -> str:
        def sink(row: Row) -> str:
            event, answer = threading.Event(), [CONTINUE]
            key = (row.trial, row.iteration)
            if row.state == TrialState.RUNNING:
                with self.lock:
                    self.answers[key] = (event, answer)
            with self.lock:
                self.rows.append(row)
            self.arrived.set()
            if row.state == TrialState.RUNNING:
                event.wait(30)
            return answer[0]

        thread = threading.Thread(
            target=runner_for(cfg.backend),
            args=(cfg, sink),
            kwargs={
                "run_id": run_id,
                "trial": trial,
                "price_usd_per_hour": price.usd_per_hour,
                "price_label": price.label,
                "out_dir": out_dir,  # the replay reads the study's ledger: a config's next seed is a new recording
            },
            daemon=True,
        )
        if not self.threads:
            self.fresh.add(trial)
        self.threads[trial] = thread
        self.busy.add(trial)
        thread.start()
        return "inline"

    def drain_rows(self) -> list[Row]:
        ended = {t for t in self.busy if not self.threads[t].is_alive()}  # before the rows: theirs are all sent
        with self.lock:
            rows, self.rows = self.rows, []
        self.busy -= ended
        return rows

    def wait_rows(self, timeout_s: float) -> None:
        if not self.rows:
            self.arrived.wait(timeout_s)
        self.arrived.clear()  # a row sent since is still in self.rows: the next call returns at once

    def lost(self) -> list[tuple[int, str]]:
        return []

    def decide(self, trial: int, iteration: int, answer: str) -> None:
        with self.lock:
            event, box = self.answers.pop((trial, iteration), (None, None))
        if event is not None:
            box[0] = answer
            event.set()

    def stop_all(self) -> None:
        pass
