"""The run report: tables first (pandas, from the ledger and study only), then one self-contained HTML file.

``python -m sweep.report reports/<run_id>`` regenerates it. Each chart is a ``*_table`` (data) and a ``*_figure``
(plotly, from that table only); :func:`render` assembles them. The tables are what the tests check against
numbers recomputed from the ledger.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from sweep.ledger import PHASES, end_label, last_rows, metrics, read_rows, repair
from sweep.summary import (
    Summary,
    changed_flags,
    ci_text,
    closest_line,
    describe_params,
    reached_text,
    states_text,
    summarize,
)

STATE_COLORS = {
    "reached": "#2ca02c",
    "pruned": "#ff7f0e",
    "failed": "#d62728",
    "capped": "#7f7f7f",
    "running": "#1f77b4",
}
KNOB_COLUMNS = ("num_envs", "num_steps_per_env", "num_mini_batches")

#: Characters of a trial's end reason shown in the table and hover text (the ledger keeps it whole).
REASON_CHARS = 120


def trials_table(rows: list[dict]) -> Any:
    """One line per trial, from its last ledger row: state, knobs, spend, throughput, success."""
    import pandas as pd

    records = []
    for trial, r in sorted(last_rows(rows).items()):
        m = metrics(r)
        rec: dict[str, Any] = {"trial": trial, "state": end_label(r), "reason": r.get("reason", "")}
        rec.update({k: r["params"].get(k) for k in KNOB_COLUMNS})
        rec["flags"] = changed_flags(r["params"])
        rec.update(
            {
                "env_steps": r["env_steps"],
                "throughput_sps": m["throughput_sps"],
                "training_s": m["training_s"],
                "wall_s": m["wall_s"],
                "usd": m["usd"],
                "usd_to_target": m["usd_to_target"],
                "wall_to_target_s": m["wall_to_target_s"],
                "success": r.get("success"),
                "success_lo": r.get("success_lo"),
                "success_hi": r.get("success_hi"),
                "bottleneck": m["bottleneck"],
                "skipped_updates": r.get("skipped_updates", 0),
                "checkpoint": r.get("checkpoint") or None,
            }
        )
        rec.update({f"{p}_s": float(r["phases_s"].get(p, 0.0)) for p in PHASES})
        records.append(rec)
    return pd.DataFrame.from_records(records)


def curves_table(rows: list[dict]) -> Any:
    """Held-out success against USD spent, one point per evaluated row."""
    import pandas as pd

    return pd.DataFrame.from_records(
        [
            {"trial": r["trial"], "usd": metrics(r)["usd"], "success": r["success"], "state": r["state"]}
            for r in rows
            if r.get("success") is not None
        ],
        columns=["trial", "usd", "success", "state"],
    )


def burn_table(rows: list[dict], budget_usd: float | None) -> Any:
    """Cumulative study spend over wall time: each row adds what its trial spent since its previous row."""
    import pandas as pd

    previous: dict[int, float] = {}
    points = []
    for r in sorted(rows, key=lambda r: r["wall_time"]):
        cost = metrics(r)["usd"]
        delta = cost - previous.get(r["trial"], 0.0)
        previous[r["trial"]] = cost
        points.append({"wall_time": r["wall_time"], "delta_usd": delta})
    if rows:  # the curve starts at the first trial's start, with nothing spent
        first = min(rows, key=lambda r: r["wall_time"] - r["billable_s"])
        points.insert(0, {"wall_time": first["wall_time"] - first["billable_s"], "delta_usd": 0.0})
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


def pareto_figure(ran: Any, pareto: set[int]) -> Any:
    """Throughput against USD to target (USD spent for unreached trials), one marker per trial that ran."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for state, group in ran.groupby("state"):
        hover = [
            "<br>".join(
                f"{k}: {str(v)[:REASON_CHARS]}"
                for k, v in r.items()
                if k in ("trial", "reason", "flags", *KNOB_COLUMNS)
            )
            for r in group.to_dict("records")
        ]
        y = group["usd_to_target"].where(group["usd_to_target"].notna(), group["usd"])
        fig.add_trace(
            go.Scatter(
                x=group["throughput_sps"],
                y=y,
                mode="markers",
                name=state,
                text=hover,
                hoverinfo="text+x+y",
                marker={
                    "color": STATE_COLORS.get(state, "#333"),
                    "size": 11,
                    "symbol": ["star" if t in pareto else "circle" for t in group["trial"]],
                    "line": {"width": [2 if t in pareto else 0 for t in group["trial"]], "color": "black"},
                },
            )
        )
    fig.update_layout(
        title="Training throughput vs USD to target (unreached trials: USD spent); stars: Pareto set",
        xaxis_title="env steps / training second",
        yaxis_title="USD",
        height=480,
    )
    return fig


def wall_figure(ran: Any) -> Any | None:
    """Wall-clock against USD to target of the reached trials; None when one price makes them proportional."""
    import plotly.graph_objects as go

    reached = ran[ran["state"] == "reached"]
    if not len(reached) or _proportional(reached):
        return None
    fig = go.Figure(
        go.Scatter(
            x=reached["wall_to_target_s"],
            y=reached["usd_to_target"],
            mode="markers",
            text=reached["trial"],
            marker={"color": STATE_COLORS["reached"], "size": 11},
        )
    )
    fig.update_layout(title="Wall-clock vs USD to target", xaxis_title="seconds", yaxis_title="USD", height=420)
    return fig


