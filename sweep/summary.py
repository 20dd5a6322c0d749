"""The figures a run ends with, from its ledger only: the summary card behind the report's top box and the
text ``sweep.run`` prints, the recommended trial (or the one that came closest), and how a config is described.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from sweep.ledger import end_label, last_rows, metrics, read_rows, summary_figures


def summary_card(rows: list[dict]) -> dict[str, Any]:
    """The figures at the top of the report (all derived from ledger rows)."""
    figures = summary_figures(rows)
    ends = last_rows(rows)
    counts = dict(Counter(end_label(r) for r in ends.values()))
    card: dict[str, Any] = {
        "total_usd": figures["total_usd"],
        "usd_by_state": figures["usd_by_state"],
        "pruned_failed_share": figures["pruned_failed_share"],
        "trials_by_state": counts,
        "pareto": figures["pareto"],
        "reached_trials": counts.get("reached", 0),
        "usd_per_reached": figures["usd_per_reaching_trial"],
        "recommended": None,
    }
    best = figures["best_trial"]
    if best is not None:
        r, m = ends[best], metrics(ends[best])
        card["recommended"] = {
            "trial": best,
            "params": r["params"],
            "usd_to_target": m["usd_to_target"],
            "wall_to_target_s": m["wall_to_target_s"],
            "success": r["success"],
            "success_ci": [r["success_lo"], r["success_hi"]],
            "eval_episodes": r["eval_episodes"],
            "throughput_sps": m["throughput_sps"],
            "bottleneck": m["bottleneck"],
            "price_label": r["price_label"],
            "price_usd_per_hour": r["price_usd_per_hour"],
            "device": r.get("device", ""),
            "checkpoint": r.get("checkpoint") or None,
        }
    else:
        card["closest"] = closest_trial(rows)
    return card


def closest_trial(rows: list[dict]) -> dict[str, Any] | None:
    """When no trial reached the target: the trial with the best held-out success, how it ended, and the key
    that would most likely let it reach (a per-trial cap, the study budget, or the target itself)."""
    evaluated = [r for r in rows if r.get("success") is not None]
    if not evaluated:
        return None
    best = max(evaluated, key=lambda r: (r["success"], -r["billable_s"]))
    end = last_rows(rows)[best["trial"]]
    reason = end.get("reason", "")
    if "per-trial cap" in reason:
        key = "budget.trial_usd (the per-trial cap stopped it)"
    elif end["state"] == "capped":
        key = "budget.usd (the study budget ran out while it trained)"
    elif end["state"] == "pruned":
        key = "prune=false or budget.trial_usd (the planner stopped it on cost)"
    else:
        key = "target.success, or budget.trial_usd for longer trials"
    return {
        "trial": best["trial"],
        "params": best["params"],
        "success": best["success"],
        "usd": metrics(end)["usd"],
        "state": end_label(end),
        "change": key,
    }


def closest_line(card: dict[str, Any]) -> str:
    """Which trial came closest to the target and what to change (for a run that found no config)."""
    near = card.get("closest")
    if not near:
        return "no trial was evaluated"
    return (
        f"closest: trial {near['trial']} ({describe_params(near['params'])}), "
        f"held-out success {near['success']:.3f}, {near['state']} after ${near['usd']:.4f}; to go further change "
        f"{near['change']}"
    )


def ci_text(lo: float | None, hi: float | None) -> str:
    return f"95% CI {lo:.3f}-{hi:.3f}" if lo is not None and hi is not None else "no interval recorded"


def changed_flags(params: dict[str, Any]) -> str:
    """The perf flags of a trial that differ from rsl-rl's behaviour, e.g. 'fused_optimizer, log_every=0'."""
    from sweep import perf
    from sweep.contract import named_flags

    return ", ".join(
        k if v is True else f"{k}={v}"
        for k, v in sorted(named_flags(params).items())
        if k in perf.CATALOG and v != perf.CATALOG[k].default
    )


def describe_params(params: dict[str, Any]) -> str:
    """'4096 envs x 12 steps, 4 mini-batches; flags on: a, b' (flags at their defaults are left out)."""
    text = f"{params.get('num_envs')} envs x {params.get('num_steps_per_env')} steps, "
    text += f"{params.get('num_mini_batches')} mini-batches"
    flags = changed_flags(params)
    return text + (f"; flags on: {flags}" if flags else "; no perf flags")


def reached_text(card: dict[str, Any]) -> str:
    n = card["reached_trials"]
    return f"{n} trial{'s' if n != 1 else ''} reached the target"


def text_summary(run_dir: str | Path) -> str:
    """The end-of-run summary printed by sweep.run (from the ledger only)."""
    rows = read_rows(Path(run_dir) / "ledger.jsonl")
    card = summary_card(rows)
    states = ", ".join(f"{n} {s}" for s, n in sorted(card["trials_by_state"].items())) or "none"
    lines = [
        f"trials: {states}; study spend ${card['total_usd']:.4f} "
        f"({100 * card['pruned_failed_share']:.1f}% on pruned and failed trials)"
    ]
    rec = card["recommended"]
    if rec:
        knobs = describe_params(rec["params"])
        lo, hi = rec["success_ci"]
        lines += [
            f"best: trial {rec['trial']} ({knobs})",
            f"  USD to target ${rec['usd_to_target']:.4f}, wall to target {rec['wall_to_target_s']:.1f} s, "
            f"held-out success {rec['success']:.3f} ({ci_text(lo, hi)}), "
            f"{rec['throughput_sps']:,.0f} env steps/s, {rec['bottleneck']}",
            f"  study spend per target-reaching checkpoint ${card['usd_per_reached']:.4f} ({reached_text(card)}); "
            f"checkpoint {rec['checkpoint'] or 'none saved'}",
            f"Pareto set (USD, wall-clock): trials {card['pareto']}",
        ]
    else:
        lines.append(f"no trial reached the target; {closest_line(card)}")
    return "\n".join(lines)
