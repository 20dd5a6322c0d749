"""Report tables equal the ledger's numbers; the HTML opens offline in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweep.analysis import evidence, summary
from sweep.ledger import LedgerWriter, Row, metrics, read_rows
from sweep.report import page as report
from tests.planner.test_scheduler import line as row


def typed(lines: list[dict]) -> list[Row]:
    """The lines as the ledger's reader reads them."""
    return [Row.of(line) for line in lines]


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
            gpu=f"host-a:{r['trial'] % 2}",
        )
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(Row.of(r))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"usd": 50.0}, "target": {"success": 0.9}}))
    return run_dir, rows


def test_tables_equal_numbers_recomputed_from_the_ledger(tmp_path: Path) -> None:
    _, rows = write_run(tmp_path)
    trials = report.trials_table(typed(rows)).set_index("trial")
    assert list(trials["state"]) == ["reached", "pruned", "failed", "reached", "capped"]
    assert trials.loc[1, "usd"] == pytest.approx(6.0)  # pruned spend counted
    assert trials.loc[2, "usd"] == pytest.approx(3.0)  # failed spend counted
    assert trials.loc[3, "usd_to_target"] == pytest.approx(metrics(Row.of(rows[6])).usd_to_target)
    card = summary.summarize(typed(rows))
    assert card.total_usd == pytest.approx(10 + 6 + 3 + 8 + 12)
    assert card.pruned_failed_share == pytest.approx(9 / 39)
    assert card.recommended is not None and card.recommended.trial == 3
    assert card.trials_by_state == {"reached": 2, "pruned": 1, "failed": 1, "capped": 1}
    assert list(trials["gpu"]) == ["host-a:0", "host-a:1", "host-a:0", "host-a:1", "host-a:0"]  # where each ran
    page = report.render(tmp_path / "run", typed(rows))
    assert ">gpu</th>" in page and "<td>host-a:1</td>" in page
    burn = report.burn_table(typed(rows), 50.0)
    assert burn["spent_usd"].iloc[-1] == pytest.approx(39.0)
    assert burn["left_usd"].iloc[-1] == pytest.approx(11.0)
    curves = report.curves_table(typed(rows))
    assert len(curves) == sum(r["success"] is not None for r in rows)


def test_dollars_per_reaching_checkpoint_and_the_winners_checkpoint_are_shown(tmp_path: Path) -> None:
    run_dir, rows = write_run(tmp_path)
    card = summary.summarize(typed(rows))
    assert card.usd_per_reached == pytest.approx(39.0 / 2) and card.reached_trials == 2
    rec = card.recommended
    assert rec is not None and rec.usd_to_target == pytest.approx(8.0) and rec.checkpoint == "trials/0003/checkpoint.pt"
    trials = report.trials_table(typed(rows)).set_index("trial")
    assert trials.loc[0, "checkpoint"] == "trials/0000/checkpoint.pt" and trials["checkpoint"].isna().sum() == 3
    html = report.write(run_dir).read_text()
    assert '<a href="trials/0003/checkpoint.pt">' in html and "$19.5000" in html
    text = summary.text_summary(run_dir)
    assert "per target-reaching checkpoint $19.5000 (2 trials reached the target)" in text
    assert "checkpoint trials/0003/checkpoint.pt" in text


def test_configs_told_without_running_are_counted_apart_from_pruned_ones(tmp_path: Path) -> None:
    _, rows = write_run(tmp_path)
    rows.append({**rows[3], "trial": 5, "billable_s": 0.0, "phases_s": {}, "env_steps": 0, "success": None})
    card = summary.summarize(typed(rows))
    assert card.trials_by_state["not run"] == 1 and card.trials_by_state["pruned"] == 1
    assert report.trials_table(typed(rows)).set_index("trial").loc[5, "state"] == "not run"
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
        w.append(Row.of({**read_rows(run_dir / "ledger.jsonl")[4].as_json(), "trial": 9, "reason": reason}))
    assert read_rows(run_dir / "ledger.jsonl")[-1].reason == reason
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
            w.append(Row.of(r))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"usd": 50.0}, "target": {"success": 0.9}}))
    near = summary.summarize(typed(rows)).closest
    assert near is not None and (near.trial, near.success, near.state) == (0, 0.62, "capped")
    assert near.usd == pytest.approx(12)
    text = summary.text_summary(run_dir)
    assert "no trial reached the target; closest: trial 0 (64 envs x 24 steps" in text
    assert "held-out success 0.620, capped after $12.0000" in text and "budget.trial_usd" in text
    assert "closest: trial 0" in report.write(run_dir).read_text()


