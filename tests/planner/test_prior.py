"""A warm start (``search.prior``): an earlier study's trials teach the cost model from the first proposal, at this
study's price, and are no seeds of this study's configs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sweep.errors import ConfigError
from sweep.ledger import LedgerView, LedgerWriter
from sweep.planner import prior
from tests.planner.test_loop import planner, runs_cfg


def earlier_study(tmp_path: Path) -> Path:
    """The run folder of a finished study over every config of :data:`tests.planner.test_loop.STEADY` (64 x 8 the
    best)."""
    p = planner(runs_cfg(tmp_path, **{"confirm.seeds": 1, "search.prune": False}), tmp_path / "earlier")
    p.run()
    return tmp_path / "earlier"


def test_an_earlier_studys_trials_teach_at_this_studys_price(tmp_path: Path) -> None:
    folder = earlier_study(tmp_path)
    here = prior.evidence(str(folder), 3600.0, 0.9)
    assert sorted(usd for _, usd in here) == pytest.approx([10.0, 25.0, 30.0, 40.0])  # $1 a second, each config
    assert [usd / 2 for _, usd in here] == pytest.approx([usd for _, usd in prior.evidence(str(folder), 1800.0, 0.9)])
    # a confirmation trial teaches too; a probe (no cost to target) does not
    rows = [replace(r, phase="confirm") for r in LedgerView.of(planner_rows(folder)).last.values()]
    rows += [replace(rows[0], trial=99, phase="probe")]
    other = tmp_path / "relabelled"
    other.mkdir()
    with LedgerWriter(other / "ledger.jsonl") as ledger:
        for r in rows:
            ledger.append(r)
    assert len(prior.evidence(str(other), 3600.0, 0.9)) == 4


def planner_rows(folder: Path):
    from sweep.ledger import read_rows

    return read_rows(folder / "ledger.jsonl")


def test_a_warm_study_bets_on_the_earlier_studys_best_config_first(tmp_path: Path) -> None:
    folder = earlier_study(tmp_path)
    over = {"confirm.seeds": 1, "search.sampler": "cost", "budget.max_trials": 1}
    warm = planner(runs_cfg(tmp_path, **over, **{"search.prior": str(folder)}), tmp_path / "warm")
    warm.run()
    first = warm.rows.last[0]
    assert (first.params["num_envs"], first.params["num_steps_per_env"]) == (64, 8)
    assert len(LedgerView.of(warm.rows).last) == 1  # the earlier trials are no trials of this study
    cold = planner(runs_cfg(tmp_path, **over), tmp_path / "cold")
    cold.run()  # without the prior, the first proposal is the sampler's random one (seeded): another config here
    assert (cold.rows.last[0].params["num_envs"], cold.rows.last[0].params["num_steps_per_env"]) != (64, 8)


def test_a_prior_without_a_ledger_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"search\.prior"):
        runs_cfg(tmp_path, **{"search.prior": str(tmp_path)})
