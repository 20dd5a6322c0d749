"""The planner's loop on replayed trials (in-process pool): limits, infeasible spaces, orphans after a crash."""

from __future__ import annotations

import os
import time
from pathlib import Path

import optuna
import pytest

from sweep import checkpoints, config
from sweep.analysis import summary
from sweep.config import validation
from sweep.errors import ConfigError
from sweep.execution.inline import InlinePool
from sweep.ledger import LedgerView, LedgerWriter, Row, metrics, read_rows
from sweep.planner import leader, searchers, space, study_store
from sweep.planner.loop import Planner
from sweep.planner.phase import Phase
from sweep.prices import resolve
from tests.replay_table import write_seeded_table, write_table, write_yardstick_table

PRICE = resolve("custom", usd_per_hour=3600.0)  # $1 per billable second


def inline_pool(size: int = 1) -> InlinePool:
    """The in-process pool (replayed trials only), with ``size`` slots."""
    pool = InlinePool()
    pool.size = size
    return pool


def make_cfg(tmp_path: Path, **over) -> config.RunConfig:
    data = {
        "backend": "replay",
        "profile": "recorded",
        # each trial replays the recording of its own seed: the scenarios below are written per seed
        "backend_options": {"table": str(write_table(tmp_path / "table.json")), "time_scale": 0.0, "draw": "seed"},
        "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16], "num_mini_batches": [4]},
        "target": {"success": 0.9, "eval_episodes": 16, "eval_every_steps": 80},
        "budget": {"usd": 1000.0, "trial_usd": 100.0, "max_trials": 10},
        "price": {"gpu": "custom", "usd_per_hour": PRICE.usd_per_hour},
        "search": {"sampler": "random"},
        "run_id": "t",
    }
    return validation.validate(config.compose(data, over, "test", has_gpu=False))


def seeded_cfg(tmp_path: Path, costs: dict[tuple[int, int], dict[int, float]], **over) -> config.RunConfig:
    """make_cfg over a table of known per-seed costs (``costs[(envs, steps)][seed]``, seconds to the target),
    8-step configs, the initial design 64 then 128 envs."""
    table = write_seeded_table(tmp_path / "seeded.json", costs)
    design = {"knobs.num_steps_per_env": [8], "search.initial": [{"num_envs": 64}, {"num_envs": 128}]}
    return make_cfg(tmp_path, **{"backend_options.table": str(table), **design, **over})


#: Two configs, two recorded seeds each: 64 envs is lucky on its first seed (10 s, then 30 s), 128 steady (13, 14 s).
LUCKY_FIRST = {(64, 8): {1: 10.0, 3: 30.0}, (128, 8): {2: 13.0, 4: 14.0}}


def ledger_row(trial: int, state: str, params: dict, iteration: int, env_steps: int, billable_s: float, **kw) -> Row:
    """A row of run 't' at $3600/hour, its seconds all simulation."""
    phases = {"sim": billable_s}
    return Row(run_id="t", trial=trial, state=state, params=params, iteration=iteration, env_steps=env_steps,
               billable_s=billable_s, phases_s=phases, price_usd_per_hour=3600.0, price_label="x", **kw)  # fmt: skip


def planner(cfg: config.RunConfig, run_dir: Path, pool=None) -> Planner:
    run_dir.mkdir(parents=True, exist_ok=True)
    return Planner(cfg, run_dir, pool or inline_pool(), PRICE, "recorded", 0.02, poll_s=0.001)


def test_the_trial_limit_lets_running_trials_finish(tmp_path: Path) -> None:
    p = planner(make_cfg(tmp_path, **{"budget.max_trials": 3, "search.prune": False}), tmp_path / "run", inline_pool(2))
    p.run()
    ends = p.rows.last
    assert len(ends) == 3 and p.phase.log == [
        (Phase.DRAINING, "trial limit (3) reached"),
        (Phase.OVER, "trial limit (3) reached"),
    ]
    assert not any("stopped by the planner" in r.reason for r in ends.values()), ends


