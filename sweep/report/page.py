"""The run report: tables first (pandas, from the ledger and study only), then one self-contained HTML file.

``python -m sweep.report reports/<run_id>`` regenerates it. Each chart is a table here (data: what the tests check
against numbers recomputed from the ledger) and a figure of :mod:`sweep.report.charts` (plotly, from that table only);
:func:`render` assembles them.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sweep import runlock
from sweep.analysis.evidence import ConfigStat, config_stats
from sweep.analysis.summary import (
    Summary,
    decision_lines,
    failure_line,
    reached_text,
    resolution_line,
    states_text,
    summarize,
)
from sweep.analysis.texts import changed_flags, ci_text
from sweep.ledger import NOT_RUN, PHASES, LedgerView, Row, end_label, metrics, read_rows, repair
from sweep.report.charts import (
    KNOB_COLUMNS,
    REASON_CHARS,
    burn_figure,
    config_map_figure,
    curves_figure,
    pareto_figure,
    phases_figure,
    seeds_figure,
    wall_figure,
)
from sweep.report.export import study_end, trainer_command


def trials_table(rows: Iterable[Row]) -> Any:
    """One line per trial, from its last ledger row: state, knobs, spend, throughput, success."""
    import pandas as pd

    records = []
    for trial, r in sorted(LedgerView.of(rows).last.items()):
        m = metrics(r)
        rec: dict[str, Any] = {
            "trial": trial,
            "state": end_label(r),
            "reason": r.reason,
            "phase": r.phase + (" (baseline)" if r.baseline else ""),
            **{k: r.params.get(k) for k in KNOB_COLUMNS},
            "flags": changed_flags(r.params),
        }
        rec.update(
            {
                "seed": r.seed,
                "gpu": r.gpu or None,
                "env_steps": r.env_steps,
                "throughput_sps": m.throughput_sps,
                "training_s": m.training_s,
                "wall_s": m.wall_s,
                "usd": m.usd,
                "usd_to_target": m.usd_to_target,
                "wall_to_target_s": m.wall_to_target_s,
                "success": r.success,
                "success_lo": r.success_lo,
                "success_hi": r.success_hi,
                "bottleneck": m.bottleneck,
                "skipped_updates": r.skipped_updates,
                "checkpoint": r.checkpoint or None,
            }
        )
        rec.update({f"{p}_s": float(r.phases_s.get(p, 0.0)) for p in PHASES})
        records.append(rec)
    return pd.DataFrame.from_records(records)


def curves_table(rows: Iterable[Row]) -> Any:
    """Held-out success against USD spent, one point per evaluated row."""
    import pandas as pd

    return pd.DataFrame.from_records(
        [
            {"trial": r.trial, "usd": metrics(r).usd, "success": r.success, "state": r.state.value}
            for r in rows
            if r.success is not None
        ],
        columns=["trial", "usd", "success", "state"],
    )


def burn_table(rows: Sequence[Row], budget_usd: float | None) -> Any:
    """Cumulative study spend over wall time: each row adds what its trial spent since its previous row."""
    import pandas as pd

    previous: dict[int, float] = {}
    points = []
    for r in sorted(rows, key=lambda r: r.wall_time):
        cost = metrics(r).usd
        delta = cost - previous.get(r.trial, 0.0)
        previous[r.trial] = cost
        points.append({"wall_time": r.wall_time, "delta_usd": delta})
    if rows:  # the curve starts at the first trial's start, with nothing spent
        first = min(rows, key=lambda r: r.wall_time - r.billable_s)
        points.insert(0, {"wall_time": first.wall_time - first.billable_s, "delta_usd": 0.0})
    df = pd.DataFrame.from_records(points, columns=["wall_time", "delta_usd"])
    df["spent_usd"] = df["delta_usd"].cumsum()
    if budget_usd is not None:
        df["left_usd"] = budget_usd - df["spent_usd"]
    if len(df):
        df["minutes"] = (df["wall_time"] - df["wall_time"].min()) / 60.0
    return df


def _budget(run_dir: Path) -> float | None:
    import yaml

    path = run_dir / "config.yaml"
    if not path.exists():
        return None
    return float((yaml.safe_load(path.read_text()) or {}).get("budget", {}).get("usd", 0)) or None


def config_map_table(stats: list[ConfigStat]) -> Any:
    """One line per (num_envs, num_steps_per_env) cell of the grid the trials spanned: the mean USD to target of its
    cheapest config (NaN where no trial of the cell reached), the trials it holds, and the cell's label."""
    import pandas as pd

    cells: dict[tuple[int, int], list[ConfigStat]] = {}
    for c in stats:
        envs, steps = c.params.get("num_envs"), c.params.get("num_steps_per_env")
        if isinstance(envs, int) and isinstance(steps, int):
            cells.setdefault((envs, steps), []).append(c)
    records = []
    for envs in sorted({e for e, _ in cells}):
        for steps in sorted({s for _, s in cells}):
            group = cells.get((envs, steps), [])
            best = min((c for c in group if c.mean_usd is not None), key=lambda c: c.mean_usd or 0.0, default=None)
            trials = sorted(t for c in group for t in c.trials)
            if best is not None:
                label = f"${best.mean_usd:.4f} (n={best.n_reached})"
            elif group:
                label = f"none reached ({len(trials)} trial{'s' if len(trials) != 1 else ''})"
            else:
                label = "not run"
            records.append(
                {
                    "num_envs": envs,
                    "num_steps_per_env": steps,
                    "mean_usd": best.mean_usd if best is not None else None,
                    "best_trials": ", ".join(map(str, best.trials)) if best is not None else "",
                    "configs": len(group),
                    "trials": ", ".join(map(str, trials)),
                    "label": label,
                }
            )
    columns = ["num_envs", "num_steps_per_env", "mean_usd", "best_trials", "configs", "trials", "label"]
    return pd.DataFrame.from_records(records, columns=columns).astype({"mean_usd": float})


