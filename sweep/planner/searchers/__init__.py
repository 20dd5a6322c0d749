"""Searchers: what proposes the search's configs, one module each, picked by ``search.sampler`` from the registry
:data:`sweep.config.searchers.SEARCHERS` (name -> lazily imported class). The planner's loop never names one.

- :mod:`~sweep.planner.searchers.base`: the seam (:class:`Searcher`, :class:`SearchView`, :class:`Proposal`);
- :mod:`~sweep.planner.searchers.cost`: ``cost``, expected improvement per dollar;
- :mod:`~sweep.planner.searchers.samplers`: ``tpe``, ``random``, ``grid``, Optuna's samplers as they are;
- :mod:`~sweep.planner.searchers.intensify`: the leader's new seeds, around whichever of them runs;
- :mod:`~sweep.planner.searchers.payoff`: the search's end once no trial is expected to pay for itself
  (``budget.later_runs``), around whichever of them runs;
- :mod:`~sweep.planner.searchers.screen`: every config's throughput first (``search.screen``), around whichever of
  them runs.
"""

from __future__ import annotations

import importlib

from sweep.config import RunConfig, searcher_target
from sweep.planner.phase import Done, Wait
from sweep.planner.searchers.base import Proposal, Searcher, SearchView
from sweep.planner.searchers.intensify import Intensify
from sweep.planner.searchers.payoff import Payoff
from sweep.planner.searchers.screen import Screen


def build(cfg: RunConfig) -> Searcher:
    """The searcher ``search.sampler`` names, its module imported now, with the stop rule around it when
    ``budget.later_runs`` is set, the throughput screen around that with ``search.screen``, and the leader's
    intensification around all (a pass-through at ``search.intensify`` 1)."""
    module_name, class_name = searcher_target(cfg.search.sampler).split(":")
    inner: Searcher = getattr(importlib.import_module(module_name), class_name)(cfg)
    if cfg.budget.later_runs is not None:
        inner = Payoff(inner, cfg.budget.later_runs)
    if cfg.search.screen:
        inner = Screen(inner)
    return Intensify(inner)


__all__ = ["Done", "Intensify", "Payoff", "Proposal", "Screen", "SearchView", "Searcher", "Wait", "build"]
