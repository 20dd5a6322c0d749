"""A broken or mismatched dependency is one line from every entry point, before any config is read."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

import pytest

from sweep import deps
from sweep.ledger import LedgerWriter, Row
from tests.helpers import ROOT

#: Every entry point, as a command after the interpreter (a bad key where one is read: the dependency goes first).
ENTRY_POINTS = [
    ["-m", "sweep.run", "budgett.usd=3"],
    ["-m", "sweep.trial", "num_envz=3"],
    ["-m", "sweep.report", "no-such-folder"],
    ["-m", "sweep.export", "no-such-folder"],
    ["-m", "sweep", "run", "budgett.usd=3"],
    ["-m", "sweep.init", "no-such-task"],
]
#: The console script beside this interpreter, where the package is installed with it.
SCRIPT = Path(sys.executable).with_name("sweep")


def declared_range(dist: str) -> str:
    """What the installed sweep declares for ``dist``, read here independently of sweep.deps."""
    line = next(r for r in requires("sweep") if r.split("<")[0].split(">")[0].split("=")[0].strip() == dist)
    return line.split(";")[0].replace(" ", "")


def commands(tmp_path: Path) -> list[list[str]]:
    out = [[sys.executable, *entry] for entry in ENTRY_POINTS]
    if SCRIPT.exists():
        out.append([str(SCRIPT), "run", "budgett.usd=3"])
    return out


def one_line(command: list[str], path: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{ROOT}"}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (command, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error:"), (command, lines)
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


def test_a_version_outside_the_declared_range_ends_every_entry_point_in_one_line(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "rich-99.0.0.dist-info"  # found before the installed rich's metadata
    shadow.mkdir(parents=True)
    (shadow / "METADATA").write_text("Metadata-Version: 2.1\nName: rich\nVersion: 99.0.0\n")
    for command in commands(tmp_path):
        line = one_line(command, str(shadow.parent), tmp_path)
        assert "'rich' is 99.0.0" in line and f"({declared_range('rich')})" in line, line
        assert "budgett" not in line and "num_envz" not in line  # before the command line is read


@pytest.mark.parametrize("dist", ["pyyaml", "plotly"])
def test_a_package_that_raises_on_import_is_one_line_wherever_it_is_imported_first(dist: str, tmp_path: Path) -> None:
    """pyyaml is imported by every entry point as it starts; plotly only once the report draws its charts."""
    module = deps.import_name(dist)
    planted = tmp_path / "planted" / module
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text("raise RuntimeError('planted: a broken build')\n")  # not even an ImportError
    if dist == "plotly":
        folder = tmp_path / "run"
        with LedgerWriter(folder / "ledger.jsonl") as w:  # one trial's end: enough for a chart to be drawn
            params = {"num_envs": 64, "num_steps_per_env": 8}
            price = {"price_usd_per_hour": 3600.0, "price_label": "x"}
            end = Row(run_id="t", trial=0, state="reached", params=params, iteration=30, env_steps=15360,
                      billable_s=12.0, phases_s={"sim": 12.0}, **price)  # fmt: skip
            w.append(end)
        runs = [[sys.executable, "-m", "sweep.report", str(folder)]]
    else:
        runs = commands(tmp_path)
    for command in runs:
        line = one_line(command, str(planted.parent), tmp_path)
        assert f"'{dist}'" in line and "raises on import" in line and "planted: a broken build" in line, line
        assert declared_range(dist) in line, line


def test_every_declared_dependency_is_installed_within_its_range_here() -> None:
    """Here (the dev environment, and the Isaac Lab one, whose tests run the entry points): the check passes."""
    found = deps.declared()
    assert {"torch", "mujoco", "optuna", "ray"} <= {d for d, _ in found}
    assert not any("extra" in r for _, r in found)
    deps.check_versions()
    for dist, _ in found:  # each is watched under the name it is imported by
        assert importlib.util.find_spec(deps.import_name(dist)) is not None, dist


def test_an_entry_point_is_told_from_other_interpreters() -> None:
    assert deps.is_entry(["python", "-m", "sweep.run", "space=locomotion"])
    assert deps.is_entry(["python", "-X", "importtime", "-m", "sweep.trial"])
    assert deps.is_entry(["python", "-msweep"])
    assert not deps.is_entry(["python", "-m", "pytest", "-m", "sweep.run"])
    assert not deps.is_entry(["python", "-c", "import sweep"])
    assert not deps.is_entry(["python", "default_worker.py", "-m", "sweep.run"])  # a Ray worker


@pytest.mark.parametrize(("cuda", "hip", "imported"), [(None, None, False), ("12.8", None, True), (None, "6.4", True)])
def test_torch_is_asked_about_a_gpu_only_where_its_build_has_gpu_support(
    cuda: str | None, hip: str | None, imported: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text(f"cuda = {cuda!r}\nhip = {hip!r}\n")
    spec = importlib.util.spec_from_file_location("torch", package / "__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "torch" else None)
    asked = []

    class Cuda:
        @staticmethod
        def is_available() -> bool:
            asked.append(True)
            return True

    monkeypatch.setitem(sys.modules, "torch", type(sys)("torch"))
    sys.modules["torch"].cuda = Cuda
    assert deps.torch_sees_gpu() is imported
    assert bool(asked) is imported