def figures(run_dir: Path, rows: LedgerView) -> list[tuple[str, Any]]:
    """Every chart of the page that has something to show, as (section name, plotly figure), in page order."""
    trials, s = trials_table(rows), summarize(rows)
    ran = trials[trials["state"] != NOT_RUN] if len(trials) else trials  # the charts show trials that ran
    stats = config_stats(rows)
    figs: list[tuple[str, Any]] = []
    if len(ran):
        figs += [("pareto", pareto_figure(ran, set(s.pareto))), ("wall", wall_figure(ran))]
        figs += [("seeds", seeds_figure(stats)), ("map", config_map_figure(config_map_table(stats)))]
        figs.append(("phases", phases_figure(ran)))
    curves, burn = curves_table(rows), burn_table(rows, _budget(run_dir))
    if len(curves):
        figs.append(("success", curves_figure(curves, _target(run_dir))))
    if len(burn):
        figs.append(("burn", burn_figure(burn)))
    return [(name, fig) for name, fig in figs if fig is not None]


def render(run_dir: Path, rows: Iterable[Row]) -> str:
    """The HTML page: summary card, the charts of :func:`figures`, sortable table (from one view of the ledger)."""
    rows = LedgerView.of(rows)
    parts = []
    for i, (name, fig) in enumerate(figures(run_dir, rows)):
        parts.append(
            f'<section id="{name}">'
            + fig.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False, div_id=f"fig-{name}")
            + "</section>"
        )
    trials, s = trials_table(rows), summarize(rows)
    trainer = trainer_command(run_dir, s.recommended.trial) if s.recommended is not None else None
    ended = study_end(run_dir)
    return _PAGE.format(
        title=html.escape(f"sweep report: {run_dir.name}"),
        card=_card_html(s, trainer, ended),
        figures="\n".join(parts),
        table=_table_html(trials),
        data=html.escape(json.dumps({"trials": len(trials)})),
    )


def _target(run_dir: Path) -> float | None:
    import yaml

    path = run_dir / "config.yaml"
    return float(yaml.safe_load(path.read_text())["target"]["success"]) if path.exists() else None


def _card_html(s: Summary, trainer: str | None = None, ended: str | None = None) -> str:
    """The top card: the decision first (:func:`~sweep.analysis.summary.decision_lines`: what to use, its cost to
    target against the baseline, what the study cost and why it ended, its payback), then the recommended config's
    best seed and the trials; every sentence once. ``trainer``: the Isaac Lab trainer line of recommended.yaml;
    ``ended``: why the study ended (:func:`sweep.report.export.study_end`)."""
    lines = ['<div class="decision">']
    for label, text in decision_lines(s, trainer, ended):
        body = f"<code>{html.escape(text)}</code>" if label == "Isaac Lab trainer" else html.escape(text)
        key = label.replace(" ", "-").lower()
        lines.append(f'<p class="{key}"><b>{html.escape(label[0].upper() + label[1:])}:</b> {body}</p>')
    lines.append("</div>")
    rec = s.recommended
    if rec:
        lines += [
            f"<p>Best seed: trial {rec.trial} (seed {rec.seed}), whose checkpoint is the deliverable "
            "(<code>recommended.yaml</code> lists every seed, the ranking rule and the baseline comparison):</p>",
            "<ul>",
            f"<li>USD to target: <b>${rec.usd_to_target:.4f}</b> (on equal terms, without its "
            f"{rec.one_time_s:.1f} s of one-time start-up and compilation: ${rec.race_usd_to_target:.4f}, the "
            "figure trials are ranked by); wall-clock to target: "
            f"<b>{rec.wall_to_target_s:.1f} s</b>; study spend per target-reaching checkpoint: "
            f"<b>${s.usd_per_reached:.4f}</b> ({reached_text(s)})</li>",
            f"<li>{_checkpoint_html(rec.checkpoint)}</li>",
            f"<li>held-out success {rec.success:.3f} ({ci_text(rec.success_lo, rec.success_hi)}, "
            f"{rec.eval_episodes} episodes)</li>",
            f"<li>training throughput {rec.throughput_sps:,.0f} env steps/s; bottleneck: {rec.bottleneck}</li>",
            f"<li>price: {html.escape(rec.price_label)} (${rec.price_usd_per_hour:g}/h)"
            f"{', device ' + html.escape(str(rec.device)) if rec.device else ''}</li>",
            "</ul>",
        ]
        coarse = resolution_line(s)
        lines += [f"<p><b>Note:</b> {html.escape(coarse)}.</p>"] if coarse else []
    lines.append(f"<p>Trials: {html.escape(states_text(s) or 'none')}.</p>")
    failed = failure_line(s, "ledger.jsonl")
    lines += [f'<p class="failures"><b>Failures:</b> {html.escape(failed)}.</p>'] if failed else []
    return "\n".join(lines)


