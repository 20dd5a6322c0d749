"""The planner: the driver alone owns the Optuna study; it asks, dispatches, reads rows, prunes and tells.

Objectives (minimized): USD to target and wall-clock to target. What runs next comes from the study's searcher
(:mod:`sweep.planner.searchers`, picked by ``search.sampler``; the loop never names one), continue/prune decisions from
:mod:`sweep.planner.pruner`, the study's money (spent, reserved, what a trial may spend) from
:mod:`sweep.planner.accounts`; the study budget counts every trial. A proposal the loop cannot use is told PRUNED at no
cost: a config that breaks a constraint, or one that already ran while others remain untried (the search does not pay
twice for the same evidence); after :data:`MAX_REPEATS` repeats in a row the searcher is asked to get unstuck. How a
trial's end is recorded (its ledger row, Optuna's answer, the stop on repeated failures): :mod:`sweep.planner.ends`.

The study's phase (:mod:`sweep.planner.phase`): the search, then with ``confirm.seeds`` > 1 the confirmation of
:mod:`sweep.planner.confirm` (the ledger's ``phase``). Once a searched config other than the baseline has reached the
target, the search keeps ``confirm.budget_share`` of the budget uncommitted; until then the whole budget is its own.
Its last trial runs on what is left, capped to fit. Then the search's best configs and the baseline re-run on further
training seeds, raced, neither pruned on cost nor capped below the per-trial cap. Confirmation trials are Optuna
trials too (the searcher is not asked), billed and counted in the budget like every other. The phase is read from the
ledger, so a resumed study continues where it stopped. Between and after them the study drains (nothing starts,
running trials end on their own); it is over when nothing follows, and a stop (budget spent, Ctrl-C, trials failing
the same way) stops what still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import sweep.planner.confirm as confirm
import sweep.planner.searchers as searchers
import sweep.planner.space as space
import sweep.planner.study_store as study_store
from sweep import faults, runlock, stops
from sweep.config import RunConfig
from sweep.contract import (
    EVAL_SEED_BASE,
    PRUNE,
    STOP,
    THROUGHPUT_PHASES,
    EndCause,
    TrialConfig,
    TrialPool,
    TrialState,
)
from sweep.ledger import LedgerView, Row, end_label, read_rows
from sweep.params import TrialParams, trial_params
from sweep.planner.accounts import Accounts
from sweep.planner.ends import Ends
from sweep.planner.phase import Done, Phase, StudyPhase, Wait
from sweep.planner.pruner import GO_ON, CostPruner, Verdict
from sweep.planner.running import Running
from sweep.planner.status import Status, best_so_far, trial_status
from sweep.prices import Price, seconds

#: Repeated proposals told and skipped in a row before the searcher is asked to get unstuck
#: (:meth:`sweep.planner.searchers.Searcher.stuck`).
MAX_REPEATS = 20
DUPLICATE = "repeat"


class Planner:
    """Runs a study to its end: budget spent, trial limit reached, or nothing more worth starting."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        pool: TrialPool,
        price: Price,
        profile: str,
        control_dt_s: float,
        progress: Callable[[Status], None] = lambda s: None,
        poll_s: float = 0.2,
        interrupted: Callable[[], bool | str] = lambda: False,
    ) -> None:
        self.cfg, self.run_dir, self.pool, self.price = cfg, Path(run_dir), pool, price
        self.profile, self.control_dt_s, self.progress = profile, control_dt_s, progress
        self.pruner = CostPruner(cfg.target.success)
        self.rows = LedgerView(read_rows(self.run_dir / "ledger.jsonl"))
        """The study's ledger as the planner keeps it: every row it read or wrote, each trial's latest."""
        self.running: dict[int, Running] = {}
        self.accounts = Accounts(cfg, price.usd_per_hour, self.rows, self.running)
        """The study's money from its rows and running trials (:mod:`sweep.planner.accounts`)."""
        self.phase = StudyPhase()
        """Where the study stands (search, confirmation, draining, over) and why (:mod:`sweep.planner.phase`)."""
        self.poll_s = poll_s
        """Seconds between polls of the workers (replayed trials need none)."""
        self.interrupted = interrupted
        """Truthy once a stop signal came (its name, :func:`sweep.stops.requested`: 'Ctrl-C', 'SIGTERM', 'SIGHUP'),
        even if the KeyboardInterrupt was swallowed on its way."""
        self.unrun = {t for t, r in self.rows.last.items() if not r.ran}
        """Trials told without running (infeasible configs, repeats): they do not count towards max_trials."""
        self.ends = Ends(cfg, price, self.run_dir, pool, self.rows, self.running, self.unrun, self.phase)
        """How a trial's end is recorded: its ledger row, Optuna's answer (:mod:`sweep.planner.ends`)."""
        self.tried: set[tuple] = set()
        """Configs already run, so the planner does not pay twice for the same evidence (filled by :meth:`run`, once
        a dead driver's orphans are closed: :meth:`_measured`)."""
        self.feasible = space.feasible_count(cfg, control_dt_s, price.memory_gib)
        """How many configs of the space satisfy the constraints."""
        self.searcher = searchers.build(cfg)
        """What proposes the search's configs (``search.sampler``, :mod:`sweep.planner.searchers`)."""
        self.view = searchers.SearchView(
            cfg=cfg,
            rows=self.rows,
            running=self.running,
            unrun=self.unrun,
            tried=self.tried,
            accounts=self.accounts,
            feasible=self.feasible,
            profile=profile,
            control_dt_s=control_dt_s,
            memory_gib=price.memory_gib,
        )
        """The study as the searcher reads it: the planner's own containers."""
        self.baseline_params = (
            trial_params(space.trial_config(space.baseline_params(cfg), cfg, profile, cfg.seeds.training, 1.0))
            if cfg.confirm.enabled or cfg.budget.runs is not None
            else None
        )
        """The baseline config as the ledger names it (None when the study runs no baseline: neither a confirmation
        phase nor ``budget.runs``)."""
        self.confirmation = confirm.Confirmation(
            cfg.confirm, self.baseline_params, cfg.seeds.training, space.probed_flags(cfg)
        )

    # -- accounting ------------------------------------------------------------------------------
    def state_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t, r in self._dispatched().items():
            state = TrialState.RUNNING if t in self.running else end_label(r)
            counts[state] = counts.get(state, 0) + 1
        return counts

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> Any:
        study = study_store.open_study(self.run_dir, self.searcher)
        with stops.held():  # a stop signal waits until every orphan has its end row and Optuna's answer
            drivers = runlock.lives(self.run_dir)
            study_store.close_orphans(study, self.rows, self.cfg, self.price, drivers, self.ends.close_orphan)
        self.tried.update(self._measured())
        if any(r.phase in ("probe", "confirm") for r in self.rows):  # a resumed study goes on probing or confirming
            self.phase.confirm()
        with self.ends.open():
            try:
                while True:
                    if self.interrupted():
                        raise KeyboardInterrupt
                    # Rows first: a trial that just ended is told (and its cost known) before the next is chosen.
                    self._collect(study)
                    self._start_trials(study)
                    self._check_budget()
                    self.progress(self.status())
                    if not self.running and self._over(study):
                        self.phase.finish()
                        break
                    # Woken by the next row: a trial waits for the answer to its checkpoint (GPU idle, billed).
                    self.pool.wait_rows(self.poll_s)
            except KeyboardInterrupt:
                how = self.interrupted()
                how = how if isinstance(how, str) and how else "Ctrl-C"
                self.phase.stop(f"interrupted ({how})", override=True)
                who = "by the user (Ctrl-C)" if how == "Ctrl-C" else f"by {how}"
                self.ends.stop_running(study, f"interrupted {who}; billed up to the stop")
                raise
            finally:
                study_store.record_end(study, self.why_ended())
                self.progress(self.status())
        return study

    def why_ended(self) -> str:
        """Why the study ended (or, while it runs, why it is ending): each change of its phase that said why (the
        search's end, the confirmation's, a stop: budget spent, Ctrl-C), in order; '' while it goes on."""
        return "; ".join(dict.fromkeys(why for _, why in self.phase.log if why))

    def _measured(self) -> set[tuple]:
        """The configs of the ledger's ended trials that ran, less those cut short through no doing of their config
        (the driver died, the study's end) and the throughput screens and probes: those measured no cost to target,
        so their config may run."""
        ends = self.rows.last.items()
        return {
            TrialParams.identity(r.params)
            for t, r in ends
            if t not in self.unrun and not r.by_study and space.in_space(r.params) and r.phase not in THROUGHPUT_PHASES
        }

    def status(self) -> Status:
        """The study now, for the progress display: spend against the budget, trials by state, the best so far and
        each running trial (:mod:`sweep.planner.status`), from the rows the planner holds."""
        price = self.price.usd_per_hour
        return Status(
            spent_usd=self.accounts.spent_usd(),
            budget_usd=self.accounts.budget_usd(),
            states={str(getattr(state, "value", state)): n for state, n in self.state_counts().items()},
            stopping=self.phase.why,
            phase=self._shown_phase(),
            best=best_so_far(self.rows),
            running=tuple(
                trial_status(n, run.config, run.params, run.rows, price) for n, run in sorted(self.running.items())
            ),
        )

    def _shown_phase(self) -> str:
        """What the study is doing, for the progress display: 'confirm', 'screen' while screen trials run, else
        'search'."""
        if self.phase.work is Phase.CONFIRMATION:
            return "confirm"
        return "screen" if any(run.phase == "screen" for run in self.running.values()) else "search"

    def _over(self, study: Any) -> bool:
        """With nothing running: whether the study has ended; a drained search moves on to the confirmation."""
        if self.phase.now is Phase.SEARCH and self._next_allowance(study) is not None:
            return False
        if self.phase.now is Phase.CONFIRMATION:
            return False
        if self.phase.now is Phase.DRAINING and self.phase.work is Phase.SEARCH and self.cfg.confirm.enabled:
            nothing = self.confirmation.begin(self.rows)
            if nothing is None:
                self.phase.confirm()
                faults.point("confirm")
                return False
            self.phase.finish(nothing.reason)
        return True

    def _next_allowance(self, study: Any) -> float | None:
        """What the search's next trial may spend (:meth:`Accounts.search_allowance`: less than a full allowance for
        its last trial), or None when the search may not start another; if not for good, the search drains (or the
        study stops)."""
        if self.phase.now is not Phase.SEARCH:
            return None
        started = study_store.started(study) - len(self.unrun) - study_store.outside_search(study)
        if started >= self.cfg.budget.max_trials:
            self.phase.close(f"trial limit ({self.cfg.budget.max_trials}) reached")
            return None
        done = self.searcher.done(study, self.view)
        if done is not None:
            self.phase.close(done.reason)
            return None
        keep = self._keeps_share()
        allowance = self.accounts.search_allowance(keep)
        if allowance is None and not self.running:
            if keep:
                share = f"{self.cfg.confirm.budget_share:.0%} of {self.accounts.budget_text()}"
                self.phase.close(f"search budget spent (the rest, at least {share}, is kept for the confirmation)")
            else:
                self.phase.stop("budget left cannot pay another trial")
        return allowance

    def _keeps_share(self) -> bool:
        """Whether the search leaves ``confirm.budget_share`` of the budget to the confirmation: only once there is
        something to confirm (a searched config other than the baseline reached the target). Until then the whole
        budget is the search's: a share kept for a confirmation that cannot happen would go unspent."""
        if not self.cfg.confirm.enabled or self.baseline_params is None:
            return False
        return bool(confirm.finalists(self.rows, self.baseline_params, self.cfg.confirm.top))

    def _start_trials(self, study: Any) -> None:
        """Start what the searcher proposes (or the confirmation's next trials) while slots and limits allow; a
        proposal that breaks a constraint or repeats a config that ran is told without running."""
        if self.phase.now is Phase.CONFIRMATION:
            self._start_confirmations(study)
            return
        repeats = 0
        while self.pool.idle() > 0 and (allowance := self._next_allowance(study)) is not None:
            if self._baseline_due():
                if not self._run_baseline(study):
                    return
                continue
            proposal = self.searcher.propose(study, self.view)
            if isinstance(proposal, Done):
                self.phase.close(proposal.reason)
                return
            if isinstance(proposal, Wait):
                if not self.running:  # nothing to wait for
                    self.phase.close(proposal.reason)
                return
            trial, params = proposal.trial, proposal.params
            if self._seeds_exhausted(study, trial, params):
                return
            trial_cfg = self._search_config(params, trial.number, proposal.phase)
            if allowance < self.accounts.allowance():  # the last trial: capped at what the budget has left
                trial_cfg.cap_s = min(trial_cfg.cap_s, seconds(allowance, self.price.usd_per_hour))
            if not proposal.rerun and proposal.phase == "search":
                knobs = trial_params(trial_cfg)
                found = space.violations(params, self.cfg, self.control_dt_s, self.price.memory_gib)
                if any(v > 0 for v in found.values()):
                    self.ends.tell_unrun(study, trial, knobs, space.infeasible_reason(found), found, trial_cfg)
                    continue
                key = TrialParams.identity(knobs)
                if key in self.tried:
                    # A config already run while others remain untried: no new evidence.
                    repeats += 1
                    reason = f"{DUPLICATE}: this config already ran"
                    self.ends.tell_unrun(study, trial, knobs, reason, {"repeat": 1.0}, trial_cfg)
                    if repeats >= MAX_REPEATS:  # the searcher is stuck
                        done = self.searcher.stuck(study, self.view, trial.number)
                        if done is not None:
                            self.phase.close(done.reason)
                            return
                        repeats = 0
                    continue
                self.tried.add(key)
            for name, value in proposal.attrs.items():
                trial.set_user_attr(name, value)
            self._dispatch(trial, trial_cfg, allowance)

    def _search_config(self, params: dict[str, Any], number: int, phase: str = "search") -> TrialConfig:
        """The TrialConfig of search trial ``number`` (or a screen trial, ``phase='screen'``): its training seed from
        the trial counter, the per-trial cap, raced at :meth:`Accounts.race_bar_usd` when pruning."""
        bar = self.accounts.race_bar_usd()
        trial_cfg = space.trial_config(
            params,
            self.cfg,
            self.profile,
            self.cfg.seeds.training + number,
            seconds(self.cfg.budget.trial_usd, self.price.usd_per_hour),
            race_cap_s=seconds(bar, self.price.usd_per_hour) if self.cfg.search.prune and bar is not None else None,
            phase=phase,
        )
        base = self.baseline_params
        identity = TrialParams.identity
        trial_cfg.baseline = base is not None and identity(trial_params(trial_cfg)) == identity(base)
        return trial_cfg

    def _seeds_exhausted(self, study: Any, trial: Any, params: dict[str, Any]) -> bool:
        """Never train on a held-out seed: when trial ``trial``'s seed would be one, it is told without running and
        the search drains."""
        if self.cfg.seeds.training + trial.number < EVAL_SEED_BASE:
            return False
        self.phase.close("training seeds exhausted: the next trial's seed would be a held-out seed")
        self.ends.tell_unrun(study, trial, params, self.phase.why, {"seed": 1.0})
        return True

    def _baseline_due(self) -> bool:
        """With ``budget.runs`` the study runs the baseline first: its cost to target prices the budget in baseline
        runs, and the trial is one of the baseline's seeds, which the confirmation runs anyway. Due while no trial of
        the baseline has run or runs (one the study's end stopped runs again; a screen of its config is none)."""
        if self.cfg.budget.runs is None or self.baseline_params is None:
            return False
        base = TrialParams.identity(self.baseline_params)
        dispatched = self._dispatched().items()
        ran = [r for t, r in dispatched if t not in self.unrun and not r.by_study and r.phase not in THROUGHPUT_PHASES]
        return not any(TrialParams.identity(r.params) == base for r in ran)

    def _run_baseline(self, study: Any) -> bool:
        """Run the baseline as a search trial on the next training seed, neither raced nor pruned (it measures the
        unit of the budget): an Optuna trial with no sampled params. False when the seeds are exhausted."""
        trial = study_store.new_trial(study)
        params = TrialParams.of(self.baseline_params).as_dict()
        if self._seeds_exhausted(study, trial, params):
            return False
        trial.set_user_attr("baseline_first", True)
        trial_cfg = self._search_config(params, trial.number)
        trial_cfg.race_cap_s = None
        self._dispatch(trial, trial_cfg, self.cfg.budget.trial_usd)
        return True

    def _dispatch(self, trial: Any, trial_cfg: TrialConfig, allowance: float) -> None:
        """Send a trial to the pool, its config kept in the study first (for a trial that dies before its first row)."""
        knobs = trial_params(trial_cfg)
        trial.set_user_attr("trial_config", asdict(trial_cfg))
        trial.set_user_attr("knobs", knobs)  # the ledger's params, for a trial that dies before its first row
        trial.set_user_attr("phase", trial_cfg.phase)
        self.running[trial.number] = Running(trial.number, trial, knobs, allowance=allowance, config=trial_cfg)
        faults.point("dispatch")
        # An absolute folder: a worker's working directory need not be the driver's.
        node = self.pool.submit(trial.number, trial_cfg, self.cfg.run_id, self.price, str(self.run_dir.resolve()))
        trial.set_user_attr("node", node)

    def _start_confirmations(self, study: Any) -> None:
        """Start the confirmation's next trials (:class:`sweep.planner.confirm.Confirmation`) while slots and budget
        allow: not pruned on cost, capped at the per-trial cap only, the whole budget theirs."""

        while self.pool.idle() > 0 and self.phase.now is Phase.CONFIRMATION:
            number = len(study.get_trials(deepcopy=False))  # the number the new trial gets
            start = self.confirmation.next(self._dispatched(), self.rows, number, self._payable)
            if isinstance(start, Done):
                self.phase.close(start.reason)
                return
            if isinstance(start, Wait):
                return
            if start.seed >= EVAL_SEED_BASE:  # never train on a held-out seed
                self.phase.close("training seeds exhausted: the next round's seed would be a held-out seed")
                return
            allowance = self.accounts.confirm_allowance(start.finalist.key)
            if allowance is None:
                if not self.running:
                    self.phase.stop("budget left cannot pay another confirmation trial")
                return
            trial = study_store.new_trial(study)
            cap_s = seconds(allowance, self.price.usd_per_hour)
            f = start.finalist
            phase = "probe" if start.probe else "confirm"
            trial_cfg = space.trial_config(
                f.params, self.cfg, self.profile, start.seed, cap_s, phase=phase, baseline=f.baseline
            )
            faults.point("confirm")
            self._dispatch(trial, trial_cfg, allowance)

    def _payable(self, key: tuple) -> bool:
        """Whether the budget left can pay a confirmation trial of config ``key`` now."""
        return self.accounts.confirm_allowance(key) is not None

    def _dispatched(self) -> dict[int, Row]:
        """Every dispatched trial's latest row; a running trial with no row yet as a 'running' row of its config."""
        return {**{n: run.placeholder() for n, run in self.running.items()}, **self.rows.last}

    def _collect(self, study: Any) -> None:
        for row in self.pool.drain_rows():
            run = self.running.get(row.trial)
            if run is None:  # a late row of a trial already closed: keep it out of the ledger
                continue
            row = self.ends.write(row)
            run.rows.append(row)
            if row.state == TrialState.RUNNING:
                faults.point("checkpoint")
                verdict = self._decide(run)
                self.pool.decide(run.number, row.iteration, verdict.decision)
                if verdict.decision == PRUNE:
                    run.optuna_trial.set_user_attr("prune_reason", verdict.reason)
            else:
                self.ends.finish(study, run, row)
        for number, error in self.pool.lost():
            run = self.running.get(number)
            if run is not None:
                self.ends.fail_lost(study, run, (TrialState.FAILED, EndCause.WORKER_LOST, f"worker lost: {error}"))

    def _decide(self, run: Running) -> Verdict:
        if self.phase.now is Phase.OVER:
            return Verdict(STOP, self.phase.why)
        if not self.cfg.search.prune or run.phase != "search" or run.config.baseline:
            return GO_ON  # a confirmation trial measures the cost to target, a baseline trial the budget's unit
        return self.pruner.decide(run.rows, self.accounts.race_bar_usd())

    def _check_budget(self) -> None:
        if self.accounts.spent_usd() >= self.accounts.budget_usd():
            self.phase.stop(f"study budget {self.accounts.budget_text()} spent")


__all__ = ["Planner"]
