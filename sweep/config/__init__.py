"""The run's configuration, driver side: the schema (frozen dataclasses), a space file composed with the command line
(types checked by OmegaConf), and the value checks of :mod:`sweep.config.validation`; every error comes before any
compute and names the file or the command line and the key."""

from sweep.config.compose import (
    compose,
    find_space,
    is_file,
    load,
    nested,
    read_yaml,
    saved_config,
    spaces_dir,
    structured,
)
from sweep.config.schema import (
    KNOB_NAMES,
    Baseline,
    Budget,
    Confirm,
    Constraints,
    Knobs,
    PriceChoice,
    RunConfig,
    Search,
    Seeds,
    Target,
    Workers,
)
from sweep.config.searchers import SEARCHERS, searcher_target

__all__ = [
    "KNOB_NAMES",
    "SEARCHERS",
    "Baseline",
    "Budget",
    "Confirm",
    "Constraints",
    "Knobs",
    "PriceChoice",
    "RunConfig",
    "Search",
    "Seeds",
    "Target",
    "Workers",
    "compose",
    "find_space",
    "is_file",
    "load",
    "nested",
    "read_yaml",
    "saved_config",
    "searcher_target",
    "spaces_dir",
    "structured",
]