def seeded(trial: int, usd: float, state: str, seed: int, envs: int = 64, steps: int = 24, **flags: object) -> dict:
    """An end row of one seed of a config (USD = billable seconds at the test price)."""
    r = row(trial, usd, 0.95 if state == "reached" else 0.5, state)
    r.update(
        seed=seed, params={"num_envs": envs, "num_steps_per_env": steps, **{f"flags.{k}": v for k, v in flags.items()}}
    )
    return r


def test_seeds_of_one_config_give_its_mean_usd_to_target_with_a_t_interval() -> None:
    rows = [
        seeded(0, 8.0, "reached", seed=1),
        seeded(1, 10.0, "reached", seed=2),
        seeded(2, 12.0, "reached", seed=3),
        seeded(3, 30.0, "pruned", seed=4),
        seeded(4, 5.0, "reached", seed=5, steps=12),
        seeded(5, 7.0, "reached", seed=6, fused_optimizer=True),  # same knobs, other flags: another config
        seeded(6, 9.0, "failed", seed=7, envs=128, steps=12),
        {**seeded(7, 0.0, "pruned", seed=0, steps=12), "phases_s": {}},  # told without running: not a seed
    ]
    stats = evidence.config_stats(typed(rows))
    assert [c.trials for c in stats] == [(4,), (5,), (0, 1, 2, 3), (6,)]  # cheapest first, none reached last
    single, flagged, three, none = stats
    assert (single.n_seeds, single.n_reached, single.mean_usd, single.lo, single.hi) == (1, 1, 5.0, 5.0, 5.0)
    assert flagged.key != three.key and flagged.mean_usd == 7.0
    assert (three.n_seeds, three.n_reached, three.seeds, three.reached_seeds) == (4, 3, (1, 2, 3, 4), (1, 2, 3))
    half = 4.302653 * 2.0 / 3**0.5  # t(0.975, 2 df) x sd 2 / sqrt(3 seeds)
    assert three.mean_usd == pytest.approx(10.0) and three.usd_to_target == (8.0, 10.0, 12.0)
    assert (three.lo, three.hi) == (pytest.approx(10.0 - half), pytest.approx(10.0 + half))
    assert (none.n_seeds, none.n_reached, none.mean_usd, none.lo) == (1, 0, None, None)
    cells = report.config_map_table(stats).set_index(["num_envs", "num_steps_per_env"])
    assert cells.loc[(64, 24), "mean_usd"] == pytest.approx(7.0)  # the cell's cheapest config
    assert cells.loc[(64, 24), "label"] == "$7.0000 (n=1)" and cells.loc[(64, 24), "configs"] == 2
    assert cells.loc[(64, 12), "label"] == "$5.0000 (n=1)"
    assert pd.isna(cells.loc[(128, 12), "mean_usd"]) and cells.loc[(128, 12), "label"] == "none reached (1 trial)"
    assert pd.isna(cells.loc[(128, 24), "mean_usd"]) and cells.loc[(128, 24), "label"] == "not run"


def test_a_flag_the_catalog_no_longer_has_keeps_its_config_apart_instead_of_failing_the_report() -> None:
    old = [seeded(0, 8.0, "reached", 1), seeded(1, 9.0, "reached", 2), seeded(2, 7.0, "reached", 3)]
    old[0]["params"]["flag.retired"] = True
    old[1]["params"]["flag.retired"] = True
    stats = evidence.config_stats(typed(old))
    assert [c.trials for c in stats] == [(2,), (0, 1)] and stats[1].key[0] == "as recorded"


def test_the_t_quantile_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 30, 31, 45, 200, 10_000):
        assert evidence.t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=5e-6)


