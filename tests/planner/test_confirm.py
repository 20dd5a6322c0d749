"""The confirmation phase on replayed tables with known per-seed costs (in-process pool): racing, billing, the
recommendation over seeds, training seeds, resume."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from sweep import config
from sweep.analysis import evidence, summary
from sweep.config import validation
from sweep.contract import EVAL_SEED_BASE
from sweep.errors import ConfigError
from sweep.ledger import LedgerView, Row, metrics, read_rows
from sweep.planner import confirm
from sweep.planner.phase import Phase
from tests.planner.test_loop import planner
from tests.replay_table import write_seeded_table

A, B, C, D = (64, 8), (64, 16), (128, 8), (128, 16)
"""D is the baseline. With 4 search trials (seeds 1-4, in the order A B C D) and 3 finalists, confirmation round 1
trains with seed 5 (1 + its first trial, 4) and round 2 with seed 8 (1 + 7)."""

#: A's search seed is lucky (10), its other seeds cost 40: mean 30. B costs 19-21 on every seed: mean 20.
LUCKY = {A: {1: 10, 5: 40, 8: 40}, B: {2: 19, 5: 20, 8: 21}, C: {3: 30, 5: 30, 8: 30}, D: {4: 28, 5: 30, 8: 32}}


def make_cfg(tmp_path: Path, costs: dict, compile_s: float = 0.0, **over) -> config.RunConfig:
    data = {
        "backend": "replay",
        "profile": "recorded",
        # each trial replays the recording of its own seed: the scenarios below are written per seed
        "backend_options": {
            "table": str(write_seeded_table(tmp_path / "table.json", costs, compile_s)),
            "draw": "seed",
        },
        "knobs": {"num_envs": [64, 128], "num_steps_per_env": [8, 16], "num_mini_batches": [4]},
        "target": {"success": 0.9, "eval_episodes": 16, "eval_every_steps": 80},
        "budget": {"usd": 1000.0, "trial_usd": 100.0, "max_trials": 4},
        "price": {"gpu": "custom", "usd_per_hour": 3600.0},  # $1 per billable second
        "search": {
            "sampler": "random",
            "prune": False,
            "initial": [{"num_envs": e, "num_steps_per_env": h} for e, h in (A, B, C, D)],
        },
        "run_id": "t",
        # the table records this package's loop only: a baseline in its mode, which the search can run too
        "confirm": {"seeds": 3, "top": 2, "baseline": {"num_envs": D[0], "num_steps_per_env": D[1], "mode": "sweep"}},
    }
    return validation.validate(config.compose(data, over, "test", has_gpu=False))


def by_config(rows: list[Row]) -> dict[tuple[int, int], list[Row]]:
    """Each config's end rows that ran, by (num_envs, num_steps_per_env), in trial order."""
    out: dict[tuple[int, int], list[Row]] = {}
    for _, r in sorted(LedgerView.of(rows).last.items()):
        if r.billable_s > 0:
            out.setdefault((r.params["num_envs"], r.params["num_steps_per_env"]), []).append(r)
    return out


def test_a_lucky_single_seed_loses_to_a_config_better_on_average(tmp_path: Path) -> None:
    searched = planner(make_cfg(tmp_path, LUCKY, **{"confirm.seeds": 1}), tmp_path / "search")
    searched.run()
    alone = summary.summarize(searched.rows).recommendation
    assert alone is not None and alone.config.params["num_steps_per_env"] == 8  # one seed each: A's luck wins
    p = planner(make_cfg(tmp_path, LUCKY), tmp_path / "run")
    p.run()
    runs = by_config(p.rows)
    assert [r.seed for r in runs[A]] == [1, 5, 8] and [metrics(r).usd for r in runs[A]] == [10, 40, 40]
    rec = summary.summarize(p.rows).recommendation
    assert rec is not None and (rec.config.params["num_envs"], rec.config.params["num_steps_per_env"]) == B
    assert rec.config.race_mean == pytest.approx(20.0) and rec.config.race_usd == (19.0, 20.0, 21.0)
    half = 4.302653 * 1.0 / 3**0.5  # t(0.975, 2 df) x sd 1 / sqrt(3)
    assert (rec.config.race_lo, rec.config.race_hi) == (pytest.approx(20 - half), pytest.approx(20 + half))
    vs = rec.vs_baseline
    assert vs is not None and vs.ratio == pytest.approx(20.0 / 29.0) and vs.lo < vs.ratio < vs.hi < 1.0
    assert vs.shared_seeds == (5,)  # confirmation gave both the same seed; their search seeds differ
    assert [metrics(r).usd for r in runs[D]] == [28, 30]  # decided on the baseline's second seed: no third


