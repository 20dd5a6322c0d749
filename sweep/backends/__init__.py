"""Name -> lazily imported backend class. Importing this package imports no simulator, nor torch: the contract
(:class:`Backend`, :class:`Profile`, :class:`TaskEnv`, in :mod:`sweep.backends.base`) is imported on first use, so a
config's checks that need no backend cost no torch import."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sweep.errors import ConfigError

if TYPE_CHECKING:
    from sweep.backends.base import Backend, Profile, TaskEnv

#: backend name -> "module:Class"; the module is imported only when the backend is asked for.
REGISTRY: dict[str, str] = {
    "mjx_locomotion": "sweep.backends.mjx.locomotion:MjxLocomotion",
    "isaaclab": "sweep.backends.isaaclab.backend:IsaacLab",
    "replay": "sweep.backends.replay:ReplayBackend",
}
_CONTRACT = ("Backend", "Profile", "TaskEnv")


def get_backend(name: str, key: str = "backend") -> Backend:
    """Build the backend registered as ``name``; an unknown name lists the valid ones."""
    if name not in REGISTRY:
        raise ConfigError(f"{key}: unknown backend {name!r}; valid backends: {', '.join(sorted(REGISTRY))}")
    module_name, class_name = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


def __getattr__(name: str) -> Any:
    if name in _CONTRACT:
        return getattr(importlib.import_module("sweep.backends.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REGISTRY", "Backend", "Profile", "TaskEnv", "get_backend"]
