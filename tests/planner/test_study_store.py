"""The rows the planner writes for trials it closes itself, and how an end is told to Optuna."""

from __future__ import annotations

from pathlib import Path

import optuna

from sweep import config
from sweep.config import validation
from sweep.contract import EndCause, TrialConfig, TrialState
from sweep.ledger import Row
from sweep.planner import study_store
from sweep.prices import resolve

PRICE = resolve("custom", usd_per_hour=3600.0)  # $1 per billable second


def test_an_end_row_bills_the_seconds_no_phase_claimed_as_other_and_keeps_its_seed_and_phase() -> None:
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=False))
    last = Row.of({"trial": 3, "state": "running", "iteration": 40, "billable_s": 10.0,
                   "phases_s": {"sim": 8.0, "eval": 2.0}, "checkpoint": "trials/3/c.pt"})  # fmt: skip
    dispatched = TrialConfig(seed=9, phase="confirm", baseline=True)
    lost = (TrialState.FAILED, EndCause.WORKER_LOST, "worker lost")
    end = study_store.end_row(cfg, PRICE, 3, {"num_envs": 256}, lost, 14.5, last, dispatched)
    assert end.billable_s == 14.5 and dict(end.phases_s) == {"sim": 8.0, "eval": 2.0, "other": 4.5}
    assert (end.seed, end.phase, end.baseline, end.iteration) == (9, "confirm", True, 40)
    assert (end.state, end.cause) == ("failed", "worker_lost")
    assert end.checkpoint == "trials/3/c.pt"  # checkpoints: all keeps it on disk
    dropped = validation.validate(config.load("locomotion", {"checkpoints": "reached"}, has_gpu=False))
    assert study_store.end_row(dropped, PRICE, 3, {}, lost, 14.5, last).checkpoint == ""
    unrun = (TrialState.PRUNED, EndCause.NOT_RUN, "repeat")
    unknown = study_store.end_row(cfg, PRICE, 3, {}, unrun, 0.0)  # told without running
    assert unknown.billable_s == 0.0 and unknown.seed == 3 + cfg.seeds.training and unknown.phase == "search"
    assert dict(unknown.phases_s) == {}  # no phase recorded, as the ledger has always written it


def test_an_end_is_told_as_its_state_says(tmp_path: Path) -> None:
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=False))
    study = optuna.create_study(directions=["minimize", "minimize"], storage=f"sqlite:///{tmp_path / 's.db'}")
    rows = [Row.of({"trial": 0, "state": "running", "billable_s": 10.0, "success": s}) for s in (0.5, 0.7)]
    last = Row.of({"trial": 0, "state": "running", "billable_s": 20.0, "phases_s": {"sim": 20.0}})
    for state, cause in [("reached", "reached"), ("capped", "cap"), ("failed", "failed"), ("pruned", "pruned")]:
        ending = (TrialState(state), EndCause(cause), "")
        end = study_store.end_row(cfg, PRICE, 0, {}, ending, 20.0, last)
        study_store.tell_end(study, study.ask(), rows, end, 0.9)
    reached, capped, failed, pruned = study.trials
    assert reached.state == optuna.trial.TrialState.COMPLETE and reached.constraints == {"success_gap": 0.0}
    gap = 0.9 - 0.7  # the best pass's distance to the target; a failure by its own fault is ranked worse still
    assert capped.values is not None and abs(capped.constraints["success_gap"] - gap) < 1e-9
    assert abs(failed.constraints["success_gap"] - (gap + 1.0)) < 1e-9
    assert pruned.state == optuna.trial.TrialState.PRUNED


def test_an_orphan_is_billed_to_the_last_sign_of_life_of_the_driver_that_ran_it() -> None:
    # Two dead drivers: the first ran 100-150 s (last beat 140, a row of its at 148), the second 200-260; now 300.
    lives, now = [(100.0, 140.0), (200.0, 260.0)], 300.0
    signs = [120.0, 148.0, 210.0, 255.0]
    assert study_store.last_sign_of_life(130.0, signs, lives, now) == 148.0  # the first's: not the second's life
    assert study_store.last_sign_of_life(205.0, signs, lives, now) == 260.0
    assert study_store.last_sign_of_life(258.0, [*signs, 262.0], lives, now) == 262.0  # a row after its last beat
    assert study_store.last_sign_of_life(50.0, signs, lives, now) == 50.0  # before any known life: nothing later
    assert study_store.last_sign_of_life(130.0, signs, [], now) == 255.0  # no life known: the run's last sign


def test_an_end_the_planner_wrote_for_a_lost_trial_is_told_fail_on_resume_as_it_would_have_been(tmp_path) -> None:
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=False))
    study = optuna.create_study(directions=["minimize", "minimize"], storage=f"sqlite:///{tmp_path / 's.db'}")
    for cause in (EndCause.WORKER_LOST, EndCause.DRIVER_STOPPED):
        end = study_store.end_row(cfg, PRICE, 0, {}, (TrialState.FAILED, cause, "lost"), 5.0)
        study_store.tell_end(study, study.ask(), [], end, 0.9)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 2
