"""A config's one identity: its knobs and every catalog flag (defaults filled in), the one spelling of
``flags.<name>`` both ways. The planner proposes configs in it, the ledger records it, the replay matches on it, the
analysis groups seeds by it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweep import perf
from sweep.contract import TrialConfig
from sweep.errors import ConfigError

#: How a flag is named in a config's params: ``flags.<name>`` (as under ``knobs.flags`` of a space).
FLAG_PREFIX = "flags."
#: The spelling of ledgers and recorded tables written before the names were unified; read, never written.
OLD_FLAG_PREFIX = "flag."


def flag_key(name: str) -> str:
    """How flag ``name`` is spelled among a config's params: ``flags.<name>``."""
    return FLAG_PREFIX + name


def flag_name(key: str) -> str | None:
    """The flag a param key names (``flags.<name>``, or the old ``flag.<name>``), None for a knob."""
    for prefix in (FLAG_PREFIX, OLD_FLAG_PREFIX):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def named_flags(params: Mapping[str, Any]) -> dict[str, Any]:
    """The flags named in ``params`` (either spelling), unresolved: name -> value."""
    return {name: value for key, value in params.items() if (name := flag_name(key)) is not None}


@dataclass(frozen=True)
class TrialParams:
    """What identifies a config: the planner proposes it, the ledger records it, the replay matches on it.

    Backend and profile are not part of it (they are fixed within a study, and a replayed trial matches a
    recording made with another backend).
    """

    num_envs: int
    num_steps_per_env: int
    num_mini_batches: int
    num_learning_epochs: int = 5
    mode: str = "sweep"
    flags: tuple[tuple[str, Any], ...] = ()
    """Every catalog flag with its value (defaults filled in), sorted by name."""

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> TrialParams:
        """From a planner suggestion, a ledger row's ``params`` or a recorded table's (mini-batches and epochs
        default as in :class:`TrialConfig` where a row leaves them out)."""
        return cls(
            num_envs=int(params["num_envs"]),
            num_steps_per_env=int(params["num_steps_per_env"]),
            num_mini_batches=int(params.get("num_mini_batches", 4)),
            num_learning_epochs=int(params.get("num_learning_epochs", 5)),
            mode=str(params.get("mode", "sweep")),
            flags=tuple(sorted(perf.resolve(named_flags(params)).items())),
        )

    @classmethod
    def from_config(cls, cfg: TrialConfig) -> TrialParams:
        return cls(
            cfg.num_envs,
            cfg.num_steps_per_env,
            cfg.num_mini_batches,
            cfg.num_learning_epochs,
            cfg.mode,
            tuple(sorted(perf.resolve(cfg.flags).items())),
        )

    @classmethod
    def identity(cls, params: Mapping[str, Any]) -> tuple:
        """The one identity of the config ``params`` names (any spelling; equal for equal configs however they were
        spelled): :meth:`key`. A ledger that names a flag this catalog no longer has (or lacks a knob) keeps its
        params as recorded for an identity, so an older ledger is still read."""
        try:
            return cls.of(params).key()
        except (ConfigError, KeyError, TypeError, ValueError):
            return ("as recorded", *sorted((k, repr(v)) for k, v in params.items() if k not in ("backend", "profile")))

    def key(self) -> tuple:
        """The one identity of a config (hashable; equal for equal configs however they were spelled)."""
        return (
            self.num_envs,
            self.num_steps_per_env,
            self.num_mini_batches,
            self.num_learning_epochs,
            self.mode,
            self.flags,
        )

    def as_dict(self) -> dict[str, Any]:
        """The ledger's spelling: knobs by name, flags as ``flags.<name>``."""
        return {
            "num_envs": self.num_envs,
            "num_steps_per_env": self.num_steps_per_env,
            "num_mini_batches": self.num_mini_batches,
            "num_learning_epochs": self.num_learning_epochs,
            "mode": self.mode,
            **{flag_key(k): v for k, v in self.flags},
        }


def trial_params(cfg: TrialConfig) -> dict[str, Any]:
    """A trial's config as the ledger records it: backend, profile and its :class:`TrialParams`."""
    return {"backend": cfg.backend, "profile": cfg.profile, **TrialParams.from_config(cfg).as_dict()}


def trial_config(params: Mapping[str, Any], **fields: Any) -> TrialConfig:
    """The one way to a TrialConfig from a config's params (a planner suggestion, a ledger row's ``params``): its knobs
    and mode (:class:`TrialParams`), its flags as ``params`` names them; every other field from ``fields``."""
    p = TrialParams.of(params)
    return TrialConfig(
        num_envs=p.num_envs,
        num_steps_per_env=p.num_steps_per_env,
        num_mini_batches=p.num_mini_batches,
        num_learning_epochs=p.num_learning_epochs,
        mode=p.mode,
        flags=named_flags(params),
        **fields,
    )
