"""The run's progress: the planner's status from its ledger rows, the live view on a terminal (rendered by rich), the
plain line in a pipe or a log."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from sweep.analysis.summary import describe_params
from sweep.contract import TrialConfig
from sweep.ledger import Row, metrics
from sweep.planner.status import Best, Status, TrialStatus, best_so_far, trial_status
from sweep.report import live
from tests.planner.test_confirm import LUCKY, make_cfg
from tests.planner.test_loop import planner

CONFIG = "128 envs x 16 steps, 4 mini-batches; flags on: fused_optimizer"


def synthetic(stopping: str = "") -> Status:
    """A study at $0.40 of $1.00: one search trial raced, one confirmation trial of the baseline near its cap."""
    return Status(
        spent_usd=0.4,
        budget_usd=1.0,
        states={"running": 2, "reached": 1, "pruned": 1},
        stopping=stopping,
        best=Best(3, "64 envs x 8 steps, 4 mini-batches; no perf flags", 0.0123),
        running=(
            TrialStatus(5, CONFIG, 6, "search", False, 12, 24576, 0.734, None, 0.01, 0.05, 0.008, 0.015),
            TrialStatus(6, "64 envs x 16 steps", 7, "confirm", True, 3, 3072, None, 0.5, 0.045, 0.05, 0.04, None),
        ),
    )


def rendered(status: Status, width: int = 200) -> tuple[str, str]:
    """(plain text, text with the terminal's escape codes) of the live view, as a 200-column terminal shows it."""
    console = Console(record=True, force_terminal=True, width=width, color_system="truecolor", file=io.StringIO())
    console.print(live.live_view(status))
    return console.export_text(), console.file.getvalue()


def test_the_live_view_shows_the_budget_bar_the_best_and_each_running_trial() -> None:
    text, ansi = rendered(synthetic())
    lines = text.splitlines()
    budget = next(line for line in lines if line.startswith("budget"))
    assert "━" in budget and budget.rstrip().endswith("$0.4000 of $1 spent (40.0%)")
    bar = budget.split()[1]
    assert len(bar) == 40 and "\x1b[" in ansi  # a bar 40 cells wide, drawn in colour on a terminal
    assert "trial 3: $0.0123 to target on equal terms (64 envs x 8 steps" in text
    assert "1 pruned, 1 reached, 2 running; search" in text
    row5 = next(line for line in lines if re.match(r"│\s+5 │", line))
    cells = [c.strip() for c in row5.strip("│").split("│")]
    assert cells == ["5", "search", CONFIG, "6", "12", "0.734", "$0.0100 / $0.0500", "$0.0080 / $0.0150"]
    row6 = next(line for line in lines if re.match(r"│\s+6 │", line))
    cells = [c.strip() for c in row6.strip("│").split("│")]
    assert cells[:4] == ["6", "confirm (baseline)", "64 envs x 16 steps", "7"]
    assert cells[4:] == ["3", "< 0.500", "$0.0450 / $0.0500", "not raced"]
    assert "stopping" not in text
    assert "stopping: study budget $1 spent" in rendered(synthetic("study budget $1 spent"))[0]


def test_a_trial_near_its_cap_is_marked() -> None:
    _, ansi = rendered(synthetic())
    assert "\x1b[33m$0.0450 / $0.0500\x1b[0m" in ansi  # 90% of its cap: yellow
    assert "│ $0.0100 / $0.0500 │" in ansi  # 20% of its cap: plain


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_the_live_view_and_a_pipe_the_plain_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    progress = live.Progress(pipe)
    assert not progress.live
    progress(synthetic())
    progress(synthetic())  # the same line again: not repeated
    first = pipe.getvalue().splitlines()
    assert first == ["spent $0.4000 / $1 | 1 pruned, 1 reached, 2 running | best USD-to-target $0.0123"]
    progress(Status(0.5, 1.0, {"running": 2}, ""))  # a new line within PLAIN_EVERY_S: held back
    assert len(pipe.getvalue().splitlines()) == 1
    progress(synthetic("study budget $1 spent"))  # stopping: said at once
    assert pipe.getvalue().splitlines()[-1].endswith("| stopping: study budget $1 spent")
    progress.close()
    assert "\x1b[" not in pipe.getvalue() and "━" not in pipe.getvalue()

    screen = Terminal()
    monkeypatch.setattr("sys.stdout", io.StringIO())  # stdout is not the terminal here: no redirect
    shown = live.Progress(screen)
    assert shown.live
    shown(synthetic())
    shown.close()
    out = screen.getvalue()
    assert "running trials" in out and "$0.4000 of $1 spent (40.0%)" in out and "━" in out
    assert "spent $0.4000 / $1 |" not in out  # no plain line on a terminal


def test_the_planner_status_follows_its_ledger_rows(tmp_path: Path) -> None:
    """Every status the planner hands the display agrees with the rows it wrote: a running trial's iteration and
    spend are those of its latest row, its cap is the per-trial cap, and the best is the cheapest reached so far."""
    cfg = make_cfg(tmp_path, LUCKY, **{"confirm.seeds": 1, "budget.trial_usd": 50.0})
    p = planner(cfg, tmp_path / "run")
    seen: list[Status] = []
    p.progress = seen.append
    p.run()
    running = [t for s in seen for t in s.running]
    assert any(t.iteration > 0 for t in running), "no status showed a trial under way"
    rows = {(r.trial, r.iteration): r for r in p.rows if r.state == "running"}
    for t in running:
        assert t.cap_usd == pytest.approx(50.0) and t.phase == "search"
        if t.iteration == 0:
            assert (t.usd, t.success) == (0.0, None)
            continue
        row = rows[(t.trial, t.iteration)]
        assert t.usd == pytest.approx(metrics(row).usd) and t.env_steps == row.env_steps
        assert t.config == describe_params(row.params) and t.seed == row.seed
    assert all(type(state) is str for s in seen for state in s.states)  # 'reached', never 'TrialState.REACHED'
    assert "reached" in live.plain_line(seen[-1]) and "TrialState" not in live.plain_line(seen[-1])
    final = seen[-1]
    assert not final.running and final.spent_usd == pytest.approx(sum(metrics(r).usd for r in p.rows.last.values()))
    reached = {t: metrics(r).race_usd_to_target for t, r in p.rows.last.items() if r.state == "reached"}
    assert final.best is not None and final.best.usd == pytest.approx(min(reached.values()))
    assert reached[final.best.trial] == pytest.approx(final.best.usd)


def test_a_running_trial_before_its_first_row_and_after_a_stopped_pass() -> None:
    config = TrialConfig(seed=4, phase="confirm", baseline=True, cap_s=36.0, race_cap_s=None)
    params = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
    fresh = trial_status(7, config, params, [], 3600.0)
    assert (fresh.iteration, fresh.usd, fresh.cap_usd, fresh.race_cap_usd, fresh.success) == (0, 0.0, 36.0, None, None)
    assert fresh.baseline and fresh.phase == "confirm" and fresh.seed == 4
    row = Row(
        run_id="r",
        trial=7,
        state="running",
        params=params,
        billable_s=9.0,
        price_usd_per_hour=3600.0,
        price_label="t",
        iteration=5,
        env_steps=2560,
        phases_s={"compile": 2.0, "sim": 7.0},
        success_max=0.4,
    )
    later = trial_status(
        7, replace(config, race_cap_s=10.0), params, [row, replace(row, iteration=6, success_max=None)], 3600.0
    )
    assert (later.iteration, later.usd, later.race_usd, later.race_cap_usd) == (6, 9.0, 7.0, 10.0)
    assert later.success is None and later.success_max == 0.4  # the latest pass that said anything
    assert best_so_far([row]) is None
