"""Shared test set-up: a session-wide XLA compile cache so each simulator shape compiles once; one reached trial."""

from __future__ import annotations

import os
import tempfile

import pytest

#: The slow marker, checked against each test's time at the end of every run.
pytest_plugins = ["tests.slow_markers"]

# Before JAX is imported anywhere (subprocesses and Ray workers inherit these too).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "sweep-test-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def reached_run(tmp_path_factory: pytest.TempPathFactory):
    """(run folder, trained PPO) of one tiny real trial that reached its target, shared by the tests that read it."""
    from tests.helpers import reached_trial

    run_dir = tmp_path_factory.mktemp("reached") / "run"
    return run_dir, reached_trial(run_dir)


@pytest.fixture
def cpu() -> object:
    """JAX's CPU device."""
    import jax

    return jax.devices("cpu")[0]
