"""The catalog of performance flags (no torch here): each a named switch with a default, a description and one
place it acts.

Defaults reproduce rsl-rl 5.5.1's behaviour, so "all flags off" is the stock algorithm run by this
runner; each flag can be turned on alone. Flags marked ``exact`` keep training semantics (same
actions and losses for the same seed, up to float rounding where stated); the others change numerics
and say so. Every flag is a search-space knob (``knobs.flags.<name>``) and is written to the
exported YAML.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from sweep.errors import ConfigError


@dataclass(frozen=True)
class Flag:
    """One performance switch, as the catalog describes it (:data:`CATALOG`)."""

    name: str
    default: Any
    choices: tuple[Any, ...]
    """Values the planner may sweep (the first is the rsl-rl behaviour)."""
    description: str
    exact: bool
    """True: training semantics are kept (see ``tolerance``); False: numerics change."""
    where: str
    """The one place the flag is applied."""
    tolerance: str = "bitwise"
    acts_in: str = ""
    """Who applies it, when not the agent config or the process: 'ppo' (this package's PPO subclass,
    :data:`UPDATE_FLAGS`) or 'backend' (the simulator, :data:`BACKEND_FLAGS`)."""


def _flag(default: Any, choices: tuple[Any, ...], description: str, exact: bool, where: str, **more: str) -> Any:
    """A field of :class:`Flags`: the flag's default, and the rest of what the catalog says of it (:class:`Flag`)."""
    about = {"choices": choices, "description": description, "exact": exact, "where": where, **more}
    return field(default=default, metadata=about)


@dataclass(frozen=True)
class Flags(Mapping[str, Any]):
    """A trial's performance flags, every one resolved (defaults filled in, values checked) once, where the trial is
    built (:meth:`of`); each layer that acts on a flag reads this object, by attribute or as a read-only mapping.
    Each flag is written here once, as a field: its default and what the catalog says of it (:data:`CATALOG` is
    read from these fields)."""

    fused_optimizer: bool = _flag(
        False,
        (False, True),
        "build Adam with fused=True (one kernel for all parameters) instead of rsl-rl's default foreach Adam",
        True,
        "sweep.perf.ppo.FastPPO.__init__ (rebuilds the optimizer)",
        tolerance="losses within 1e-5 relative",
        acts_in="ppo",
    )
    deferred_episode_stats: bool = _flag(
        False,
        (False, True),
        "keep finished-episode returns on the device and read them once per logged iteration, not every step",
        True,
        "sweep.perf.stats.EpisodeStats.update",
    )
    fast_finite_check: bool = _flag(
        False,
        (False, True),
        "replace the per-step NaN scans of observations/rewards (check_for_nan) with one finite check of the "
        "clipped gradient norm per mini-batch; a non-finite step is skipped and counted",
        True,
        "sweep.perf.ppo.FastPPO.update (and the rollout skips check_nan)",
        acts_in="ppo",
    )
    lazy_loss_readout: bool = _flag(
        False,
        (False, True),
        "sum PPO losses on the device and read them once per logged iteration, not 3 .item() per mini-batch",
        True,
        "sweep.perf.ppo.FastPPO.update",
        acts_in="ppo",
    )
    log_every: int = _flag(
        1,
        (1, 10, 0),
        "read and report losses every N iterations (0: never; divergence is then caught by the finite check)",
        True,
        "sweep.trial.learner.SweepLoop (log phase)",
    )
    critic_chunk: int = _flag(
        0,
        (0, 16384),
        "evaluate the critic in chunks of N samples during the update (0: whole mini-batch); bounds peak memory",
        True,
        "sweep.perf.ppo.FastPPO._values",
        tolerance="losses within 1e-5 relative",
        acts_in="ppo",
    )
    torch_compile: str = _flag(
        "none",
        ("none", "default"),
        "torch.compile actor and critic (rsl-rl's torch_compile_mode); changes kernels, so float rounding",
        False,
        "agent config torch_compile_mode (rsl-rl PPO.compile)",
    )
    tf32: bool = _flag(
        False,
        (False, True),
        "allow TF32 matmuls on Ampere+ GPUs: faster, changes numerics (10-bit mantissa inputs)",
        False,
        "sweep.perf.apply.apply_to_algorithm (torch.backends matmul precision)",
    )
    bf16_update: bool = _flag(
        False,
        (False, True),
        "bf16 autocast in the PPO update (rsl-rl's use_mixed_precision); changes numerics",
        False,
        "agent config algorithm.use_mixed_precision",
    )
    buffer_donation: bool = _flag(
        False,
        (False, True),
        "MJX: donate the simulator state to the jitted step so XLA updates it in place (no new buffers)",
        True,
        "sweep.backends.mjx.locomotion (jax.jit donate_argnums)",
        acts_in="backend",
    )
    cuda_graph_update: bool = _flag(
        False,
        (False, True),
        "CUDA only (ignored on CPU): capture each PPO mini-batch step (forward, backward, clipping, "
        "capturable fused Adam, adaptive learning rate on the device) in a CUDA graph; losses as eager to float "
        "rounding, but the discarded action sample is not drawn, so later rollouts' random numbers change",
        False,
        "sweep.perf.graphs.GraphedUpdate",
        acts_in="ppo",
    )
    compile_cache: bool = _flag(
        False,
        (False, True),
        "JAX persistent compilation cache in ~/.cache/sweep/jax (and, for the embedded task, each env shape's "
        "functions lowered in its exported/ folder): later processes skip most XLA compilation and tracing",
        True,
        "sweep.perf.apply.enable_compile_cache (JAX config)",
    )

    @classmethod
    def of(cls, flags: Mapping[str, Any] | None, key: str = "flags") -> Flags:
        """``flags`` (names to values, some or none) resolved: :func:`resolve`'s checks, as one object."""
        return flags if isinstance(flags, Flags) else cls(**resolve(dict(flags or {}), key))

    def __getitem__(self, name: str) -> Any:
        if name not in CATALOG:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(CATALOG)

    def __len__(self) -> int:
        return len(CATALOG)