def test_racing_stops_a_clearly_worse_candidate_after_two_seeds(tmp_path: Path) -> None:
    # B's search seed (12) puts it second; its next seed costs 60: mean 36 > 1.5 x A's 10.5
    costs = {A: {1: 10, 5: 11, 8: 12}, B: {2: 12, 5: 60, 8: 12}, C: {3: 30}, D: {4: 28, 5: 30, 8: 32}}
    p = planner(make_cfg(tmp_path, costs), tmp_path / "run")
    p.run()
    runs = by_config(p.rows)
    # B stopped; with no other candidate left, the leader's verdict against the baseline is decided on two seeds each
    assert [len(runs[k]) for k in (A, B, C, D)] == [2, 2, 1, 2]
    assert [r.seed for r in runs[B]] == [2, 5] and [r.seed for r in runs[D]] == [4, 5]
    stats = {c.key: c for c in evidence.config_stats(p.rows)}
    out = confirm.out_of_race(stats, p.confirmation.finalists(p.rows), 1.5)
    decided = "verdict decided: leader / baseline 0.36 (95% interval 0.28-0.47) lies below 1"
    assert sorted(out.values()) == ["mean $36.0000 > 1.5 x the leader's $10.5000", decided, decided]
    assert p.phase.now is Phase.OVER and p.phase.why.startswith("confirmation complete")


def test_without_racing_pressure_every_finalist_gets_its_seeds(tmp_path: Path) -> None:
    costs = {A: {1: 10, 5: 11, 8: 12}, B: {2: 12, 5: 13, 8: 12}, C: {3: 30}, D: {4: 28, 5: 30, 8: 32}}
    p = planner(make_cfg(tmp_path, costs), tmp_path / "run")
    p.run()
    # the racing test's control: A and B race on to their 3 seeds; the baseline, its verdict decided, stops at 2
    assert [len(by_config(p.rows)[k]) for k in (A, B, C, D)] == [3, 3, 1, 2]


#: A, B and C reach in the search; D, the baseline, runs in the confirmation only. D's trial number was taken by its
#: waiting initial entry: the rounds train with seeds 5, 8 (and 10). Two seeds of D decide the verdict against it (A's
#: three lie close together, and the interval pools the two sides' spread).
#: Why a confirmation ends once each finalist is done (:mod:`sweep.planner.confirm`).
COMPLETE = "confirmation complete: every finalist has 3 seeds, has left the race or has its verdict decided"
BUDGETED = {A: {1: 10, 5: 11, 8: 12}, B: {2: 12, 5: 14, 8: 12}, C: {3: 40}, D: {5: 30, 8: 50, 10: 40}}