def phases_figure(ran: Any) -> Any:
    """Billable seconds of every trial that ran, stacked by phase."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for p in PHASES:
        fig.add_trace(go.Bar(name=p, x=ran["trial"].astype(str), y=ran[f"{p}_s"]))
    fig.update_layout(
        barmode="stack", title="Billable seconds by phase", xaxis_title="trial", yaxis_title="seconds", height=420
    )
    return fig


def curves_figure(curves: Any, target: float | None) -> Any:
    """Held-out success against USD spent, one line per trial; the target as a dashed line."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for trial, group in curves.groupby("trial"):
        fig.add_trace(go.Scatter(x=group["usd"], y=group["success"], mode="lines+markers", name=f"trial {trial}"))
    if target is not None:
        fig.add_hline(y=target, line_dash="dash", annotation_text=f"target {target:g}")
    fig.update_layout(title="Held-out success vs USD spent", xaxis_title="USD", yaxis_title="success", height=420)
    return fig


def burn_figure(burn: Any) -> Any:
    """Budget left (or spend, without a budget) over the run's minutes."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=burn["minutes"], y=burn.get("left_usd", burn["spent_usd"]), mode="lines"))
    fig.update_layout(
        title="Budget left over time" if "left_usd" in burn else "Spend over time",
        xaxis_title="minutes since the first row",
        yaxis_title="USD",
        height=380,
    )
    return fig


def render(run_dir: Path, rows: list[dict]) -> str:
    """The HTML page: summary card, Pareto chart(s), phases, success curves, burn-down, sortable table."""
    trials, s = trials_table(rows), summarize(rows)
    curves, burn = curves_table(rows), burn_table(rows, _budget(run_dir))
    ran = trials[trials["state"] != "not run"] if len(trials) else trials  # the charts show trials that ran
    figs: list[tuple[str, Any]] = []
    if len(ran):
        figs += [
            ("pareto", pareto_figure(ran, set(s.pareto))),
            ("wall", wall_figure(ran)),
            ("phases", phases_figure(ran)),
        ]
    if len(curves):
        figs.append(("success", curves_figure(curves, _target(run_dir))))
    if len(burn):
        figs.append(("burn", burn_figure(burn)))
    parts = []
    for i, (name, fig) in enumerate((name, fig) for name, fig in figs if fig is not None):
        parts.append(
            f'<section id="{name}">'
            + fig.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False, div_id=f"fig-{name}")
            + "</section>"
        )
    return _PAGE.format(
        title=html.escape(f"sweep report: {run_dir.name}"),
        card=_card_html(s),
        figures="\n".join(parts),
        table=_table_html(trials),
        data=html.escape(json.dumps({"trials": len(trials)})),
    )


def _proportional(reached: Any) -> bool:
    """USD and wall-clock agree (one price for every trial): the second view adds nothing."""
    ratio = reached["usd_to_target"] / reached["wall_to_target_s"]
    return bool((ratio.max() - ratio.min()) <= 1e-9 * max(ratio.max(), 1e-12))


def _target(run_dir: Path) -> float | None:
    import yaml

    path = run_dir / "config.yaml"
    return float(yaml.safe_load(path.read_text())["target"]["success"]) if path.exists() else None


def _card_html(s: Summary) -> str:
    rec = s.recommended
    lines = []
    if rec:
        knobs = describe_params(rec.params)
        lines += [
            f"<p><b>Recommended (trial {rec.trial}):</b> {html.escape(knobs)}</p>",
            "<ul>",
            f"<li>USD to target: <b>${rec.usd_to_target:.4f}</b>; wall-clock to target: "
            f"<b>{rec.wall_to_target_s:.1f} s</b>; study spend per target-reaching checkpoint: "
            f"<b>${s.usd_per_reached:.4f}</b> ({reached_text(s)})</li>",
            f"<li>{_checkpoint_html(rec.checkpoint)}</li>",
            f"<li>held-out success {rec.success:.3f} ({ci_text(rec.success_lo, rec.success_hi)}, "
            f"{rec.eval_episodes} episodes)</li>",
            f"<li>training throughput {rec.throughput_sps:,.0f} env steps/s; bottleneck: {rec.bottleneck}</li>",
            f"<li>price: {html.escape(rec.price_label)} (${rec.price_usd_per_hour:g}/h), device "
            f"{html.escape(str(rec.device))}</li>",
            "</ul>",
        ]
    else:
        lines.append(f"<p><b>No trial reached the target</b>; {html.escape(closest_line(s))}.</p>")
    lines.append(
        f"<p>Study spend <b>${s.total_usd:.4f}</b>, of which {100 * s.pruned_failed_share:.1f}% on pruned "
        f"and failed trials. Trials: {states_text(s)}.</p>"
    )
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
.card{{background:#f6f8fa;padding:1em}}</style>
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
    """Write ``report.html`` from the run folder's ledger (torn lines moved aside first, said once); returns it."""
    run_dir = Path(run_dir)
    path = run_dir / "report.html"
    repair(run_dir / "ledger.jsonl")
    path.write_text(render(run_dir, read_rows(run_dir / "ledger.jsonl")), encoding="utf-8")
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


if __name__ == "__main__":
    from sweep.cli import run_main

    run_main(main)
