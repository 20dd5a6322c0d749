"""A broken environment is caught before or at the first trial and named: declared dependencies, the driver's import
check, and a study that stops when its trials keep failing the same way."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib

from sweep import run as run_mod
from sweep.backends import REGISTRY, get_backend
from sweep.planner.running import SAME_FAILURE_STOP, FailureStreak

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: Modules imported only on an optional path, and the extra that installs them.
OPTIONAL = {
    "isaaclab": "isaaclab",
    "isaaclab_rl": "isaaclab",
    "isaaclab_tasks": "isaaclab",
    "gymnasium": "isaaclab",
    "warp": "isaaclab",
    "onnx": "onnx",
    "onnxscript": "onnx",
    "onnxruntime": "onnx",
}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def imported_modules() -> dict[str, str]:
    """Top-level third-party modules the package imports (statically, through ``require("x")``, a backend's
    ``requires`` and the driver's check), each with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "require" and node.args:
                arg = node.args[0]
                names = [arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else []
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    for name in REGISTRY:
        for module in get_backend(name).requires:
            found.setdefault(module.split(".")[0], f"backend {name}'s requires")
    for module in run_mod.DRIVER_MODULES:
        found.setdefault(module.split(".")[0], "sweep/run.py DRIVER_MODULES")
    return {m: where for m, where in found.items() if m not in sys.stdlib_module_names and m != "sweep"}


def test_every_module_the_package_imports_is_a_declared_dependency() -> None:
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    dists = packages_distributions()
    modules = imported_modules()
    assert {"flatbuffers", "jax", "ray", "optuna", "torch"} <= set(modules)  # the scan sees lazy imports too
    for module, where in modules.items():
        if module in OPTIONAL:
            assert OPTIONAL[module] in extras, f"{module} ({where}): extra {OPTIONAL[module]} is not declared"
            continue
        provided = {_name(d) for d in dists.get(module, [])}
        assert provided, f"{module} ({where}) is not installed: is it declared in pyproject.toml?"
        assert provided & declared, f"{module} ({where}) comes from {sorted(provided)}, not declared in pyproject.toml"


def planted(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment in which ``flatbuffers`` is a package of ours with ``body`` as its ``__init__``."""
    pkg = tmp_path / "planted" / "flatbuffers"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    return {**os.environ, "PYTHONPATH": f"{pkg.parent}{os.pathsep}{ROOT}"}


def main_command(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep.run",
            "space=locomotion",
            "profile=cpu",
            "device=cpu",
            "price.gpu=cpu",
            f"out={tmp_path / 'reports'}",
            "run_id=r",
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_a_missing_package_every_trial_needs_is_named_before_ray_starts(tmp_path: Path) -> None:
    env = planted(tmp_path, "raise ImportError('planted: this flatbuffers is broken')\n")
    t0 = time.monotonic()
    proc = main_command(tmp_path, env)
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - t0 < 120  # no trial, no Ray: only the interpreter's imports
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert "'flatbuffers'" in lines[0] and "planted" in lines[0]
    assert re.search(r"pip install (--force-reinstall )?'flatbuffers[<>=]", lines[0])
    assert not (tmp_path / "reports").exists(), "a folder was left behind"


@pytest.mark.slow
def test_the_same_failure_in_a_row_stops_the_study_says_why_and_exits_non_zero(tmp_path: Path) -> None:
    # A flatbuffers that imports but lacks what jax.export needs: the driver's check passes, every trial fails alike.
    env = planted(tmp_path, "")
    proc = main_command(tmp_path, env, "knobs.num_envs=[32,64]", "knobs.num_steps_per_env=[8,16]", "search.initial=[]")
    assert proc.returncode == run_mod.EXIT_ALL_FAILED, proc.stderr[-2000:]
    run_dir = tmp_path / "reports" / "r"
    from sweep.ledger import LedgerView, read_rows

    ends = LedgerView(read_rows(run_dir / "ledger.jsonl")).last
    assert len(ends) == SAME_FAILURE_STOP and {r.state for r in ends.values()} == {"failed"}
    reason = next(iter(ends.values())).reason
    assert "flatbuffers" in reason
    assert f"{SAME_FAILURE_STOP} trials in a row failed the same way" in proc.stderr
    failures = [line for line in proc.stdout.splitlines() if line.startswith("failures:")]
    assert len(failures) == 1 and f"({SAME_FAILURE_STOP} of {SAME_FAILURE_STOP})" in failures[0]
    assert reason.split(":")[0] in failures[0] and str(run_dir / "ledger.jsonl") in failures[0]
    page = (run_dir / "report.html").read_text()
    assert "<b>Failures:</b>" in page and reason.split(":")[0] in page


def test_a_different_failure_or_any_other_end_resets_the_count() -> None:
    from sweep.ledger import Row

    def end(state: str, reason: str) -> Row:
        return Row.of({"trial": 0, "state": state, "reason": reason, "billable_s": 1.0})

    streak = FailureStreak()
    for state, reason in [("failed", "A"), ("failed", "A"), ("reached", ""), ("failed", "A"), ("failed", "B")]:
        assert streak.note(end(state, reason)) is None
    assert streak.reasons == ["B"]
    for _ in range(SAME_FAILURE_STOP - 2):
        assert streak.note(end("failed", "B")) is None
    stop = streak.note(end("failed", "B"))
    assert stop == f"{SAME_FAILURE_STOP} trials in a row failed the same way (B)"
