"""The typed record: rows written key for key as before, every committed ledger read, older formats included, and no
module but the reader and the writer naming a row's fields as text."""

from __future__ import annotations

import ast
import json
import pickle
from dataclasses import fields
from pathlib import Path

import pytest

from sweep.contract import EndCause, TrialState
from sweep.ledger import TrialRows, read_rows
from sweep.record import NO_PHASES, PHASES, PhaseSeconds, Progress, Row, recorded_cause

ROOT = Path(__file__).resolve().parents[1]
LEDGERS = [*sorted((ROOT / "benchmarks" / "data").rglob("*ledger.jsonl")), *(ROOT / "tests" / "data").glob("*.jsonl")]

#: Two rows as the writer wrote them before rows were typed (the same inputs give the same line), with the two keys
#: added since for runs in pieces (``fresh_worker``, ``piece``).
BEFORE = (
    '{"baseline": true, "billable_s": 12.5, "cause": "", "checkpoint": "trials/0003/checkpoint.pt", "device": '
    '"NVIDIA H200", "env_steps": 184320, "eval_episodes": 256, "fresh_worker": false, "gpu": "vm:0", '
    '"gpu_capacity_gib": null, "iteration": 30, "mean_return": 1.25, "on_track": 0.45, "params": {"backend": '
    '"mjx_locomotion", "flags.tf32": false, "num_envs": 256}, "peak_gpu_gib": null, "phase": "confirm", "phases_s": '
    '{"answer": 0.01, "checkpoint": 0.05, "compile": 2.0, "eval": 1.2, "learn": 2.5, "log": 0.1, "other": 0.14, '
    '"policy": 1.0, "sim": 4.0, "startup": 1.5}, "piece": 0, "price_label": "h200 on_demand (2026-03-17)", '
    '"price_usd_per_hour": 4.54, "reason": "", "run_id": "run", "seed": 7, "skipped_updates": 0, "startup_parts_s": '
    '{"backend": 0.5, "env": 0.75, "learner": 0.25}, "state": "running", "success": 0.5, "success_hi": 0.6, '
    '"success_lo": 0.4, "success_max": null, "train_success": 0.3, "trial": 3, "wall_time": 1796000000.25}',
    '{"baseline": true, "billable_s": 0.0, "cause": "not_run", "checkpoint": "", "device": "", "env_steps": 0, '
    '"eval_episodes": 0, "fresh_worker": false, "gpu": "", "gpu_capacity_gib": null, "iteration": 0, "mean_return": '
    'null, "on_track": null, "params": {"backend": "mjx_locomotion", "flags.tf32": false, "num_envs": 256}, '
    '"peak_gpu_gib": null, "phase": "confirm", "phases_s": {}, "piece": 0, "price_label": "h200 on_demand '
    '(2026-03-17)", "price_usd_per_hour": 4.54, "reason": "repeat: this config already ran", "run_id": "run", '
    '"seed": 7, "skipped_updates": 0, "startup_parts_s": {}, "state": "pruned", "success": null, "success_hi": null, '
    '"success_lo": null, "success_max": null, "train_success": null, "trial": 3, "wall_time": 1796000001.5}',
)


def test_rows_are_written_key_for_key_as_before() -> None:
    rows = TrialRows("run", 3, {"backend": "mjx_locomotion", "num_envs": 256, "flags.tf32": False}, 7, 4.54,
                     "h200 on_demand (2026-03-17)", "confirm", True)  # fmt: skip
    seconds = {"startup": 1.5, "compile": 2.0, "sim": 4.0, "policy": 1.0, "learn": 2.5, "log": 0.1, "eval": 1.2,
               "checkpoint": 0.05, "answer": 0.01, "other": 0.14}  # fmt: skip
    progress = Progress(
        iteration=30, env_steps=184320, billable_s=12.5, phases_s=PhaseSeconds.of(seconds), success=0.5,
        success_lo=0.4, success_hi=0.6, eval_episodes=256, mean_return=1.25, train_success=0.3, on_track=0.45,
        device="NVIDIA H200", gpu="vm:0", checkpoint="trials/0003/checkpoint.pt",
        startup_parts_s={"backend": 0.5, "env": 0.75, "learner": 0.25},
    )  # fmt: skip
    running = rows.row(TrialState.RUNNING, progress)
    unrun = rows.row(TrialState.PRUNED, None, "repeat: this config already ran", EndCause.NOT_RUN)
    written = [r.to_json().replace(f'"wall_time": {r.wall_time}', '"wall_time": {}') for r in (running, unrun)]
    assert written == [line.replace('"wall_time": 1796000000.25', '"wall_time": {}').replace(
        '"wall_time": 1796000001.5', '"wall_time": {}') for line in BEFORE]  # fmt: skip
    for line in BEFORE:  # read back, written again: the same line
        assert Row.of(json.loads(line)).to_json() == line


