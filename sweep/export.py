"""``recommended.yaml``: the winning config, the rsl-rl agent config it implies, versions and the evidence.

``python -m sweep.trial config=reports/<run_id>/recommended.yaml`` re-runs it (its ``trial``
section is a complete :class:`sweep.contract.TrialConfig`).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import yaml

from sweep import __version__
from sweep.ledger import last_rows, metrics, read_rows, summary_figures


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


def implied_agent_config(cfg: Any) -> dict[str, Any]:
    """The rsl-rl agent config the trial ran with: the knobs and the perf flags that act through it
    (``check_for_nan``, mixed precision, ``torch_compile_mode``, the PPO class and its flags)."""
    from sweep import perf
    from sweep.learner import agent_config

    return agent_config(cfg, perf.resolve(cfg.flags))


def recommended(run_dir: Path, rows: list[dict]) -> dict[str, Any] | None:
    """The YAML document for the best trial of a run (None when no trial reached the target)."""
    from sweep.backends import get_backend
    from sweep.contract import TrialConfig

    best = summary_figures(rows)["best_trial"]
    if best is None:
        return None
    row = last_rows(rows)[best]
    saved = _trial_config(run_dir, best)
    cfg = TrialConfig(**saved) if saved else _config_from_params(row)
    backend = get_backend(cfg.backend)
    m = metrics(row)
    from sweep import perf

    doc: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "task": {
            "backend": cfg.backend,
            "profile": cfg.profile,
            "success_rule": backend.success_rule,
            "target_success": cfg.target,
            "eval_episodes": cfg.eval_episodes,
        },
        "knobs": {
            "num_envs": cfg.num_envs,
            "num_steps_per_env": cfg.num_steps_per_env,
            "num_mini_batches": cfg.num_mini_batches,
        },
        "perf_flags": perf.resolve(cfg.flags),
        "agent": implied_agent_config(cfg),
        "versions": _versions(backend),
        "evidence": {
            "run": str(run_dir),
            "trial": best,
            "seed": row.get("seed"),
            "held_out_success": row["success"],
            "success_ci95": [row["success_lo"], row["success_hi"]],
            "eval_episodes": row["eval_episodes"],
            "usd_to_target": m["usd_to_target"],
            "wall_to_target_s": m["wall_to_target_s"],
            "env_steps": row["env_steps"],
            "throughput_env_steps_per_s": m["throughput_sps"],
            "bottleneck": m["bottleneck"],
            "price_usd_per_hour": row["price_usd_per_hour"],
            "price": row["price_label"],
            "device": row.get("device", ""),
        },
        "trial": asdict(cfg),
    }
    if hasattr(backend, "export_section"):
        doc.update(backend.export_section(cfg, implied_agent_config(cfg)))
    return doc


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


def _config_from_params(row: dict) -> Any:
    from sweep.contract import TrialConfig

    p = row["params"]
    return TrialConfig(
        backend=p["backend"],
        profile=p["profile"],
        num_envs=p["num_envs"],
        num_steps_per_env=p["num_steps_per_env"],
        num_mini_batches=p["num_mini_batches"],
        num_learning_epochs=p["num_learning_epochs"],
        seed=row.get("seed", 1),
        flags={k[5:]: v for k, v in p.items() if k.startswith("flag.")},
    )


def write(run_dir: str | Path) -> Path | None:
    """Write ``recommended.yaml`` into the run folder; None when nothing reached the target."""
    run_dir = Path(run_dir)
    doc = recommended(run_dir, read_rows(run_dir / "ledger.jsonl"))
    if doc is None:
        return None
    path = run_dir / "recommended.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
