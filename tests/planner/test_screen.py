"""The throughput screen (``search.screen``): every config trains a few iterations before the search, no seed of it
and no search trial, and the cost model divides env steps by each config's measured throughput."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.analysis.evidence import config_stats
from sweep.backends.replay import replay_trial
from sweep.contract import CONTINUE, SCREEN_END, SCREEN_ITERATIONS, TrialConfig
from sweep.ledger import LedgerView, LedgerWriter, metrics
from sweep.params import TrialParams
from sweep.planner import acquisition, space
from sweep.planner.loop import Planner
from sweep.record import EndCause
from sweep.report.live import plain_line
from tests.planner.test_loop import PRICE, inline_pool, ledger_row, make_cfg, planner
from tests.replay_table import reaching_curve, write_seeded_table

#: Four configs, two seeds each; 64 x 16 the cheapest.
COSTS = {
    (64, 8): {1: 30.0, 2: 32.0},
    (64, 16): {1: 10.0, 2: 12.0},
    (128, 8): {1: 40.0, 2: 42.0},
    (128, 16): {1: 20.0, 2: 22.0},
}


def screen_cfg(tmp_path: Path, **over):
    table = write_seeded_table(tmp_path / "shapes.json", COSTS)
    return make_cfg(tmp_path, **{"backend_options.table": str(table), "search.screen": True, **over})


def test_a_screen_trial_replays_its_iterations_of_the_first_round_and_its_one_time_seconds_whole(
    tmp_path: Path,
) -> None:
    table = write_seeded_table(tmp_path / "shapes.json", {(64, 8): {1: 40.0}}, compile_s=2.0)
    cfg = TrialConfig(backend="replay", profile="recorded", num_envs=64, num_steps_per_env=8, seed=1, cap_s=1e6,
                      eval_every_steps=SCREEN_ITERATIONS * 8, backend_options={"table": str(table)},
                      phase="screen")  # fmt: skip
    rows = []
    end = replay_trial(cfg, lambda r: rows.append(r) or CONTINUE, price_usd_per_hour=3600.0, price_label="t")
    first = reaching_curve(40.0, compile_s=2.0)[0]  # 10 iterations, 1000 env steps, 10 s: 2 compiling, 6.4 simulating
    share = SCREEN_ITERATIONS / first["iteration"]
    assert rows == [end] and end.cause == EndCause.PROBE and end.phase == "screen"
    assert end.success is None and end.eval_episodes == 0 and end.phases_s.get("eval", 0.0) == 0.0
    assert end.iteration == SCREEN_ITERATIONS and end.env_steps == round(first["env_steps"] * share)
    training = first["billable_s"] - first["phases_s"]["eval"] - 2.0
    assert end.billable_s == pytest.approx(2.0 + training * share) and end.phases_s.compile == pytest.approx(2.0)
    assert metrics(end).throughput_sps == pytest.approx(first["env_steps"] / first["phases_s"]["sim"])


def test_every_config_is_screened_once_before_the_search_and_counts_as_no_trial_and_no_seed(tmp_path: Path) -> None:
    p = planner(screen_cfg(tmp_path, **{"budget.max_trials": 4, "search.prune": False}), tmp_path / "run")
    p.run()
    ends = [r for _, r in sorted(p.rows.last.items()) if r.ran]  # not the random sampler's repeats, told unrun
    assert [r.phase for r in ends] == ["screen"] * 4 + ["search"] * 4
    assert {(r.params["num_envs"], r.params["num_steps_per_env"]) for r in ends[:4]} == set(COSTS)
    assert all(r.cause == EndCause.PROBE and r.eval_episodes == 0 for r in ends[:4])
    # the trial limit counts search trials, and a screened config still runs in the search: no repeat
    assert {(r.params["num_envs"], r.params["num_steps_per_env"]) for r in ends[4:]} == set(COSTS)
    assert all(len(c.trials) == 1 and c.n_reached == 1 for c in config_stats(p.rows))  # the screens are no seeds
    assert p.accounts.spent_usd() == pytest.approx(sum(metrics(r).usd for r in ends))  # and billed


def test_the_progress_says_the_screen_runs(tmp_path: Path) -> None:
    seen = []
    cfg = screen_cfg(tmp_path, **{"budget.max_trials": 1, "search.prune": False})
    (tmp_path / "run").mkdir()
    Planner(cfg, tmp_path / "run", inline_pool(), PRICE, "recorded", 0.02, progress=seen.append, poll_s=0.001).run()
    phases = [s.phase for s in seen]
    assert phases[0] == "screen" and phases[-1] == "search" and phases == sorted(phases, key=["screen", "search"].index)
    assert "screening each config's throughput" in plain_line(seen[0])


def test_a_resumed_study_does_not_screen_again_and_goes_on_with_the_search(tmp_path: Path) -> None:
    run = tmp_path / "run"
    planner(screen_cfg(tmp_path, **{"budget.max_trials": 1, "search.prune": False}), run).run()
    again = planner(screen_cfg(tmp_path, **{"budget.max_trials": 2, "search.prune": False}), run)
    again.run()
    ends = [r for _, r in sorted(LedgerView.of(again.rows).last.items()) if r.ran]
    assert [r.phase for r in ends] == ["screen"] * 4 + ["search"] * 2


def test_a_screen_of_the_baseline_config_is_no_run_of_the_baseline(tmp_path: Path) -> None:
    base = {"num_envs": 128, "num_steps_per_env": 8, "num_mini_batches": 4, "mode": "sweep"}
    run = tmp_path / "run"
    run.mkdir()
    with LedgerWriter(run / "ledger.jsonl") as ledger:
        state, cause, reason = SCREEN_END
        ledger.append(ledger_row(0, state, base, 5, 5120, 1.0, phase="screen", cause=cause, reason=reason))
    cfg = screen_cfg(tmp_path, **{"budget.runs": 8.0, "confirm.seeds": 2, "confirm.baseline": base})
    assert planner(cfg, run)._baseline_due()  # what prices budget.runs has still to run


def test_throughputs_are_each_configs_screen_trials_mean() -> None:
    a = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
    b = {**a, "num_steps_per_env": 16}
    rows = [
        ledger_row(0, "capped", a, 5, 2560, 1.0, phase="screen"),
        ledger_row(1, "capped", a, 5, 2560, 2.0, phase="screen"),
        ledger_row(2, "reached", b, 50, 51200, 1.0),  # a search trial: no screen
    ]
    assert acquisition.throughputs(rows) == {TrialParams.identity(a): pytest.approx((2560 + 1280) / 2)}


def point(envs: int) -> dict:
    return {"num_envs": envs, "num_steps_per_env": 8, "num_mini_batches": 4}


@pytest.mark.parametrize(("slow", "fast"), [(512, 1024), (1024, 512)])
def test_with_a_screen_the_cost_model_divides_env_steps_by_each_configs_throughput(slow: int, fast: int) -> None:
    # every config needs the same env steps to the target: the one with the fastest screen is the cheapest
    choices = {"num_envs": [64, 128, 256, 512, 1024], "num_steps_per_env": [8]}
    rates = {64: 100.0, 128: 800.0, 256: 200.0, slow: 50.0, fast: 1600.0}
    sps = {TrialParams.identity(point(e)): rate for e, rate in rates.items()}
    evidence = [(point(e), 1e4 / rates[e]) for e in (64, 128, 256)]
    candidates = [point(512), point(1024)]
    assert acquisition.choose(evidence, candidates, choices, None, 0.0, sps) == point(fast)
    found = acquisition.prospect(evidence, candidates, choices, 12.5, 25.0, 0.0, 100.0, sps)
    assert found is not None and found.params == point(fast)
    # without every config's throughput the model learns cost itself: the same choice whichever is faster
    some = {TrialParams.identity(point(fast)): 1600.0}
    assert acquisition.choose(evidence, candidates, choices, None, 0.0, {}) == acquisition.choose(
        evidence, candidates, choices, None, 0.0, some
    )


def test_a_screen_round_is_its_iterations_long(tmp_path: Path) -> None:
    cfg = screen_cfg(tmp_path)
    params = {"num_envs": 64, "num_steps_per_env": 16, "num_mini_batches": 4}
    screen = space.trial_config(params, cfg, "recorded", 1, 10.0, phase="screen")
    assert screen.eval_every == SCREEN_ITERATIONS
    assert space.trial_config(params, cfg, "recorded", 1, 10.0).eval_every == 80 // 16  # the target's passes
