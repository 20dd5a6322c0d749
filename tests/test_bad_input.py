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
    (with_("target", "eval_gate", 0.95), "target.eval_gate"),
    (with_("target", "eval_gate_signal", "reward"), "target.eval_gate_signal"),
    (with_("target", "success_fn", "stood_up"), "target.success_fn='stood_up': module:function"),
    (with_("target", "success_term", "reached"), "target.success_term: backend mjx_locomotion judges success by its"),
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
    ({**GOOD, "search": {"initial": [{"num_envs": 4096}]}}, "search.initial[0].num_envs"),
    (with_("search", "sampler", "cmaes"), "search.sampler"),
    (with_("search", "race_slack", 0.8), "search.race_slack"),
    (with_("search", "intensify", 0), "search.intensify"),
    (with_("search", "intensify", "two"), "search.intensify"),
    ({**GOOD, "search": {"intensify": 3}, "confirm": {"seeds": 3}}, "search.intensify"),
    ({**GOOD, "intensify": 2}, "intensify: now search.intensify"),
    (with_("workers", "num", -1), "workers.num"),
    (with_("budget", None, 5), "budget"),
    (with_("seeds", "training", "one"), "seeds.training"),
    (with_("budget", "trial_usd", 0.95), "budget.trial_usd"),  # no room for the overrun reserve
    (with_("knobs", "flags", {"fused_optimizer": [True, True]}), "knobs.flags.fused_optimizer"),
    ({**GOOD, "device": "gpu0"}, "device"),
    (with_("knobs", "num_mini_batches", [100000]), "no config of the space satisfies the constraints"),
    ({**GOOD, "confirm": {"baseline": {"mode": "fast"}}}, "confirm.baseline.mode"),
    ({**GOOD, "confirm": {"baseline": {"flags": {"fused_optimizer": True}}}}, "confirm.baseline.flags.fused_optimizer"),
    (with_("budget", "runs", 0), "budget.runs"),
    (with_("budget", "runs", 6), "confirm.baseline.num_envs"),  # the baseline it runs first must be known
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


# -- issue: damaged run folders, seeds, empty folders, command-line naming ----------------------------------------


def test_values_given_on_the_command_line_are_named_as_such_and_a_key_twice_is_refused(tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    out = f"out={tmp_path / 'reports'}"
    line = reject([f"space={path}", "budget.usd=-1", out], capsys)
    assert line.startswith("error: command line: budget.usd") and str(path) not in line
    line = reject([f"space={path}", "knobs.num_envs=[64,64]", out], capsys)
    assert line.startswith("error: command line: knobs.num_envs")
    line = reject([f"space={path}", "budget.usd=2", "budget.usd=3", out], capsys)
    assert "budget.usd is given twice" in line
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(with_("budget", "usd", -1)))  # the file's own value still names the file
    assert str(bad) in reject([f"space={bad}", out], capsys)


def test_a_limit_two_keys_set_together_names_the_command_line_when_either_came_from_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    data = dict(GOOD, budget={"usd": 1.0, "trial_usd": 0.4}, confirm={"seeds": 2, "budget_share": 0.5})
    data["search"] = {"initial": [{"num_envs": 64, "num_steps_per_env": 8}]}
    path.write_text(yaml.safe_dump(data))
    out = f"out={tmp_path / 'reports'}"
    line = reject([f"space={path}", "budget.usd=0.8", out], capsys)  # the confirmation's share no longer fits a trial
    assert line.startswith("error: command line: confirm.budget_share") and str(path) not in line
    line = reject([f"space={path}", "budget.trial_usd=2", out], capsys)  # the cap itself exceeds the budget
    assert line.startswith("error: command line: budget.trial_usd") and "exceeds budget.usd" in line
    line = reject([f"space={path}", "budget.usd=0.3", out], capsys)
    assert line.startswith("error: command line: budget.trial_usd")
    # a narrowed knob that both drops the initial entry and is itself bad: the error alone, no note before it
    line = reject([f"space={path}", "knobs.num_envs=[0]", out], capsys)
    assert line.startswith("error: command line: knobs.num_envs")
    # the GPU space's gate (0.85) under a target lowered on the command line: the gate is named, and what to do
    gated = tmp_path / "gated.yaml"
    gated.write_text(yaml.safe_dump(dict(data, target={"eval_gate": 0.85, "eval_gate_signal": "on_track"})))
    line = reject([f"space={gated}", "target.success=0.8", out], capsys)
    assert line.startswith("error: command line: target.eval_gate") and "set it below the target" in line


