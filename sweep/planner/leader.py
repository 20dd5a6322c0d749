"""The search's leader, from ledger rows: the config with the lowest mean cost to target on equal terms over its
search seeds (:func:`sweep.analysis.evidence.config_stats`), what later search trials race against, and whether it runs
again on a new seed before the search goes on (``intensify``)."""

from __future__ import annotations

from collections.abc import Iterable

from sweep.analysis.evidence import ConfigStat, config_stats
from sweep.ledger import Row


def leader(rows: Iterable[Row]) -> ConfigStat | None:
    """The best config of the search's rows that reached the target; None before one reaches."""
    return next((c for c in config_stats(rows, "search") if c.n_reached > 0), None)


def race_bar_usd(rows: Iterable[Row], slack: float) -> float | None:
    """The leader's mean cost to target on equal terms times ``slack`` (a search trial's cap and the pruner's bar);
    with one seed per config, the best known cost times ``slack``."""
    lead = leader(rows)
    return None if lead is None or lead.race_mean is None else lead.race_mean * slack


def due(rows: Iterable[Row], intensify: int, running: Iterable[tuple], confirmed_later: bool) -> ConfigStat | None:
    """The leader while it has run fewer than ``intensify`` search trials and none of ``running`` (the config
    identities of running trials) is it; never the baseline when ``confirmed_later`` (a confirmation runs it on its
    seeds anyway)."""
    if intensify <= 1:
        return None
    lead = leader(rows)
    if lead is None or len(lead.trials) >= intensify or (lead.baseline and confirmed_later):
        return None
    return None if lead.key in set(running) else lead


__all__ = ["due", "leader", "race_bar_usd"]
