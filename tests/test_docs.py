"""The commands the README and the docs show do what the docs say: every ``sweep.run`` and ``sweep.trial`` line
passes the checks a run makes before it starts (keys, values, the space, a resumed folder), and ``sweep.report``
rebuilds ``report.html`` and touches nothing else of the run folder."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest

from sweep.cli import parse_overrides
from tests.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A committed run folder stands in for ``reports/<run_id>`` (it has its config, ledger, study and recommendation).
RUN_FOLDER = ROOT / "benchmarks" / "data" / "h200_confirmed"
VERBS = {"sweep.run": "run", "sweep.trial": "trial", "sweep.report": "report", "sweep.export": "export"}


def shown_commands() -> list[tuple[str, str, list[str]]]:
    """(where, verb, arguments) of every ``python -m sweep.<verb>`` or ``sweep <verb>`` line in a bash block. A block
    that starts with ``sweep.init`` runs on the space file it writes: its lines carry ``space-from-init`` first."""
    found = []
    for doc in DOCS:
        blocks = re.findall(r"```bash\n(.*?)```", doc.read_text(), flags=re.S)
        lines = [
            (line, "sweep.init" in block)
            for block in blocks
            for line in block.replace("\\\n", " ").splitlines()
            if "sweep.init" not in line
        ]
        for number, (line, after_init) in enumerate(lines):
            words = shlex.split(line.split(" && ")[-1], comments=True)
            if words[:2] == ["python", "-m"] and words[2:3] and words[2] in VERBS:
                verb, args = VERBS[words[2]], words[3:]
            elif words[:1] == ["sweep"] and words[1:2] and words[1] in VERBS.values():
                verb, args = words[1], words[2:]
            else:
                continue
            found.append((f"{doc.relative_to(ROOT)}:{number}", verb, ["space-from-init"] * after_init + args))
    return found


COMMANDS = shown_commands()


def test_the_docs_show_every_verb() -> None:
    assert {verb for _, verb, _ in COMMANDS} == set(VERBS.values())


def in_folder(args: list[str], run_dir: Path) -> list[str]:
    return [a.replace("reports/<run_id>", str(run_dir)) for a in args]


def needs_isaaclab(args: list[str]) -> bool:
    isaac = any(a in ("space=anymal_d_flat", "space=go2_flat", "backend=isaaclab") for a in args)
    return isaac and importlib.util.find_spec("isaaclab") is None


@pytest.mark.parametrize(
    ("where", "args"), [(w, a) for w, v, a in COMMANDS if v == "run"], ids=[w for w, v, _ in COMMANDS if v == "run"]
)
def test_a_shown_run_passes_the_checks_made_before_it_starts(where: str, args: list[str], tmp_path: Path) -> None:
    from sweep.run import prepare

    if "space-from-init" in args:
        pytest.skip(
            "its space file is written by sweep.init from an Isaac Lab task (tests/backends/isaaclab/test_own_task.py)"
        )
    run_dir = tmp_path / "run"
    shutil.copytree(RUN_FOLDER, run_dir)
    args = in_folder(args, run_dir)
    cfg, folder, resuming = prepare(
        [*args] if any(a.startswith("resume=") for a in args) else [*args, f"out={tmp_path}"]
    )
    assert resuming == (folder == run_dir), where
    assert not (tmp_path / cfg.run_id).exists()  # nothing written before the run starts


@pytest.mark.parametrize(
    ("where", "args"),
    [(w, a) for w, v, a in COMMANDS if v == "trial"],
    ids=[w for w, v, _ in COMMANDS if v == "trial"],
)
def test_a_shown_trial_is_a_valid_trial(where: str, args: list[str], tmp_path: Path) -> None:
    from sweep.trial.cli import config_from_overrides

    if needs_isaaclab(args):
        pytest.skip("Isaac Lab is not installed: its profiles cannot be checked here")
    run_dir = tmp_path / "run"
    shutil.copytree(RUN_FOLDER, run_dir)
    cfg, _ = config_from_overrides(parse_overrides(in_folder(args, run_dir)))
    assert cfg.num_envs > 0, where


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")}


def test_report_rebuilds_the_page_and_leaves_the_run_folder_as_it_was(tmp_path: Path) -> None:
    """The README: ``python -m sweep.report reports/<run_id>`` rebuilds report.html from the ledger; it rewrites no
    other file (recommended.yaml stays what the run wrote)."""
    from sweep.report.page import main

    shown = [a for _, v, a in COMMANDS if v == "report"]
    assert shown == [["reports/<run_id>"]]
    run_dir = tmp_path / "run"
    shutil.copytree(RUN_FOLDER, run_dir)
    before = digests(run_dir)
    assert main(in_folder(shown[0], run_dir)) == 0
    after = digests(run_dir)
    assert set(after) - set(before) == {"report.html"}
    assert {k: after[k] for k in before} == before
