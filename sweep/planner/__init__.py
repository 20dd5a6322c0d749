"""The planner, driver side: the study loop (:mod:`~sweep.planner.loop`) asks the study's searcher
(:mod:`~sweep.planner.searchers`, picked by ``search.sampler``) for configs of the search space
(:mod:`~sweep.planner.space`), dispatches them, prunes on cost (:mod:`~sweep.planner.pruner`), keeps the study's money
(:mod:`~sweep.planner.accounts`), its phase (:mod:`~sweep.planner.phase`), the search's leader
(:mod:`~sweep.planner.leader`) and the confirmation (:mod:`~sweep.planner.confirm`), and alone writes the study
(:mod:`~sweep.planner.study_store`) and the ledger."""

from sweep.planner.loop import Planner

__all__ = ["Planner"]
