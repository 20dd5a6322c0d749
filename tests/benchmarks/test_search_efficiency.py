"""The search-efficiency yardstick (benchmarks/search_efficiency.py): truth from held-out recordings only, one drawing
rule and one budget for every strategy, a study's cost in baseline runs, intervals over distinct outcomes, the line."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

from sweep.backends.replay import load_table
from sweep.params import TrialParams
from tests.helpers import search_efficiency
from tests.replay_table import STOCK_BASELINE, write_yardstick_table

A, B, C, D = (64, 8), (64, 16), (128, 8), (128, 16)
#: Replayed: every recording of a config costs the same (s to target); the stock baseline's three cost 20 s.
COSTS = {A: 10.0, B: 30.0, C: 40.0, D: 25.0}
#: Held out: A's mean is the best (11 s), B within 10% of it (11.5 s), C not (40 s), D not recorded; the baseline
#: 21 s. Each cost differs from every replayed one, so a held-out draw would show.
HELD = {A: {4: 10.5, 5: 11.5}, B: {4: 11.5}, C: {4: 40.5}, "baseline": {4: 20.5, 5: 21.5}}


def key(shape: tuple[int, int]) -> tuple:
    return TrialParams.identity({"num_envs": shape[0], "num_steps_per_env": shape[1]})


@pytest.fixture
def table(tmp_path: Path) -> Path:
    costs = {k: {s: v for s in (1, 2, 3)} for k, v in COSTS.items()}
    return write_yardstick_table(tmp_path / "yardstick.json", costs, {1: 20.0, 2: 20.0, 3: 20.0}, HELD)


def test_the_truth_is_the_held_out_means_and_correct_is_within_10_percent_of_the_best(table: Path) -> None:
    bench = search_efficiency()
    t = bench.truth(load_table(str(table)), 0.9, 0.10)
    assert t.correct == {key(A), key(B)} and t.best == pytest.approx(11.0)
    assert t.baseline == TrialParams.identity(STOCK_BASELINE) and t.baseline not in t.correct
    assert t.held_out_baseline_usd == pytest.approx(21.0)  # what recommended/baseline divides by
    assert t.unit_usd == pytest.approx(20.0)  # one baseline run: its replayed mean, every budget's and study's unit
    assert t.in_sample[key(D)] == pytest.approx(25.0) and key(D) not in t.held_out


def test_a_table_without_held_out_recordings_cannot_judge(tmp_path: Path) -> None:
    bench = search_efficiency()
    path = write_yardstick_table(tmp_path / "t.json", {A: {1: 10.0}}, {1: 20.0})
    with pytest.raises(ValueError, match="held_out_trials"):
        bench.truth(load_table(str(path)), 0.9, 0.10)


def test_a_recommendation_is_judged_on_held_out_means_and_one_outside_them_is_wrong(table: Path) -> None:
    bench = search_efficiency()
    t = bench.truth(load_table(str(table)), 0.9, 0.10)
    studies = [
        bench.Study(key(A), 42.0, ("a",), frozenset({key(A), key(C)})),
        bench.Study(key(D), 63.0, ("d",), frozenset({key(D)})),  # no held-out recording: wrong, ratio from replay
        bench.Study(None, 21.0, ("none",)),  # nothing recommended: the user keeps the baseline
        bench.Study(key(C), 84.0, ("c",), frozenset({key(B), key(C)})),  # ran a correct config, recommended another
    ]
    v = bench.judge("planner-cost budget 6 runs", studies, t)
    assert v.correct == (True, False, False, False) and (v.unjudged, v.none) == (1, 1)
    assert v.ran_correct == (True, False, False, True)  # breadth: it trained a correct config
    assert bench.details(v).endswith("| 2/4, 1 of them correct | - |")  # built without a verdict: blank
    assert v.runs == pytest.approx((2.1, 3.15, 1.05, 4.2))  # billed spend over the baseline's replayed mean
    assert v.ratios == pytest.approx((11.0 / 21.0, 25.0 / 21.0, 1.0, 40.5 / 21.0))
    assert v.line() == "planner-cost budget 6 runs: correct 1/4, median study 2.6 runs, recommended/baseline 1.10x"


def test_intervals_resample_distinct_outcomes_not_copies_of_one(table: Path) -> None:
    bench = search_efficiency()
    t = bench.truth(load_table(str(table)), 0.9, 0.10)
    same = [bench.Study(key(A), 42.0, ("one",))] * 3 + [bench.Study(key(C), 42.0, ("other",))]
    v = bench.judge("x", same, t)
    assert v.distinct == 2
    lo, hi = bench.cluster_interval(v, lambda ix: sum(v.correct[i] for i in ix) / len(ix))
    # two outcomes: a resample holds the first only, the second only, or both; never 4 independent studies
    assert (lo, hi) == (0.0, 1.0)
    apart = bench.judge("y", [bench.Study(key(A), 42.0, (i,)) for i in range(4)], t)
    assert apart.distinct == 4 and bench.cluster_interval(apart, lambda ix: 1.0) == (1.0, 1.0)


def test_random_search_and_asha_draw_as_the_planner_does_spend_their_budget_and_never_a_held_out_run(
    table: Path,
) -> None:
    bench = search_efficiency()
    data = load_table(str(table))
    held = {c for by_seed in HELD.values() for c in by_seed.values()}
    for seed in range(6):
        stretches = bench.run_random(data, seed, 55.0, 50.0, 0.9)
        assert sum(s.usd for s in stretches) == pytest.approx(55.0)  # the last trial stopped at the budget
        asha = bench.run_asha(data, seed, 55.0, 50.0, 0.9)
        assert sum(s.usd for s in asha) <= 55.0 + 1e-9
        assert not {s.race_usd_to_target for s in [*stretches, *asha]} & held
        tried = [s.key for s in bench.run_random(data, seed, 1000.0, 50.0, 0.9)]
        assert sorted(tried) == sorted(set(tried)) and len(tried) == 4  # each config once, all four
    orders = {tuple(s.key for s in bench.run_random(data, seed, 1000.0, 50.0, 0.9)) for seed in range(10)}
    assert len(orders) > 1  # in a random order


def test_asha_promotes_the_best_return_of_a_rung_not_the_cheapest_config(tmp_path: Path) -> None:
    bench = search_efficiency()
    # returns that rank C first on the lowest rung: it is promoted, though A would reach the target cheapest
    costs = {k: {1: v} for k, v in COSTS.items()}
    path = write_yardstick_table(tmp_path / "t.json", costs, {1: 20.0}, HELD)
    data = load_table(str(path))
    for record in data["trials"]:
        envs = record["params"]["num_envs"]
        for i, point in enumerate(record["curve"]):
            point["mean_return"] = (100.0 if (envs, record["params"]["num_steps_per_env"]) == C else 1.0) * (i + 1)
    for seed in range(4):
        stretches = bench.run_asha(data, seed, 1000.0, 45.0, 0.9)  # rungs to 5, 15 and 45 s
        rungs = [s.key for s in stretches]
        assert sorted(set(rungs)) == sorted(key(k) for k in COSTS) and rungs.count(key(C)) == 2  # C promoted once
        assert next(s for s in stretches if s.key == key(A)).usd == pytest.approx(5.0)  # A stopped at its rung
        assert bench.cheapest_reached(stretches) is None  # so nothing reached the target


def test_under_budget_runs_the_planner_measures_the_baseline_first_and_stops_at_n_of_its_runs(table: Path) -> None:
    bench = search_efficiency()
    data = load_table(str(table))
    t = bench.truth(data, 0.9, 0.10)

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 50.0, 4
        confirm, confirm_top, confirm_share = 3, 1, 0.3
        baseline_params, race_slack, intensify = bench.baseline_params(data), 1.5, 2
        budget_runs = 6.0

    for seed in range(3):
        rows = bench.run_planner(str(table), bench.table_space(data), "planner-cost", seed, Args())
        assert rows[0].params["mode"] == "stock" and rows[0].baseline
        study = bench.planner_study(rows)
        assert study.spent_usd <= 6.0 * 20.0  # its own unit: the baseline recordings it drew, 20 s each
        assert bench.judge("p", [study], t).runs[0] <= 6.0
        assert isinstance(study.decided, bool)  # the planner measures a baseline: its verdict is decided or not


def test_verdict_decided_counts_the_planners_own_intervals_and_is_blank_without_a_baseline() -> None:
    bench = search_efficiency()

    def verdict(*decided: bool | None):
        studies = tuple(bench.Study(None, 1.0, (i,), frozenset(), d) for i, d in enumerate(decided))
        n = len(studies)
        return bench.Verdict("p", studies, (False,) * n, (1.0,) * n, (1.0,) * n, 0, n, (False,) * n)

    assert bench.decided(verdict(True, False, True)) == "2/3"
    assert bench.decided(verdict(None, None)) == "-"  # random search and ASHA compare nothing with the baseline


def test_the_benchmark_prints_one_line_per_strategy_and_budget(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["search_efficiency.py", str(table), "--budget-runs", "5,8", "--reps", "2"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        search_efficiency().main()  # in this process: the script's imports are paid once, by the test run
    stdout = printed.getvalue()
    lines = [x for x in stdout.splitlines() if " budget " in x and x.endswith("x")]
    pattern = r"(planner-cost|random|asha) budget (5|8) runs: correct \d+/2, median study \d+\.\d runs, "
    assert len(lines) == 6 and all(re.fullmatch(pattern + r"recommended/baseline \d+\.\d\dx", x) for x in lines)
    stop = r"planner-cost stop rule: correct \d+/2, median study \d+\.\d runs, recommended/baseline \d+\.\d\dx"
    assert len([x for x in stdout.splitlines() if re.fullmatch(stop, x)]) == 1  # the space's stop rule, no cap


@pytest.mark.parametrize("flag", [["--confirm-share", "1"], ["--confirm-share", "-0.1"], ["--confirm-top", "0"]])
def test_a_confirmation_setting_out_of_range_is_refused_in_one_line(
    table: Path, flag: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys, "argv", ["search_efficiency.py", str(table), "--budget-runs", "6", *flag])
    with pytest.raises(SystemExit) as exit_:
        search_efficiency().main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err[-1].startswith(f"search_efficiency.py: error: {flag[0]}:")
