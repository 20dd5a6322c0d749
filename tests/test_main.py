"""``sweep <verb>`` (the console script, also ``python -m sweep``) runs the same entry points as the modules."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_module


def test_each_verb_runs_its_module_and_an_unknown_one_is_a_usage_line(tmp_path: Path) -> None:
    usage = run_module("sweep", "walk", cwd=tmp_path)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: sweep {run,trial,report,export,init}")
    run = run_module("sweep", "run", "space=locomotion", "budget.usd=-1", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.strip().endswith("budget.usd: must be > 0 (got -1.0)"), run.stderr
    trial = run_module("sweep", "trial", "run_id=../x", cwd=tmp_path)
    assert trial.returncode == 2 and "run_id" in trial.stderr
    report = run_module("sweep", "report", str(tmp_path), cwd=tmp_path)
    assert report.returncode == 2 and "no ledger.jsonl here" in report.stderr
    init = run_module("sweep", "init", "profile=Mydog-Stand-GO2-Direct", "colour=red", cwd=tmp_path)
    assert init.returncode == 2 and "error: command line: unknown key 'colour'" in init.stderr, init.stderr
    assert not any(tmp_path.iterdir())
