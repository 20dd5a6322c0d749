"""A trial's checkpoint on disk: the model and normalizer state, the ledger row it belongs to, and what is kept.

Each trial folder ``trials/NNNN/`` of a run holds ``checkpoint.pt`` (rsl-rl's ``PPO.save()``: the actor
with its observation normalizer, the critic, the optimizer) and ``checkpoint.json`` (the trial, iteration
and held-out success of the ledger row it belongs to, and the observation and action sizes needed to
rebuild the actor without the simulator). Both are replaced at every checkpoint. A trial ends right
after the checkpoint that first reaches the target, so a reached trial's files are that checkpoint.

What is kept (``checkpoints:`` of the run config): ``all`` keeps every trial's latest checkpoint (about
1 MB each for the 128x3 MLP with its Adam state); ``reached`` deletes the files of trials that end any
other way. A reached trial's checkpoint is never deleted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sweep.errors import ConfigError

CHECKPOINT_FILE = "checkpoint.pt"
META_FILE = "checkpoint.json"
#: Values of the ``checkpoints`` setting.
KEEP = ("all", "reached")


def trial_dir(run_dir: str | Path, trial: int) -> Path:
    """The folder of one trial inside a run folder (checkpoint, TensorBoard events)."""
    return Path(run_dir) / "trials" / f"{trial:04d}"


def relative_path(trial: int) -> str:
    """Where a trial's checkpoint lies, relative to the run folder (what ledger rows and YAML record)."""
    return f"trials/{trial:04d}/{CHECKPOINT_FILE}"


def check_keep(value: Any, key: str = "checkpoints") -> str:
    """Reject an unknown ``checkpoints`` setting, naming the key and the valid values."""
    if value not in KEEP:
        raise ConfigError(f"{key}: must be one of {', '.join(KEEP)} (got {value!r})")
    return value


def save(state: dict[str, Any], meta: dict[str, Any], run_dir: str | Path, trial: int) -> str:
    """Write ``state`` (``PPO.save()``) and ``meta`` for ``trial``; returns the checkpoint's relative path.

    Each file is written beside its final name and then renamed over it, so a trial killed mid-write
    leaves the previous checkpoint whole.
    """
    import torch

    folder = trial_dir(run_dir, trial)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (CHECKPOINT_FILE + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, folder / CHECKPOINT_FILE)
    tmp = folder / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
    os.replace(tmp, folder / META_FILE)
    return relative_path(trial)


def prune(run_dir: str | Path, trial: int) -> bool:
    """Delete a trial's checkpoint files (call only for trials that did not reach the target); True if any was."""
    folder = trial_dir(run_dir, trial)
    removed = False
    for name in (CHECKPOINT_FILE, META_FILE, CHECKPOINT_FILE + ".tmp", META_FILE + ".tmp"):
        try:
            (folder / name).unlink()
            removed = True
        except FileNotFoundError:
            pass
    return removed


def read_meta(run_dir: str | Path, checkpoint: str) -> dict[str, Any]:
    """The ``checkpoint.json`` beside a checkpoint given relative to the run folder."""
    path = Path(run_dir) / Path(checkpoint).parent / META_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: missing; it says which ledger row and model sizes the checkpoint has") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable ({exc})") from exc
