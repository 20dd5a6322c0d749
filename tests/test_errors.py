"""The error family's helpers: quiet imports keep a dependency's import-time notices off the user's screen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sweep.errors import import_quietly


def test_import_quietly_drops_only_the_named_notices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "noisy_dep.py").write_text(
        "print('Failed to import warp: No module named warp')\nprint('a warning a user should read')\nVALUE = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "noisy_dep", raising=False)
    assert import_quietly("noisy_dep", ("Failed to import warp:",)).VALUE == 3
    assert capsys.readouterr().out == "a warning a user should read\n"
    import_quietly("noisy_dep", ("Failed to import warp:",))  # imported already: nothing printed again
    assert capsys.readouterr().out == ""


def test_the_main_commands_checks_print_no_dependency_notice(tmp_path: Path) -> None:
    """Everything ``python -m sweep.run space=locomotion`` checks before it starts (the driver imports every module
    a trial needs, MJX included) prints nothing of a dependency's: the run's first line is sweep's own."""
    code = f"from sweep.run import plan; plan(['space=locomotion', 'out={tmp_path}'])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "Failed to import" not in proc.stderr, proc.stdout + proc.stderr
