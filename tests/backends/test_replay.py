"""The replay backend serves recorded trials exactly as recorded, and the search benchmark runs on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.summary import summarize
from sweep.backends.replay import draw_index, load_table, replay_trial
from sweep.contract import CONTINUE, PRUNE, TrialConfig
from sweep.ledger import LedgerView
from sweep.params import TrialParams
from tests.helpers import ROOT, search_efficiency
from tests.replay_table import write_seeded_table, write_table, write_yardstick_table

RECORDED = sorted((ROOT / "benchmarks" / "data").glob("*_grid.json"))
#: The recorded tables as test parameters: the GPU grid's replays are slow, the CPU grid's take a few seconds.
RECORDED_PARAMS = [pytest.param(p, id=p.name, marks=[pytest.mark.slow] * (p.name != "cpu_grid.json")) for p in RECORDED]


def replay(table: Path, params: dict, sink, seed: int = 0, cap_s: float = 1e6):
    cfg = TrialConfig(
        backend="replay",
        profile="recorded",
        num_envs=params["num_envs"],
        num_steps_per_env=params["num_steps_per_env"],
        seed=seed,
        cap_s=cap_s,
        backend_options={"table": str(table), "draw": "seed"},
    )
    return replay_trial(cfg, sink, price_usd_per_hour=3600.0, price_label="t")


def test_rows_come_from_the_record(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t.json")
    record = next(t for t in load_table(str(table))["trials"] if t["params"]["num_envs"] == 64 and t["seed"] == 0)
    rows = []
    final = replay(table, record["params"], lambda r: rows.append(r) or CONTINUE)
    assert final.state == "reached"
    for row, rec in zip(rows[:-1], record["curve"], strict=False):
        assert row.billable_s == rec["billable_s"] and row.success == rec["success"]  # time from the record
    assert final.billable_s == rows[-2].billable_s


def test_prune_and_cap_are_honoured(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t.json")
    params = {"num_envs": 128, "num_steps_per_env": 16}
    pruned = replay(table, params, lambda r: PRUNE)
    assert pruned.state == "pruned" and pruned.iteration == 10  # stopped at its first checkpoint
    capped = replay(table, params, lambda r: CONTINUE, cap_s=9.0)
    assert capped.state == "capped" and capped.billable_s == 9.0


@pytest.mark.skipif(not RECORDED, reason="no recorded grid under benchmarks/data")
@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_grid_is_complete_and_replays(path: Path) -> None:
    table = json.loads(path.read_text())
    bench = search_efficiency()
    space = bench.table_space(table)
    combos = 1
    for values in space.values():
        combos *= len(values)
    assert len({TrialParams.identity(t["params"]) for t in table["trials"]}) == combos, "the grid has holes"

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, 6

    rows = bench.run_planner(str(path), space, "planner", 0, Args())
    assert rows and all(r.billable_s >= 0 for r in rows)


def test_planner_starts_on_the_reduced_initial_design(tmp_path: Path) -> None:
    bench = search_efficiency()
    table = write_table(tmp_path / "t.json")
    space = bench.table_space(load_table(str(table)))
    design_file = tmp_path / "space.yaml"
    design_file.write_text(
        "search:\n"
        "  initial:\n"
        "    - {num_envs: 128, num_steps_per_env: 16, flags.fused_optimizer: true}\n"  # flag the table does not vary
        "    - {num_envs: 128, num_steps_per_env: 16}\n"  # the same config once reduced: kept once
        "    - {num_envs: 64, num_steps_per_env: 16}\n"
    )
    design = bench.initial_design(str(design_file), space)
    assert design == [{"num_envs": 128, "num_steps_per_env": 16}, {"num_envs": 64, "num_steps_per_env": 16}]

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, 3

    rows = bench.run_planner(str(table), space, "planner+initial", 0, Args(), design)
    ends = LedgerView(rows).last
    assert [(ends[i].params["num_envs"], ends[i].params["num_steps_per_env"]) for i in (0, 1)] == [
        (128, 16),
        (64, 16),
    ]


def test_truth_is_each_configs_mean_over_its_seeds_on_equal_terms(tmp_path: Path) -> None:
    bench = search_efficiency()
    path = write_seeded_table(tmp_path / "t.json", {(64, 8): {1: 10.0, 2: 30.0}, (128, 8): {1: 16.0}}, compile_s=4.0)
    table = json.loads(path.read_text())
    never = dict(table["trials"][2], seed=2, curve=[dict(p, success=0.5) for p in table["trials"][2]["curve"]])
    table["trials"].append(never)  # a seed of 128 x 8 that spends its 16 s and never reaches the target
    means = bench.config_means(table["trials"], 0.9)
    by_envs = {k[0]: v for k, v in means.items()}  # a key starts with num_envs
    assert by_envs[64] == pytest.approx((6.0 + 26.0) / 2)  # compilation left out of both seeds
    assert by_envs[128] == pytest.approx((12.0 + 12.0) / 1)  # the failed seed's seconds, over the one success


def test_a_study_that_ends_wrong_pays_all_it_spent_towards_each_correct_recommendation() -> None:
    bench, inf = search_efficiency(), float("inf")
    assert bench.per_correct([10.0, inf, 20.0], [50.0, 100.0, 60.0]) == (10.0 + 100.0 + 20.0) / 2
    assert bench.per_correct([inf, inf], [5.0, 7.0]) == inf
    assert bench.per_correct([4.0, 6.0], [9.0, 9.0]) == 5.0  # all correct: the mean to a correct recommendation


def test_a_planner_study_is_what_its_ledger_says(tmp_path: Path) -> None:
    bench = search_efficiency()
    table = write_table(tmp_path / "t.json")
    space = bench.table_space(load_table(str(table)))

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, 4

    rows = bench.run_planner(str(table), space, "planner", 0, Args())
    study = bench.planner_study(rows)
    ends = LedgerView(rows).last
    assert study.spent_usd == pytest.approx(sum(r.billable_s for r in ends.values()))  # $1 per recorded second
    final = summarize(rows).recommendation
    assert final is not None and study.recommended == TrialParams.identity(final.config.params)  # what sweep.run says
    assert len(study.outcome[0]) == len([r for r in ends.values() if r.ran])  # paid trials only


def test_a_sampler_stuck_on_seen_configs_never_makes_the_search_pay_for_a_repeat(tmp_path: Path, monkeypatch) -> None:
    import sweep.planner.loop

    monkeypatch.setattr(sweep.planner.loop, "MAX_REPEATS", 1)  # after one repeated proposal the planner queues a config
    bench = search_efficiency()
    table = write_table(tmp_path / "t.json")
    space = bench.table_space(load_table(str(table)))

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, 4

    for seed in range(3):  # a random sampler on 4 configs proposes seen ones again and again
        ends = LedgerView(bench.run_planner(str(table), space, "random", seed, Args())).last
        paid = [TrialParams.identity(r.params) for r in ends.values() if r.ran]
        assert len(paid) == 4 and len(set(paid)) == 4, paid  # each config once, none paid for twice


def test_a_checkpoint_at_the_race_cap_is_the_caps_pass(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t.json")
    record = next(t for t in load_table(str(table))["trials"] if t["params"]["num_envs"] == 64 and t["seed"] == 0)
    reached = next(p for p in record["curve"] if p["success"] >= 0.9)
    race_s = reached["billable_s"] * 3.0 / 7.0  # a cap derived from a recorded cost, not exact in binary

    def run(race_cap_s: float):
        cfg = TrialConfig(
            backend="replay",
            profile="recorded",
            num_envs=64,
            num_steps_per_env=8,
            seed=0,
            cap_s=1e6,
            race_cap_s=race_cap_s * 7.0 / 3.0,
            backend_options={"table": str(table), "draw": "seed"},
        )
        return replay_trial(cfg, lambda r: CONTINUE, price_usd_per_hour=3600.0)

    assert run(race_s).state == "reached"  # a repeat of the best config, capped at exactly its own cost
    assert run(race_s * 0.999).state == "capped"


@pytest.mark.skipif(not RECORDED, reason="no recorded grid under benchmarks/data")
@pytest.mark.parametrize("path", RECORDED_PARAMS)
def test_the_cost_planner_ends_on_a_correct_config_of_each_one_seed_table(path: Path) -> None:
    # a regression test of the planner's search on one recording per config (the truth is that recording: no
    # yardstick, which needs held-out recordings)
    bench = search_efficiency()
    table = load_table(str(path))
    means = bench.config_means(table["trials"], 0.9)
    correct = {k for k, v in means.items() if v <= 1.1 * min(means.values())}

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, len(means)

    for seed in (0, 1):
        study = bench.planner_study(
            bench.run_planner(str(path), bench.table_space(table), "planner-cost", seed, Args())
        )
        assert study.recommended in correct, study.outcome


def test_drawn_by_seed_a_configs_later_seeds_replay_recordings_not_yet_replayed(tmp_path: Path) -> None:
    costs = {(64, 8): {1: 10.0, 2: 20.0, 3: 30.0}, (128, 8): {1: 40.0, 2: 50.0, 3: 60.0}}
    table = write_seeded_table(tmp_path / "t.json", costs)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ledger = run_dir / "ledger.jsonl"

    def run(trial: int, seed: int, envs: int = 64) -> float:
        cfg = TrialConfig(
            backend="replay",
            profile="recorded",
            num_envs=envs,
            num_steps_per_env=8,
            seed=seed,
            cap_s=1e6,
            backend_options={"table": str(table), "draw": "seed"},
        )
        final = replay_trial(cfg, lambda r: CONTINUE, trial=trial, price_usd_per_hour=3600.0, out_dir=run_dir)
        with ledger.open("a") as f:
            f.write(final.to_json() + "\n")
        return final.billable_s

    # a search seed, then confirmation rounds whose seeds step by the number of finalists (3 = the recordings here):
    # seed % 3 alone would replay one recording three times
    assert [run(0, 33), run(1, 36), run(2, 39)] == [10.0, 20.0, 30.0]
    assert run(3, 42) == 10.0  # more seeds than recordings: from the start again
    assert run(4, 36, envs=128) == 40.0  # another config's seeds do not count
    assert run(5, 2, envs=128) == 50.0  # a seed recorded in the table replays its own recording while unused


GRID3 = ROOT / "benchmarks" / "data" / "h200_grid3.json"


@pytest.mark.slow
@pytest.mark.skipif(not GRID3.is_file(), reason="no 3-seed table under benchmarks/data")
def test_the_race_slack_keeps_a_lucky_seed_from_capping_the_best_configs_of_the_3_seed_table(tmp_path: Path) -> None:
    bench = search_efficiency()
    # the 32 configs of docs/decisions/0002-race-slack.md (--num-envs 2048,4096): every seed of them is recorded
    table = bench.subset(load_table(str(GRID3)), {2048, 4096})
    path = tmp_path / GRID3.name
    path.write_text(json.dumps(table))
    means = bench.config_means(table["trials"], 0.9)
    correct = {k for k, v in means.items() if v <= 1.1 * min(means.values())}

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, len(means)
        confirm, confirm_top = 3, 2
        baseline_params = bench.baseline_params({"trials": table["trials"]}, "4096x24")  # sweep mode, as measured
        race_slack, draw = 1.0, "seed"  # as decision 0002 measured it: a trial replays its own seed's recording

    def ends_correct() -> bool:
        rows = bench.run_planner(str(path), bench.table_space(table), "planner-cost", 6, Args())
        return bench.planner_study(rows).recommended in correct

    # sampler seed 6: at 1x a lucky seed of 4096 x 8 (23.3 s to target) caps every correct config short of the target
    assert not ends_correct()
    Args.race_slack = 1.5
    assert ends_correct()


@pytest.mark.slow
@pytest.mark.skipif(not GRID3.is_file(), reason="no 3-seed table under benchmarks/data")
def test_a_leaders_second_search_seed_ends_correct_where_its_first_alone_did_not() -> None:
    """Decision 0003 (intensify 2), with each trial replaying its own seed's recording as measured then; the GPU
    space now searches every config once (intensify 1), its finalists getting their seeds in the confirmation."""
    from sweep import config

    bench = search_efficiency()
    table = load_table(str(GRID3))
    means = bench.config_means(table["trials"], 0.9)
    correct = {k for k, v in means.items() if v <= 1.1 * min(means.values())}
    gpu = config.load("locomotion", {}, has_gpu=True)  # the search and confirmation sweep.run uses on a GPU

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, len(means)
        confirm, confirm_top = gpu.confirm.seeds, gpu.confirm.top
        baseline_params = bench.baseline_params({"trials": table["trials"]}, "4096x24")  # sweep mode, as measured
        race_slack, intensify = gpu.search.race_slack, gpu.search.intensify
        draw = "seed"  # as decision 0003 measured it: a trial replays its own seed's recording

    def ends_correct(seed: int) -> bool:
        rows = bench.run_planner(str(GRID3), bench.table_space(table), "planner-cost", seed, Args())
        return bench.planner_study(rows).recommended in correct

    # sampler seeds 6 and 8 end on a wrong config with each config's first seed alone
    # (docs/decisions/0003-intensify.md): a lucky seed of a worse config became a finalist while the correct configs'
    # single seeds ranked below it
    Args.intensify = 2
    assert ends_correct(6) and ends_correct(8)
    Args.intensify = 1
    assert not ends_correct(6)


def test_a_configs_trials_draw_its_recordings_at_random_without_replacement_while_the_table_allows() -> None:
    key = ("some", "config")
    for seed in range(20):
        first = [draw_index(3, seed, key, k) for k in range(3)]
        again = [draw_index(3, seed, key, k) for k in range(3, 6)]
        assert sorted(first) == sorted(again) == [0, 1, 2]  # each recording once, then each once more
    orders = {tuple(draw_index(3, seed, key, k) for k in range(3)) for seed in range(40)}
    assert len(orders) == 6  # every order of 3 recordings turns up: a random draw, not the seed's own recording
    assert draw_index(3, 7, key, 0) == draw_index(3, 7, key, 0)  # the same study draws the same


def yardstick_trial(table: Path, run_dir: Path, trial: int, envs: int, steps: int, baseline: bool = False) -> Any:
    """Replay one trial of a study in ``run_dir`` (its ledger grows by the trial's end row), drawn at random."""
    mode = "stock" if baseline else "sweep"
    cfg = TrialConfig(
        backend="replay",
        profile="recorded",
        num_envs=envs,
        num_steps_per_env=steps,
        seed=1000 + trial,
        cap_s=1e6,
        mode=mode,
        baseline=baseline,
        backend_options={"table": str(table), "draw_seed": 3},
    )
    final = replay_trial(cfg, lambda r: CONTINUE, trial=trial, price_usd_per_hour=3600.0, out_dir=run_dir)
    with (run_dir / "ledger.jsonl").open("a") as f:
        f.write(final.to_json() + "\n")
    return final


def test_a_study_draws_each_recording_once_and_never_a_held_out_one(tmp_path: Path) -> None:
    costs = {(64, 8): {1: 10.0, 2: 11.0, 3: 12.0}}
    held = {(64, 8): {4: 77.0, 5: 78.0}, (64, 16): {4: 5.0}, "baseline": {4: 99.0}}
    table = write_yardstick_table(tmp_path / "t.json", costs, {1: 20.0, 2: 21.0}, held)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    drawn = [yardstick_trial(table, run_dir, t, 64, 8).billable_s for t in range(6)]
    assert sorted(drawn[:3]) == sorted(drawn[3:]) == [10.0, 11.0, 12.0]  # never 77 or 78: those are held out
    base = [yardstick_trial(table, run_dir, t, 128, 16, baseline=True).billable_s for t in (6, 7)]
    assert sorted(base) == [20.0, 21.0]  # the baseline replays its own recordings, never its held-out one (99)
    only_held = yardstick_trial(table, run_dir, 8, 64, 16)
    assert only_held.state == "failed" and "no recorded trial" in only_held.reason  # held out: never served
