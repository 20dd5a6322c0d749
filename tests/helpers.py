"""Helpers shared by the tests: run an entry point as a real process, build a tiny real trial config."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from sweep.contract import TrialConfig

ROOT = Path(__file__).resolve().parents[1]


def search_efficiency():
    """``benchmarks/search_efficiency.py`` as a module (its search strategies, tested on recorded tables)."""
    spec = importlib.util.spec_from_file_location("search_efficiency", ROOT / "benchmarks" / "search_efficiency.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


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