def test_every_feasible_config_runs_once_then_the_study_ends(tmp_path: Path) -> None:
    # 4 configs, of which the 128-env ones break the update-period bound at 0.25 s per step
    cfg = make_cfg(tmp_path, **{"constraints.max_update_period_s": 2.0, "search.prune": False})
    p = Planner(cfg, tmp_path / "run", inline_pool(), PRICE, "recorded", 0.25, poll_s=0.001)
    (tmp_path / "run").mkdir(exist_ok=True)
    p.run()
    ran = [r for r in p.rows.last.values() if r.billable_s > 0]
    keys = [(r.params["num_envs"], r.params["num_steps_per_env"]) for r in ran]
    assert sorted(keys) == [(64, 8), (128, 8)] and p.phase.why == "every feasible config tried (2)"


def test_a_config_whose_trial_died_with_the_driver_runs_again_on_resume(tmp_path: Path) -> None:
    # 2 feasible configs (as above); the driver died while trial 0 (64 x 8) ran: it measured nothing of its config
    cfg = make_cfg(tmp_path, **{"constraints.max_update_period_s": 2.0, "search.prune": False})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    study_store.open_study(run_dir, searchers.build(cfg)).ask()
    last = ledger_row(0, "running", {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}, 10, 5120, 2.0)
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(last)
    p = Planner(cfg, run_dir, inline_pool(), PRICE, "recorded", 0.25, poll_s=0.001)
    p.run()
    ends = p.rows.last
    assert ends[0].state == "failed" and ends[0].reason.startswith("driver stopped")
    ran = sorted(
        (r.params["num_envs"], r.params["num_steps_per_env"]) for t, r in ends.items() if t > 0 and r.billable_s > 0
    )
    assert ran == [(64, 8), (128, 8)] and p.phase.why == "every feasible config tried (2)"


def test_a_resumed_driver_writes_its_piece_and_the_start_up_its_fresh_worker_paid_again(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path, **{"constraints.max_update_period_s": 2.0, "search.prune": False})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    study_store.open_study(run_dir, searchers.build(cfg)).ask()
    with LedgerWriter(run_dir / "ledger.jsonl") as w:  # the first piece: a trial cut by its end
        params = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
        w.append(ledger_row(0, "running", params, 10, 5120, 2.0))
    pool = inline_pool()
    Planner(cfg, run_dir, pool, PRICE, "recorded", 0.25, poll_s=0.001).run()
    rows = read_rows(run_dir / "ledger.jsonl")
    assert [r.piece for r in rows[:1]] == [0] and {r.piece for r in rows[1:]} == {1}
    first = min(t for t in LedgerView.of(rows).last if t > 0)
    assert pool.fresh == {first} and {r.trial for r in rows if r.fresh_worker} == {first}
    s = summary.summarize(rows)
    assert s.restarts is not None and (s.restarts.pieces, s.restarts.trials) == (1, 1)
    assert s.restarts.one_time_s == metrics(LedgerView.of(rows).last[first]).one_time_s
    line = "resumed: 1 time; start-up and compilation paid again by the first trial of each fresh worker: 1 trial"
    assert line in summary.run_text(s)
    assert summary.summarize(rows[:1]).restarts is None  # a run in one piece


def test_a_space_with_no_feasible_config_is_a_config_error(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path, **{"knobs.num_mini_batches": [100000]})
    with pytest.raises(ConfigError, match="no config of the space satisfies the constraints"):
        space.feasible_count(cfg, 0.02, None)


def test_resume_keeps_an_end_that_reached_the_ledger_before_the_crash(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path, **{"budget.max_trials": 1})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    study_store.open_study(run_dir, searchers.build(cfg)).ask()
    # The driver died after the trial's end row was fsynced but before Optuna was told: RUNNING there.
    end = ledger_row(0, "reached", {"num_envs": 64, "num_steps_per_env": 8}, 30, 15360, 12.0)
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(end)
    before = read_rows(run_dir / "ledger.jsonl")
    planner(cfg, run_dir).run()
    assert read_rows(run_dir / "ledger.jsonl") == before  # no 'failed' row appended over the recorded end
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE and study.trials[0].values[0] == 12.0