def test_the_report_shows_seeds_per_config_as_error_bars_and_a_map(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    rows = [seeded(0, 8.0, "reached", 1), seeded(1, 12.0, "reached", 2), seeded(2, 5.0, "reached", 3, steps=12)]
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(Row.of({**r, "run_id": "t", "price_label": "test", "eval_episodes": 256}))
    figs = dict(report.figures(run_dir, read_rows(run_dir / "ledger.jsonl")))
    means, seeds = figs["seeds"].data
    assert list(means.y) == [5.0, 10.0] and list(means.text) == ["n=1", "n=2"]
    half = 12.706205 * 8**0.5 / 2**0.5
    assert list(means.error_y.array) == [0.0, pytest.approx(half)]
    assert list(seeds.text) == ["2", "0", "1"] and list(seeds.y) == [5.0, 8.0, 12.0]
    heat = figs["map"].data[0]
    assert heat.zmin == 0.0 and [list(line) for line in heat.z] == [[5.0, 10.0]]
    html = report.write(run_dir).read_text()
    assert 'id="fig-seeds"' in html and 'id="fig-map"' in html


def test_the_legend_names_the_state_when_only_one_state_is_present(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in (seeded(0, 8.0, "reached", 1), seeded(1, 9.0, "reached", 2, steps=12)):
            w.append(Row.of({**r, "run_id": "t", "price_label": "test", "eval_episodes": 256}))
    figs = dict(report.figures(run_dir, read_rows(run_dir / "ledger.jsonl")))
    assert [t.name for t in figs["pareto"].data] == ["reached"]
    assert figs["pareto"].layout.showlegend is True and figs["pareto"].layout.legend.title.text == "state"
    for name, fig in figs.items():
        if name != "map":  # the map's colour bar is its legend
            assert fig.layout.showlegend is True, name
            assert all(t.name for t in fig.data), name


def test_every_marker_of_a_per_trial_chart_carries_its_trial_number(tmp_path: Path) -> None:
    run_dir, rows = write_run(tmp_path)
    with LedgerWriter(run_dir / "ledger.jsonl") as w:  # a second price, so that the wall-clock chart is drawn
        w.append(Row.of({**rows[1], "trial": 5, "price_usd_per_hour": 7200.0}))
    figs = dict(report.figures(run_dir, read_rows(run_dir / "ledger.jsonl")))
    labelled = 0
    for trace in figs["pareto"].data:
        trials = [int(t) for t in trace.text]
        assert [h.split("<br>")[0] for h in trace.hovertext] == [f"trial: {t}" for t in trials]
        labelled += len(trials)
    assert labelled == 6
    wall = figs["wall"].data[0]
    assert list(wall.text) == ["0", "3", "5"] and list(wall.hovertext) == ["trial 0", "trial 3", "trial 5"]
    for trace in figs["success"].data:
        assert set(trace.hovertext) == {trace.name} and trace.text[-1] == trace.name.removeprefix("trial ")
    assert list(figs["phases"].data[0].x) == ["0", "1", "2", "3", "4", "5"]


def test_quantity_axes_start_at_zero_so_a_small_spread_does_not_fill_them(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:  # throughput 100.0k vs 100.2k, USD 10.00 vs 10.02
        for trial, steps, usd in ((0, 1_000_000, 10.0), (1, 1_002_000, 10.02)):
            r = seeded(trial, usd, "reached", trial, steps=12 + trial)
            w.append(Row.of({**r, "env_steps": steps, "phases_s": {"sim": 10.0}, "price_label": "test", "run_id": "t"}))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"usd": 50.0}, "target": {"success": 0.9}}))
    figs = dict(report.figures(run_dir, read_rows(run_dir / "ledger.jsonl")))
    assert list(figs["pareto"].data[0].x) == [100_000.0, 100_200.0]
    quantities = {"USD", "USD to target", "seconds", "env steps / training second", "minutes since the first row"}
    checked = 0
    for name, fig in figs.items():
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            if axis.title.text in quantities:
                assert axis.rangemode == "tozero", (name, axis.title.text)
                checked += 1
    assert checked == 7  # pareto 2, seeds 1, phases 1, success 1, burn 2; and the map's colours:
    assert figs["map"].data[0].zmin == 0.0
    assert figs["success"].layout.yaxis.range == (0.0, 1.05)


def study_end(
    trial: int, billable_s: float, one_time_s: float, state: str, seed: int, envs: int, phase: str, baseline: bool
) -> dict:
    """An end row of a confirmation study: ``one_time_s`` of its billable seconds are compilation (left out on equal
    terms); USD = billable seconds at the test price ($1 a second)."""
    r = row(trial, billable_s, 0.95 if state == "reached" else 0.5, state)
    r.update(
        run_id="t",
        seed=seed,
        phase=phase,
        baseline=baseline,
        params={"num_envs": envs, "num_steps_per_env": 24, "num_mini_batches": 4},
        phases_s={"sim": billable_s - one_time_s, "compile": one_time_s},
        reason="",
        success_lo=0.9,
        success_hi=0.97,
        eval_episodes=256,
        price_label="test",
    )
    return r