def test_each_round_gives_the_verdicts_sides_their_seeds_first(tmp_path: Path) -> None:
    # the search runs A, B and C (3 trials): the baseline D has no seed yet, so each round opens with it, then the
    # leader A, then B; rounds train with seeds 5 and 8 (D's waiting initial entry took trial number 3)
    costs = {A: {1: 10, 5: 11, 8: 12}, B: {2: 12, 5: 13, 8: 14}, C: {3: 40}, D: {5: 30, 8: 32, 11: 31}}
    p = planner(make_cfg(tmp_path, costs, **{"budget.max_trials": 3}), tmp_path / "run")
    p.run()
    ends = LedgerView.of(p.rows).last
    order = [(ends[t].seed, (ends[t].params["num_envs"], ends[t].params["num_steps_per_env"])) for t in sorted(ends)]
    assert order[3:9] == [(5, D), (5, A), (5, B), (8, D), (8, A), (8, B)]


#: D, the baseline, runs in the search (its 4th trial): from then on it ties with the leader A on seeds, and costs more.
TIED = {A: {1: 10, 5: 11, 8: 12}, B: {2: 12, 5: 13, 8: 14}, C: {3: 40}, D: {4: 30, 5: 50, 8: 40}}


@pytest.mark.parametrize(
    ("budget", "round_2"),
    [
        # after round 1, $230 leaves D's floor (1.5 x its $40 mean, + 10%) and then A's: D, the dearer, first pays both
        # (A first would leave too little for D, and the verdict on two baseline seeds)
        (230.0, [D, A]),
        # $206 cannot pay D's third seed: it is passed over for A's and B's, which it can
        (206.0, [A, B]),
    ],
)
def test_on_a_tie_the_unconfirmed_leader_then_the_dearer_side_runs_first_and_one_unpaid_is_passed_over(
    tmp_path: Path, budget: float, round_2: list
) -> None:
    over = {"budget.usd": budget, "budget.trial_usd": 60.0, "confirm.budget_share": 0.6, "budget.max_trials": 4}
    p = planner(make_cfg(tmp_path, TIED, **over), tmp_path / "run")
    p.run()
    ends = LedgerView.of(p.rows).last
    order = [(ends[t].seed, (ends[t].params["num_envs"], ends[t].params["num_steps_per_env"])) for t in sorted(ends)]
    assert order[:4] == [(1, A), (2, B), (3, C), (4, D)]  # the search, the baseline its 4th trial
    # a tie at one seed each: A, the leader, first while the confirmation has not run it (the ranking puts confirmed
    # configs first: a baseline confirmed alone would outrank it)
    assert order[4:7] == [(5, A), (5, D), (5, B)]
    assert order[7:] == [(8, k) for k in round_2]
    assert p.phase.why.startswith("budget left cannot pay another confirmation trial")


def test_confirmation_is_billed_in_the_budget_and_shown_apart(tmp_path: Path) -> None:
    # 66% of $205 kept for confirmation once A reached, trials reserved at the $60 cap + 10%: the search's $69.70
    # cannot reserve C's $66 after A and B ($22), so C, its last trial, runs capped at what is left ($47.70 / 1.1,
    # more than the best cost, $10) and costs $40. Then $7.70 is left, too little for a config that beats the best:
    # the search stops after A, B, C ($62 spent). Round 2 runs D ($50), then A and B capped at what is left; D's
    # second seed decides the verdict, and A and B have their 3 seeds: the confirmation is complete.
    over = {"budget.usd": 205.0, "budget.trial_usd": 60.0, "confirm.budget_share": 0.66}
    p = planner(make_cfg(tmp_path, BUDGETED, **over), tmp_path / "run")
    p.run()
    rows = read_rows(tmp_path / "run" / "ledger.jsonl")
    ends = LedgerView.of(rows).last
    search = sum(metrics(r).usd for r in ends.values() if r.phase == "search")
    confirmed = sum(metrics(r).usd for r in ends.values() if r.phase == "confirm")
    assert (search, confirmed) == (62.0, 129.0)  # rounds 1 and 2 of A, B, D
    assert p.phase.log == [
        (Phase.DRAINING, "search budget spent (the rest, at least 66% of $205, is kept for the confirmation)"),
        (Phase.CONFIRMATION, ""),
        (Phase.DRAINING, COMPLETE),
        (Phase.OVER, COMPLETE),
    ]
    assert [len(v) for v in by_config(rows).values()] == [3, 3, 1, 2]
    s = summary.summarize(rows)
    assert s.usd_by_phase == {"search": pytest.approx(search), "confirm": pytest.approx(confirmed)}
    assert s.total_usd == pytest.approx(search + confirmed)
    assert f"confirmation ${confirmed:.4f}" in summary.run_text(s)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{tmp_path / 'run' / 'study.db'}")
    told = [t for t in study.trials if t.user_attrs.get("phase") == "confirm"]
    assert told and all(t.state == optuna.trial.TrialState.COMPLETE for t in told)
    assert sorted(t.number for t in told) == sorted(t for t, r in ends.items() if r.phase == "confirm")


