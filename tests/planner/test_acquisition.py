"""Cost-aware proposals: estimates from partial curves, a model that follows the evidence, the planner's bets."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.backends.replay import load_table
from sweep.ledger import LedgerView, Row
from sweep.params import TrialParams
from sweep.planner import acquisition
from tests.helpers import search_efficiency
from tests.replay_table import write_table

PRICE = 3600.0  # $1 per billable second


def row(state: str, billable_s: float, success: float | None, compile_s: float = 0.0, **extra) -> Row:
    base = {"trial": 0, "state": state, "billable_s": billable_s, "price_usd_per_hour": PRICE}
    return Row.of({**base, "phases_s": {"compile": compile_s}, "success": success, **extra})


def test_a_reached_trial_gives_its_cost_and_a_stopped_one_an_estimate_from_its_curve() -> None:
    reached = [row("running", 10.0, 0.5, 2.0), row("reached", 20.0, 0.95, 2.0)]
    assert acquisition.estimated_usd(reached, 0.9) == pytest.approx(18.0)  # equal terms: compilation left out
    pruned = [row("running", 10.0, 0.3), row("running", 20.0, 0.45), row("pruned", 20.0, 0.45)]
    assert acquisition.estimated_usd(pruned, 0.9) == pytest.approx(40.0)  # halfway to the target: twice its spend
    gated = [row("running", 10.0, None, success_max=0.6), row("capped", 30.0, None, success_max=0.6)]
    assert acquisition.estimated_usd(gated, 0.9) == pytest.approx(45.0)  # a stopped pass bounds it from above
    flat = [row("capped", 30.0, None)]
    assert acquisition.estimated_usd(flat, 0.9) == pytest.approx(30.0 * 0.9 / acquisition.SUCCESS_FLOOR)
    assert acquisition.estimated_usd([row("failed", 0.0, None)], 0.9) is None  # died before training


CHOICES = {"num_envs": [64, 128, 256, 512, 1024], "flags.fused_optimizer": [False, True], "num_mini_batches": [4]}


def config(envs: int, fused: bool = False) -> dict:
    return {"num_envs": envs, "flags.fused_optimizer": fused, "num_mini_batches": 4}


def test_the_bet_follows_the_cost_trend_of_the_evidence() -> None:
    # cost grows with num_envs, the flag does not matter: the untried config at the cheap end is the bet
    evidence = [(config(256), 40.0), (config(512, True), 80.0), (config(1024), 160.0), (config(512), 85.0)]
    candidates = [config(64, True), config(128), config(1024, True), config(256, True)]
    assert acquisition.choose(evidence, candidates, CHOICES, 40.0, 5.0) == config(128)
    # reversed evidence, reversed bet
    evidence = [(config(256), 160.0), (config(128, True), 320.0), (config(512), 80.0), (config(128), 300.0)]
    assert acquisition.choose(evidence, candidates, CHOICES, 80.0, 5.0) == config(1024, True)


def test_no_bet_on_thin_evidence_or_without_candidates() -> None:
    evidence = [(config(256), 40.0), (config(512), 80.0)]
    assert acquisition.choose(evidence, [config(64)], CHOICES, 40.0, 0.0) is None  # the sampler's random starts
    assert acquisition.choose([*evidence, (config(128), 50.0)], [], CHOICES, 40.0, 0.0) is None


def test_the_cost_sampler_runs_through_the_planner_and_bets_on_untried_configs_only(tmp_path: Path) -> None:
    bench = search_efficiency()
    table = write_table(tmp_path / "t.json")  # 4 configs; 64 x 8 reaches the target cheapest
    space = bench.table_space(load_table(str(table)))

    class Args:
        target, budget, trial_cap, max_trials = 0.9, 1e9, 300.0, 4

    for seed in range(3):
        rows = bench.run_planner(str(table), space, "planner-cost", seed, Args())
        ends = LedgerView(rows).last
        paid = [TrialParams.identity(r.params) for r in ends.values() if r.ran]
        assert len(paid) == len(set(paid)) == 4  # every config once: the bets are untried configs
