"""Where the flags act on a trial being built: rsl-rl's agent config, the process (the XLA compile cache), the
algorithm once built (TF32), torch.compile's first compilation. Worker side: imports torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from sweep.perf.catalog import UPDATE_FLAGS, Flags


def apply_to_agent_config(train_cfg: dict, flags: Mapping[str, Any]) -> None:
    """Flags that rsl-rl already has a config key for, and the PPO class to use (edits ``train_cfg`` only)."""
    flags = Flags.of(flags)
    if flags.torch_compile != "none":
        train_cfg["torch_compile_mode"] = flags.torch_compile
    train_cfg["algorithm"]["use_mixed_precision"] = flags.bf16_update
    train_cfg["check_for_nan"] = not flags.fast_finite_check
    if any(flags[name] for name in UPDATE_FLAGS):
        train_cfg["algorithm"]["class_name"] = "sweep.perf.ppo:FastPPO"
        train_cfg["algorithm"]["perf_flags"] = {name: flags[name] for name in UPDATE_FLAGS}


def apply_to_process(flags: Mapping[str, Any]) -> None:
    """Process-wide switches a trial turns on before it builds anything (the persistent XLA compile cache)."""
    if Flags.of(flags).compile_cache:
        enable_compile_cache()


def apply_to_algorithm(alg: Any, flags: Mapping[str, Any]) -> None:
    """Process-wide switches that act on an algorithm already built."""
    tf32 = Flags.of(flags).tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def warm_up(alg: Any, env: Any, flags: Mapping[str, Any]) -> None:
    """Trigger torch.compile's first compilation inside the compile phase (nothing else needs it)."""
    if Flags.of(flags).torch_compile == "none":
        return
    with torch.inference_mode():
        obs = env.get_observations()
        alg.actor(obs)
        alg.critic(obs)


def skipped_updates(alg: Any) -> int:
    """Optimizer steps skipped so far for a non-finite gradient (0 without the fast finite check)."""
    return int(alg.skipped_updates()) if hasattr(alg, "skipped_updates") else 0


def enable_compile_cache() -> None:
    """Persist XLA compilations across processes so later trials skip most compile time."""
    import os

    import jax

    path = os.path.join(os.path.expanduser("~"), ".cache", "sweep", "jax")
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
