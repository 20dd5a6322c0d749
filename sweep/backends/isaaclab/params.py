"""The configs a trial trains with, saved as Isaac Lab's trainer saves them (``params/agent.yaml``,
``params/env.yaml``), read back, and compared leaf by leaf with the trainer's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: Where a trial folder keeps its configs, as Isaac Lab's trainer keeps them in its log folder (``params/``).
PARAMS_DIR = "params"


class ParamsLoader(yaml.SafeLoader):
    """Safe YAML plus the two Python tags in what Isaac Lab's ``dump_yaml`` writes (it calls ``yaml.dump``, not
    ``safe_dump``): ``!!python/tuple`` and ``!!python/object/apply:builtins.slice``. Any other tag is an error."""


ParamsLoader.add_constructor(
    "tag:yaml.org,2002:python/tuple", lambda loader, node: tuple(loader.construct_sequence(node, deep=True))
)
ParamsLoader.add_constructor(
    "tag:yaml.org,2002:python/object/apply:builtins.slice",
    lambda loader, node: slice(*loader.construct_sequence(node, deep=True)),
)


def read_params(path: Path) -> dict[str, Any]:
    """A ``params/agent.yaml`` or ``params/env.yaml`` as Isaac Lab's trainer or a sweep trial wrote it."""
    with open(path) as f:
        return yaml.load(f, Loader=ParamsLoader)  # a SafeLoader with two constructors added: builds nothing else


def write_params(path: Path, data: dict[str, Any]) -> None:
    """Write a config dict as Isaac Lab's ``dump_yaml`` does (``yaml.dump``, block style, keys in their order)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        yaml.dump(data, f, default_flow_style=False, sort_keys=False)


def plain(value: Any) -> Any:
    """A config value with tuples as lists and slices as their text: what ``yaml.safe_dump`` can write."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, slice) else value


#: Keys of the saved configs that say how a run is driven, not what it trains, so a sweep trial and Isaac Lab's
#: trainer replaying its line differ there by design: the trainer's iteration count (a trial trains until its
#: target or cap) and its log folder (a trial logs to its own folder).
RUN_ONLY = {"agent": frozenset({"max_iterations"}), "env": frozenset({"log_dir"})}


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a nested config dict by dotted path (an empty dict is a leaf)."""
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_leaves(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): tree}


def params_differences(kind: str, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Leaves of two saved ``kind`` configs (``agent`` or ``env``: a trial's and Isaac Lab's trainer's) that differ,
    by dotted path -> (ours, theirs), ``"<absent>"`` for a missing one; the :data:`RUN_ONLY` keys left out."""
    a, b = _leaves(ours), _leaves(theirs)
    missing = "<absent>"
    return {
        path: (a.get(path, missing), b.get(path, missing))
        for path in sorted(set(a) | set(b))
        if path not in RUN_ONLY[kind] and a.get(path, missing) != b.get(path, missing)
    }
