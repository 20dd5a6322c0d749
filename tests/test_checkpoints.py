"""Checkpoints on disk: the one that reached the target is kept with its ledger row; others go when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep import checkpoints
from sweep.contract import PRUNE
from sweep.errors import ConfigError
from sweep.ledger import LedgerView, read_rows
from sweep.trial.cli import checked
from sweep.trial.runner import run_trial
from tests.helpers import tiny_trial


def test_a_reached_checkpoint_stays_even_when_only_reached_ones_are_kept(reached_run) -> None:
    run_dir, _ = reached_run
    end = LedgerView(read_rows(run_dir / "ledger.jsonl")).last[3]
    assert end.state == "reached" and end.checkpoint == checkpoints.relative_path(3)
    assert (run_dir / end.checkpoint).is_file()
    meta = checkpoints.read_meta(run_dir, end.checkpoint)
    assert meta["reached"] and meta["iteration"] == end.iteration and meta["obs_dim"] > 0 < meta["num_actions"]


def test_a_trial_that_did_not_reach_drops_its_checkpoint_when_only_reached_ones_are_kept(tmp_path: Path) -> None:
    seen = []

    def sink(row):
        seen.append((row.state, row.checkpoint, (tmp_path / row.checkpoint).is_file() if row.checkpoint else False))
        return PRUNE

    final = run_trial(tiny_trial(checkpoints="reached", eval_every_steps=16), sink, trial=5, out_dir=tmp_path)
    assert final.state == "pruned"
    # the checkpoint row named a file that was there; the end row names none, and the files are gone
    assert seen == [("running", "trials/0005/checkpoint.pt", True), ("pruned", "", False)]
    folder = checkpoints.trial_dir(tmp_path, 5)
    assert not (folder / checkpoints.CHECKPOINT_FILE).exists() and not (folder / checkpoints.META_FILE).exists()
    assert list(folder.glob("events.out.tfevents.*"))  # the TensorBoard record of the trial stays


def test_save_replaces_both_files_and_prune_removes_them(tmp_path: Path) -> None:
    for iteration in (10, 20):
        rel = checkpoints.save({"actor_state_dict": {}, "it": iteration}, {"iteration": iteration}, tmp_path, 2)
    assert rel == "trials/0002/checkpoint.pt"
    assert json.loads((tmp_path / "trials/0002/checkpoint.json").read_text()) == {"iteration": 20}
    assert sorted(p.name for p in (tmp_path / "trials/0002").iterdir()) == ["checkpoint.json", "checkpoint.pt"]
    assert checkpoints.prune(tmp_path, 2) and not checkpoints.prune(tmp_path, 2)
    assert list((tmp_path / "trials/0002").iterdir()) == []


def test_an_unknown_keep_setting_names_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"checkpoints: must be one of all, reached \(got 'best'\)"):
        checked(tiny_trial(checkpoints="best"))
