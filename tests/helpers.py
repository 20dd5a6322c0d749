"""Helpers shared by the tests: run an entry point as a real process, build a tiny real trial config."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
from collections.abc import Callable
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


def run_in_process(main: Callable[[list[str]], int | None], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``main(args)`` as its module's ``python -m`` runs it (:func:`sweep.cli.run_main`: an error is one line and
    exit status 2), in this process from ``cwd``, output captured: for the many cases of a check whose real process
    one case runs through :func:`run_module` (a fresh process pays its imports, about 2 s)."""
    from sweep.cli import run_main

    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run_main(main, list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(
        [getattr(main, "__module__", "main"), *args], code, out.getvalue(), err.getvalue()
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
