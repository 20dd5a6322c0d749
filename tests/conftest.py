"""Shared test set-up: a session-wide XLA compile cache so each simulator shape compiles once; one reached trial; one
offline Isaac Lab asset root."""

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


@pytest.fixture(scope="session")
def isaac_asset_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One offline Isaac Lab asset root with the ANYmal stand-in (tests/backends/isaaclab/standin.py) and the real Go2
    (tests/backends/isaaclab/go2.py), set for this process before Isaac Lab is imported: Isaac Lab reads the root once
    per process, so every test file of the session shares it."""
    from sweep.backends.isaaclab.scene import use_asset_root
    from tests.backends.isaaclab import go2, standin

    root = tmp_path_factory.mktemp("isaac-assets")
    root = str(go2.write_asset_root(standin.write_asset_root(root)))
    use_asset_root(root)
    return root


@pytest.fixture
def cpu() -> object:
    """JAX's CPU device."""
    import jax

    return jax.devices("cpu")[0]