def test_a_confirmation_trial_the_budget_cannot_give_the_full_cap_starts_on_what_is_left(tmp_path: Path) -> None:
    # $242, a $70 cap: the search runs A, B, C and D (its seed 4, $50); round 1 ($55) leaves $75, less than a capped
    # trial's $77 reserve. D's two seeds have decided the verdict, so round 2 is A's and B's: A's seed starts capped at
    # $75 / 1.1, at least 1.5 x its own mean, and costs $12; B's last starts on the $63 / 1.1 left and costs $12
    over = {"budget.usd": 242.0, "budget.trial_usd": 70.0, "confirm.budget_share": 0.5}
    p = planner(make_cfg(tmp_path, BUDGETED, **over), tmp_path / "run")
    p.run()
    rows = read_rows(tmp_path / "run" / "ledger.jsonl")
    assert [len(v) for v in by_config(rows).values()] == [3, 3, 1, 2]
    assert p.phase.why.startswith("confirmation complete")  # not stopped by the budget
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{tmp_path / 'run' / 'study.db'}")
    caps = {
        t.number: t.user_attrs["trial_config"]["cap_s"] for t in study.trials if t.user_attrs.get("phase") == "confirm"
    }
    ends = LedgerView.of(rows).last
    round2 = [t for t in sorted(caps) if t >= 7]
    assert [caps[t] for t in round2] == [pytest.approx(75 / 1.1), pytest.approx(63 / 1.1)]
    assert [(ends[t].params["num_envs"], ends[t].params["num_steps_per_env"]) for t in round2] == [A, B]
    assert [ends[t].billable_s for t in round2] == [12.0, 12.0]
    total = summary.summarize(rows).total_usd
    assert total == pytest.approx(191.0) and total < 242.0


def test_the_ranking_leaves_compilation_out_of_both_sides(tmp_path: Path) -> None:
    # every trial pays 5 s of compilation: billed figures include it, the ranking and the ratio do not
    p = planner(make_cfg(tmp_path, LUCKY, compile_s=5.0), tmp_path / "run")
    p.run()
    rec = summary.summarize(p.rows).recommendation
    assert rec is not None and rec.config.race_mean == pytest.approx(15.0)
    assert rec.config.mean_usd == pytest.approx(20.0)  # billed
    # the baseline's two seeds, 23 and 25 s less 5 s each, decide the verdict: it gets no third
    assert rec.vs_baseline is not None and rec.vs_baseline.ratio == pytest.approx(15.0 / 24.0)


def test_confirmation_seeds_are_new_training_seeds_never_held_out(tmp_path: Path) -> None:
    p = planner(make_cfg(tmp_path, LUCKY), tmp_path / "run")
    p.run()
    ends = p.rows.last
    search = {r.seed for r in ends.values() if r.phase == "search"}
    rounds = sorted({r.seed for r in ends.values() if r.phase == "confirm"})
    assert rounds == [5, 8] and not search & set(rounds) and all(s < EVAL_SEED_BASE for s in rounds)
    for seed in rounds:  # a round's seed comes from the counter: seeds.training + its first trial
        first = min(t for t, r in ends.items() if r.phase == "confirm" and r.seed == seed)
        assert seed == 1 + first
    for runs in by_config(p.rows).values():  # no config trains on the same seed twice
        assert len({r.seed for r in runs}) == len(runs)


