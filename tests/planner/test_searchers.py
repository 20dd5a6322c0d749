"""The searcher seam: one registry line and one class make a searcher; the shipped ones run as they always did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweep import config
from sweep.config import SEARCHERS, validation
from sweep.errors import ConfigError
from sweep.ledger import LedgerView, Row
from sweep.planner import searchers
from sweep.planner.phase import Done, Phase, Wait
from sweep.planner.searchers import Proposal, Searcher, SearchView
from tests.planner.test_loop import inline_pool, planner
from tests.replay_table import write_table


class SmallestFirst(Searcher):
    """A toy: the untried config with the fewest env steps per iteration, 64 envs only, then done."""

    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        untried = [p for p in view.untried(0) if p["num_envs"] == 64]
        if not untried:
            return Done("every 64-env config ran")
        return self.ask(
            study, min(untried, key=lambda p: (p["num_envs"] * p["num_steps_per_env"], p["num_mini_batches"]))
        )


class OneAtATime(SmallestFirst):
    """A toy that waits for every running trial's end before it proposes the next."""

    seen_running: list[int] = []

    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        if view.running:
            return Wait("a trial runs")
        OneAtATime.seen_running.append(len(view.running))
        return super().propose(study, view)


def cfg_for(tmp_path: Path, sampler: str, **over: Any) -> config.RunConfig:
    data = {
        "backend": "replay",
        "profile": "recorded",
        "backend_options": {"table": str(write_table(tmp_path / "t.json", mini_batches=(2, 4))), "time_scale": 0.0},
        "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16], "num_mini_batches": [2, 4]},
        "target": {"success": 0.9, "eval_episodes": 16, "eval_every_steps": 80},
        "budget": {"usd": 1000.0, "trial_usd": 100.0, "max_trials": 5},
        "price": {"gpu": "custom", "usd_per_hour": 3600.0},
        "search": {"sampler": sampler},
        "seeds": {"sampler": 3, "training": 5},
        "run_id": "t",
    }
    return validation.validate(config.compose(data, over, "test", has_gpu=False))


def ran(rows: list[Row]) -> tuple[list[str], int]:
    """The configs a study paid for, in order, each with how it ended; and how many proposals it told without
    running."""
    ends = LedgerView.of(rows).last.values()
    paid = [
        f"{r.params['num_envs']}x{r.params['num_steps_per_env']}/{r.params['num_mini_batches']} {r.state.value}"
        for r in ends
        if r.ran
    ]
    return paid, sum(not r.ran for r in ends)


def test_a_searcher_is_one_class_and_one_registry_line(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match=r"search\.sampler: unknown searcher 'smallest'; valid searchers: cost, grid"):
        cfg_for(tmp_path, "smallest")
    monkeypatch.setitem(SEARCHERS, "smallest", f"{__name__}:SmallestFirst")
    cfg = cfg_for(tmp_path, "smallest", **{"search.prune": False})
    p = planner(cfg, tmp_path / "run")
    p.run()
    paid, unrun = ran(p.rows)
    assert paid == ["64x8/2 reached", "64x8/4 reached", "64x16/2 reached", "64x16/4 reached"] and unrun == 0
    assert p.phase.log == [(Phase.DRAINING, "every 64-env config ran"), (Phase.OVER, "every 64-env config ran")]


def test_a_searcher_that_waits_is_asked_again_once_a_trial_ends(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(SEARCHERS, "one_at_a_time", f"{__name__}:OneAtATime")
    OneAtATime.seen_running = []
    cfg = cfg_for(tmp_path, "one_at_a_time", **{"search.prune": False})
    p = planner(cfg, tmp_path / "run", inline_pool(2))  # two slots, one trial at a time
    p.run()
    assert ran(p.rows)[0] == ["64x8/2 reached", "64x8/4 reached", "64x16/2 reached", "64x16/4 reached"]
    assert OneAtATime.seen_running == [0, 0, 0, 0, 0] and p.phase.why == "every 64-env config ran"


def test_the_leaders_new_seeds_come_around_any_searcher(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(SEARCHERS, "smallest", f"{__name__}:SmallestFirst")
    cfg = cfg_for(tmp_path, "smallest", **{"search.prune": False, "search.intensify": 2})
    assert isinstance(searchers.build(cfg), searchers.Intensify)
    p = planner(cfg, tmp_path / "run")
    p.run()
    # 64 x 8 / 2 leads after its first trial and runs again before the toy is asked for more
    assert ran(p.rows)[0][:2] == ["64x8/2 reached", "64x8/2 reached"]


#: The configs each shipped searcher paid for on this table, and the proposals it told without running, as they were
#: before the searchers had a seam of their own: the same study, the same order.
BEFORE = {
    "tpe": (["128x16/4 capped", "64x8/4 reached", "128x16/2 pruned", "64x8/2 reached", "64x16/4 pruned"], 22),
    "random": (["128x16/4 capped", "64x8/4 reached", "128x16/2 pruned", "128x8/4 pruned", "64x8/2 reached"], 1),
    "grid": (["64x8/2 reached", "128x8/4 pruned", "128x16/4 pruned", "64x16/2 pruned", "64x8/4 reached"], 0),
    "cost": (["128x16/4 capped", "64x8/4 reached", "128x16/2 pruned", "64x8/2 reached", "64x16/2 pruned"], 1),
}


@pytest.mark.parametrize("sampler", sorted(BEFORE))
def test_each_shipped_searcher_runs_the_configs_it_ran_before(tmp_path: Path, sampler: str) -> None:
    p = planner(cfg_for(tmp_path, sampler), tmp_path / "run")
    p.run()
    assert ran(p.rows) == BEFORE[sampler]


def test_every_registered_name_builds_its_searcher(tmp_path: Path) -> None:
    for name in SEARCHERS:
        searcher = searchers.build(cfg_for(tmp_path, name))
        assert isinstance(searcher.inner, Searcher) and type(searcher.inner).__name__.lower().startswith(name)
