"""A study's money from its ledger rows: spent, held by running trials, best on equal terms, what a trial may spend."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sweep.contract import RESERVE_MARGIN
from sweep.ledger import LedgerView, Row
from sweep.planner.accounts import Accounts
from tests.planner.test_leader import PRICE, end
from tests.planner.test_loop import make_cfg


@dataclass
class Run:
    rows: list[Row] = field(default_factory=list)
    allowance: float = 0.0


def test_the_figures_follow_the_rows_and_the_running_trials_as_they_change(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path)  # $1000 budget, $100 per trial, pruning, race_slack 1.5
    rows = LedgerView()
    running: dict[int, Run] = {}
    money = Accounts(cfg, PRICE, rows, running)
    assert money.best_usd() is None and money.spent_usd() == 0.0 and money.allowance() == 100.0

    # a trial that paid 4 s of start-up and compilation on top of 10 s of training
    rows.add(end(0, 64, 14.0, phases_s={"sim": 10.0, "startup": 3.0, "compile": 1.0}))
    rows.add(end(1, 128, 30.0, state="capped"))
    assert money.best_usd() == pytest.approx(10.0)  # equal terms: one-time seconds left out
    assert money.one_time_usd() == pytest.approx(4.0)
    assert money.allowance() == pytest.approx(10.0 * cfg.search.race_slack + 4.0)
    assert money.spent_usd() == money.finished_usd() == pytest.approx(44.0)

    running[2] = Run(allowance=20.0)  # dispatched, no row yet: it holds its allowance with margin
    assert money.reserved_usd() == pytest.approx(20.0 * RESERVE_MARGIN)
    row = end(2, 64, 50.0, state="running")
    running[2].rows.append(row)
    rows.add(row)
    assert money.reserved_usd() == pytest.approx(50.0)  # past its allowance: it holds what it spent
    assert money.finished_usd() == pytest.approx(44.0) and money.spent_usd() == pytest.approx(94.0)


def test_the_search_keeps_the_confirmations_share_and_stops_when_it_cannot_pay_a_trial(tmp_path: Path) -> None:
    confirm = {"seeds": 2, "budget_share": 0.4, "baseline": {"num_envs": 128, "num_steps_per_env": 8}}
    cfg = make_cfg(tmp_path, **{"confirm": confirm, "budget.usd": 300.0})
    rows = LedgerView()
    money = Accounts(cfg, PRICE, rows, {})
    assert money.search_budget_usd() == pytest.approx(180.0)
    assert money.search_allowance() == 100.0  # $180 pays a $100 trial with its margin
    rows.add(end(0, 64, 80.0, state="capped"))
    assert money.search_allowance() is None  # $100 left does not (nothing reached: no best to fit a last trial to)
    assert money.search_allowance(keep_share=False) == 100.0  # the whole $300, with nothing to confirm


def test_budget_runs_is_priced_by_the_baselines_mean_to_target_once_one_of_its_trials_reached(tmp_path: Path) -> None:
    confirm = {"seeds": 2, "baseline": {"num_envs": 128, "num_steps_per_env": 8}}
    cfg = make_cfg(tmp_path, **{"confirm": confirm, "budget.usd": 400.0, "budget.runs": 4.0})
    rows = LedgerView()
    rows.add(end(0, 64, 12.0))
    money = Accounts(cfg, PRICE, rows, {})
    assert money.baseline_run_usd() is None and money.budget_usd() == 400.0  # not priced yet: budget.usd alone
    rows.add(end(1, 128, 50.0, state="capped", cause="cap", baseline=True))
    assert money.baseline_run_usd() is None  # a baseline that stopped short prices nothing
    rows.add(end(2, 128, 20.0, baseline=True, phases_s={"sim": 16.0, "compile": 4.0}))
    # counted as payback counts it: its seeds' mean on equal terms (the capped one at what it spent, 50, and 16)
    assert money.baseline_run_usd() == pytest.approx((50.0 + 16.0) / 2)
    assert money.budget_usd() == pytest.approx(4 * 33.0) and money.search_budget_usd() == pytest.approx(0.7 * 132.0)
    assert money.budget_text() == "4 baseline runs ($132.0000 at the baseline's mean $33.0000)"
    rows.add(end(3, 128, 500.0, baseline=True))
    assert money.budget_usd() == 400.0 and money.budget_text() == "$400"  # budget.usd stays an upper bound
