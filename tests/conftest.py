"""Shared test set-up: a session-wide XLA compile cache so each simulator shape compiles once; temporary folders on a
RAM disk where there is one; one reached trial; one offline Isaac Lab asset root."""

from __future__ import annotations

import os
import shutil
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


#: Free space a RAM disk needs to hold a run's temporary folders (``tmp_path``: run folders, checkpoints, studies).
RAM_TMP_MIN_BYTES = 2 << 30
#: The RAM disk folder this run made, removed when the run passes.
_RAM_TMP = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Temporary folders on a RAM disk (``/dev/shm``) where there is one with room and no ``--basetemp`` was given:
    every study commits to SQLite after each trial, and a disk's syncs cost the planner tests about a fifth of their
    time. A passing run removes them; a failing one keeps them for a look."""
    shm = "/dev/shm"
    if config.option.basetemp or not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        return
    if shutil.disk_usage(shm).free < RAM_TMP_MIN_BYTES:
        return
    folder = tempfile.mkdtemp(prefix="sweep-tests-", dir=shm)
    config.stash[_RAM_TMP] = folder
    config.option.basetemp = os.path.join(folder, "t")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    folder = session.config.stash.get(_RAM_TMP, None)
    if folder is not None and exitstatus == 0:
        shutil.rmtree(folder, ignore_errors=True)


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
