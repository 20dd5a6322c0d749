"""One Summary behind the three printouts (sweep.run, sweep.trial.runner, the report's top box)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweep.analysis import summary
from sweep.ledger import Row, metrics, read_rows
from sweep.report import page as report
from sweep.trial.cli import format_summary, pass_text
from tests.report.test_report import write_run


def test_the_three_printouts_render_one_summary(tmp_path: Path) -> None:
    run_dir, rows = write_run(tmp_path)
    s = summary.summarize(read_rows(run_dir / "ledger.jsonl"))
    assert s.n_rows == len(rows) and sorted(s.trials) == [0, 1, 2, 3, 4]
    best, reached = s.recommended, read_rows(run_dir / "ledger.jsonl")[6]
    assert best is not None and best is s.trials[3] and best.usd_to_target == metrics(reached).usd_to_target
    usd = f"${best.usd_to_target:.4f}"
    assert usd in summary.run_text(s) and usd in summary.text_summary(run_dir)
    assert usd in report._card_html(s)
    printout = format_summary(s, 3, 0.9, run_dir / "ledger.jsonl")
    assert printout.splitlines()[0] == "trial 3: reached ()"
    assert f"USD to target      {usd} at test ($3600/h)" in printout and f"({len(rows)} rows)" in printout


def test_the_trial_printout_of_a_row_without_an_interval_says_so(tmp_path: Path) -> None:
    run_dir, _ = write_run(tmp_path)
    s = summary.summarize(read_rows(run_dir / "ledger.jsonl"))
    text = format_summary(s, 1, 0.9, Path("ledger.jsonl"))
    assert "held-out success   0.300 (no interval recorded, 256 episodes; target 0.9)" in text
    assert "spent              6.0 s, $6.0000 at test" in text


def test_a_pass_stopped_below_the_target_reads_as_a_bound() -> None:

    assert pass_text(0.9123, None) == "0.912"
    assert pass_text(None, 0.746).startswith("< 0.746")
    assert pass_text(None, None) == "not evaluated"
    assert pass_text(None, None, 0.125) == "skipped (training episodes' success 0.125, below target.eval_gate)"
    assert pass_text(None, None, 0.5, "on_track") == "skipped (training envs on track 0.500, below target.eval_gate)"


def test_a_config_the_confirmation_never_ran_cannot_outrank_a_confirmed_mean() -> None:
    """Found on an H200: 16384 x 12 with one search seed at $0.0343 was recommended over 8192 x 12 confirmed on 3
    seeds (mean $0.0348); a lone seed is the lucky draw the confirmation exists to rule out."""
    from sweep.analysis.summary import summarize
    from sweep.ledger import Row

    def end(trial: int, num_envs: int, seed: int, seconds: float, phase: str) -> Row:
        params = {"num_envs": num_envs, "num_steps_per_env": 12, "num_mini_batches": 4}
        return Row(
            run_id="r",
            trial=trial,
            state="reached",
            params=params,
            iteration=10,
            env_steps=1000,
            billable_s=seconds,
            phases_s={"sim": seconds},
            price_usd_per_hour=3600.0,
            price_label="t",
            success=0.95,
            success_lo=0.9,
            success_hi=0.97,
            eval_episodes=256,
            seed=seed,
            phase=phase,
        )

    rows = [end(0, 8192, 1, 30.3, "search"), end(1, 16384, 2, 34.3 - 0.5, "search")]
    rows += [end(2, 8192, 3, 36.6, "confirm"), end(3, 8192, 4, 37.4, "confirm")]
    best = summarize(rows).recommendation
    assert best.config.params["num_envs"] == 8192 and best.config.n_seeds == 3


def test_an_interval_of_costs_does_not_reach_below_zero() -> None:
    import pytest

    from sweep.analysis.evidence import _t_interval

    mean, lo, hi = _t_interval((0.0023, 0.0035))  # two seeds: t(1) = 12.7 makes the plain interval negative
    assert lo == 0.0 and mean == pytest.approx(0.0029) and hi > mean


def ledger_row(trial: int, iteration: int, state: str, billable_s: float, cause: Any = None) -> Row:
    """A row of trial ``trial`` (128 x (trial + 1) envs, 24 steps, $1 a billable second) at ``iteration``."""
    return Row(
        run_id="r",
        trial=trial,
        state=state,
        params={"num_envs": 128 * (trial + 1), "num_steps_per_env": 24, "num_mini_batches": 4},
        iteration=iteration,
        env_steps=iteration * 128 * 24,
        billable_s=billable_s,
        phases_s={"sim": billable_s},
        price_usd_per_hour=3600.0,
        price_label="t",
        success=0.95 if state == "reached" else 0.5,
        success_lo=0.9,
        success_hi=0.97,
        eval_episodes=256,
        seed=trial + 1,
        cause=cause,
    )


def test_a_ranking_of_trials_that_all_reached_at_their_first_checkpoint_says_how_coarse_it_is() -> None:
    """Seen on 2 cores: 12 of 15 trials reached the target at their first pass, so their costs to target were one
    round's each, and the recommendation ranked round costs, not learning."""
    from sweep.analysis.summary import run_text, summarize
    from sweep.report.page import _card_html

    def row(trial: int, iteration: int, state: str) -> Row:
        return ledger_row(trial, iteration, state, float(iteration + trial))

    def trial(t: int, checkpoints: int) -> list[Row]:
        running = [row(t, 10 * (k + 1), "running") for k in range(checkpoints)]
        return [*running, row(t, 10 * checkpoints, "reached")]

    coarse = [*trial(0, 1), *trial(1, 1), *trial(2, 2)]
    s = summarize(coarse)
    assert s.reached_first == 2
    assert "note: 2 of 3 reached trials reached the target at their first checkpoint" in run_text(s)
    assert "target.eval_every_steps" in _card_html(s)
    fine = [*trial(0, 1), *trial(1, 3), *trial(2, 2)]
    assert summarize(fine).reached_first == 1 and "note:" not in run_text(summarize(fine))