def test_a_trial_the_planner_closes_drops_its_checkpoint_when_only_reached_ones_are_kept(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path, **{"budget.max_trials": 1, "checkpoints": "reached"})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    study_store.open_study(run_dir, searchers.build(cfg)).ask()
    # The driver died while trial 0 ran: its last row named the checkpoint it had written
    rel = checkpoints.save({"actor_state_dict": {}}, {"iteration": 30}, run_dir, 0)
    last = ledger_row(0, "running", {"num_envs": 64, "num_steps_per_env": 8}, 30, 15360, 12.0, checkpoint=rel)
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(last)
    planner(cfg, run_dir).run()
    end = read_rows(run_dir / "ledger.jsonl")[-1]
    assert end.state == "failed" and end.checkpoint == "" and not (run_dir / rel).exists()


def test_a_trial_that_died_before_its_first_row_is_billed_to_the_drivers_last_heartbeat(tmp_path: Path) -> None:
    """A folder written before the lock held the heartbeat: its ``heartbeat`` file's time is the driver's last beat."""
    cfg = make_cfg(tmp_path, **{"budget.max_trials": 1})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    trial = study_store.open_study(run_dir, searchers.build(cfg)).ask()  # dispatched, then the driver died: no row
    trial.set_user_attr("trial_config", {"seed": 1, "phase": "search"})
    beat = time.time() + 30.0
    (run_dir / "heartbeat").touch()
    os.utime(run_dir / "heartbeat", (beat, beat))  # the driver lived 30 s more
    planner(cfg, run_dir).run()
    rows = read_rows(run_dir / "ledger.jsonl")
    assert [r.state for r in rows] == ["failed"]
    assert rows[0].billable_s == pytest.approx(30.0, abs=2.0) and "first checkpoint" in rows[0].reason


def test_a_trial_the_dead_driver_asked_but_never_sent_is_closed_at_no_cost(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path, **{"budget.max_trials": 1})
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    study_store.open_study(run_dir, searchers.build(cfg)).ask()  # asked; the driver died before it recorded its config
    (run_dir / "heartbeat").touch()
    os.utime(run_dir / "heartbeat", (time.time() + 30.0,) * 2)
    planner(cfg, run_dir).run()
    (end,) = read_rows(run_dir / "ledger.jsonl")
    assert (end.state, end.cause, end.billable_s) == ("failed", "driver_stopped", 0.0)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert study.trials[0].state == optuna.trial.TrialState.FAIL and study.trials[0].user_attrs["state"] == "failed"


def test_a_ctrl_c_that_never_reached_the_loop_still_stops_and_bills(tmp_path: Path) -> None:
    # Ray's client code can defer or swallow a KeyboardInterrupt; sweep.run's handler also sets a flag
    cfg = make_cfg(
        tmp_path, **{"backend_options.time_scale": 0.01, "search.prune": False, "search.initial": [{"num_envs": 128}]}
    )
    run_dir = tmp_path / "run"
    p = planner(cfg, run_dir)
    p.interrupted = lambda: p.accounts.spent_usd() > 0  # set once the first row is in: the trial is mid-run
    with pytest.raises(KeyboardInterrupt):
        p.run()
    ends = LedgerView.of(read_rows(run_dir / "ledger.jsonl")).last
    assert len(ends) == 1
    (end,) = ends.values()
    assert end.state == "capped" and "Ctrl-C" in end.reason and end.billable_s > 0


@pytest.mark.parametrize("slack", [1.0, 1.5])
def test_race_slack_lets_a_trial_run_past_a_lucky_best_seed(tmp_path: Path, slack: float) -> None:
    cfg = seeded_cfg(
        tmp_path, {(64, 8): {1: 10.0}, (128, 8): {2: 13.0}}, **{"budget.max_trials": 2, "search.race_slack": slack}
    )
    p = planner(cfg, tmp_path / "run")
    p.run()
    ends = p.rows.last
    # the second trial is raced against 10 s x the slack: 30% worse than the best seed is inside 1.5x, not 1x (at 1x
    # its curve is pruned, or capped at 10 s)
    assert ends[0].state == "reached"
    if slack == 1.0:
        assert ends[1].state in ("pruned", "capped") and ends[1].billable_s <= 10.0, ends[1]
    else:
        assert ends[1].state == "reached" and ends[1].billable_s == pytest.approx(13.0), ends[1]


