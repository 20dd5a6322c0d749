"""The task's functions for one env shape, kept lowered on disk (``jax.export``) beside the persistent XLA cache.

With a warm XLA cache, most of what a new env shape still costs a process is Python tracing and lowering of the MJX
step, not loading its executable (docs/decisions/0014-lowered-functions-on-disk.md). So the first process to meet a
shape exports its reset, step and simulation-only step, lowered, to ``<XLA cache dir>/exported/<key>.bin``; every
later process (a worker's next trial, the ahead-of-time compiler's shapes) deserializes them and only lowers a thin
wrapper, whose executable the XLA cache then holds. The key hashes everything the lowered code depends on: the
task's source files, the model file, the profile's parameters, donation, the shape, the platform and device kind,
and the jax / jaxlib / mujoco versions, so a change to any of them exports afresh. Used only when the persistent
cache is on (the ``compile_cache`` flag).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def cache_dir() -> Path | None:
    """``<XLA persistent cache>/exported`` when the persistent cache is on, else None."""
    import jax

    path = jax.config.jax_compilation_cache_dir
    return Path(path) / "exported" if path else None


def shape_key(params: Any, donate: bool, num_envs: int, device: Any, files: Sequence[str]) -> str:
    """Hex digest naming one shape's exported functions: ``files`` are the task's sources and model file, the rest
    of what the lowered code depends on is added here (see the module docstring)."""
    from importlib.metadata import version

    import jax

    h = hashlib.sha256()
    for path in (*files, __file__):
        h.update(Path(path).read_bytes())
    parts = (repr(params), donate, num_envs, device.platform, getattr(device, "device_kind", ""), jax.__version__)
    h.update(repr((*parts, version("jaxlib"), version("mujoco"), version("mujoco-mjx"))).encode())
    return h.hexdigest()[:32]


def shape_functions(fns: dict[str, Any], num_envs: int, donate: bool, device: Any, key: str) -> dict:
    """reset / step / sim_only for ``num_envs`` envs, from their exported form (exported now if not on disk yet).

    ``fns`` are the task's jitted functions (:func:`sweep.backends.mjx.task.build_functions`, with the state's
    pytree structure under ``treedef``); the returned functions take and return the same pytrees as ``fns``.
    """
    import jax

    folder = cache_dir()
    if folder is None:
        raise RuntimeError("shape_functions needs the persistent XLA cache on (sweep.perf.enable_compile_cache)")
    treedef = fns["treedef"]

    @functools.cache
    def exported(name: str) -> Any:
        path = folder / f"{key}.{name}.bin"
        if not path.exists():
            _write(path, _export(fns, treedef, name, num_envs, device))
        return jax.export.deserialize(bytearray(path.read_bytes()))

    exported("reset"), exported("step")  # now; sim_only (benchmarks only) when first traced
    return _wrap(exported, treedef, donate)


def _export(fns: dict[str, Any], treedef: Any, name: str, num_envs: int, device: Any) -> bytes:
    """Trace and lower one function (``reset``, ``step`` or ``sim_only``) for this shape; its serialized form. They
    take and return flat state leaves, so the state's own pytree types need no serialization."""
    import jax
    import jax.numpy as jnp

    from sweep.backends.mjx.task import NUM_ACTIONS

    keys = jax.ShapeDtypeStruct((num_envs, 2), jnp.uint32)
    if name == "reset":

        def flat(k):
            state, obs = fns["reset"](k)
            return jax.tree_util.tree_leaves(state), obs

        args: tuple = (keys,)
    else:
        state_spec, _ = jax.eval_shape(fns["reset"], keys)
        leaves = jax.tree_util.tree_leaves(state_spec)
        actions = jax.ShapeDtypeStruct((num_envs, NUM_ACTIONS), jnp.float32)

        def flat(leaves, a):
            out = fns[name](jax.tree_util.tree_unflatten(treedef, leaves), a)
            if name == "sim_only":
                return jax.tree_util.tree_leaves(out)
            state, *rest = out
            return (jax.tree_util.tree_leaves(state), *rest)

        args = (leaves, actions)
    platform = "cuda" if device.platform == "gpu" else device.platform
    return bytes(jax.export.export(jax.jit(flat), platforms=(platform,))(*args).serialize())


def _wrap(exported: Callable[[str], Any], treedef: Any, donate: bool) -> dict[str, Any]:
    """Jitted functions on the state pytree that call the exported ones (the wrapper is all that is traced)."""
    import jax

    def reset(keys):
        leaves, obs = exported("reset").call(keys)
        return jax.tree_util.tree_unflatten(treedef, leaves), obs

    def step(state, actions):
        leaves, *rest = exported("step").call(jax.tree_util.tree_leaves(state), actions.astype("float32"))
        return (jax.tree_util.tree_unflatten(treedef, leaves), *rest)

    def sim_only(state, actions):
        leaves = exported("sim_only").call(jax.tree_util.tree_leaves(state), actions.astype("float32"))
        return jax.tree_util.tree_unflatten(treedef, leaves)

    donated = (0,) if donate else ()
    return {
        "reset": jax.jit(reset),
        "step": jax.jit(step, donate_argnums=donated),
        "sim_only": jax.jit(sim_only, donate_argnums=donated),
    }


def _write(path: Path, data: bytes) -> None:
    """Atomically (several processes may export the same shape at once: the last rename wins, all equal)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
