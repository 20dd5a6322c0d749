"""The searchers ``search.sampler`` may name: name -> ``"module:Class"``, each class a
:class:`sweep.planner.searchers.Searcher`.

One table, read by the value checks (:mod:`sweep.config.validation`, before any compute) and by the planner, which
imports a class only when its study opens (:func:`sweep.planner.searchers.build`). It sits with the schema, as a Hydra
config names its ``_target_``, so that the checks know every name without importing the planner above them. Adding a
searcher is one module under ``sweep/planner/searchers/`` and one line here.
"""

from __future__ import annotations

from sweep.errors import ConfigError

#: search.sampler name -> "module:Class"; the module is imported only when a study uses it.
SEARCHERS: dict[str, str] = {
    "cost": "sweep.planner.searchers.cost:CostSearcher",
    "tpe": "sweep.planner.searchers.samplers:TpeSearcher",
    "random": "sweep.planner.searchers.samplers:RandomSearcher",
    "grid": "sweep.planner.searchers.samplers:GridSearcher",
}


def searcher_target(name: str, key: str = "search.sampler") -> str:
    """Where searcher ``name`` lives (``"module:Class"``); an unknown name lists the valid ones."""
    if name not in SEARCHERS:
        raise ConfigError(f"{key}: unknown searcher {name!r}; valid searchers: {', '.join(sorted(SEARCHERS))}")
    return SEARCHERS[name]


__all__ = ["SEARCHERS", "searcher_target"]
