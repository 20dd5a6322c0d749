"""The embedded task's functions for each env shape, traced and compiled once per process.

Every env of a process with the same profile, donation, device and size shares one set of jitted functions (a
worker's later trials re-trace nothing), and the worker's preloading thread (:mod:`sweep.execution.preload`) fills the
same caches ahead of the trials: each function here is a thread-safe once-cache (:func:`once`), so a trial that needs
what the thread is building waits for it instead of building it twice. ``compiled`` and ``compiled_loop``
compile ahead of time (``jit(...).lower(specs).compile()`` with the env's device sharding), which fills the
in-memory caches that a later call with arrays of that shape reads, and runs nothing on the device.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from typing import Any

from sweep.backends.mjx.task import NUM_ACTIONS, OBS_DIM, PHYSICS_DT_S, TaskParams, build_functions, policy_loop
from sweep.backends.policy import PolicyShape
from sweep.errors import ConfigError, require


def model_path() -> str:
    """Path of the Barkour v0 MJCF inside the installed ``mujoco-mjx`` wheel."""
    mjx = require("mujoco.mjx")
    path = os.path.join(os.path.dirname(mjx.__file__), "test_data", "barkour_v0", "assets", "barkour_v0_mjx.xml")
    if not os.path.exists(path):
        raise ConfigError(f"backend=mjx_locomotion: model file not found at {path}; reinstall mujoco-mjx==3.17.0")
    return path


def load_model(floor: str) -> Any:
    """Compile the Barkour model for ``floor``: visual meshes dropped, 4 ms physics step."""
    import mujoco

    spec = mujoco.MjSpec.from_file(model_path())
    for geom in list(spec.geoms):  # visual-only geoms never collide: drop them and their meshes
        if geom.contype == 0 and geom.conaffinity == 0 and geom.name != "hfield_floor":
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    if floor == "flat":
        floor_geom = spec.geom("hfield_floor")
        floor_geom.type = mujoco.mjtGeom.mjGEOM_PLANE
        floor_geom.hfieldname = ""
        floor_geom.size = [0.0, 0.0, 0.05]
    spec.option.timestep = PHYSICS_DT_S
    return spec.compile()


def once(fn: Any) -> Any:
    """``functools.cache`` for functions that two threads may call at once (a trial and the worker's preloader,
    :mod:`sweep.execution.preload`): the first caller of a key computes it, a later caller of that key waits for its
    result."""
    results: dict[tuple, Any] = {}
    locks: dict[tuple, threading.Lock] = {}
    guard = threading.Lock()

    @functools.wraps(fn)
    def cached(*args: Any) -> Any:
        with guard:
            lock = locks.setdefault(args, threading.Lock())
        with lock:
            if args not in results:
                results[args] = fn(*args)
        return results[args]

    def cache_clear() -> None:
        with guard:
            results.clear()
            locks.clear()

    cached.cache_clear = cache_clear
    return cached


@once
def task_functions(params: TaskParams, donate: bool, jax_device: str) -> dict[str, Any]:
    """Jitted task functions shared by every env of this process with these params, donation and JAX
    device: a worker's later trials re-trace nothing, and XLA compiles each env shape once."""
    return build_functions(load_model(params.floor), params, donate)


@once
def shape_functions(params: TaskParams, donate: bool, jax_device: Any, num_envs: int) -> dict[str, Any]:
    """The task functions for ``num_envs`` envs: with the persistent XLA cache on, from their lowered form on disk
    (:mod:`sweep.backends.mjx.export`: a new process traces none of the task), else the shared jitted ones."""
    import jax

    from sweep.backends.mjx import export as mjx_export
    from sweep.backends.mjx import task as mjx_task

    with jax.default_device(jax_device):  # the model's arrays live on the env's device
        fns = task_functions(params, donate, str(jax_device))
    if mjx_export.cache_dir() is None:
        return fns
    sources = (mjx_task.__file__, __file__, model_path())
    key = mjx_export.shape_key(params, donate, num_envs, jax_device, sources)
    return mjx_export.shape_functions(fns, num_envs, donate, jax_device, key)


@once
def loop_function(params: TaskParams, donate: bool, jax_device: Any, num_envs: int, shape: PolicyShape) -> Any:
    """The jitted loop of a policy of ``shape`` and the step (:func:`sweep.backends.mjx.task.policy_loop`)."""
    step = shape_functions(params, donate, jax_device, num_envs)["step"]
    return policy_loop(step, shape.activation, shape.steps)


@once
def compiled(params: TaskParams, donate: bool, jax_device: Any, num_envs: int, name: str) -> None:
    """Compile ``name`` ('reset' or 'step') for ``num_envs`` envs ahead of time, once per process."""
    import jax.numpy as jnp

    fns = shape_functions(params, donate, jax_device, num_envs)
    spec, keys, state, _ = _specs(fns, jax_device, num_envs)
    if name == "reset":
        fns["reset"].lower(keys).compile()
    else:
        fns[name].lower(state, spec((num_envs, NUM_ACTIONS), jnp.float32)).compile()


@once
def compiled_loop(params: TaskParams, donate: bool, jax_device: Any, num_envs: int, shape: PolicyShape) -> None:
    """Compile the policy loop of ``shape`` for ``num_envs`` envs ahead of time, once per process."""
    import jax.numpy as jnp

    fns = shape_functions(params, donate, jax_device, num_envs)
    spec, _, state, obs = _specs(fns, jax_device, num_envs)
    widths = (OBS_DIM, *shape.hidden, NUM_ACTIONS)
    layers = tuple((spec((o, i), jnp.float32), spec((o,), jnp.float32)) for i, o in itertools.pairwise(widths))
    vector = spec((OBS_DIM,), jnp.float32)
    policy = {"mean": vector, "std": vector, "eps": spec((), jnp.float32), "layers": layers}
    mask = spec((num_envs,), jnp.bool_)
    loop = loop_function(params, donate, jax_device, num_envs, shape)
    loop.lower(state, obs, mask, mask, policy).compile()


def _specs(fns: dict[str, Any], jax_device: Any, num_envs: int) -> tuple[Any, Any, Any, Any]:
    """``spec(dims, dtype)`` on the env's device, and the specs of the reset's keys, the state and observations."""
    import jax
    import jax.numpy as jnp

    on = jax.sharding.SingleDeviceSharding(jax_device)

    def spec(dims: tuple[int, ...], dtype: Any) -> Any:
        return jax.ShapeDtypeStruct(dims, dtype, sharding=on)

    keys = spec((num_envs, 2), jnp.uint32)
    state, obs = jax.eval_shape(fns["reset"], keys)
    state = jax.tree_util.tree_map(lambda s: spec(s.shape, s.dtype), state)
    return spec, keys, state, spec(obs.shape, obs.dtype)
