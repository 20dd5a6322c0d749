"""The searcher seam: what a searcher reads (:class:`SearchView`), what it answers (:class:`Proposal`, or
:class:`~sweep.planner.phase.Wait` / :class:`~sweep.planner.phase.Done` when it has none), and the small base class
every searcher is (:class:`Searcher`).

A searcher suggests; it never tells Optuna how a trial ended, dispatches or spends: the planner's loop
(:mod:`sweep.planner.loop`) does, as Ray Tune keeps its searchers apart from its schedulers and executor. The loop
asks for a proposal whenever a slot is free and the study's limits allow one; before it runs a proposal it checks the
training seed, the constraints and whether the config already ran: a proposal it cannot use is told to Optuna without
running (the searcher sees it in the study and the ledger), and after :data:`sweep.planner.loop.MAX_REPEATS` repeated
configs in a row the searcher is asked how to get unstuck (:meth:`Searcher.stuck`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import sweep.planner.acquisition as acquisition
import sweep.planner.prior as prior
import sweep.planner.space as space
from sweep.config import RunConfig
from sweep.params import TrialParams
from sweep.planner.accounts import Accounts
from sweep.planner.phase import Done, Wait
from sweep.planner.running import Running


@dataclass(frozen=True)
class Proposal:
    """The config a searcher proposes, held by the Optuna trial that will carry it."""

    trial: Any
    """The study's trial for it (``optuna.trial.Trial``: asked of the study, or a new one the searcher filled)."""
    params: dict[str, Any]
    """Every knob of the space, flags as ``flags.<name>`` (what :func:`sweep.planner.space.suggest` gives)."""
    rerun: bool = False
    """A config that ran already, proposed again on purpose (a new training seed of the leader): neither checked
    against the constraints (it ran) nor told as a repeat."""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """What the trial keeps as Optuna user attributes when it starts (e.g. ``intensify_of``)."""
    phase: str = "search"
    """The study phase its trial runs in: 'search', or 'screen' (its config's throughput over one short round, no
    cost to target: :mod:`sweep.planner.searchers.screen`), which is neither checked as a repeat nor counted as run."""


@dataclass(frozen=True)
class SearchView:
    """The study as a searcher sees it, besides the Optuna study itself. It holds the planner's own containers, which
    the planner updates as trials start and end: every call reads them afresh."""

    cfg: RunConfig
    rows: Sequence[dict]
    """The ledger's rows, oldest first: every trial's checkpoints and ends, running trials' included."""
    running: Mapping[int, Running]
    """Trial number -> a dispatched trial that has not ended."""
    unrun: Set[int]
    """Trials told to Optuna without running (infeasible, repeats): their rows teach nothing."""
    tried: Set[tuple]
    """Identities (:meth:`~sweep.params.TrialParams.identity`) of the configs that ran."""
    accounts: Accounts
    """The study's money: the best cost to target, one-time costs (:mod:`sweep.planner.accounts`)."""
    feasible: int
    """How many configs of the space satisfy the constraints."""
    profile: str
    control_dt_s: float
    memory_gib: float | None
    """The device's memory (GiB) the constraints judge against; None when unknown."""

    def running_configs(self) -> list[tuple]:
        """The identities of the running trials' configs."""
        return [TrialParams.identity(run.params) for run in self.running.values()]

    def untaught(self) -> set[int]:
        """Trials whose rows teach nothing yet: running, or told without running."""
        return set(self.running) | set(self.unrun)

    def evidence(self) -> list[tuple[dict[str, Any], float]]:
        """What the cost model learns from: (params, USD estimate) of every search trial of the study that ended
        (:func:`sweep.planner.acquisition.evidence`), and with ``search.prior`` those of the earlier study
        (:mod:`sweep.planner.prior`)."""
        own = acquisition.evidence(self.rows, self.untaught(), self.cfg.target.success)
        if not self.cfg.search.prior:
            return own
        return own + list(prior.evidence(self.cfg.search.prior, self.accounts.usd_per_hour, self.cfg.target.success))

    def throughputs(self) -> dict[tuple, float]:
        """With ``search.screen``, each screened config's env steps per training second
        (:func:`sweep.planner.acquisition.throughputs`), which the cost model divides by; else none."""
        return acquisition.throughputs(self.rows) if self.cfg.search.screen else {}

    def untried(self, salt: int) -> list[dict[str, Any]]:
        """Every feasible config not yet run, as suggestions, in an order shuffled by the sampler seed and ``salt``."""
        return space.untried_points(self.cfg, self.tried, self.profile, self.control_dt_s, self.memory_gib, salt)


class Searcher(ABC):
    """Proposes the search's next config from the study and the ledger's rows (Ray Tune's searcher; Optuna's
    sampler draws inside it). A new searcher implements :meth:`propose`; the rest has defaults that suit a searcher
    which asks Optuna for its configs."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg

    def sampler(self) -> Any:
        """The Optuna sampler the study opens with, seeded by ``seeds.sampler``: it draws what :meth:`ask` gets for
        a config that nothing queued. Default: random."""
        import optuna

        return optuna.samplers.RandomSampler(seed=self.cfg.seeds.sampler)

    def open(self, study: Any) -> None:
        """A new study: queue what runs first, the initial design (``search.initial``)."""
        for initial in self.cfg.search.initial:
            study.enqueue_trial(initial, skip_if_exists=True)

    def done(self, study: Any, view: SearchView) -> Done | None:
        """Why the search has nothing more to propose (checked before every proposal, after the trial limit and
        before the budget); None while it has. Default: every feasible config has run."""
        if len(view.tried) >= view.feasible:
            return Done(f"every feasible config tried ({view.feasible})")
        return None

    @abstractmethod
    def propose(self, study: Any, view: SearchView) -> Proposal | Wait | Done:
        """The next config to run, or why there is none now (:class:`Wait`) or any more (:class:`Done`)."""

    def stuck(self, study: Any, view: SearchView, salt: int) -> Done | None:
        """The last proposals all repeated configs that ran: queue an untried config for the next :meth:`ask` (the
        order shuffled by ``salt``), or say the search is done when none is left (configs that differ in the space
        but run the same all ran)."""
        untried = view.untried(salt)
        if not untried:
            return Done(f"every feasible config tried ({len(view.tried)} distinct)")
        study.enqueue_trial(untried[0])
        return None

    def ask(self, study: Any, point: dict[str, Any] | None = None) -> Proposal:
        """A proposal asked of the study: ``point`` (if given) is queued behind what already waits there (the initial
        design), then the first queued config is asked; with nothing queued, what the sampler draws."""
        if point is not None:
            study.enqueue_trial(point)
        trial = study.ask()
        return Proposal(trial, space.suggest(trial, self.cfg))


__all__ = ["Proposal", "SearchView", "Searcher"]