@pytest.mark.parametrize("where", ["file", "command line"])
def test_a_training_seed_reaching_the_held_out_range_is_refused_before_anything_runs(
    where: str, tmp_path: Path, capsys
) -> None:
    near = 2**31 - 3  # trial 3 would train on the first held-out seed
    path = tmp_path / "space.yaml"
    data = dict(GOOD, seeds={"training": near}) if where == "file" else GOOD
    path.write_text(yaml.safe_dump(data))
    argv = [f"space={path}", f"out={tmp_path / 'reports'}"] + ([f"seeds.training={near}"] if where != "file" else [])
    line = reject(argv, capsys)
    assert "seeds.training" in line and "held-out seeds" in line
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())
    line = reject([f"space={path}", "seeds.training=-1", f"out={tmp_path / 'reports'}"], capsys)
    assert "seeds.training" in line


def test_sweep_trial_and_record_trials_refuse_held_out_training_seeds(tmp_path: Path, capsys) -> None:
    from sweep.trial.cli import main as trial_main
    from sweep.trial.runner import run_trial

    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda argv: trial_main(argv, run=run_trial), [f"seed={2**31}", f"out={tmp_path}"])
    assert exit_info.value.code == 2 and "training seeds must be in" in capsys.readouterr().err
    proc = subprocess.run(
        [sys.executable, "benchmarks/record_trials.py", "grid", f"--seeds=1,{2**31 + 5}", f"--out={tmp_path}/g.json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "--seeds" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("g*")), "record_trials wrote before refusing"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_rejected_value_leaves_no_empty_run_folder(tmp_path: Path, capsys) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    reports = tmp_path / "reports"
    # A value only this machine can judge is rejected after the run folder is made: the folder goes again.
    line = reject([f"space={path}", "device=cuda", f"out={reports}", "run_id=x"], capsys)
    assert "no CUDA GPU" in line and not (reports / "x").exists()


@pytest.mark.parametrize("damage", ["garbage", "empty", "other study"])
def test_a_study_that_does_not_match_the_ledger_is_refused_before_ray_starts(
    damage: str, tmp_path: Path, capsys
) -> None:
    import optuna

    from sweep.ledger import LedgerWriter, Row

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump({**GOOD, "run_id": "r", "out": str(tmp_path)}))
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for trial in (0, 1):
            w.append(
                Row(
                    run_id="r",
                    trial=trial,
                    state="capped",
                    params={},
                    iteration=1,
                    env_steps=10,
                    billable_s=60.0,
                    phases_s={"sim": 60.0},
                    price_usd_per_hour=3.6,
                    price_label="cpu",
                )
            )
    db = run_dir / "study.db"
    if damage == "garbage":
        db.write_bytes(b"\x00not sqlite at all" * 64)
    elif damage == "empty":
        db.write_bytes(b"")
    else:  # a study with fewer trials than the ledger bills (e.g. copied from another run)
        study = optuna.create_study(study_name="sweep", storage=f"sqlite:///{db}", directions=["minimize"] * 2)
        study.enqueue_trial({})
        study.ask()
    before = (run_dir / "ledger.jsonl").read_bytes()
    line = reject([f"resume={run_dir}"], capsys)
    assert f"resume={run_dir}" in line and "the ledger keeps every row and dollar" in line
    assert ("cannot be read" in line) if damage != "other study" else ("lacks trial(s) 1" in line)
    assert (run_dir / "ledger.jsonl").read_bytes() == before


@pytest.mark.parametrize(("key", "value"), [("device", "\n"), ("backend", "\u2028"), ("new\nkey", 1)])
def test_a_value_or_key_holding_a_line_break_is_still_refused_in_one_line(key: str, value, tmp_path: Path, capsys):
    # found by tests/test_bad_input_properties.py: device "\n" split its error over two lines; the printer escapes
    # every line break (sweep.cli.printable), and a message quotes a value or key with repr
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({**GOOD, key: value}))
    line = reject([f"space={path}", f"out={tmp_path / 'reports'}"], capsys)
    assert repr(key)[1:-1] in line, line
