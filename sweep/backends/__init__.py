"""Name -> lazily imported backend class. Importing this package imports no simulator."""

from __future__ import annotations

import importlib

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.errors import ConfigError

#: backend name -> "module:Class"; the module is imported only when the backend is asked for.
REGISTRY: dict[str, str] = {
    "mjx_locomotion": "sweep.backends.mjx.locomotion:MjxLocomotion",
    "isaaclab": "sweep.backends.isaaclab.backend:IsaacLab",
    "replay": "sweep.backends.replay:ReplayBackend",
}


def get_backend(name: str, key: str = "backend") -> Backend:
    """Build the backend registered as ``name``; an unknown name lists the valid ones."""
    if name not in REGISTRY:
        raise ConfigError(f"{key}: unknown backend {name!r}; valid backends: {', '.join(sorted(REGISTRY))}")
    module_name, class_name = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["REGISTRY", "Backend", "Profile", "TaskEnv", "get_backend"]
