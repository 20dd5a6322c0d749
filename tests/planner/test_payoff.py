"""The stop rule (``budget.later_runs``, :mod:`sweep.planner.searchers.payoff`): the search ends once no untried config
is expected to pay for its trial over the later runs, and says so; the figures behind it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sweep.errors import ConfigError
from sweep.planner import acquisition, searchers
from sweep.planner.phase import Phase
from tests.planner.test_loop import planner, runs_cfg


def test_the_expected_saving_and_trial_cost_are_those_of_a_lognormal_cost() -> None:
    mu, sigma = np.array([math.log(30.0), math.log(20.0)]), np.array([0.3, 0.5])
    draws = np.exp(np.random.default_rng(0).normal(mu, sigma, size=(400_000, 2)))
    saving = acquisition.expected_saving_usd(mu, sigma, 28.0)
    trial = acquisition.expected_trial_usd(mu, sigma, 40.0)
    assert saving == pytest.approx(np.maximum(0.0, 28.0 - draws).mean(0), rel=0.02)
    assert trial == pytest.approx(np.minimum(draws, 40.0).mean(0), rel=0.01)


def test_a_prospect_pays_when_its_saving_over_the_later_runs_exceeds_its_trial() -> None:
    choices = {"num_envs": [64, 128, 256], "num_steps_per_env": [8, 16]}
    evidence = [({"num_envs": 64, "num_steps_per_env": 8}, 10.0), ({"num_envs": 128, "num_steps_per_env": 8}, 14.0)]
    evidence.append(({"num_envs": 64, "num_steps_per_env": 16}, 12.0))
    untried = [{"num_envs": 256, "num_steps_per_env": 8}, {"num_envs": 128, "num_steps_per_env": 16}]
    few = acquisition.prospect(evidence, untried, choices, 10.0, 15.0, 0.5, later_runs=1.0)
    many = acquisition.prospect(evidence, untried, choices, 10.0, 15.0, 0.5, later_runs=1e6)
    assert few is not None and not few.pays and few.trial_usd > 0.5
    assert many is not None and many.pays and many.saving_usd > 0
    assert acquisition.prospect(evidence[:2], untried, choices, 10.0, 15.0, 0.5, 1e6) is None  # too few to judge


def test_a_study_with_few_later_runs_stops_searching_and_says_why(tmp_path: Path) -> None:
    p = planner(runs_cfg(tmp_path, **{"confirm.seeds": 1, "budget.later_runs": 0.01}), tmp_path / "run")
    p.run()
    search = [r for r in p.rows.last.values() if r.phase == "search"]
    assert len(search) == acquisition.MIN_EVIDENCE  # the model judges from the third ended trial on
    assert p.phase.log[0][0] is Phase.DRAINING and p.why_ended().startswith("more search does not pay")
    assert "budget.later_runs" in p.why_ended()


def test_a_study_with_many_later_runs_searches_on(tmp_path: Path) -> None:
    p = planner(runs_cfg(tmp_path, **{"confirm.seeds": 1, "budget.later_runs": 1e9}), tmp_path / "run")
    p.run()
    assert p.why_ended() == "every feasible config tried (4)"


def test_the_stop_rule_wraps_any_searcher_and_is_off_without_later_runs(tmp_path: Path) -> None:
    on = searchers.build(runs_cfg(tmp_path, **{"budget.later_runs": 20.0}))
    off = searchers.build(runs_cfg(tmp_path))
    assert isinstance(on.inner, searchers.Payoff) and on.inner.later_runs == 20.0
    assert not isinstance(off.inner, searchers.Payoff)


@pytest.mark.parametrize("bad", [0.0, -3.0, float("inf")])
def test_later_runs_must_be_a_positive_count(tmp_path: Path, bad: float) -> None:
    with pytest.raises(ConfigError, match=r"budget\.later_runs"):
        runs_cfg(tmp_path, **{"budget.later_runs": bad})
