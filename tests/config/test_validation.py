"""Value checks of a run config: the initial design against the knobs, the confirmation's baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep import config, run
from sweep.config import validation
from sweep.errors import ConfigError


def test_knobs_narrowed_on_the_command_line_drop_the_initial_entries_they_exclude(tmp_path: Path) -> None:
    cfg, _, _ = run.prepare(["space=locomotion", "knobs.num_envs=[128]", f"out={tmp_path}"])
    assert cfg.knobs.num_envs == [128] and cfg.search.initial == []  # the CPU design's 256 envs no longer fit
    kept, notes = validation.drop_unfit_initial(config.load("locomotion", {}, has_gpu=True))
    assert notes == [] and len(kept.search.initial) == 2


def test_an_initial_design_given_on_the_command_line_must_fit_the_knobs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"search\.initial\[0\]\.num_envs: 256 is not among the choices \[128\]"):
        run.prepare(["space=locomotion", "knobs.num_envs=[128]", "search.initial=[{num_envs: 256}]", f"out={tmp_path}"])


def test_a_space_file_naming_an_unknown_knob_in_its_design_is_still_rejected() -> None:
    cfg, notes = validation.drop_unfit_initial(
        config.load("locomotion", {"search.initial": [{"num_env": 64}]}, has_gpu=False)
    )
    assert notes == []
    with pytest.raises(ConfigError, match=r"search\.initial\[0\]\.num_env: unknown knob"):
        validation.validate(cfg)


def test_budget_runs_without_a_confirmation_still_needs_the_baselines_knobs_and_says_why() -> None:
    over = {"confirm.baseline.num_envs": None, "confirm.seeds": 1, "budget.runs": 1}
    with pytest.raises(ConfigError, match=r"confirm\.baseline\.num_envs: .*\(budget\.runs=1 counts in runs of") as info:
        validation.validate(config.load("locomotion", over, has_gpu=True))
    assert info.value.keys == ("budget.runs",)


def test_a_confirmation_baseline_must_name_a_knob_the_space_leaves_open(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"confirm.baseline.num_envs: the space has several choices"):
        validation.validate(config.load("locomotion", {"confirm.baseline.num_envs": None}, has_gpu=True))
    with pytest.raises(
        ConfigError, match=r"command line: confirm.baseline.flags: unknown flag\(s\) \[.fused_optimizr.\]"
    ):
        run.prepare(["space=locomotion", "confirm.baseline.flags.fused_optimizr=true", f"out={tmp_path}"])
    with pytest.raises(ConfigError, match=r"confirm.budget_share: must be in \[0, 1\)"):
        validation.validate(config.load("locomotion", {"confirm.budget_share": 1.0}, has_gpu=True))
