"""One trial, worker side: build the env and rsl-rl PPO (:mod:`~sweep.trial.learner`), train with phase timers,
evaluate on the held-out panel (:mod:`~sweep.trial.evaluation`), write checkpoints and TensorBoard scalars
(:mod:`~sweep.trial.tblog`), and send one ledger row per checkpoint (:mod:`~sweep.trial.runner`);
``python -m sweep.trial`` runs one from the command line (:mod:`~sweep.trial.cli`). The runner (torch, rsl-rl) is
imported on first use, so that a bad command line is refused without it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweep.trial.runner import run_trial, runner_for


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("sweep.trial.runner"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["run_trial", "runner_for"]
