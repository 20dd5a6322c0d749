"""What the planner and a trial share: trial states, why a trial ended (also read from ledgers written before end
causes were recorded), and the held-out seed policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.contract import (
    EVAL_SEED_BASE,
    EndCause,
    TrialConfig,
    TrialState,
    cap_reached,
    check_training_seed,
    end_state,
    panel_seeds,
)
from sweep.errors import ConfigError
from sweep.ledger import Progress, TrialRows, end_label, read_rows

#: Real end rows of committed ledgers written before causes were recorded (the last two with the reasons the
#: planner wrote then for a budget stop and a dead driver), in this order.
OLD = Path(__file__).parent / "data" / "ledger_before_end_causes.jsonl"
OLD_CAUSES = ["reached", "cap", "race_cap", "pruned", "not_run", "study_end", "failed", "worker_lost", "study_end",
              "driver_stopped"]  # fmt: skip


def test_a_ledger_written_before_end_causes_is_read_with_each_trials_cause() -> None:
    assert all("cause" not in json.loads(line) for line in OLD.read_text().splitlines())
    rows = read_rows(OLD)
    assert [r.cause.value for r in rows] == OLD_CAUSES
    assert [r.censored for r in rows] == [c in ("cap", "race_cap", "pruned") for c in OLD_CAUSES]
    assert [r.by_study for r in rows] == [c in ("study_end", "driver_stopped") for c in OLD_CAUSES]
    assert [end_label(r) for r in rows].count("not run") == 1


def test_a_row_that_carries_its_cause_is_read_by_it_not_by_its_reason() -> None:
    rows = TrialRows("r", 3, {}, 1, 3600.0, "test")
    row = rows.row(TrialState.CAPPED, Progress(billable_s=5.0), "worded however", EndCause.RACE_CAP)
    line = json.loads(row.to_json())
    assert line["cause"] == "race_cap" and line["state"] == "capped"
    assert row.cause is EndCause.RACE_CAP and row.censored and not row.by_study
    assert rows.row(TrialState.RUNNING).cause is None


def test_every_way_a_runner_ends_names_its_cause() -> None:
    cfg = TrialConfig(cap_s=100.0, race_cap_s=10.0)
    assert cap_reached(cfg, 100.0, {})[:2] == (TrialState.CAPPED, EndCause.CAP)
    assert cap_reached(cfg, 30.0, {"startup": 15.0, "compile": 4.0})[:2] == (TrialState.CAPPED, EndCause.RACE_CAP)
    assert cap_reached(cfg, 20.0, {"startup": 15.0}) is None  # 5 s past start-up: under the race cap
    assert end_state(0.95, 0.9, "prune")[:2] == (TrialState.REACHED, EndCause.REACHED)
    assert end_state(0.5, 0.9, "prune")[:2] == (TrialState.PRUNED, EndCause.PRUNED)
    assert end_state(None, 0.9, "stop")[:2] == (TrialState.CAPPED, EndCause.STUDY_END)
    assert end_state(0.5, 0.9, "continue") is None


def test_held_out_seeds_are_never_training_seeds() -> None:
    assert min(panel_seeds(4)) == EVAL_SEED_BASE
    with pytest.raises(ConfigError, match="training seeds must be in"):
        check_training_seed(EVAL_SEED_BASE)