def test_a_finalists_confirmation_seeds_replay_recordings_its_search_seed_did_not(tmp_path: Path) -> None:
    costs = {(64, 8): {1: 20.0, 7: 10.0, 8: 10.0}, (128, 8): {2: 30.0, 4: 30.0}}
    confirm = {"seeds": 2, "top": 1, "baseline": {"num_envs": 128, "num_steps_per_env": 8, "mode": "sweep"}}
    cfg = seeded_cfg(tmp_path, costs, **{"budget.max_trials": 2, "search.prune": False, "confirm": confirm})
    p = planner(cfg, tmp_path / "run")
    p.run()
    ends = p.rows.last.values()
    runs = [(r.phase, r.seed, r.billable_s) for r in ends if r.params["num_envs"] == 64]
    # the replay reads the study's ledger (the pool passes the run folder): the finalist's confirmation seed (3)
    # replays a recording its search seed (1) did not; without the ledger 3 % 3 would replay seed 1's again
    assert [(phase, s) for phase, _, s in runs] == [("search", 20.0), ("confirm", 10.0)], runs


@pytest.mark.parametrize(("intensify", "sampler"), [(1, "random"), (2, "random"), (2, "tpe"), (2, "cost")])
def test_intensify_runs_a_new_leader_again_before_the_search_goes_on(
    tmp_path: Path, intensify: int, sampler: str
) -> None:
    over = {"budget.max_trials": 4, "search.prune": False, "search.intensify": intensify, "search.sampler": sampler}
    cfg = seeded_cfg(tmp_path, LUCKY_FIRST, **over)
    p = planner(cfg, tmp_path / "run")
    p.run()
    runs = [(r.params["num_envs"], r.seed, r.billable_s) for r in p.rows.last.values()]
    if intensify == 1:  # each config once, then every feasible config has been tried
        assert runs == [(64, 1, 10.0), (128, 2, 13.0)] and p.phase.why == "every feasible config tried (2)"
        return
    # the initial design runs first; then 64 leads and runs again (a 30 s seed: mean 20), and 128 leads at 13 and runs
    # again before the search ends (the design's trials were numbered when queued)
    assert runs == [(64, 1, 10.0), (128, 2, 13.0), (64, 3, 30.0), (128, 4, 14.0)], runs
    assert leader.leader(p.rows).params["num_envs"] == 128
    assert p.accounts.race_bar_usd() == pytest.approx(13.5 * cfg.search.race_slack)
    study = study_store.open_study(tmp_path / "run", searchers.build(cfg))
    assert [t.user_attrs.get("intensify_of") for t in study.trials] == [None, None, 0, 1]


def test_intensify_leaves_the_baseline_to_the_confirmation(tmp_path: Path) -> None:
    confirm = {"seeds": 3, "top": 1, "baseline": {"num_envs": 64, "num_steps_per_env": 8, "mode": "sweep"}}
    cfg = seeded_cfg(
        tmp_path,
        LUCKY_FIRST,
        **{"budget.max_trials": 4, "search.prune": False, "search.intensify": 2, "confirm": confirm},
    )
    p = planner(cfg, tmp_path / "run")
    p.run()
    search = [(r.params["num_envs"], r.seed) for r in p.rows.last.values() if r.phase == "search"]
    # 64, the baseline, leads the search but is not run again there: the confirmation gives it its seeds
    assert search == [(64, 1), (128, 2)] and leader.leader(p.rows).baseline, search


#: Every seed of a config costs the same (s to target); the stock baseline (128 x 16, rsl-rl's runner) 20 s.
STEADY = {(64, 8): 10.0, (64, 16): 30.0, (128, 8): 40.0, (128, 16): 25.0}


