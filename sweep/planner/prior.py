"""A warm start (``search.prior``): the trials of an earlier study of the same task teach this study's cost model from
its first proposal. Read from the earlier run folder's ledger: every trial of its search and its confirmation that
ran a config of the space (a stock run never is one), each priced at this study's price from its own billable
seconds, so that an earlier study on the same kind of device at another price teaches the same seconds. They are
evidence for the model only: no seed of this study's configs, no leader, no race bar."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import sweep.planner.acquisition as acquisition
from sweep.errors import ConfigError
from sweep.ledger import read_rows


def ledger_path(folder: str) -> Path:
    """The ledger of the run folder ``folder``; a folder without one is a config error naming the key."""
    path = Path(folder).expanduser() / "ledger.jsonl"
    if not path.is_file():
        raise ConfigError(f"search.prior: {folder} holds no ledger.jsonl (give the run folder of an earlier study)")
    return path


@cache
def evidence(folder: str, usd_per_hour: float, target: float) -> tuple[tuple[dict[str, Any], float], ...]:
    """(params, USD estimate) of every trial of the earlier study in ``folder`` that teaches the cost model
    (:func:`sweep.planner.acquisition.evidence`), its seconds at ``usd_per_hour`` (cached per folder and price)."""
    rows = [
        replace(r, price_usd_per_hour=usd_per_hour, phase="search")
        for r in read_rows(ledger_path(folder))
        if r.phase in ("search", "confirm")  # a probe measured no cost to target
    ]
    return tuple(acquisition.evidence(rows, set(), target))  # stock runs left out there


__all__ = ["evidence", "ledger_path"]
