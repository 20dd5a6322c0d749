"""GPU price table: turn a price choice (GPU name + on-demand/spot, or an explicit rate) into USD/hour."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from sweep.errors import ConfigError

KINDS = ("on_demand", "spot")


@dataclass(frozen=True)
class Price:
    """One device's price, as used for every dollar figure of a trial."""

    usd_per_hour: float
    """Price of one device for one hour (USD)."""
    label: str
    """Where the figure comes from, e.g. 'h200 on_demand (2026-03-17)' or 'explicit'."""
    gpu: str
    """Key of the price table row ('h200', 'cpu', ...) or 'custom'."""
    memory_gib: float | None = None
    """Device memory of that GPU (GiB), used to mark configs that cannot fit; None when unknown."""


@cache
def table() -> dict[str, dict]:
    """The shipped price table (``sweep/prices.yaml``), keyed by GPU name."""
    return yaml.safe_load(resources.files("sweep").joinpath("prices.yaml").read_text())


def resolve(gpu: str, kind: str = "on_demand", usd_per_hour: float | None = None, key: str = "price") -> Price:
    """Pick a price: an explicit ``usd_per_hour`` wins; otherwise the table row ``gpu`` at ``kind``."""
    rows = table()
    if usd_per_hour is not None:
        if not usd_per_hour > 0:
            raise ConfigError(f"{key}.usd_per_hour: must be > 0 (got {usd_per_hour})")
        row = rows.get(gpu.lower(), {})
        return Price(float(usd_per_hour), "explicit", gpu.lower() if row else "custom", row.get("memory_gib"))
    name = gpu.lower()
    if name not in rows:
        raise ConfigError(
            f"{key}.gpu: unknown GPU {gpu!r}; known: {', '.join(sorted(rows))}, or give {key}.usd_per_hour"
        )
    if kind not in KINDS:
        raise ConfigError(f"{key}.kind: unknown price kind {kind!r}; use one of {', '.join(KINDS)}")
    row = rows[name]
    return Price(float(row[kind]), f"{name} {kind} ({row['date']})", name, row.get("memory_gib"))


def usd(seconds: float, usd_per_hour: float) -> float:
    """Dollars for ``seconds`` of one device: the only place money is computed from time."""
    return seconds * usd_per_hour / 3600.0


def seconds(usd: float, usd_per_hour: float) -> float:
    """Seconds of one device that ``usd`` dollars buy (a cap in dollars as the billable seconds a trial checks): the
    only place time is computed from money."""
    return usd * 3600.0 / usd_per_hour


def detect_gpu(device: str) -> str:
    """Price-table key for the device a trial runs on: the GPU's model when known, else 'cpu'."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    name = torch.cuda.get_device_name(device).upper()
    for key in table():
        if key != "cpu" and key.upper() in name:
            return key
    raise ConfigError(f"price.gpu: no price known for GPU {name!r}; give price.gpu=<name> or price.usd_per_hour=<rate>")
