"""Exact flags decided by throughput probes (``search.probe``): the search holds them at their fast setting, the
confirmation probes the others on the leader's config (one round of training, no held-out pass) and its finalists
carry what the probes decided (:data:`sweep.planner.confirm.PROBE_RULE`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep import config
from sweep.backends.replay import replay_trial
from sweep.config import validation
from sweep.contract import CONTINUE, TrialConfig
from sweep.ledger import LedgerView
from sweep.params import TrialParams
from sweep.planner import confirm, space
from sweep.record import EndCause
from tests.planner.test_loop import ledger_row, planner
from tests.replay_table import reaching_curve

FUSED = "flags.fused_optimizer"


def write_flag_table(path: Path, costs: dict[tuple[int, bool], float]) -> Path:
    """Configs (num_envs x 8 steps, fused_optimizer) with three recordings each that reach the target at ``cost``
    seconds; a recording's throughput over its first round is 5000 / cost env steps per second (its curve's)."""
    trials = [
        {
            "params": {"num_envs": envs, "num_steps_per_env": 8, "num_mini_batches": 4, FUSED: fused},
            "seed": seed,
            "curve": reaching_curve(cost),
        }
        for (envs, fused), cost in costs.items()
        for seed in (1, 2, 3)
    ]
    path.write_text(json.dumps({"profile": "recorded", "control_dt_s": 0.02, "device": "synthetic", "trials": trials}))
    return path


def probe_cfg(tmp_path: Path, costs: dict[tuple[int, bool], float], **over) -> config.RunConfig:
    data = {
        "backend": "replay",
        "profile": "recorded",
        "backend_options": {"table": str(write_flag_table(tmp_path / "flags.json", costs)), "draw": "random"},
        "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8], "num_mini_batches": [4]},
        "target": {"success": 0.9, "eval_episodes": 16, "eval_every_steps": 80},
        "budget": {"usd": 1000.0, "trial_usd": 100.0, "max_trials": 10},
        "price": {"gpu": "custom", "usd_per_hour": 3600.0},
        "search": {"sampler": "random", "prune": False, "probe": True},
        "run_id": "t",
        "confirm": {"seeds": 2, "top": 1, "baseline": {"num_envs": 128, "num_steps_per_env": 8, "mode": "sweep"}},
    }
    data["knobs"]["flags"] = {"fused_optimizer": [False, True]}
    return validation.validate(config.compose(data, over, "test", has_gpu=False))


#: 64 envs is the better config; fused on is the faster setting in both.
FUSED_FASTER = {(64, True): 10.0, (64, False): 20.0, (128, True): 30.0, (128, False): 40.0}


def test_the_search_holds_an_exact_flag_at_its_fast_setting(tmp_path: Path) -> None:
    cfg = probe_cfg(tmp_path, FUSED_FASTER)
    assert space.probed_flags(cfg) == {"fused_optimizer": (True, (False,))}
    assert space.choices(cfg)[FUSED] == [True] and space.feasible_count(cfg, 0.02, None) == 2
    off = probe_cfg(tmp_path, FUSED_FASTER, **{"search.probe": False})
    assert space.probed_flags(off) == {} and space.choices(off)[FUSED] == [False, True]


def test_a_probe_trains_one_round_and_is_billed_without_a_held_out_pass(tmp_path: Path) -> None:
    table = write_flag_table(tmp_path / "flags.json", FUSED_FASTER)
    cfg = TrialConfig(backend="replay", profile="recorded", num_envs=64, num_steps_per_env=8, seed=1, cap_s=1e6,
                      flags={"fused_optimizer": True}, backend_options={"table": str(table)},
                      phase="probe")  # fmt: skip
    rows = []
    end = replay_trial(cfg, lambda r: rows.append(r) or CONTINUE, price_usd_per_hour=3600.0, price_label="t")
    first = reaching_curve(10.0)[0]
    assert rows == [end] and end.cause == EndCause.PROBE and end.phase == "probe"
    assert end.success is None and end.eval_episodes == 0 and end.phases_s.get("eval", 0.0) == 0.0
    assert end.billable_s == pytest.approx(first["billable_s"] - first["phases_s"]["eval"])
    assert end.env_steps == first["env_steps"]


def test_a_probe_slower_than_the_leader_keeps_the_held_setting(tmp_path: Path) -> None:
    p = planner(probe_cfg(tmp_path, FUSED_FASTER), tmp_path / "run")
    p.run()
    ends = LedgerView.of(p.rows).last.values()
    assert all(r.params[FUSED] for r in ends if r.phase == "search")  # the search never runs it off
    probes = [r for r in ends if r.phase == "probe"]
    assert [(r.params["num_envs"], r.params[FUSED]) for r in probes] == [(64, False)]  # on the leader, once
    confirmed = {(r.params["num_envs"], r.params[FUSED]) for r in ends if r.phase == "confirm" and not r.baseline}
    assert confirmed == {(64, True)}
    assert "probe: fused_optimizer true" in p.why_ended()


def test_a_probe_clearly_faster_than_the_leader_moves_the_flag(tmp_path: Path) -> None:
    # off trains the leader's config twice as fast: the finalist runs off, a new config with no seed yet
    costs = {(64, True): 10.0, (64, False): 5.0, (128, True): 30.0, (128, False): 40.0}
    p = planner(probe_cfg(tmp_path, costs), tmp_path / "run")
    p.run()
    ends = LedgerView.of(p.rows).last.values()
    confirmed = [(r.params["num_envs"], r.params[FUSED]) for r in ends if r.phase == "confirm" and not r.baseline]
    assert confirmed == [(64, False), (64, False)]  # its confirmation seeds: the search's seed was of another config
    assert "probe: fused_optimizer false" in p.why_ended()


@pytest.mark.parametrize("gain", [0.99, 1.01])
def test_a_probe_moves_a_flag_only_past_the_margin(gain: float) -> None:
    on = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4, FUSED: True}
    off = {**on, FUSED: False}
    # the leader's seeds trained 1000 env steps in 1 s over its second round (trial 0) and in 2 s over its only one
    # (trial 1): 750 a second on average
    rows = [
        ledger_row(0, "running", on, 10, 1000, 1.0),
        ledger_row(0, "reached", on, 20, 2000, 2.0),
        ledger_row(1, "running", on, 10, 1000, 2.0),
        ledger_row(2, "capped", off, 10, 1000, 1000 / (750 * confirm.PROBE_MARGIN * gain), phase="probe"),
    ]
    lead = confirm.Finalist(TrialParams.identity(on), on)
    probe = confirm.Finalist(TrialParams.identity(off), off)
    flags, said = confirm.decide(rows, [lead], [probe], {"fused_optimizer": (True, (False,))})
    held = gain < 1  # short of the margin: the flag stays at its held setting, on
    assert flags == {"fused_optimizer": held} and said[0].startswith(f"probe: fused_optimizer {str(held).lower()}")
    assert confirm.throughput(rows, lead.key, "search") == pytest.approx(750.0)


def test_the_leaders_first_round_costs_do_not_move_a_flag() -> None:
    on = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4, FUSED: True}
    off = {**on, FUSED: False}
    # the leader's first round paid a one-time cost (1000 env steps in 2 s), its second none (1000 in 1 s); the probe,
    # on a warm worker, trains 800 a second: faster than that first round by more than the margin, slower than the
    # second
    rows = [
        ledger_row(0, "running", on, 10, 1000, 2.0),
        ledger_row(0, "reached", on, 20, 2000, 3.0),
        ledger_row(1, "capped", off, 10, 1000, 1000 / 800, phase="probe"),
    ]
    lead = confirm.Finalist(TrialParams.identity(on), on)
    probe = confirm.Finalist(TrialParams.identity(off), off)
    assert confirm.throughput(rows, lead.key, "search") == pytest.approx(500.0)
    assert confirm.throughput(rows, lead.key, "search", steady=True) == pytest.approx(1000.0)
    flags, said = confirm.decide(rows, [lead], [probe], {"fused_optimizer": (True, (False,))})
    assert flags == {"fused_optimizer": True} and "held true 1000" in said[0]