def confirmed_study(baseline_state: str = "reached") -> list[dict]:
    """A search of 3 configs, then 128 envs confirmed on 2 more seeds beside the baseline (512 envs) on those seeds."""
    return [
        study_end(0, 10.0, 2.0, "reached", 1, 128, "search", False),
        study_end(1, 6.0, 1.0, "pruned", 2, 256, "search", False),
        study_end(2, 3.0, 1.0, "failed", 3, 64, "search", False),
        study_end(3, 12.0, 2.0, "reached", 5, 128, "confirm", False),
        study_end(4, 25.0, 2.0, baseline_state, 5, 512, "confirm", True),
        study_end(5, 11.0, 3.0, "reached", 8, 128, "confirm", False),
        study_end(6, 24.0, 3.0, baseline_state, 8, 512, "confirm", True),
    ]


def recomputed_payback(rows: list[dict], envs: int, baseline_envs: int) -> dict[str, float]:
    """The decision's figures straight from the rows, without sweep's code: each config's mean USD to target on equal
    terms (billable seconds less start-up and compilation, x price), the study's billed spend, and the payback."""
    ends = {r["trial"]: r for r in rows}  # one row per trial here: its end

    def equal_terms(r: dict) -> float:
        seconds = r["billable_s"] - r["phases_s"].get("startup", 0.0) - r["phases_s"].get("compile", 0.0)
        return seconds * r["price_usd_per_hour"] / 3600.0

    def seeds(n: int) -> list[float]:
        return [equal_terms(r) for r in ends.values() if r["params"]["num_envs"] == n and r["state"] == "reached"]

    rec, base = seeds(envs), seeds(baseline_envs)
    study = sum(r["billable_s"] * r["price_usd_per_hour"] / 3600.0 for r in ends.values())
    rec_mean, base_mean = sum(rec) / len(rec), sum(base) / len(base)
    sd = (sum((x - rec_mean) ** 2 for x in rec) / (len(rec) - 1)) ** 0.5
    half = 4.302653 * sd / len(rec) ** 0.5  # t(0.975) with 2 degrees of freedom
    return {
        "rec_mean": rec_mean,
        "rec_lo": rec_mean - half,
        "rec_hi": rec_mean + half,
        "base_mean": base_mean,
        "ratio": rec_mean / base_mean,
        "study": study,
        "study_in_baseline_runs": study / base_mean,
        "saving": base_mean - rec_mean,
        "runs_to_pay_back": study / (base_mean - rec_mean),
    }


def card_text(page: str) -> str:
    """The report's top card as a reader sees it: tags dropped, entities decoded, one line per block."""
    import html as html_mod

    card = page[page.index('<div class="card">') : page.index("<h2>All trials</h2>")]
    card = card[: card.index("<section")] if "<section" in card else card
    text = re.sub(r"<(p|li|div|ul)[^>]*>", "\n", card)
    return html_mod.unescape(re.sub(r"<[^>]+>", "", text))


def confirmed_run(tmp_path: Path) -> tuple[list[dict], Path]:
    """:func:`confirmed_study`'s rows, and a run folder whose ledger holds them."""
    rows, run_dir = confirmed_study(), tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in rows:
            w.append(Row.of(r))
    return rows, run_dir