def runs_cfg(tmp_path: Path, **over) -> config.RunConfig:
    """A study over :data:`STEADY` with a confirmation against the stock baseline (3 recordings of 20 s)."""
    costs = {k: {s: v for s in (1, 2, 3)} for k, v in STEADY.items()}
    table = write_yardstick_table(tmp_path / "yardstick.json", costs, {1: 20.0, 2: 20.0, 3: 20.0})
    confirm = {"seeds": 3, "top": 1, "budget_share": 0.3, "baseline": {"num_envs": 128, "num_steps_per_env": 16}}
    base = {"backend_options.table": str(table), "backend_options.draw": "random", "confirm": confirm}
    return make_cfg(tmp_path, **{**base, "search.prune": True, **over})


def spent(rows: list[Row]) -> float:
    return sum(r.billable_s for r in LedgerView.of(rows).last.values())  # $1 per billable second


def test_budget_runs_runs_the_baseline_first_and_caps_the_study_at_that_many_baseline_runs(tmp_path: Path) -> None:
    p = planner(runs_cfg(tmp_path, **{"budget.runs": 8.0}), tmp_path / "run")
    p.run()
    first = p.rows.last[0]
    assert first.params["mode"] == "stock" and first.baseline and first.phase == "search"  # the unit first
    assert p.accounts.baseline_run_usd() == pytest.approx(20.0) and p.accounts.budget_usd() == pytest.approx(160.0)
    assert spent(p.rows) <= 160.0  # 8 baseline runs: the search's share and the confirmation's, together
    pay = summary.summarize(p.rows).payback
    assert pay is not None and pay.study_in_baseline_runs == pytest.approx(spent(p.rows) / 20.0)
    base = [r for r in p.rows.last.values() if r.baseline]
    assert all(r.params["mode"] == "stock" for r in base) and len(base) >= 2  # dispatched in its mode
    uncapped = planner(runs_cfg(tmp_path), tmp_path / "uncapped")
    uncapped.run()
    assert uncapped.rows.last[0].params["mode"] == "sweep"  # the same study with budget.usd alone: no baseline first
    ended = study_store.open_study(tmp_path / "run", searchers.build(p.cfg)).user_attrs[study_store.ENDED]
    assert ended == p.why_ended() and ended


def test_budget_usd_stays_an_upper_bound_beside_budget_runs(tmp_path: Path) -> None:
    over = {"budget.runs": 100.0, "budget.usd": 60.0, "budget.trial_usd": 25.0, "confirm.budget_share": 0.5}
    p = planner(runs_cfg(tmp_path, **over), tmp_path / "run")
    p.run()
    assert p.accounts.budget_usd() == 60.0 and spent(p.rows) <= 60.0
    assert p.accounts.budget_text() == "$60"


def test_an_unpriced_baseline_leaves_budget_usd_the_only_cap(tmp_path: Path) -> None:
    costs = {k: {s: v for s in (1, 2, 3)} for k, v in STEADY.items()}
    table = write_yardstick_table(tmp_path / "never.json", costs, {1: 900.0, 2: 900.0, 3: 900.0})  # past its cap
    p = planner(runs_cfg(tmp_path, **{"budget.runs": 2.0, "backend_options.table": str(table)}), tmp_path / "run")
    p.run()
    assert p.rows.last[0].state == "capped" and p.accounts.baseline_run_usd() is None
    assert p.accounts.budget_usd() == p.cfg.budget.usd and spent(p.rows) > 2 * 100.0


def test_budget_runs_without_a_confirmation_still_measures_the_baseline_it_counts_in(tmp_path: Path) -> None:
    p = planner(runs_cfg(tmp_path, **{"budget.runs": 6.0, "confirm.seeds": 1}), tmp_path / "run")
    p.run()
    ends = p.rows.last
    assert ends[0].params["mode"] == "stock" and ends[0].baseline  # the unit, measured first
    assert all(r.phase == "search" for r in ends.values()) and spent(p.rows) <= 6 * 20.0
    pay = summary.summarize(p.rows).payback
    assert pay is not None and pay.study_in_baseline_runs == pytest.approx(spent(p.rows) / 20.0)
