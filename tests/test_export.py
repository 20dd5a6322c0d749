"""recommended.yaml: complete, round-trips, and re-runs through ``python -m sweep.trial config=...``."""

from __future__ import annotations

from pathlib import Path

import yaml

from sweep import export
from sweep.contract import TrialConfig
from sweep.ledger import LedgerWriter
from sweep.trial import run_trial
from tests.replay_table import write_table


def replay_run(tmp_path: Path) -> Path:
    """Two replayed trials written to a run folder (no Ray needed)."""
    table = write_table(tmp_path / "table.json")
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for trial, (n, h) in enumerate([(128, 16), (64, 8)]):
            cfg = TrialConfig(
                backend="replay",
                profile="recorded",
                num_envs=n,
                num_steps_per_env=h,
                cap_s=1e6,
                backend_options={"table": str(table)},
            )
            run_trial(
                cfg,
                lambda r: w.append(r) or "continue",
                run_id="x",
                trial=trial,
                price_usd_per_hour=3.6,
                price_label="test",
            )
    return run_dir


def test_yaml_has_the_sections_and_round_trips(tmp_path: Path) -> None:
    path = export.write(replay_run(tmp_path))
    doc = yaml.safe_load(path.read_text())
    for key in ("task", "knobs", "perf_flags", "agent", "versions", "evidence", "trial"):
        assert key in doc, key
    assert doc["knobs"] == {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
    assert doc["agent"]["num_steps_per_env"] == 8 and doc["agent"]["algorithm"]["class_name"] == "PPO"
    assert doc["evidence"]["trial"] == 1 and doc["evidence"]["held_out_success"] >= 0.9
    assert doc["versions"]["rsl-rl-lib"] == "5.5.1"
    assert TrialConfig(**doc["trial"]).validate().num_envs == 64  # the trial section is a complete config
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_the_agent_section_carries_the_flags_that_act_through_it() -> None:
    stock = export.implied_agent_config(TrialConfig(num_envs=64, num_steps_per_env=8))
    assert stock["check_for_nan"] is True and stock["algorithm"]["class_name"] == "PPO"
    fast = export.implied_agent_config(
        TrialConfig(num_envs=64, num_steps_per_env=8, flags={"fast_finite_check": True, "bf16_update": True})
    )
    assert fast["check_for_nan"] is False and fast["algorithm"]["use_mixed_precision"] is True
    assert fast["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO"
    assert fast["algorithm"]["perf_flags"]["fast_finite_check"] is True


def test_no_yaml_when_nothing_reached(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(
            {
                "trial": 0,
                "state": "failed",
                "billable_s": 1.0,
                "price_usd_per_hour": 1.0,
                "params": {},
                "phases_s": {},
                "env_steps": 0,
                "reason": "x",
            }
        )
    assert export.write(run_dir) is None