def test_the_card_leads_with_the_decision_and_its_figures_equal_the_ledgers(tmp_path: Path) -> None:
    rows, run_dir = confirmed_run(tmp_path)
    want = recomputed_payback(rows, 128, 512)
    assert want["rec_mean"] != pytest.approx(sum(r["billable_s"] for r in rows if r["trial"] in (0, 3, 5)) / 3)

    pay = summary.summarize(typed(rows)).payback  # the data the card is built from
    assert pay is not None and pay.compared and pay.note == ""
    assert pay.study_usd == pytest.approx(want["study"])
    assert pay.recommended_mean_usd == pytest.approx(want["rec_mean"])
    assert pay.baseline_mean_usd == pytest.approx(want["base_mean"])
    assert pay.study_in_baseline_runs == pytest.approx(want["study_in_baseline_runs"])
    assert pay.saving_per_run_usd == pytest.approx(want["saving"])
    assert pay.runs_to_pay_back == pytest.approx(want["runs_to_pay_back"])

    text = card_text(report.write(run_dir).read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines[:4]] == ["Use", "Cost to target", "Study cost", "Payback"]
    assert lines[0] == "Use: 128 envs x 24 steps, 4 mini-batches; no perf flags"
    number = r"([0-9]+\.[0-9]+)"
    cost = re.fullmatch(
        rf"Cost to target: mean \${number} per training run on equal terms \(95% CI \${number}-\${number}\) over 3 "
        rf"seeds; {number}x the baseline's mean \${number} over 2 seeds \(95% CI {number}-{number}; baseline: 512 "
        r"envs x 24 steps, 4 mini-batches; no perf flags\)",
        lines[1],
    )
    assert cost, lines[1]
    mean, lo, hi, ratio, base, ratio_lo, ratio_hi = map(float, cost.groups())
    assert mean == pytest.approx(want["rec_mean"], abs=5e-5) and base == pytest.approx(want["base_mean"], abs=5e-5)
    assert (lo, hi) == (pytest.approx(want["rec_lo"], abs=5e-5), pytest.approx(want["rec_hi"], abs=5e-5))
    assert ratio == pytest.approx(want["ratio"], abs=5e-3) and ratio_lo < ratio < ratio_hi
    study = re.fullmatch(
        rf"Study cost: \${number}, {number} baseline training runs \(search \${number}, confirmation \${number}; "
        rf"{number}% on pruned and failed trials\)",
        lines[2],
    )
    assert study, lines[2]
    spent, in_runs, search, confirmation, share = map(float, study.groups())
    assert spent == pytest.approx(want["study"], abs=5e-5) and spent == pytest.approx(search + confirmation, abs=1e-4)
    assert in_runs == pytest.approx(want["study_in_baseline_runs"], abs=0.05)
    assert share == pytest.approx(100 * (6.0 + 3.0) / want["study"], abs=0.05)
    payback = re.fullmatch(
        rf"Payback: saves \${number} per training run on equal terms; the study pays for itself after {number} "
        r"training runs",
        lines[3],
    )
    assert payback, lines[3]
    assert float(payback.group(1)) == pytest.approx(want["saving"], abs=5e-5)
    assert float(payback.group(2)) == pytest.approx(want["runs_to_pay_back"], abs=0.05)

    sentences = [s.strip() for s in re.split(r"[.;]\s|\n", text) if len(s.strip()) > 12]
    repeated = {s for s in sentences if sentences.count(s) > 1}
    assert not repeated, repeated  # no sentence said twice
    assert text.count("128 envs x 24 steps") == 1

    printout = summary.text_summary(run_dir).splitlines()
    assert printout[:4] == [line[0].lower() + line[1:] for line in lines[:4]]  # the same decision, first


def test_for_isaac_lab_the_decision_names_the_trainer_line_of_recommended_yaml(tmp_path: Path) -> None:
    from sweep.report import export

    rows, run_dir = confirmed_run(tmp_path)
    command = "./isaaclab.sh -p scripts/reinforcement_learning/rsl_rl/train.py --task Isaac-Velocity agent.x=1"
    best = summary.summarize(typed(rows)).recommended.trial
    for trial, shown in ((best + 1, False), (best, True)):  # a file left from another recommendation is not quoted
        doc = {"task": {"backend": "isaaclab"}, "evidence": {"trial": trial}, "isaaclab": {"command": command}}
        (run_dir / "recommended.yaml").write_text(yaml.safe_dump(doc))
        lines = [line.strip() for line in card_text(report.write(run_dir).read_text()).splitlines() if line.strip()]
        assert (lines[1] == f"Isaac Lab trainer: {command}") is shown, lines[:3]
    trainer = export.trainer_command(run_dir, best)
    assert trainer == command
    printout = summary.run_text(summary.summarize(typed(rows)), trainer=trainer).splitlines()
    assert printout[:2] == [lines[0][0].lower() + lines[0][1:], f"Isaac Lab trainer: {command}"]


