"""``python -m sweep.run`` end to end on the replay backend (real Optuna, real Ray actors, real ledger)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml

from sweep import run as run_mod
from sweep.analysis.texts import usd_text
from sweep.ledger import LedgerView, metrics, read_rows
from tests.helpers import ROOT, run_in_process, run_module
from tests.replay_table import write_table, write_yardstick_table


def space_file(tmp_path: Path, **over) -> Path:
    table = write_table(tmp_path / "table.json")
    data = {
        "backend": "replay",
        "profile": "recorded",
        "backend_options": {"table": str(table), "time_scale": 0.002},
        "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16, 64], "num_mini_batches": [4]},
        "target": {"success": 0.9},
        "budget": {"usd": 400.0, "trial_usd": 60.0, "max_trials": 8},
        "price": {"gpu": "custom", "usd_per_hour": 3600.0},
        "workers": {"num": 2, "cpus_per_trial": 1},
        "constraints": {"max_update_period_s": 1.0},
        "search": {"initial": [{"num_envs": 128, "num_steps_per_env": 16}, {"num_envs": 64, "num_steps_per_env": 8}]},
        "device": "cpu",
    }
    for key, value in over.items():
        data[key] = value
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return run_module("sweep.run", *args, cwd=cwd, timeout=timeout)


def study(run_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    # 3 of the 4 feasible configs: the run ends at its trial limit, and a resume has one left to try
    proc = run(f"space={space_file(tmp)}", "run_id=r1", "budget.max_trials=3", f"out={tmp / 'reports'}", cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp / "stderr.txt").write_text(proc.stderr)
    return tmp / "reports" / "r1"


@pytest.mark.slow
def test_the_console_shows_sweep_lines_not_ray_notices(finished_run: Path) -> None:
    err = (finished_run.parents[1] / "stderr.txt").read_text()
    assert "Token authentication" not in err  # Ray's notice on every run (token auth itself stays on)
    assert "spent $" in err  # the progress line is there


@pytest.mark.slow
def test_every_trial_is_billed_and_the_budget_holds(finished_run: Path) -> None:
    rows = read_rows(finished_run / "ledger.jsonl")
    ends = LedgerView(rows).last
    states = Counter(r.state for r in ends.values())
    assert states["reached"] >= 1
    assert states["pruned"] >= 1  # slow configs are pruned by cost (or infeasible ones pruned before start)
    total = sum(metrics(r).usd for r in ends.values())
    assert total <= 400.0
    # the study and the ledger agree trial by trial
    s = study(finished_run)
    assert len(s.trials) == len(ends)
    for t in s.trials:
        assert t.user_attrs["state"] == ends[t.number].state


@pytest.mark.slow
def test_infeasible_configs_never_run(finished_run: Path) -> None:
    ends = LedgerView(read_rows(finished_run / "ledger.jsonl")).last
    for r in ends.values():
        if r.params["num_steps_per_env"] == 64:  # 64 x 0.02 s > 1 s update period
            assert r.state == "pruned" and r.billable_s == 0 and "update_period" in r.reason


@pytest.mark.slow
def test_the_first_trials_follow_the_initial_design(finished_run: Path) -> None:
    s = study(finished_run)
    first = sorted(s.trials, key=lambda t: t.number)[:2]
    assert [(t.params["num_envs"], t.params["num_steps_per_env"]) for t in first] == [(128, 16), (64, 8)]


@pytest.mark.slow
def test_report_and_yaml_are_written(finished_run: Path) -> None:
    assert (finished_run / "report.html").stat().st_size > 100_000  # plotly.js inlined
    doc = yaml.safe_load((finished_run / "recommended.yaml").read_text())
    assert doc["knobs"]["num_envs"] == 64 and doc["knobs"]["num_steps_per_env"] == 8


@pytest.mark.slow
def test_recommended_yaml_re_runs_through_sweep_trial(finished_run: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep.trial",
            f"config={finished_run / 'recommended.yaml'}",
            "price=3600",
            f"out={tmp_path / 'rerun'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reached" in proc.stdout and "USD to target" in proc.stdout


@pytest.mark.slow
def test_resume_continues_without_lost_or_duplicated_rows(finished_run: Path, tmp_path: Path) -> None:
    before = read_rows(finished_run / "ledger.jsonl")
    n_before = len(study(finished_run).trials)
    proc = run(f"resume={finished_run}", "budget.max_trials=11", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = read_rows(finished_run / "ledger.jsonl")
    assert after[: len(before)] == before  # nothing lost or rewritten
    keys = [(r.trial, r.iteration, r.state) for r in after]
    assert len(keys) == len(set(keys))  # nothing duplicated
    s = study(finished_run)
    assert len(s.trials) > n_before and len(s.trials) == len(LedgerView(after).last)
    saved = yaml.safe_load((finished_run / "config.yaml").read_text())
    assert saved["budget"]["max_trials"] == 11  # what changed on resume is what the report and a next resume read
    first = finished_run.parents[1] / "space.yaml"
    assert (saved["space"], saved["space_sha256"]) == ("space.yaml", hashlib.sha256(first.read_bytes()).hexdigest())


@pytest.mark.slow
def test_config_yaml_names_the_space_and_hashes_its_file_instead_of_a_machines_path(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweep.config import find_space

    space = finished_run.parents[1] / "space.yaml"  # given on the command line by its absolute path
    saved = yaml.safe_load((finished_run / "config.yaml").read_text())
    assert saved["space"] == "space.yaml" and saved["space_sha256"] == hashlib.sha256(space.read_bytes()).hexdigest()
    shipped = find_space("locomotion")
    assert run_mod.space_record(str(shipped)) == {
        "space": "locomotion",
        "space_sha256": hashlib.sha256(shipped.read_bytes()).hexdigest(),
    }
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "mine.yaml").write_text("budget: {usd: 1}\n")
    monkeypatch.chdir(tmp_path)
    assert run_mod.space_record("spaces/mine.yaml")["space"] == "spaces/mine.yaml"  # a relative path as given
    assert run_mod.space_record(str(tmp_path / "spaces" / "mine.yaml"))["space"] == "mine.yaml"


BAD_SPACES = [
    ({"knobs": {"num_envz": [1]}}, "knobs.num_envz"),
    ({"knobs": {"num_envs": []}}, "knobs.num_envs"),
    ({"knobs": {"num_envs": [0, 64]}}, "knobs.num_envs"),
    ({"knobs": {"num_steps_per_env": [-8]}}, "knobs.num_steps_per_env"),
    ({"budget": {"usd": -1}}, "budget.usd"),
    ({"price": {"gpu": "tpu9"}}, "price.gpu"),
    ({"price": {"gpu": "h200", "kind": "reserved"}}, "price.kind"),
    ({"backend": "bullet"}, "backend"),
]


@pytest.mark.parametrize(("over", "key"), BAD_SPACES)
def test_bad_spaces_are_rejected_before_any_trial(over: dict, key: str, tmp_path: Path) -> None:
    path = space_file(tmp_path)
    data = yaml.safe_load(path.read_text())
    for section, value in over.items():
        data[section] = {**data[section], **value} if isinstance(value, dict) and section in data else value
    if "price" in over:
        data["price"].pop("usd_per_hour", None)
        data["price"].update(over["price"])
    path.write_text(yaml.safe_dump(data))
    args = (f"space={path}", f"out={tmp_path / 'reports'}")
    if key == "backend":  # the real process once; the other cases in this one (the same checks, no imports paid)
        proc = run(*args, cwd=tmp_path, timeout=60)
    else:
        proc = run_in_process(run_mod.main, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error:") and str(path) in line and key in line, line
    assert not any((tmp_path / "reports").glob("*/ledger.jsonl"))


@pytest.mark.slow
def test_a_run_with_a_confirmation_ends_with_the_baseline_comparison(tmp_path: Path) -> None:
    # the table records this package's loop only: a baseline in its mode
    confirm = {"seeds": 2, "top": 1, "baseline": {"num_envs": 64, "num_steps_per_env": 16, "mode": "sweep"}}
    path = space_file(tmp_path, confirm=confirm)
    proc = run(f"space={path}", "run_id=c1", "budget.max_trials=3", f"out={tmp_path / 'reports'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = tmp_path / "reports" / "c1"
    ends = LedgerView(read_rows(run_dir / "ledger.jsonl")).last
    confirmed = [r for r in ends.values() if r.phase == "confirm"]
    assert confirmed and all(r.state == "reached" for r in confirmed)
    assert {r.baseline for r in confirmed} == {True, False}
    doc = yaml.safe_load((run_dir / "recommended.yaml").read_text())
    evidence = doc["evidence"]
    assert (doc["knobs"]["num_envs"], doc["knobs"]["num_steps_per_env"]) == (64, 8)
    assert len(evidence["seeds"]) == 2 and all(s["reached"] for s in evidence["seeds"])
    assert evidence["mean_usd_to_target_equal_terms"] == pytest.approx(
        sum(s["usd_to_target_equal_terms"] for s in evidence["seeds"]) / 2
    )
    vs = evidence["vs_baseline"]
    assert vs["ratio"] == pytest.approx(evidence["mean_usd_to_target_equal_terms"] / vs["baseline_mean"])
    assert vs["ratio"] < 1 and len(vs["ci95"]) == 2 and "delta method" in vs["rule"]
    spend = evidence["study_usd_by_phase"]
    assert spend["confirm"] == pytest.approx(sum(metrics(r).usd for r in confirmed))
    printed = proc.stdout.splitlines()
    use = printed.index(next(x for x in printed if x.startswith("use: 64 envs x 8 steps")))
    cost, study_cost, payback = printed[use + 1 : use + 4]  # the decision leads the printout
    assert cost.startswith("cost to target: ") and "over 2 seeds" in cost
    assert f"{vs['ratio']:.2f}x the baseline's mean ${vs['baseline_mean']:.4f}" in cost
    pay = evidence["payback"]
    total = sum(metrics(r).usd for r in ends.values())
    assert pay["study_usd"] == pytest.approx(total)
    assert pay["study_in_baseline_runs"] == pytest.approx(total / vs["baseline_mean"])
    assert pay["saving_per_run_usd"] == pytest.approx(vs["baseline_mean"] - evidence["mean_usd_to_target_equal_terms"])
    assert pay["runs_to_pay_back"] == pytest.approx(total / pay["saving_per_run_usd"])
    assert study_cost.startswith(
        f"study cost: ${total:.4f}, {pay['study_in_baseline_runs']:.1f} baseline training runs"
    )
    assert "confirmation $" in study_cost
    assert payback.startswith(
        f"payback: saves {usd_text(pay['saving_per_run_usd'])} per training run on equal terms; the study pays for "
        f"itself after {pay['runs_to_pay_back']:.1f} training runs"
    )


@pytest.mark.slow
def test_a_run_with_budget_runs_measures_the_stock_baseline_first_and_says_what_it_cost_in_its_runs(
    tmp_path: Path,
) -> None:
    costs = {(64, 8): 10.0, (64, 16): 30.0, (128, 8): 40.0, (128, 16): 25.0}
    table = write_yardstick_table(
        tmp_path / "yardstick.json", {k: {s: v for s in (1, 2, 3)} for k, v in costs.items()}, {1: 20.0, 2: 20.0}
    )
    confirm = {"seeds": 2, "top": 1, "baseline": {"num_envs": 128, "num_steps_per_env": 16}}  # mode: stock
    path = space_file(
        tmp_path,
        confirm=confirm,
        backend_options={"table": str(table), "time_scale": 0.002},
        budget={"usd": 400.0, "trial_usd": 60.0, "max_trials": 8, "runs": 6},
    )
    proc = run(f"space={path}", "run_id=b1", f"out={tmp_path / 'reports'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = tmp_path / "reports" / "b1"
    ends = LedgerView.of(read_rows(run_dir / "ledger.jsonl")).last
    first = next(t for t in study(run_dir).trials if t.user_attrs.get("baseline_first"))  # numbered after the design
    assert first.datetime_start == min(t.datetime_start for t in study(run_dir).trials)  # but dispatched first
    base = ends[first.number]
    assert base.params["mode"] == "stock" and base.baseline and base.phase == "search"
    total = sum(metrics(r).usd for r in ends.values())
    assert total <= 6 * 20.0  # 6 runs of the baseline it measured (20 s each at $1 a second)
    doc = yaml.safe_load((run_dir / "recommended.yaml").read_text())
    study_doc = doc["evidence"]["study"]
    assert study_doc["usd"] == pytest.approx(total) and study_doc["in_baseline_runs"] == pytest.approx(total / 20.0)
    assert study_doc["budget"] == {"usd": 400.0, "runs": 6.0} and study_doc["ended"]
    assert doc["evidence"]["vs_baseline"]["baseline_params"]["mode"] == "stock"
    printed = proc.stdout.splitlines()
    assert f"study cost: ${total:.4f}, {total / 20.0:.1f} baseline training runs" in proc.stdout
    assert f"study ended: {study_doc['ended']}" in printed
    assert "baseline: 128 envs x 16 steps, 4 mini-batches; rsl-rl's own runner, unchanged" in proc.stdout
    card = (run_dir / "report.html").read_text()
    assert "Study ended:</b>" in card and f"{total / 20.0:.1f} baseline training runs" in card
