"""The task's functions loaded from their exported form compute what the jitted ones do, keyed by what they hold."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_exported_functions_match_the_jitted_ones_step_for_step(tmp_path: Path, monkeypatch, cpu) -> None:
    import jax
    import numpy as np

    from sweep.backends.mjx import export as mjx_export
    from sweep.backends.mjx.compiled import task_functions
    from sweep.backends.mjx.locomotion import PROFILES
    from sweep.backends.mjx.task import NUM_ACTIONS, train_keys

    monkeypatch.setattr(mjx_export, "cache_dir", lambda: tmp_path)
    n = 8
    with jax.default_device(cpu):
        fns = task_functions(PROFILES["cpu"], False, str(cpu))
    loaded = mjx_export.shape_functions(fns, n, False, cpu, key="test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.reset.bin", "test.step.bin"]  # sim_only: on use
    again = mjx_export.shape_functions(fns, n, False, cpu, key="test")  # read back from disk, as a new process

    keys = jax.device_put(train_keys(3, n), cpu)
    direct, ours, theirs = fns["reset"](keys)[0], loaded["reset"](keys)[0], again["reset"](keys)[0]
    actions = jax.random.normal(jax.random.PRNGKey(0), (30, n, NUM_ACTIONS))
    for a in actions:  # 30 control steps: falls and restarts included
        direct, *out_d = fns["step"](direct, a)
        ours, *out_o = loaded["step"](ours, a)
        theirs, *out_t = again["step"](theirs, a)
        for x, y, z in zip(out_d, out_o, out_t, strict=True):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(np.asarray(y), np.asarray(z))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(direct)
    sim = loaded["sim_only"](ours, actions[0])
    assert (tmp_path / "test.sim_only.bin").exists()
    np.testing.assert_allclose(np.asarray(sim.data.qpos), np.asarray(fns["sim_only"](ours, actions[0]).data.qpos))


def test_the_key_changes_with_whatever_the_lowered_code_depends_on(tmp_path: Path, cpu) -> None:
    from sweep.backends.mjx import export as mjx_export
    from sweep.backends.mjx import task as mjx_task
    from sweep.backends.mjx.compiled import model_path
    from sweep.backends.mjx.locomotion import PROFILES, with_overrides

    files = (mjx_task.__file__, model_path())
    base = mjx_export.shape_key(PROFILES["cpu"], False, 64, cpu, files)
    assert base == mjx_export.shape_key(PROFILES["cpu"], False, 64, cpu, files)
    edited = tmp_path / "mjx_task.py"  # a task source that changed by one line
    edited.write_text(Path(mjx_task.__file__).read_text() + "\n# edited\n")
    others = {
        mjx_export.shape_key(PROFILES["gpu"], False, 64, cpu, files),
        mjx_export.shape_key(with_overrides("cpu", success_threshold_mps=0.3), False, 64, cpu, files),
        mjx_export.shape_key(PROFILES["cpu"], True, 64, cpu, files),
        mjx_export.shape_key(PROFILES["cpu"], False, 65, cpu, files),
        mjx_export.shape_key(PROFILES["cpu"], False, 64, cpu, (str(edited), model_path())),
    }
    assert base not in others and len(others) == 5