def test_recommended_yaml_carries_the_payback(tmp_path: Path) -> None:
    from sweep.report import export

    rows = confirmed_study()
    want = recomputed_payback(rows, 128, 512)
    doc = export.seeds_evidence(summary.summarize(typed(rows)))["payback"]
    assert doc["study_usd"] == pytest.approx(want["study"])
    assert doc["study_in_baseline_runs"] == pytest.approx(want["study_in_baseline_runs"])
    assert doc["saving_per_run_usd"] == pytest.approx(want["saving"])
    assert doc["runs_to_pay_back"] == pytest.approx(want["runs_to_pay_back"])
    assert doc["note"] is None and doc["baseline_mean_is_lower_bound"] is False and "equal terms" in doc["rule"]
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_without_a_baseline_that_reached_the_card_says_so_instead_of_the_payback(tmp_path: Path) -> None:
    unreached = confirmed_study(baseline_state="capped")
    for r in unreached:
        if r["baseline"]:
            r["reason"] = "per-trial cap of 25 billable seconds reached"
    no_baseline = [r for r in confirmed_study() if not r["baseline"]]
    cases = [
        (unreached, "no baseline comparison: the baseline ran 2 trials and none reached the target"),
        (no_baseline, "no baseline comparison: the baseline was not run"),
    ]
    for rows, note in cases:
        s = summary.summarize(typed(rows))
        pay = s.payback
        assert pay is not None and not pay.compared and pay.note.startswith(note)
        assert (pay.study_in_baseline_runs, pay.saving_per_run_usd, pay.runs_to_pay_back) == (None, None, None)
        lines = [line.strip() for line in card_text(report.render(tmp_path, typed(rows))).splitlines() if line.strip()]
        assert lines[3].startswith(f"Payback: {note}") and "x the baseline" not in lines[1]
        assert "baseline training runs" not in lines[2]
        doc = __import__("sweep.report.export", fromlist=["x"]).seeds_evidence(s)["payback"]
        assert doc["runs_to_pay_back"] is None and doc["saving_per_run_usd"] is None and doc["note"] == pay.note


def test_a_recommendation_that_is_the_baseline_saves_nothing() -> None:
    rows = [r for r in confirmed_study() if r["params"]["num_envs"] != 128]
    s = summary.summarize(typed(rows))
    pay = s.payback
    assert s.recommendation is not None and s.recommendation.is_baseline
    assert pay is not None and pay.saving_per_run_usd == 0.0 and pay.runs_to_pay_back is None
    text = summary.run_text(s)
    assert "it is the baseline" in text and "payback: none: the recommended config is the baseline" in text


def test_a_saving_whose_ratio_interval_reaches_one_is_said_to_be_uncertain() -> None:
    rows = confirmed_study()
    rows[6] = study_end(6, 12.0, 3.0, "reached", 8, 512, "confirm", True)  # baseline seeds $23 and $9: a wide ratio
    s = summary.summarize(typed(rows))
    vs = s.recommendation.vs_baseline
    assert vs is not None and vs.lo < 1.0 <= vs.hi and s.payback.saving_per_run_usd > 0
    assert "(the ratio's 95% interval reaches 1: the saving may be none)" in summary.run_text(s)
    assert "may be none" not in summary.run_text(summary.summarize(typed(confirmed_study())))


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit RGB or RGBA PNG, decoded with the standard library."""
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride, out, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left, up = line[i - bpp] if i >= bpp else 0, prev[i]
            corner = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        out.append(bytes(line))
        prev = line
    return width, height, out


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
    for name in ("seeds", "map", "phases", "success", "burn"):
        section = dom[dom.index(f'id="fig-{name}"') :]
        assert "main-svg" in section[: section.index("</section>")], f"plotly did not render the {name} chart"
    console_errors = [line for line in proc.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert not console_errors, console_errors


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed")
def test_the_card_renders_in_headless_chromium_and_is_screenshotted(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for r in confirmed_study():
            w.append(Row.of(r))
    page = report.write(run_dir)  # the card is the top of the page: the window's first 800 pixels show it
    shot = tmp_path / "card.png"
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--proxy-server=127.0.0.1:9",
            "--window-size=1000,800",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file() and shot.stat().st_size > 5_000, proc.stderr[-2000:]
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (1000, 800)
    colours = {line[i : i + 3] for line in pixels[::4] for i in range(0, len(line), 12)}
    assert len(colours) > 20, "a blank or one-colour screenshot"  # text, the card's background, the green rule
    card_rows = [line for line in pixels if line.count(bytes((0xF6, 0xF8, 0xFA))) > 100]
    assert len(card_rows) > 50, "the card's background is not on screen"