#: Every flag by name, in the order of :class:`Flags`' fields (each written there once).
CATALOG: dict[str, Flag] = {f.name: Flag(f.name, f.default, **f.metadata) for f in fields(Flags)}
#: Flags that need this package's PPO subclass (the others act elsewhere).
UPDATE_FLAGS = tuple(name for name, flag in CATALOG.items() if flag.acts_in == "ppo")
#: Flags that the backend applies.
BACKEND_FLAGS = tuple(name for name, flag in CATALOG.items() if flag.acts_in == "backend")


def resolve(flags: Mapping[str, Any] | None, key: str = "flags") -> dict[str, Any]:
    """All flags with defaults filled in; unknown names or values are errors that name the key."""
    flags = dict(flags or {})
    unknown = sorted(set(flags) - set(CATALOG))
    if unknown:
        raise ConfigError(f"{key}: unknown flag(s) {unknown}; known: {', '.join(CATALOG)}")
    out = {}
    for name, flag in CATALOG.items():
        value = flags.get(name, flag.default)
        if isinstance(flag.default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{key}.{name}: must be true or false (got {value!r})")
        elif isinstance(flag.default, int):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{key}.{name}: must be an integer >= 0 (got {value!r})")
        elif value not in flag.choices:
            raise ConfigError(f"{key}.{name}: must be one of {list(flag.choices)} (got {value!r})")
        out[name] = value
    return out


def all_on(exact_only: bool = False) -> dict[str, Any]:
    """Every speed flag (or every semantics-preserving one) at its fastest setting, logging off.

    ``critic_chunk`` trades speed for memory, and ``cuda_graph_update`` (CUDA only) is measured and
    swept on its own (``benchmarks/perf_flags.py``: "exact flags + cuda_graph_update"), so both stay
    at their defaults here.
    """
    return {
        name: 0 if name == "log_every" else flag.choices[-1]
        for name, flag in CATALOG.items()
        if (flag.exact or not exact_only) and name not in ("critic_chunk", "cuda_graph_update")
    }


def markdown() -> str:
    """The catalog as the page ``docs/perf-flags.md`` (``python -m sweep.perf > docs/perf-flags.md``; a test fails when
    the page is stale)."""

    def value(v: Any) -> str:
        return f"`{str(v).lower() if isinstance(v, bool) else v}`"

    lines = [
        "# Performance flags",
        "",
        "<!-- Generated from sweep/perf/catalog.py by `python -m sweep.perf > docs/perf-flags.md`: edit the catalog, "
        "not this page. -->",
        "",
        "Each flag is a switch whose default reproduces rsl-rl 5.5.1, so all flags at their defaults is the stock "
        "algorithm run by sweep's loop. A flag is a search-space knob (`knobs.flags.<name>: [false, true]`), a "
        "`python -m sweep.trial flags.<name>=...` option, and is written to `recommended.yaml`. *Exact* flags keep "
        "training semantics (same actions and losses for the same seed, to the tolerance given); the others change "
        "numerics. What they buy on a GPU: [docs/benchmarks.md](benchmarks.md#perf-flags).",
        "",
        "| flag | default | choices | semantics | what it does | where it acts |",
        "|---|---|---|---|---|---|",
    ]
    for f in CATALOG.values():
        semantics = f"exact ({f.tolerance})" if f.exact else "changes numerics"
        choices = ", ".join(value(c) for c in f.choices)
        row = (f"`{f.name}`", value(f.default), choices, semantics, f.description, f"`{f.where}`")
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


def backend_knobs(flags: Mapping[str, Any], supported: tuple[str, ...]) -> dict[str, Any]:
    """The flags a backend applies itself, restricted to those it supports."""
    return {name: flags[name] for name in BACKEND_FLAGS if name in supported}


def should_log(flags: Mapping[str, Any], iteration: int) -> bool:
    """Whether this iteration reads and reports its losses."""
    every = int(flags["log_every"])
    return every > 0 and iteration % every == 0
