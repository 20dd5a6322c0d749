"""A run's deliverable: ``recommended.yaml``.

``recommended.yaml`` holds the winning config, the rsl-rl agent config it implies, versions, the
evidence, and the checkpoint that first reached the target (path relative to the run folder).
``python -m sweep.trial config=reports/<run_id>/recommended.yaml`` re-runs it (its ``trial``
section is a complete :class:`sweep.contract.TrialConfig`).

``python -m sweep.export reports/<run_id>`` writes that checkpoint's policy (:mod:`sweep.report.policy`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import yaml

from sweep import __version__, checkpoints
from sweep.contract import TrialState
from sweep.errors import ConfigError
from sweep.ledger import LedgerView, Row, metrics, read_rows


def _versions(backend: Any) -> dict[str, str]:
    out = {"sweep": __version__}
    for name in ("rsl-rl-lib", "torch"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    try:
        out.update(backend.versions())
    except Exception:  # a missing simulator must not block the export
        out["simulator"] = "unknown"
    return out


def implied_agent_config(cfg: Any, trial_dir: Path | None = None) -> dict[str, Any]:
    """The rsl-rl agent config the trial ran with (its backend's, :meth:`sweep.backends.Backend.agent_config`): the
    knobs and the perf flags that act through it (``check_for_nan``, mixed precision, ``torch_compile_mode``, the
    PPO class and its flags). ``trial_dir``: the trial's folder, where a backend reads back what the trial recorded."""
    from sweep import perf
    from sweep.backends import get_backend

    return get_backend(cfg.backend).agent_config(cfg, perf.resolve(cfg.flags), trial_dir)


def recommended(run_dir: Path, rows: Iterable[Row]) -> dict[str, Any] | None:
    """The YAML document for the best trial of a run (None when no trial reached the target)."""
    from sweep import perf
    from sweep.analysis.summary import summarize
    from sweep.backends import get_backend
    from sweep.contract import TrialConfig

    view = LedgerView.of(rows)
    s = summarize(view)
    if s.recommendation is None:
        return None
    best = s.recommendation.trial.trial
    row = view.last[best]
    saved = _trial_config(run_dir, best)
    cfg = TrialConfig(**saved) if saved else _config_from_params(row)
    backend = get_backend(cfg.backend)
    m = metrics(row)

    doc: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "task": {
            "backend": cfg.backend,
            "profile": cfg.profile,
            "success_rule": backend.success_text(cfg),
            "target_success": cfg.target,
            "eval_episodes": cfg.eval_episodes,
        },
        "knobs": {
            "num_envs": cfg.num_envs,
            "num_steps_per_env": cfg.num_steps_per_env,
            "num_mini_batches": cfg.num_mini_batches,
        },
        "perf_flags": perf.resolve(cfg.flags),
        "agent": (agent := implied_agent_config(cfg, checkpoints.trial_dir(run_dir, best))),
        "versions": _versions(backend),
        "evidence": {
            "run": str(run_dir),
            "trial": best,
            "seed": row.seed,
            "held_out_success": row.success,
            "success_ci95": [row.success_lo, row.success_hi],
            "eval_episodes": row.eval_episodes,
            "usd_to_target": m.usd_to_target,
            "usd_to_target_equal_terms": m.race_usd_to_target,
            "one_time_s": m.one_time_s,
            "ranking": "usd_to_target_equal_terms: billable seconds less one-time start-up and compilation, x price",
            "wall_to_target_s": m.wall_to_target_s,
            "env_steps": row.env_steps,
            "throughput_env_steps_per_s": m.throughput_sps,
            "bottleneck": m.bottleneck,
            "price_usd_per_hour": row.price_usd_per_hour,
            "price": row.price_label,
            "device": row.device,
            **seeds_evidence(s),
            "study": {
                "usd": s.total_usd,
                "in_baseline_runs": s.payback.study_in_baseline_runs if s.payback is not None else None,
                "budget": _budget(run_dir),
                "ended": study_end(run_dir),
            },
        },
        "checkpoint": _checkpoint_section(run_dir, best, row),
        "trial": asdict(cfg),
    }
    doc.update(backend.export_section(cfg, agent))  # may replace ``agent`` with what the backend's own trainer reads
    return doc


def seeds_evidence(s: Any) -> dict[str, Any]:
    """The recommended config over its seeds: each seed's result, the mean and interval that ranked it, the billed
    mean, the ratio to the baseline with its interval and rule (``evidence.RANKING_RULE``, ``VS_BASELINE_RULE``), and
    the study's payback (:func:`payback_evidence`)."""
    from sweep.analysis.evidence import RANKING_RULE, VS_BASELINE_RULE
    from sweep.planner.confirm import RACE_RULE, VERDICT_RULE

    rec = s.recommendation
    c = rec.config
    confirmed = any(s.trials[t].phase == "confirm" for t in s.trials)

    def seed(t: int) -> dict[str, Any]:
        f = s.trials[t]
        return {
            "seed": f.seed,
            "trial": t,
            "phase": f.phase,
            "state": f.state.value,
            "reached": f.state == TrialState.REACHED,
            "usd_to_target": f.usd_to_target if f.state == TrialState.REACHED else None,
            "usd_to_target_equal_terms": f.race_usd_to_target if f.state == TrialState.REACHED else None,
            "usd_spent": f.usd,
            "usd_spent_equal_terms": f.race_usd,
        }

    out: dict[str, Any] = {
        "seeds": [seed(t) for t in c.trials],
        "mean_usd_to_target_equal_terms": c.race_mean,
        "ci95": [c.race_lo, c.race_hi] if len(c.counted_trials) > 1 else None,
        "mean_is_lower_bound": c.censored,
        "mean_usd_to_target": c.mean_usd,
        "ci95_billed": [c.lo, c.hi] if c.n_reached > 1 else None,
        "recommendation_rule": RANKING_RULE,
        "racing_rule": RACE_RULE if confirmed else None,
        "round_order": VERDICT_RULE if confirmed else None,
        "study_usd_by_phase": dict(s.usd_by_phase),
    }
    vs = rec.vs_baseline
    if rec.is_baseline:
        out["vs_baseline"] = {"ratio": 1.0, "ci95": None, "note": "the recommended config is the baseline"}
    elif vs is None or vs.ratio is None:
        out["vs_baseline"] = None
    else:
        b = vs.baseline
        out["vs_baseline"] = {
            "ratio": vs.ratio,
            "ci95": [vs.lo, vs.hi] if vs.lo is not None else None,
            "baseline_mean": b.race_mean,
            "baseline_ci95": [b.race_lo, b.race_hi] if len(b.counted_trials) > 1 else None,
            "baseline_params": b.params,
            "baseline_seeds": [seed(t) for t in b.trials],
            "shared_seeds": list(vs.shared_seeds),
            "rule": VS_BASELINE_RULE,
        }
    out["payback"] = payback_evidence(s.payback)
    return out


