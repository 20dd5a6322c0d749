"""Composition of the run configuration: a search-space YAML + command-line overrides -> one frozen dataclass,
types checked.

The dataclasses are OmegaConf's structured schema: OmegaConf merges the layers and checks keys and types, and
:func:`sweep.config.validation.validate` checks values, both before the first simulator second; every error names the
file (or the command line) and the key and says what to do. A space file may hold ``when_gpu:`` and ``when_cpu:``
blocks merged over its top level depending on the machine, so one file gives sensible defaults on both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import BooleanNode, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from sweep.config.schema import RunConfig
from sweep.errors import ConfigError


def spaces_dir() -> Path:
    """Where ``space=<name>`` is looked up: the installed package's ``sweep.spaces`` (the repository's top-level
    ``search_spaces/``, installed inside the package), or that folder itself when sweep runs from a checkout that was
    never installed."""
    from importlib import resources

    try:
        return Path(str(resources.files("sweep.spaces")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "search_spaces"


T = TypeVar("T")
#: Keys that moved from the top level into the ``search:`` section.
MOVED_TO_SEARCH = ("sampler", "prune", "race_slack", "intensify", "initial")


def saved_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run folder's ``config.yaml`` as this version's schema reads it: a run written before the ``search:``
    section existed keeps those keys at the top level, which sweep wrote itself, so a resume moves them (a space
    file a user edits is told to move them instead: :func:`compose`)."""
    data = dict(data)
    moved = {key: data.pop(key) for key in MOVED_TO_SEARCH if key in data}
    if moved:
        data["search"] = {**moved, **(data.get("search") or {})}
    return data


def find_space(name: str) -> Path:
    """A space name or path -> the YAML file; an unknown one lists the shipped spaces."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or os.sep in name:
        if not is_file(as_path):
            raise ConfigError(f"space={name}: file not found")
        return as_path
    path = spaces_dir() / f"{name}.yaml"
    if not is_file(path):
        shipped = sorted(p.stem for p in spaces_dir().glob("*.yaml"))
        raise ConfigError(f"space={name}: no such search space; shipped: {', '.join(shipped)} (or give a .yaml path)")
    return path


def is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the filesystem refuses (too long, ...) is none."""
    try:
        return path.is_file()
    except OSError:
        return False


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping; syntax errors name the file and line."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: YAML syntax error ({getattr(exc, 'problem', exc)}); fix the file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    return data


def compose(data: dict[str, Any], overrides: dict[str, Any], source: str, has_gpu: bool) -> RunConfig:
    """A space file's mapping, its ``when_gpu``/``when_cpu`` block for this machine, then the command line's
    dotted ``overrides``, merged in that order and type-checked (:func:`sweep.config.validation.validate` checks
    values)."""
    layers = [layer for layer in (data, data.get("when_gpu"), data.get("when_cpu")) if isinstance(layer, Mapping)]
    moved = [(key, source) for layer in layers for key in layer if key in MOVED_TO_SEARCH]
    moved += [(key.split(".")[0], "command line") for key in overrides if key.split(".")[0] in MOVED_TO_SEARCH]
    if moved:
        key, where = moved[0]
        raise ConfigError(
            f"{where}: {key}: now search.{key}; write it under the space's search: section (on the command line "
            f"search.{key}=...)"
        )
    if any(key.split(".")[0] in ("when_gpu", "when_cpu") for key in overrides):
        raise ConfigError("when_gpu/when_cpu: set those in the space file; on the command line set the key itself")
    data = dict(data)
    blocks = {name: data.pop(name, None) or {} for name in ("when_gpu", "when_cpu")}
    name = "when_gpu" if has_gpu else "when_cpu"
    if not isinstance(blocks[name], dict):
        raise ConfigError(f"{source}: {name}: expected a mapping of keys, got {blocks[name]!r}")
    return structured(RunConfig, [(data, source), (blocks[name], source), (nested(overrides), "command line")])


def structured(schema: type[T], layers: list[tuple[Any, str]]) -> T:
    """An instance of dataclass ``schema``: each ``(mapping, where)`` layer merged over its defaults in turn
    by OmegaConf, which checks keys and types; an error names ``where`` (a file, the command line) and the key."""
    conf = _writable(OmegaConf.structured(schema))
    where = ""
    try:
        for data, where in layers:
            conf = OmegaConf.merge(conf, _fit(conf, data, where))
        return OmegaConf.to_object(conf)
    except OmegaConfBaseException as exc:
        raise _error(exc, where) from None


def _writable(node: Any) -> Any:
    """``node`` and every config below it made writable: OmegaConf marks a frozen dataclass's config read-only,
    and 2.3 refuses to merge into it (2.4 copies); the result is frozen again by ``to_object``."""
    OmegaConf.set_readonly(node, False)
    for child in node.values() if OmegaConf.is_dict(node) else node:
        if OmegaConf.is_config(child):
            _writable(child)
    return node


def _error(exc: OmegaConfBaseException, where: str) -> ConfigError:
    """OmegaConf's error as one line that starts with ``where`` and names the dotted key."""
    if isinstance(exc, ConfigKeyError) and exc.parent_node is not None:  # struct mode: not a field
        valid = ", ".join(map(str, exc.parent_node.keys()))
        return ConfigError(f"{where}: unknown key {exc.full_key!r}; valid keys: {valid}")
    text = str(exc).splitlines()[0]
    return ConfigError(f"{where}: {exc.full_key}: {text}" if exc.full_key else f"{where}: {text}")


def _fit(schema: DictConfig, data: Any, where: str, key: str = "") -> dict[Any, Any]:
    """``data`` in the shape ``schema`` has, before OmegaConf checks types: a section must be a mapping, and a
    scalar given for a list becomes its one choice (``knobs.num_envs=256`` -> ``[256]``)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: {key}: expected a mapping of keys, got {data!r}")
    out = dict(data)
    for name, value in data.items():
        node = schema.get(name)
        switch = name in schema and isinstance(schema._get_node(name), BooleanNode)
        if switch and value is not None and not isinstance(value, bool):
            # OmegaConf would read 2 or -7 as true: only true and false mean a switch's state
            raise ConfigError(f"{where}: {key + '.' if key else ''}{name}: expected true or false, got {value!r}")
        if isinstance(node, ListConfig) and value is not None and not isinstance(value, list):
            out[name] = [value]
        elif isinstance(node, DictConfig):
            out[name] = _fit(node, value, where, f"{key}.{name}" if key else str(name))
    return out


def nested(overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted command-line keys as one nested mapping: ``{"budget.usd": 3}`` -> ``{"budget": {"usd": 3}}``."""
    conf = OmegaConf.create()
    for key, value in overrides.items():
        try:
            OmegaConf.update(conf, key, value)
        except OmegaConfBaseException as exc:
            raise _error(exc, "command line") from None
    return OmegaConf.to_container(conf)


def load(space: str, overrides: dict[str, Any], has_gpu: bool) -> RunConfig:
    """Read the space file and apply command-line overrides, types checked; nothing is run."""
    path = find_space(space)
    return replace(compose(read_yaml(path), overrides, str(path), has_gpu), space=str(path))
