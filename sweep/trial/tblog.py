"""TensorBoard scalars of one trial, written once per ledger row (checkpoint cadence: no per-step host sync).

The trial process writes its own event file under its trial folder (``trials/NNNN/``), so
``tensorboard --logdir reports/<run_id>`` shows every trial of a run side by side. Every value is
taken from the ledger row (through :func:`sweep.ledger.metrics`), at step = env steps and at the
row's wall time. Logging never ends a trial: if ``tensorboard`` is missing or a write fails, the
trial warns once and goes on without it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from sweep.contract import TrialState
from sweep.ledger import PHASES, Row, metrics


class TrialScalars:
    """Writes a trial's ledger rows as TensorBoard scalars into ``log_dir`` (opened at the first row)."""

    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self._writer: Any = None
        self._disabled = False

    def write(self, row: Row) -> None:
        """Add one row's scalars (held-out success and interval, return, throughput, phases, spend)."""
        if self._disabled:
            return
        try:
            writer = self._open(row)
            if writer is None:
                return
            step, when = int(row.env_steps), float(row.wall_time)
            for tag, value in scalars(row).items():
                writer.add_scalar(tag, value, step, walltime=when)
            if row.state != TrialState.RUNNING:
                writer.add_text("trial/end", f"{row.state}: {row.reason}", step, walltime=when)
            writer.flush()
        except Exception as exc:  # a full disk or a broken writer must not fail the trial
            self._disable(f"TensorBoard logging stopped for {self.log_dir}: {type(exc).__name__}: {exc}")

    def _open(self, row: Row) -> Any:
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                self._disable(f"no TensorBoard scalars ({exc}); install it with: pip install tensorboard")
                return None
            self._writer = SummaryWriter(log_dir=str(self.log_dir))
            knobs = ", ".join(f"{k}={v}" for k, v in sorted(row.params.items()))
            self._writer.add_text("trial/params", f"trial {row.trial} (seed {row.seed}): {knobs}", 0)
        return self._writer

    def _disable(self, message: str) -> None:
        self._disabled = True
        warnings.warn(message, stacklevel=3)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def scalars(row: Row) -> dict[str, float]:
    """Tag -> value for one ledger row: what :class:`TrialScalars` writes (None-valued figures left out)."""
    m = metrics(row)
    recorded = {  # the row's own figures, written as they are (when recorded)
        "held_out/success": row.success,
        "held_out/success_lo": row.success_lo,
        "held_out/success_hi": row.success_hi,
        "held_out/success_max": row.success_max,
        "train/mean_return": row.mean_return,
        "train/success": row.train_success,
        "train/on_track": row.on_track,
    }
    out = {tag: float(value) for tag, value in recorded.items() if value is not None}
    out["perf/env_steps_per_s"] = float(m.throughput_sps)
    out["cost/usd"] = float(m.usd)
    out["cost/billable_s"] = float(m.wall_s)
    out.update({f"phases/{p}_s": float(row.phases_s.get(p, 0.0)) for p in PHASES})
    return out
