"""Command-line overrides and the space's initial design."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep import config, run
from sweep.errors import ConfigError


def test_knobs_narrowed_on_the_command_line_drop_the_initial_entries_they_exclude(tmp_path: Path) -> None:
    cfg, _, _ = run.prepare(["space=locomotion", "knobs.num_envs=[128]", f"out={tmp_path}"])
    assert cfg.knobs.num_envs == [128] and cfg.initial == []  # the CPU design's 256 envs no longer fit
    kept = config.load("locomotion", {}, has_gpu=True)
    notes = config.drop_unfit_initial(kept)
    assert notes == [] and len(kept.initial) == 3


def test_an_initial_design_given_on_the_command_line_must_fit_the_knobs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"initial\[0\]\.num_envs: 256 is not among the choices \[128\]"):
        run.prepare(["space=locomotion", "knobs.num_envs=[128]", "initial=[{num_envs: 256}]", f"out={tmp_path}"])


def test_a_space_file_naming_an_unknown_knob_in_its_design_is_still_rejected() -> None:
    cfg = config.load("locomotion", {"initial": [{"num_env": 64}]}, has_gpu=False)
    assert config.drop_unfit_initial(cfg) == []
    with pytest.raises(ConfigError, match=r"initial\[0\]\.num_env: unknown knob"):
        config.validate(cfg)
