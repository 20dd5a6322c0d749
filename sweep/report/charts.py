"""The report's charts: one plotly figure per table of :mod:`sweep.report.page`, built from that table only.

Every chart names what its colours mean in a legend (one entry is still an entry), labels each trial's marker with
its trial number (the table's first column), and starts the axes of quantities (USD, seconds, throughput) at zero.
"""

from __future__ import annotations

import math
from typing import Any

from sweep.analysis.evidence import ConfigStat
from sweep.analysis.texts import describe_params
from sweep.config import KNOB_NAMES
from sweep.contract import TrialState
from sweep.ledger import PHASES

#: Marker colour per trial state (the legend names it).
STATE_COLORS = {
    "reached": "#2ca02c",
    "pruned": "#ff7f0e",
    "failed": "#d62728",
    "capped": "#7f7f7f",
    "running": "#1f77b4",
}
#: The knobs shown in the trials table and on hover: every space's (the schema's).
KNOB_COLUMNS = KNOB_NAMES

#: Characters of a trial's end reason shown in the table and hover text (the ledger keeps it whole).
REASON_CHARS = 120

#: Quantities (USD, seconds, throughput) start their axis at zero: a small spread must not fill the chart.
_FROM_ZERO = {"rangemode": "tozero"}


def pareto_figure(ran: Any, pareto: set[int]) -> Any:
    """Throughput against USD to target (USD spent for unreached trials), one marker per trial that ran, labelled
    with its trial number; one legend entry per state, even when there is one."""
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
                mode="markers+text",
                name=state,
                text=[str(t) for t in group["trial"]],
                textposition="top center",
                hovertext=hover,
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
        title="Training throughput vs USD to target (unreached trials: USD spent); stars: Pareto set; labels: trial",
        xaxis={"title": "env steps / training second", **_FROM_ZERO},
        yaxis={"title": "USD", **_FROM_ZERO},
        showlegend=True,
        legend_title_text="state",
        height=480,
    )
    return fig


def wall_figure(ran: Any) -> Any | None:
    """Wall-clock against USD to target of the reached trials; None when one price makes them proportional."""
    import plotly.graph_objects as go

    reached = ran[ran["state"] == TrialState.REACHED.value]  # a pandas column compares by value
    if not len(reached) or _proportional(reached):
        return None
    fig = go.Figure(
        go.Scatter(
            x=reached["wall_to_target_s"],
            y=reached["usd_to_target"],
            mode="markers+text",
            name="reached",
            text=[str(t) for t in reached["trial"]],
            textposition="top center",
            hovertext=[f"trial {t}" for t in reached["trial"]],
            hoverinfo="text+x+y",
            marker={"color": STATE_COLORS["reached"], "size": 11},
        )
    )
    fig.update_layout(
        title="Wall-clock vs USD to target; labels: trial",
        xaxis={"title": "seconds", **_FROM_ZERO},
        yaxis={"title": "USD", **_FROM_ZERO},
        showlegend=True,
        legend_title_text="state",
        height=420,
    )
    return fig


def seeds_figure(stats: list[ConfigStat]) -> Any | None:
    """Per config with a reached seed: mean USD to target over its reached seeds with its 95% t interval (n=1: the
    point alone), beside each reached trial's own USD to target; None when no config reached."""
    import plotly.graph_objects as go

    shown = [
        (c, c.mean_usd, c.lo, c.hi) for c in stats if c.mean_usd is not None and c.lo is not None and c.hi is not None
    ]
    if not shown:
        return None
    x = list(range(len(shown)))  # numeric positions, named by tick labels, so a config's trials sit beside its mean
    hover = [
        f"{describe_params(c.params)}<br>trials {_join(c.trials)} (seeds {_join(c.seeds)}); "
        f"{c.n_reached} of {c.n_seeds} reached<br>mean ${mean:.4f}, "
        + (f"95% t interval ${lo:.4f}-${hi:.4f}" if c.n_reached > 1 else "n=1: no interval")
        for c, mean, lo, hi in shown
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[mean for _, mean, _, _ in shown],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [hi - mean for _, mean, _, hi in shown],
                "arrayminus": [mean - lo for _, mean, lo, _ in shown],
            },
            mode="markers+text",
            name="mean over reached seeds (95% t interval)",
            text=[f"n={c.n_reached}" for c, *_ in shown],
            textposition="middle right",
            hovertext=hover,
            hoverinfo="text",
            marker={"color": STATE_COLORS["reached"], "size": 12, "symbol": "diamond"},
        )
    )
    points = [(i - 0.15, t, seed, usd) for i, (c, *_) in enumerate(shown) for t, seed, usd in _reached(c)]
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[3] for p in points],
            mode="markers+text",
            name="one reached trial (label: trial)",
            text=[str(p[1]) for p in points],
            textposition="middle left",
            hovertext=[f"trial {t}, seed {seed}: ${usd:.4f} to target" for _, t, seed, usd in points],
            hoverinfo="text",
            marker={"color": "#555", "size": 7},
        )
    )
    fig.update_layout(
        title="Seeds per config: mean USD to target over the seeds that reached it (n = reached seeds)",
        xaxis={
            "title": "config (envs x steps per env: its trials)",
            "tickvals": x,
            "ticktext": [_config_label(c) for c, *_ in shown],
        },
        yaxis={"title": "USD to target", **_FROM_ZERO},
        showlegend=True,
        height=460,
    )
    return fig


