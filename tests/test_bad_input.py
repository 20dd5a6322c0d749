"""Bad input is rejected before any trial starts: exit status 2, one line naming the file/key, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from sweep import run as run_mod
from sweep.cli import run_main

ROOT = Path(__file__).resolve().parents[1]
GOOD = {
    "backend": "mjx_locomotion",
    "profile": "cpu",
    "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16], "flags": {"fused_optimizer": [False, True]}},
    "budget": {"usd": 1.0, "trial_usd": 0.5},
    "price": {"gpu": "cpu"},
}


def with_(section: str, key: str | None, value) -> dict:
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    if key is None:
        data[section] = value
    else:
        data.setdefault(section, {})[key] = value
    return data


# (space file content: a dict or raw text, text the error line must contain)
FILE_CASES = [
    ("knobs: [1, 2\n", "YAML syntax error"),
    ("- a\n- b\n", "mapping"),
    ({**GOOD, "budgett": {"usd": 1}}, "budgett"),
    (with_("knobs", "num_envz", [64]), "knobs.num_envz"),
    (with_("budget", "usd", "lots"), "budget.usd"),
    (with_("knobs", "num_envs", "many"), "knobs.num_envs"),
    (with_("knobs", "num_envs", []), "knobs.num_envs"),
    (with_("knobs", "num_steps_per_env", [-8]), "knobs.num_steps_per_env"),
    (with_("knobs", "num_mini_batches", [0]), "knobs.num_mini_batches"),
    (with_("knobs", "num_envs", [64, 64]), "knobs.num_envs"),
    (with_("budget", "usd", -1), "budget.usd"),
    (with_("budget", "trial_usd", 5.0), "budget.trial_usd"),
    (with_("target", "success", 1.5), "target.success"),
    (with_("target", "eval_episodes", 0), "target.eval_episodes"),
    (with_("constraints", "max_update_period_s", 0.01), "max_update_period_s"),
    (with_("constraints", "memory_share", 2.0), "memory_share"),
    (with_("backend", None, "bullet"), "backend"),
    (with_("profile", None, "moon"), "profile"),
    (with_("price", "gpu", "tpu9"), "price.gpu"),
    (with_("price", "kind", "reserved"), "price.kind"),
    (with_("price", "usd_per_hour", -3.0), "usd_per_hour"),
    (with_("knobs", "flags", {"warp_drive": [True]}), "warp_drive"),
    (with_("checkpoints", None, "best"), "checkpoints"),
    (with_("knobs", "flags", {"fused_optimizer": ["yes"]}), "fused_optimizer"),
    ({**GOOD, "initial": [{"num_envs": 4096}]}, "initial[0].num_envs"),
    (with_("sampler", None, "cmaes"), "sampler"),
    (with_("workers", "num", -1), "workers.num"),
    (with_("budget", None, 5), "budget"),
    (with_("seeds", "training", "one"), "seeds.training"),
    (with_("budget", "trial_usd", 0.95), "budget.trial_usd"),  # no room for the overrun reserve
    (with_("knobs", "flags", {"fused_optimizer": [True, True]}), "knobs.flags.fused_optimizer"),
    ({**GOOD, "device": "gpu0"}, "device"),
    (with_("knobs", "num_mini_batches", [100000]), "no config of the space satisfies the constraints"),
]


def reject(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_main(run_mod.main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


@pytest.mark.parametrize(("content", "needle"), FILE_CASES, ids=[c[1] for c in FILE_CASES])
def test_bad_space_files(content, needle: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    line = reject([f"space={path}", f"out={tmp_path / 'reports'}"], capsys)
    assert str(path) in line and needle in line, line
    assert not list((tmp_path / "reports").glob("*/ledger.jsonl")), "something ran"


def test_bad_command_lines(tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    out = f"out={tmp_path / 'reports'}"
    old = tmp_path / "old"  # a run folder to resume
    old.mkdir()
    (old / "config.yaml").write_text(yaml.safe_dump(GOOD))
    (old / "study.db").write_bytes(b"")
    cases = [
        ([f"space={path}", "budgett.usd=3", out], "budgett"),
        ([f"space={path}", "budget.usd=abc", out], "budget.usd"),
        (["space=no_such_space", out], "no_such_space"),
        ([f"space={path}", "oops", out], "oops"),
        ([f"space={path}", "out=/proc/forbidden/reports"], "out="),
        ([f"resume={tmp_path}"], "not a sweep run folder"),
        ([f"space={path}", "knobs.num_envs=[]", out], "knobs.num_envs"),
        ([f"resume={old}", "knobs.num_envs=[64]"], "knobs.num_envs: a resumed run keeps its search space"),
    ]
    for argv, needle in cases:
        line = reject(argv, capsys)
        assert needle in line, (argv, line)
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*/ledger.jsonl"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_a_gpu_on_a_machine_without_one(tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "device": "cuda"}))
    line = reject([f"space={path}", f"out={tmp_path / 'reports'}"], capsys)
    assert "device=cuda" in line and "no CUDA GPU" in line


def test_an_existing_run_is_not_overwritten(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "reports" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "study.db").write_bytes(b"")
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    line = reject([f"space={path}", "run_id=r", f"out={tmp_path / 'reports'}"], capsys)
    assert "resume=" in line


def test_no_traceback_from_the_real_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sweep.run", "space=locomotion", "budget.usd=-5", f"out={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error:") and "budget.usd" in proc.stderr
