"""Searchers: what proposes the search's configs, one module each, picked by ``search.sampler`` from the registry
:data:`sweep.config.searchers.SEARCHERS` (name -> lazily imported class). The planner's loop never names one.

- :mod:`~sweep.planner.searchers.base`: the seam (:class:`Searcher`, :class:`SearchView`, :class:`Proposal`);
- :mod:`~sweep.planner.searchers.cost`: ``cost``, expected improvement per dollar;
- :mod:`~sweep.planner.searchers.samplers`: ``tpe``, ``random``, ``grid``, Optuna's samplers as they are;
- :mod:`~sweep.planner.searchers.intensify`: the leader's new seeds, around whichever of them runs.
"""

from __future__ import annotations

import importlib

from sweep.config import RunConfig, searcher_target
from sweep.planner.phase import Done, Wait
from sweep.planner.searchers.base import Proposal, Searcher, SearchView
from sweep.planner.searchers.intensify import Intensify


def build(cfg: RunConfig) -> Searcher:
    """The searcher ``search.sampler`` names, its module imported now, with the leader's intensification around it
    (a pass-through at ``search.intensify`` 1)."""
    module_name, class_name = searcher_target(cfg.search.sampler).split(":")
    return Intensify(getattr(importlib.import_module(module_name), class_name)(cfg))


__all__ = ["Done", "Intensify", "Proposal", "SearchView", "Searcher", "Wait", "build"]