def config_map_figure(cells: Any) -> Any | None:
    """num_envs x num_steps_per_env map of the cheapest config's mean USD to target (colour from $0); cells with no
    reached trial are left empty and labelled. None when no cell has a reached trial."""
    import plotly.graph_objects as go

    if not len(cells) or cells["mean_usd"].isna().all():
        return None
    envs, steps = sorted(cells["num_envs"].unique()), sorted(cells["num_steps_per_env"].unique())
    by_cell = {(r["num_envs"], r["num_steps_per_env"]): r for r in cells.to_dict("records")}
    grid = [[by_cell[(e, s)] for s in steps] for e in envs]
    fig = go.Figure(
        go.Heatmap(
            x=[str(s) for s in steps],
            y=[str(e) for e in envs],
            z=[[None if math.isnan(r["mean_usd"]) else r["mean_usd"] for r in line] for line in grid],
            zmin=0.0,
            zmax=float(cells["mean_usd"].max()),
            colorscale="Viridis",
            colorbar={"title": {"text": "USD"}},
            hovertext=[
                [f"{r['num_envs']} envs x {r['num_steps_per_env']} steps: {r['label']}" for r in line] for line in grid
            ],
            hoverinfo="text",
            hoverongaps=True,
            name="mean USD to target",
        )
    )
    for i, line in enumerate(grid):  # annotations, not the heatmap's text, so that the empty cells are labelled too
        for j, r in enumerate(line):  # placed by category index: a numeric name like "8" would be read as an index
            text = r["label"] + (f"<br>trials {r['best_trials']}" if r["best_trials"] else "")
            fig.add_annotation(x=j, y=i, text=text, showarrow=False, font={"size": 11})
    fig.update_layout(
        title="Mean USD to target by num_envs x num_steps_per_env (a cell's cheapest config; n = its reached seeds)",
        xaxis={"title": "num_steps_per_env", "type": "category"},
        yaxis={"title": "num_envs", "type": "category"},
        height=420,
    )
    return fig


def phases_figure(ran: Any) -> Any:
    """Billable seconds of every trial that ran, stacked by phase."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for p in PHASES:
        fig.add_trace(go.Bar(name=p, x=ran["trial"].astype(str), y=ran[f"{p}_s"]))
    fig.update_layout(
        barmode="stack",
        title="Billable seconds by phase",
        xaxis={"title": "trial", "type": "category"},
        yaxis={"title": "seconds", **_FROM_ZERO},
        showlegend=True,
        height=420,
    )
    return fig


def curves_figure(curves: Any, target: float | None) -> Any:
    """Held-out success against USD spent, one line per trial (its number at its last point and on every hover);
    the target as a dashed line; success on its whole 0-1 scale."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for trial, group in curves.groupby("trial"):
        fig.add_trace(
            go.Scatter(
                x=group["usd"],
                y=group["success"],
                mode="lines+markers+text",
                name=f"trial {trial}",
                text=[""] * (len(group) - 1) + [str(trial)],
                textposition="middle right",
                hovertext=[f"trial {trial}"] * len(group),
                hoverinfo="text+x+y",
            )
        )
    if target is not None:
        fig.add_hline(y=target, line_dash="dash", annotation_text=f"target {target:g}")
    fig.update_layout(
        title="Held-out success vs USD spent",
        xaxis={"title": "USD", **_FROM_ZERO},
        yaxis={"title": "success", "range": [0.0, 1.05]},
        showlegend=True,
        height=420,
    )
    return fig


def burn_figure(burn: Any) -> Any:
    """Budget left (or spend, without a budget) over the run's minutes."""
    import plotly.graph_objects as go

    left = "left_usd" in burn
    fig = go.Figure(
        go.Scatter(
            x=burn["minutes"],
            y=burn["left_usd"] if left else burn["spent_usd"],
            mode="lines",
            name="budget left" if left else "spent",
        )
    )
    fig.update_layout(
        title="Budget left over time" if left else "Spend over time",
        xaxis={"title": "minutes since the first row", **_FROM_ZERO},
        yaxis={"title": "USD", **_FROM_ZERO},
        showlegend=True,
        height=380,
    )
    return fig


def _config_label(c: ConfigStat) -> str:
    """'4096x24: 0, 5' (envs x steps per env: its trials; ' baseline' for the study's baseline), unique per config
    because trial numbers are."""
    mark = " baseline" if c.baseline else ""
    return f"{c.params.get('num_envs')}x{c.params.get('num_steps_per_env')}{mark}: {_join(c.trials)}"


def _reached(c: ConfigStat) -> list[tuple[int, int, float]]:
    """(trial, seed, USD to target) of each reached trial of a config."""
    seeds = dict(zip(c.trials, c.seeds, strict=True))
    return [(t, seeds[t], usd) for t, usd in zip(c.reached_trials, c.usd_to_target, strict=True)]


def _join(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values))


def _proportional(reached: Any) -> bool:
    """USD and wall-clock agree (one price for every trial): the second view adds nothing."""
    ratio = reached["usd_to_target"] / reached["wall_to_target_s"]
    return bool((ratio.max() - ratio.min()) <= 1e-9 * max(ratio.max(), 1e-12))