def payback_evidence(pay: Any) -> dict[str, Any]:
    """``evidence.payback``: the study's spend in baseline training runs, the saving per run and the runs until the
    study has paid for itself (:class:`sweep.analysis.evidence.Payback`, USD); the baseline figures are null and
    ``note`` says why when there is no baseline comparison."""
    from sweep.analysis.evidence import PAYBACK_RULE

    return {
        "study_usd": pay.study_usd,
        "baseline_mean_usd_to_target_equal_terms": pay.baseline_mean_usd,
        "recommended_mean_usd_to_target_equal_terms": pay.recommended_mean_usd,
        "study_in_baseline_runs": pay.study_in_baseline_runs,
        "saving_per_run_usd": pay.saving_per_run_usd,
        "runs_to_pay_back": pay.runs_to_pay_back,
        "baseline_mean_is_lower_bound": pay.baseline_is_lower_bound,
        "note": pay.note or None,
        "rule": PAYBACK_RULE,
    }


def trainer_command(run_dir: str | Path, trial: int) -> str | None:
    """The line that trains the recommendation in its backend's own trainer (:meth:`Backend.trainer_command`: Isaac
    Lab's), when the ``recommended.yaml`` in ``run_dir`` recommends ``trial``'s checkpoint; None for a backend
    without one, a file not written yet or one left from an earlier recommendation."""
    from sweep.backends import get_backend

    path = Path(run_dir) / "recommended.yaml"
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict) or (doc.get("evidence") or {}).get("trial") != trial:
        return None
    try:
        backend = get_backend(str((doc.get("task") or {}).get("backend")))
    except ConfigError:  # a file naming no backend this sweep knows
        return None
    return backend.trainer_command(doc)


def _checkpoint_section(run_dir: Path, trial: int, row: Row) -> dict[str, Any] | None:
    """Where the checkpoint that reached the target lies (relative to the run folder), with its evidence.

    None when the trial saved none (a replayed trial). A ledger written before rows named their
    checkpoint points to the trial's own file, which a reached trial leaves as the reaching one.
    """
    path = row.checkpoint
    if path is None:
        legacy = checkpoints.relative_path(trial)
        path = legacy if (run_dir / legacy).is_file() else ""
    if not path:
        return None
    return {
        "path": path,
        "trial": trial,
        "iteration": row.iteration,
        "env_steps": row.env_steps,
        "held_out_success": row.success,
        "success_ci95": [row.success_lo, row.success_hi],
    }


def study_end(run_dir: str | Path) -> str | None:
    """Why the study of ``run_dir`` ended, as its planner recorded it in the study (None: a study without the
    record, or no study)."""
    db = Path(run_dir) / "study.db"
    if not db.exists():
        return None
    import optuna

    from sweep.planner.study_store import ENDED

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{db.resolve()}")
    except Exception:  # a damaged or foreign study.db: the outputs are written from the ledger regardless
        return None
    return study.user_attrs.get(ENDED)


def _budget(run_dir: Path) -> dict[str, Any]:
    """The study's budget as its config.yaml records it: ``usd`` and ``runs`` (null: no cap in baseline runs)."""
    path = run_dir / "config.yaml"
    budget = (yaml.safe_load(path.read_text()) or {}).get("budget", {}) if path.is_file() else {}
    return {"usd": budget.get("usd"), "runs": budget.get("runs")}


def _trial_config(run_dir: Path, trial: int) -> dict[str, Any] | None:
    """The exact TrialConfig the planner dispatched, from the study's user attributes."""
    db = run_dir / "study.db"
    if not db.exists():
        return None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{db.resolve()}")
    for t in study.get_trials(deepcopy=False):
        if t.number == trial:
            return t.user_attrs.get("trial_config")
    return None


def _config_from_params(row: Row) -> Any:
    """A run folder without the dispatched config (older studies): the trial's config from its ledger params, mode
    (``stock`` for a stock-rsl-rl baseline) included."""
    from sweep.params import trial_config

    return trial_config(row.params, backend=row.params["backend"], profile=row.params["profile"], seed=row.seed)


def write(run_dir: str | Path) -> Path | None:
    """Write ``recommended.yaml`` into the run folder; None when nothing reached the target."""
    run_dir = Path(run_dir)
    doc = recommended(run_dir, read_rows(run_dir / "ledger.jsonl"))
    if doc is None:
        return None
    path = run_dir / "recommended.yaml"
    tmp = path.with_name(path.name + ".tmp")  # renamed over the old: a kill mid-write leaves that one whole
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.replace(tmp, path)
    return path