def _checkpoint_html(path: str | None) -> str:
    """A link to the winner's checkpoint, relative to the run folder (where report.html lies)."""
    if not path:
        return "checkpoint: none saved (replayed trial, or checkpoints off)"
    link = html.escape(path, quote=True)
    return (
        f'checkpoint: <a href="{link}">{html.escape(path)}</a> '
        "(<code>python -m sweep.export</code> on this folder writes it as TorchScript and ONNX)"
    )


def _table_html(trials: Any) -> str:
    if not len(trials):
        return "<p>No trials.</p>"
    cols = [
        "trial",
        "state",
        "phase",
        "seed",
        *(["gpu"] if trials["gpu"].notna().any() else []),  # where each ran, on GPU workers
        *KNOB_COLUMNS,
        "flags",
        "env_steps",
        "throughput_sps",
        "wall_s",
        "usd",
        "usd_to_target",
        "success",
        "bottleneck",
        "reason",
    ]
    head = "".join(f'<th onclick="sortTable({i})">{c}</th>' for i, c in enumerate(cols))
    body = []
    for rec in trials[cols].to_dict("records"):
        cells = []
        for c in cols:
            v = rec[c]
            text = "" if v is None or v != v else (f"{v:.4g}" if isinstance(v, float) else str(v))
            if c == "reason" and len(text) > REASON_CHARS:  # whole in the ledger and on hover
                short = text[: REASON_CHARS - 1] + "\u2026"
                cells.append(f'<td title="{html.escape(text)}">{html.escape(short)}</td>')
            else:
                cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="trials"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:3px 6px}} th{{cursor:pointer;background:#eee}}
.card{{background:#f6f8fa;padding:1em}} .decision p{{margin:.3em 0}}
.decision{{font-size:1.1em;border-left:4px solid #2ca02c;padding-left:.8em}}</style>
</head><body><h1>{title}</h1><div class="card">{card}</div>
{figures}
<h2>All trials</h2>{table}
<script id="sweep-data" type="application/json">{data}</script>
<script>
function sortTable(col) {{
  const tb = document.querySelector('#trials tbody'); const rows = Array.from(tb.rows);
  const asc = tb.dataset.col == col ? tb.dataset.asc != 'true' : true; tb.dataset.col = col; tb.dataset.asc = asc;
  rows.sort((a, b) => {{ const x = a.cells[col].innerText, y = b.cells[col].innerText;
    const nx = parseFloat(x), ny = parseFloat(y);
    const c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y); return asc ? c : -c; }});
  rows.forEach(r => tb.appendChild(r));
}}
</script></body></html>
"""


def write(run_dir: str | Path) -> Path:
    """Write ``report.html`` from the run folder's ledger (torn lines moved aside first, said once, unless a live
    driver holds the folder: its ledger is its own to repair); returns it. The page is written beside its name and
    renamed over it, so a kill mid-write leaves the previous page whole."""
    run_dir = Path(run_dir)
    path = run_dir / "report.html"
    if runlock.live_holder(run_dir) is None:
        repair(run_dir / "ledger.jsonl")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(run_dir, LedgerView(read_rows(run_dir / "ledger.jsonl"))), encoding="utf-8")
    os.replace(tmp, path)
    return path


def main(argv: list[str]) -> int:
    from sweep.errors import ConfigError

    if len(argv) != 1:
        raise ConfigError("usage: python -m sweep.report reports/<run_id>")
    run_dir = Path(argv[0])
    if not (run_dir / "ledger.jsonl").is_file():
        raise ConfigError(f"{run_dir}: no ledger.jsonl here; give a run folder written by sweep.run")
    print(write(run_dir))
    return 0
