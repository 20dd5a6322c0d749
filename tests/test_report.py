"""Report tables equal the ledger's numbers; the HTML opens offline in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sweep import report, summary
from sweep.ledger import LedgerWriter, metrics, read_rows
from tests.test_scheduler import row


def write_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    rows = [
        row(0, 5, 0.4),
        row(0, 10, 0.95, "reached"),
        row(1, 4, 0.2),
        row(1, 6, 0.3, "pruned"),
        row(2, 3, None, "failed"),
        row(3, 4, 0.5),
        row(3, 8, 0.91, "reached"),
        row(4, 12, 0.6, "capped"),
    ]
    for r in rows:
        r.update(
            run_id="t",
            params={"num_envs": 64 * (r["trial"] + 1), "num_steps_per_env": 24, "flag.x": True},
            reason="",
            success_lo=None,
            success_hi=None,
            eval_episodes=256,
            price_label="test",
            checkpoint=f"trials/{r['trial']:04d}/checkpoint.pt" if r["state"] == "reached" else "",
        )
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(r)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"usd": 50.0}, "target": {"success": 0.9}}))
    return run_dir, rows


def test_tables_equal_numbers_recomputed_from_the_ledger(tmp_path: Path) -> None:
    _, rows = write_run(tmp_path)
    trials = report.trials_table(rows).set_index("trial")
    assert list(trials["state"]) == ["reached", "pruned", "failed", "reached", "capped"]
    assert trials.loc[1, "usd"] == pytest.approx(6.0)  # pruned spend counted
    assert trials.loc[2, "usd"] == pytest.approx(3.0)  # failed spend counted
    assert trials.loc[3, "usd_to_target"] == pytest.approx(metrics(rows[6])["usd_to_target"])
    card = summary.summarize(rows)
    assert card.total_usd == pytest.approx(10 + 6 + 3 + 8 + 12)
    assert card.pruned_failed_share == pytest.approx(9 / 39)
    assert card.recommended is not None and card.recommended.trial == 3
    assert card.trials_by_state == {"reached": 2, "pruned": 1, "failed": 1, "capped": 1}
    burn = report.burn_table(rows, 50.0)
    assert burn["spent_usd"].iloc[-1] == pytest.approx(39.0)
    assert burn["left_usd"].iloc[-1] == pytest.approx(11.0)
    curves = report.curves_table(rows)
    assert len(curves) == sum(r["success"] is not None for r in rows)


def test_dollars_per_reaching_checkpoint_and_the_winners_checkpoint_are_shown(tmp_path: Path) -> None:
    run_dir, rows = write_run(tmp_path)
    card = summary.summarize(rows)
    assert card.usd_per_reached == pytest.approx(39.0 / 2) and card.reached_trials == 2
    rec = card.recommended
    assert rec is not None and rec.usd_to_target == pytest.approx(8.0) and rec.checkpoint == "trials/0003/checkpoint.pt"
    trials = report.trials_table(rows).set_index("trial")
    assert trials.loc[0, "checkpoint"] == "trials/0000/checkpoint.pt" and trials["checkpoint"].isna().sum() == 3
    html = report.write(run_dir).read_text()
    assert '<a href="trials/0003/checkpoint.pt">' in html and "$19.5000" in html
    text = summary.text_summary(run_dir)
    assert "per target-reaching checkpoint $19.5000 (2 trials reached the target)" in text
    assert "checkpoint trials/0003/checkpoint.pt" in text


def test_configs_told_without_running_are_counted_apart_from_pruned_ones(tmp_path: Path) -> None:
    _, rows = write_run(tmp_path)
    rows.append({**rows[3], "trial": 5, "billable_s": 0.0, "phases_s": {}, "env_steps": 0, "success": None})
    card = summary.summarize(rows)
    assert card.trials_by_state["not run"] == 1 and card.trials_by_state["pruned"] == 1
    assert report.trials_table(rows).set_index("trial").loc[5, "state"] == "not run"
    assert card.total_usd == pytest.approx(39.0)


def test_report_is_one_self_contained_file(tmp_path: Path) -> None:
    run_dir, _ = write_run(tmp_path)
    html = report.write(run_dir).read_text()
    assert not re.search(r"<script[^>]+src=\"http", html)
    assert "Plotly.newPlot" in html and "sortTable" in html


def test_a_torn_last_ledger_line_never_crashes_the_report(tmp_path: Path, capsys) -> None:
    run_dir, rows = write_run(tmp_path)
    with open(run_dir / "ledger.jsonl", "a") as f:
        f.write('{"run_id": "t", "trial": 9, "state": "runn')  # power cut mid-write
    html = report.write(run_dir).read_text()
    assert "Plotly.newPlot" in html and "torn line" in capsys.readouterr().err
    assert len(report.trials_table(read_rows(run_dir / "ledger.jsonl"))) == len({r["trial"] for r in rows})


def test_a_long_failure_reason_is_shortened_in_the_table_and_kept_whole_in_the_ledger(tmp_path: Path) -> None:
    run_dir, _ = write_run(tmp_path)
    reason = "ActorDiedError: " + "the actor died unexpectedly before finishing this task; " * 8
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append({**read_rows(run_dir / "ledger.jsonl")[4], "trial": 9, "reason": reason})
    assert read_rows(run_dir / "ledger.jsonl")[-1]["reason"] == reason
    html = report.write(run_dir).read_text()
    cell = re.search(r'<td title="([^"]*)">([^<]*)</td>', html)
    assert cell and cell.group(1) == reason and len(cell.group(2)) == report.REASON_CHARS
    assert reason not in html.replace(f'title="{reason}"', "")  # shown whole only on hover


def test_with_no_trial_at_the_target_the_summary_names_the_closest_and_the_key_to_change(tmp_path: Path) -> None:
    rows = [row(0, 5, 0.4), row(0, 9, 0.62), row(0, 12, 0.6, "capped"), row(1, 4, 0.3), row(1, 6, 0.35, "pruned")]
    for r in rows:
        r.update(
            run_id="t",
            params={"num_envs": 64 * (r["trial"] + 1), "num_steps_per_env": 24},
            reason="",
            success_lo=None,
            success_hi=None,
            eval_episodes=256,
            price_label="test",
        )
    rows[2]["reason"] = "per-trial cap of 12 billable seconds reached"
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(r)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"usd": 50.0}, "target": {"success": 0.9}}))
    near = summary.summarize(rows).closest
    assert near is not None and (near.trial, near.success, near.state) == (0, 0.62, "capped")
    assert near.usd == pytest.approx(12)
    text = summary.text_summary(run_dir)
    assert "no trial reached the target; closest: trial 0 (64 envs x 24 steps" in text
    assert "held-out success 0.620, capped after $12.0000" in text and "budget.trial_usd" in text
    assert "closest: trial 0" in report.write(run_dir).read_text()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed")
def test_report_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    run_dir, rows = write_run(tmp_path)
    page = report.write(run_dir)
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = proc.stdout
    pareto = dom[dom.index('id="fig-pareto"') :]
    pareto = pareto[: pareto.index("</section>")]
    assert "main-svg" in pareto, "plotly did not render the Pareto chart"
    trials = len({r["trial"] for r in rows})
    assert len(re.findall(r'class="point"', pareto)) == trials  # one marker per trial
    console_errors = [line for line in proc.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert not console_errors, console_errors
