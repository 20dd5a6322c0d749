"""Helpers shared by the tests: run an entry point as a real process, build a tiny real trial config."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from sweep.contract import TrialConfig

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str):
    """``benchmarks/<name>.py`` as a module (benchmark logic that tests check)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[name] = bench  # as an import would: dataclasses look their module up there
    spec.loader.exec_module(bench)
    return bench


def search_efficiency():
    """``benchmarks/search_efficiency.py`` as a module (its search strategies, tested on recorded tables)."""
    return benchmark("search_efficiency")


def run_module(module: str, *args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m <module> args...`` in a fresh process, output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def tiny_trial(**overrides) -> TrialConfig:
    """A real trial small enough for 2 CPU cores (32 envs, 16 held-out episodes, compile cache on)."""
    base = dict(
        num_envs=32,
        num_steps_per_env=16,
        eval_episodes=16,
        eval_every_steps=160,
        cap_s=1e9,
        seed=7,
        target=1.0,
        flags={"compile_cache": True},
    )
    base.update(overrides)
    return TrialConfig(**base).validate()


def reached_trial(run_dir: Path, **overrides):
    """A tiny real trial that reaches a low target, written as a run folder (ledger, checkpoint, TensorBoard);
    only reached checkpoints are kept (``checkpoints="reached"``).

    Returns the trained PPO algorithm as the trial left it: the one whose checkpoint reached the target.
    """
    import sweep.trial.runner as trial_mod
    from sweep.ledger import LedgerWriter

    trained = {}
    build = trial_mod.build_learner

    def keep(*args, **kwargs):
        trainer, alg = build(*args, **kwargs)
        trained["alg"] = alg
        return trainer, alg

    trial_mod.build_learner = keep
    try:
        with LedgerWriter(run_dir / "ledger.jsonl") as w:
            final = trial_mod.run_trial(
                tiny_trial(**{"target": 0.05, "cap_s": 600.0, "checkpoints": "reached", **overrides}),
                lambda r: w.append(r) or "continue",
                run_id="reached",
                trial=3,
                price_usd_per_hour=1.0,
                price_label="test",
                out_dir=run_dir,
            )
    finally:
        trial_mod.build_learner = build
    assert final.state == "reached", final.reason
    return trained["alg"]