def test_the_seed_bound_counts_the_confirmation_trials(tmp_path: Path) -> None:
    near = EVAL_SEED_BASE - 4 - 5  # fits the 4 search trials, not the 9 confirmation trials
    make_cfg(tmp_path, LUCKY, **{"seeds.training": near, "confirm.seeds": 1})
    with pytest.raises(ConfigError, match=r"seeds.training: .* confirmation trials \(9\)"):
        make_cfg(tmp_path, LUCKY, **{"seeds.training": near})


def test_a_resumed_study_continues_its_confirmation(tmp_path: Path) -> None:
    costs = {k: {**v, 9: v[8]} for k, v in LUCKY.items()}  # the re-run takes a trial number: round 2 trains with 9
    cfg = make_cfg(tmp_path, costs, **{"backend_options.time_scale": 0.002})
    first = planner(cfg, tmp_path / "run")
    # Ctrl-C once the first confirmation trial has ended: the second is mid-run
    first.interrupted = lambda: any(r.phase == "confirm" and r.state == "reached" for r in first.rows)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    cut = LedgerView.of(read_rows(tmp_path / "run" / "ledger.jsonl")).last
    assert any(r.phase == "confirm" and r.state == "capped" and "Ctrl-C" in r.reason for r in cut.values())
    resumed = planner(cfg, tmp_path / "run")
    resumed.run()
    assert resumed.phase.log[0] == (Phase.CONFIRMATION, "") and resumed.phase.why.startswith("confirmation complete")

    reached = {k: [r.seed for r in v if r.state == "reached"] for k, v in by_config(resumed.rows).items()}
    # the interrupted one ran again on seed 5; the baseline's two seeds decided the verdict
    assert reached == {A: [1, 5, 9], B: [2, 5, 9], C: [3], D: [4, 5]}
    rec = summary.summarize(resumed.rows).recommendation
    assert rec is not None and rec.config.race_usd == (19.0, 20.0, 21.0)


def test_with_nothing_to_confirm_the_search_spends_the_confirmations_share_too(tmp_path: Path) -> None:
    # A, B and C never reach (capped at $60); D, the baseline, reaches for $28. Half of $300 kept for a confirmation
    # would stop the search after A and B ($30 left of its $150). With nothing to confirm the search has all of it.
    costs = {**{k: {s: 500 for s in range(1, 5)} for k in (A, B, C)}, D: {4: 28}}
    over = {"budget.usd": 300.0, "budget.trial_usd": 60.0, "confirm.budget_share": 0.5}
    p = planner(make_cfg(tmp_path, costs, **over), tmp_path / "run")
    p.run()
    assert [(r.state, metrics(r).usd) for r in LedgerView.of(p.rows).last.values()] == [
        ("capped", 60.0),
        ("capped", 60.0),
        ("capped", 60.0),
        ("reached", 28.0),
    ]
    assert [why for _, why in p.phase.log] == [
        "trial limit (4) reached",
        "no searched config other than the baseline reached the target: nothing to confirm",
    ]


def test_no_confirmation_when_nothing_reached(tmp_path: Path) -> None:
    # every seed capped at 100: nothing to confirm, and no baseline run for nothing
    costs = {k: {s: 500 for s in range(1, 5)} for k in (A, B, C, D)}
    p = planner(make_cfg(tmp_path, costs), tmp_path / "run")
    p.run()
    assert p.phase.why == "no searched config other than the baseline reached the target: nothing to confirm"
    assert [phase for phase, _ in p.phase.log] == [Phase.DRAINING, Phase.OVER]
    assert all(r.phase == "search" for r in p.rows)