@pytest.mark.parametrize("path", LEDGERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_ledger_reads_as_written(path: Path) -> None:
    """Each line read loses nothing: every key it has comes back with its value; what it lacks takes the default
    of its time (an end row's cause from its state and reason, no phase: 'search'); a line with every key comes back
    byte for byte."""
    lines = [line.rstrip("\n") for line in path.read_text().splitlines() if line.strip()]
    rows = read_rows(path)
    assert len(rows) == len(lines)
    every = {f.name for f in fields(Row)}
    for line, row in zip(lines, rows, strict=True):
        data, written = json.loads(line), row.as_json()
        kept = {k: v for k, v in written.items() if k in data}
        if not data.get("cause") and data.get("state") != "running":
            kept.pop("cause", None), data.pop("cause", None)  # an end row without its cause: read from its reason
            assert row.cause == recorded_cause(TrialState(data["state"]), data.get("reason", ""), data["billable_s"])
        assert kept == data
        if set(json.loads(line)) == every and (json.loads(line)["cause"] or row.state == TrialState.RUNNING):
            assert row.to_json() == line
        assert row.phase == data.get("phase", "search") and row.state.value == data["state"]


def test_an_end_row_always_has_its_cause() -> None:
    rows = TrialRows("r", 0, {}, 1, 1.0, "p")
    assert rows.row(TrialState.RUNNING).cause is None
    capped = rows.row(TrialState.CAPPED, Progress(billable_s=3.0), "per-trial cap of 3 billable seconds reached")
    assert capped.cause is EndCause.CAP
    assert rows.row(TrialState.PRUNED).cause is EndCause.NOT_RUN and not rows.row(TrialState.PRUNED).ran
    assert rows.row(TrialState.PRUNED, Progress(billable_s=1.0)).censored
    assert rows.row(TrialState.FAILED, None, "driver stopped while the trial ran").by_study


def test_phase_seconds_keep_what_a_row_records() -> None:
    old = PhaseSeconds.of({"startup": 1.0, "sim": 2.0})  # a table recorded before the 'answer' phase
    assert dict(old) == {"startup": 1.0, "sim": 2.0} and old.learn == 0.0 and old.get("answer", 0.0) == 0.0
    assert dict(old.plus("other", 0.5)) == {"startup": 1.0, "sim": 2.0, "other": 0.5}
    assert dict(NO_PHASES) == {} and tuple(PhaseSeconds()) == PHASES
    with pytest.raises(ValueError, match="unknown phase"):
        PhaseSeconds.of({"rollout": 1.0})


def test_a_row_crosses_a_process_boundary_as_itself() -> None:
    row = Row.of(json.loads(BEFORE[0]))
    again = pickle.loads(pickle.dumps(row))  # what Ray does to a row between a worker, the hub and the driver
    assert again == row and again.state is TrialState.RUNNING and again.phases_s.sim == 4.0


#: The reader and the writer (every field by name), and the modules whose text names a field for something else: the
#: names each may use, and what they are there.
ALLOWED: dict[str, tuple[frozenset[str] | None, str]] = {
    "sweep/record.py": (None, "the one reader and writer of a ledger line"),
    "sweep/backends/replay.py": (
        frozenset({"params", "seed", "state", "reason", "cause", "billable_s", "device"}),
        "the reader of recorded tables, each trial a typed Recording",
    ),
    "sweep/trial/evaluation.py": (frozenset({"success"}), "an env step's extras"),
    "sweep/trial/learner.py": (frozenset({"success"}), "an env step's extras"),
    "sweep/backends/isaaclab/scene.py": (frozenset({"success"}), "an env step's extras"),
    "sweep/backends/isaaclab/backend.py": (
        frozenset({"success"}),
        "the trial's own rule among an env's knobs; recommended.yaml's success section",
    ),
    "sweep/trial/runner.py": (
        frozenset({"train_success", "success"}),
        "the trainer's method of that name; the task's own success rule among the env's knobs",
    ),
    "sweep/backends/isaaclab/panel.py": (frozenset({"device", "success"}), "the panel process's spec"),
    "sweep/execution/preload.py": (frozenset({"device"}), "a worker's compile plan"),
    "sweep/execution/precompile.py": (frozenset({"device"}), "a compile process's plan"),
    "sweep/perf/apply.py": (frozenset({"skipped_updates"}), "the PPO algorithm's counter"),
    "sweep/planner/study_store.py": (frozenset({"phase"}), "an Optuna trial's user attribute"),
    "sweep/report/charts.py": (frozenset({"state", "trial", "success"}), "columns of the report's tables"),
    "sweep/report/page.py": (
        frozenset({"state", "gpu", "wall_time", "success"}),
        "columns of the report's tables; config.yaml's target.success",
    ),
    "sweep/report/export.py": (frozenset({"trial"}), "recommended.yaml's trial section"),
    "sweep/report/policy.py": (
        frozenset({"trial", "checkpoint", "iteration", "eval_episodes"}),
        "keys of recommended.yaml",
    ),
    "sweep/trial/cli.py": (frozenset({"trial", "run_id"}), "recommended.yaml's trial section; a command-line key"),
}


def field_names_as_text(source: str) -> list[tuple[int, str]]:
    """(line, field) of every access to a row field by its name as text: ``x["state"]``, ``x.get("state")``,
    ``getattr(x, "state")`` (and ``hasattr``, ``setattr``, ``.pop``, ``.setdefault``)."""
    names = {f.name for f in fields(Row)}
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault"):
                key = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            elif isinstance(func, ast.Name) and func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1:
                key = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
        if isinstance(key, str) and key in names:
            found.append((node.lineno, key))
    return found


def test_the_scan_sees_each_form_of_access() -> None:
    code = 'a = r["state"]\nb = r.get("trial", 0)\nc = getattr(r, "phases_s")\nd = r.state\ne = m["sim"]\n'
    assert field_names_as_text(code) == [(1, "state"), (2, "trial"), (3, "phases_s")]


def test_only_the_reader_and_the_writer_name_a_rows_fields_as_text() -> None:
    bad = []
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        allowed, _ = ALLOWED.get(name, (frozenset(), ""))
        bad += [f"{name}:{line}: {key}" for line, key in field_names_as_text(path.read_text())
                if allowed is not None and key not in allowed]  # fmt: skip
    assert not bad, "a row is read by attribute, not by its field's name as text:\n" + "\n".join(bad)
    stale = [name for name, (allowed, _) in ALLOWED.items() if allowed is not None and not
             {key for _, key in field_names_as_text((ROOT / name).read_text())} >= allowed]  # fmt: skip
    assert not stale, f"allowed names no longer used (narrow the allowlist): {stale}"
