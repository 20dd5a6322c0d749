"""The catalog of performance flags: each a named switch with a default, a description and one place it acts.

Defaults reproduce rsl-rl 5.5.1's behaviour, so "all flags off" is the stock algorithm run by this
runner; each flag can be turned on alone. Flags marked ``exact`` keep training semantics (same
actions and losses for the same seed, up to float rounding where stated); the others change numerics
and say so. Every flag is a search-space knob (``knobs.flags.<name>``) and is written to the
exported YAML.
"""

from __future__ import annotations

import importlib
from typing import Any

from sweep.perf.catalog import (
    BACKEND_FLAGS,
    CATALOG,
    STOCK_FLAGS,
    UPDATE_FLAGS,
    Flag,
    Flags,
    all_on,
    backend_knobs,
    resolve,
    should_log,
)

#: What acts on a trial (torch), imported on first use so that the catalog alone imports no torch.
_ACTING = {
    "apply_to_agent_config": "apply",
    "apply_to_process": "apply",
    "apply_to_algorithm": "apply",
    "warm_up": "apply",
    "skipped_updates": "apply",
    "enable_compile_cache": "apply",
    "EpisodeStats": "stats",
    "check_nan": "stats",
    "nonfinite_parts": "stats",
}


def __getattr__(name: str) -> Any:
    if name in _ACTING:
        return getattr(importlib.import_module(f"sweep.perf.{_ACTING[name]}"), name)
    raise AttributeError(f"module 'sweep.perf' has no attribute {name!r}")


__all__ = [
    "BACKEND_FLAGS",
    "CATALOG",
    "STOCK_FLAGS",
    "UPDATE_FLAGS",
    "Flag",
    "Flags",
    "all_on",
    "backend_knobs",
    "resolve",
    "should_log",
    *_ACTING,
]
