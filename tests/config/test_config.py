"""Composing a run config: where the space files live, the merge order of file, machine block and command line."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path

import pytest

from sweep import config
from sweep.config import validation
from sweep.errors import ConfigError
from sweep.params import TrialParams


def test_the_search_spaces_ship_inside_the_wheel_and_are_found_from_any_folder(tmp_path: Path) -> None:
    """The top-level search_spaces/ is installed as sweep.spaces: a built wheel carries every file, and a run from
    another folder finds ``space=locomotion`` inside the installed package."""
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).resolve().parents[2]
    pip = [sys.executable, "-m", "pip"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(root)]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("sweep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"sweep/spaces/{p.name}" for p in (root / "search_spaces").glob("*.yaml")}
    assert {"sweep/spaces/locomotion.yaml", "sweep/spaces/anymal_d_flat.yaml"} <= shipped <= names
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=elsewhere, capture_output=True, text=True, env=env)

    found = python("-c", "from sweep.config import find_space; print(find_space('locomotion'))")
    assert Path(found.stdout.strip()) == site / "sweep" / "spaces" / "locomotion.yaml", found.stderr
    run = python("-m", "sweep.run", "space=locomotion", "budget.usd=-1")  # refused after the space was read
    assert run.returncode == 2 and "budget.usd: must be > 0" in run.stderr, run.stderr


def test_an_editable_install_finds_the_checkouts_search_spaces(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    code = "import sweep.spaces; from sweep.config import find_space; print(find_space('locomotion'))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    if "No module named 'sweep'" in found.stderr:
        pytest.skip("sweep is not installed in this environment (pip install -e .)")
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == root / "search_spaces" / "locomotion.yaml"


def test_the_file_its_machine_block_and_the_command_line_merge_in_that_order_into_a_frozen_config() -> None:
    data = {
        "knobs": {"num_envs": [64, 128]},
        "budget": {"usd": 1.0, "trial_usd": 0.2},
        "when_cpu": {"budget": {"usd": 2.0}},
        "when_gpu": {"budget": {"usd": 9.0}},
    }
    cfg = config.compose(data, {"knobs.num_envs": 64, "budget.trial_usd": 0.1}, "f.yaml", has_gpu=False)
    assert cfg.knobs.num_envs == [64] and (cfg.budget.usd, cfg.budget.trial_usd) == (2.0, 0.1)  # a scalar: one choice
    assert config.compose(data, {}, "f.yaml", has_gpu=True).budget == config.Budget(usd=9.0, trial_usd=0.2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.budget.usd = 3.0


@pytest.mark.parametrize(
    ("data", "overrides", "message"),
    [
        ({"knobs": {"num_envs": "many"}}, {}, r"^f\.yaml: knobs\.num_envs\[0\]: .*'many'"),
        ({"budget": {"usd": 1.0}}, {"budget.usd": "abc"}, r"^command line: budget\.usd: .*'abc'"),
        ({}, {"search.prune": "maybe"}, r"^command line: search.prune: .*'maybe'"),
        ({"knobs": {"num_envz": [1]}}, {}, r"^f\.yaml: unknown key 'knobs\.num_envz'; valid keys: num_envs, "),
        ({"when_cpu": [1]}, {}, r"^f\.yaml: when_cpu: expected a mapping of keys"),
        ({}, {"when_cpu.budget.usd": 1}, r"^when_gpu/when_cpu: set those in the space file"),
    ],
)
def test_a_bad_key_or_type_names_where_it_came_from_and_the_key(data: dict, overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.compose(data, overrides, "f.yaml", has_gpu=False)


def test_the_shipped_spaces_compare_with_rsl_rls_own_runner_at_the_tasks_defaults() -> None:
    from sweep import perf
    from sweep.planner import space

    for name, gpu in itertools.product(("locomotion", "go2_flat", "anymal_d_flat"), (True, False)):
        cfg = validation.validate(config.load(name, {}, has_gpu=gpu))
        base = space.baseline_params(cfg)
        assert base["mode"] == "stock", name  # what a user runs without sweep
        changed = {k for k, v in base.items() if k.startswith("flags.") and v != perf.CATALOG[k[6:]].default}
        assert changed <= {"flags.compile_cache"}  # rsl-rl's behaviour; the simulator's compile cache as fixed
        if gpu:
            assert cfg.confirm.seeds == 3 and cfg.confirm.top == 2
            assert (base["num_envs"], base["num_steps_per_env"]) == (4096, 24)
        # a stock run is no point of the space: no initial entry runs it, the study runs it itself (budget.runs)
        trial = space.trial_config(base, cfg, "gpu" if gpu else "cpu", 1, 1.0)
        assert trial.mode == "stock" and TrialParams.from_config(trial).key() == TrialParams.identity(base)


def test_a_stock_baseline_keeps_rsl_rls_behaviour_where_the_space_fixes_a_training_flag() -> None:
    from sweep.planner import space

    over = {"knobs.flags.fused_optimizer": [True]}
    stock = validation.validate(config.load("locomotion", over, has_gpu=True))
    assert space.baseline_params(stock)["flags.fused_optimizer"] is False
    ours = validation.validate(config.load("locomotion", {**over, "confirm.baseline.mode": "sweep"}, has_gpu=True))
    assert (
        space.baseline_params(ours)["flags.fused_optimizer"] is True and space.baseline_params(ours)["mode"] == "sweep"
    )