def test_trials_the_study_stopped_itself_are_billed_and_told_apart() -> None:
    """A run split into pieces (each ended by SIGINT, then resumed) loses what its cut trials spent: the printout
    says how much, apart from the trials' own ends."""
    from sweep.analysis.summary import run_text, summarize
    from sweep.record import EndCause

    def end(trial: int, state: str, cause: EndCause, billable_s: float) -> Row:
        return ledger_row(trial, 10, state, billable_s, cause)

    rows = [
        end(0, "reached", EndCause.REACHED, 30.0),
        end(1, "capped", EndCause.STUDY_END, 10.0),  # a piece's end
        end(2, "failed", EndCause.DRIVER_STOPPED, 5.0),  # a dead driver's orphan
        end(3, "capped", EndCause.RACE_CAP, 15.0),  # its config's own end: not cut short
    ]
    s = summarize(rows)
    assert s.cut_short == (2, 15.0) and s.total_usd == 60.0
    assert "cut short: 2 trials stopped by the study itself (a stop signal, a run's piece ending, a dead driver), " \
        "$15.0000, 25.0% of the study's spend" in run_text(s)  # fmt: skip
    own = summarize([rows[0], rows[3]])
    assert own.cut_short == (0, 0.0) and "cut short" not in run_text(own)


def test_the_printout_says_when_the_run_folder_no_longer_holds_the_recommended_checkpoint(tmp_path: Path) -> None:
    run_dir, _ = write_run(tmp_path)  # trial 3 reached; its checkpoint file was never written
    ledger = run_dir / "ledger.jsonl"
    s = summary.summarize(read_rows(ledger))
    missing = "checkpoint trials/0003/checkpoint.pt, not in this run folder (copied without checkpoints, or deleted)"
    assert missing in summary.run_text(s, ledger)
    (run_dir / "trials" / "0003").mkdir(parents=True)
    (run_dir / "trials" / "0003" / "checkpoint.pt").write_bytes(b"")
    lines = summary.run_text(s, ledger).splitlines()
    assert any(line.endswith("; checkpoint trials/0003/checkpoint.pt") for line in lines), lines


def test_a_resumed_piece_reports_the_start_up_and_compilation_its_fresh_workers_paid_again() -> None:
    """Each piece after the first starts its workers afresh: the first trial of each pays the scene's start-up and
    the simulator's kernel compilation again (Warp compiles in every new process); a warm worker's trial pays none."""
    from dataclasses import replace

    def piece_1(trial: int, fresh: bool, startup_s: float, compile_s: float) -> Row:
        row = ledger_row(trial, 10, "reached", 100.0)
        phases = {"startup": startup_s, "compile": compile_s, "sim": 100.0 - startup_s - compile_s}
        return replace(row, piece=1, fresh_worker=fresh, phases_s=phases)

    rows = [ledger_row(0, 10, "reached", 100.0), piece_1(1, True, 20.0, 30.0), piece_1(2, False, 2.0, 0.0)]
    s = summary.summarize(rows)
    assert s.restarts is not None and (s.restarts.pieces, s.restarts.trials, s.restarts.one_time_s) == (1, 1, 50.0)
    assert "resumed: 1 time; start-up and compilation paid again by the first trial of each fresh worker: 1 trial, " \
        "50.0 s, $50.0000, 16.7% of the study's spend" in summary.run_text(s)  # fmt: skip
