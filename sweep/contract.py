"""The contract between the planner and a trial: what a trial is asked to run, how its config is named in the
ledger, and what the planner may answer after each checkpoint. Below every other module that speaks of trials
(planner, space, scheduler, workers, the trial itself), so none of them imports another to get these.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from sweep.errors import ConfigError
from sweep.record import END_STATES as END_STATES  # the record's states, spoken of here as well
from sweep.record import EndCause, Row, TrialState

#: First held-out seed; every training seed must be below it. Training seeds live in ``[0, EVAL_SEED_BASE)``, the
#: held-out panel's are ``EVAL_SEED_BASE + i``: the two can never meet, whichever path a seed takes.
EVAL_SEED_BASE = 2**31
DEFAULT_EPISODES = 256


def panel_seeds(episodes: int = DEFAULT_EPISODES) -> list[int]:
    """Seeds of the held-out panel: one per episode, disjoint from every training seed."""
    if episodes <= 0:
        raise ConfigError(f"target.eval_episodes: must be > 0 (got {episodes})")
    return [EVAL_SEED_BASE + i for i in range(episodes)]


def check_training_seed(seed: int, key: str = "seed") -> int:
    """Reject a training seed that could collide with the held-out panel."""
    if not 0 <= seed < EVAL_SEED_BASE:
        raise ConfigError(f"{key}: training seeds must be in [0, {EVAL_SEED_BASE}) (got {seed})")
    return seed


#: The keys that name a task's own success rule (``target.success_term`` / ``target.success_fn`` of a space, the
#: same keys of a trial); a backend takes those in its ``success_keys``. None of them set: the backend's own rule.
SUCCESS_KEYS = ("success_term", "success_fn")
#: ``success_fn``'s form: an importable module and a function in it (``my_project.tasks.success:stood_up``).
SUCCESS_FN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def success_rule(source: Any) -> dict[str, str]:
    """The success rule that ``source`` (a space's ``target`` section or a :class:`TrialConfig`) names: its
    :data:`SUCCESS_KEYS` that are set; empty for the backend's own rule."""
    return {key: getattr(source, key) for key in SUCCESS_KEYS if getattr(source, key, None) is not None}


def check_success_rule(rule: Mapping[str, Any], where: str = "") -> None:
    """The form of a success rule (what it names is checked where the task is loaded): one key at most, a
    termination term's name, a ``module:function``. ``where``: how the error names the keys' place."""
    if len(rule) > 1:
        raise ConfigError(f"{where}{' and '.join(rule)}: name one success rule, not both")
    for key, value in rule.items():
        if key == "success_term" and not (isinstance(value, str) and value.isidentifier()):
            raise ConfigError(f"{where}{key}={value!r}: the name of a termination term of the task, e.g. goal_reached")
        if key == "success_fn" and not (isinstance(value, str) and SUCCESS_FN.fullmatch(value)):
            raise ConfigError(
                f"{where}{key}={value!r}: module:function, e.g. my_project.tasks.success:stood_up (called as "
                "function(env, ended) -> bool tensor)"
            )


#: The training-side signals a gate can read (``target.eval_gate_signal``), as a sentence names them: the success
#: share of the training episodes that ended since the last checkpoint (a ledger row's ``train_success``), or the
#: share of the training envs on track to succeed (``on_track``, :meth:`TaskEnv.on_track_share`).
GATE_SIGNALS = {"train_success": "training episodes' success", "on_track": "training envs on track"}

#: Phases a trial pays once, whatever it trains; how long they take depends on what ran before it (a warm XLA
#: cache, imports already done), so trials are compared without them (the ledger's ``race_*`` figures).
ONE_TIME_PHASES = ("startup", "compile")
#: Phases of a study, in order: the throughput screen of the searched configs (``search.screen``), the search, the
#: throughput probes of the exact flags its leader holds, then the confirmation of its finalists on further seeds.
STUDY_PHASES = ("screen", "search", "probe", "confirm")
#: Phases whose trials measure throughput alone: one short round of training, no held-out pass, no cost to target
#: (no seed of their config).
THROUGHPUT_PHASES = ("screen", "probe")
#: Training iterations of a screen trial (``phase='screen'``): enough for a steady rate of env steps per training
#: second once the trial's compilation and warm-up are done (docs/benchmarks.md, "A route to breadth").
SCREEN_ITERATIONS = 5

#: A running trial's reservation of the study budget covers its allowance plus an overrun (the cap is checked after
#: each iteration): the planner reserves it, the config's checks make sure one trial's fits.
RESERVE_MARGIN = 1.1


def one_time_s(phases_s: Mapping[str, float]) -> float:
    """Seconds of start-up and compilation (:data:`ONE_TIME_PHASES`) in a row's phase seconds."""
    return sum(float(phases_s.get(p, 0.0)) for p in ONE_TIME_PHASES)


class Decision(str, Enum):
    """What the planner answers a running trial after each checkpoint row (a ``str``: it crosses Ray as text)."""

    CONTINUE = "continue"
    PRUNE = "prune"
    """Stop: it cannot beat the best known cost to target."""
    STOP = "stop"
    """Stop: the study is ending (budget spent, Ctrl-C)."""


CONTINUE, PRUNE, STOP = Decision.CONTINUE, Decision.PRUNE, Decision.STOP

#: Takes each ledger row of a running trial and answers with a :class:`Decision` (as text).
Sink = Callable[[Row], str]


#: An end: its state, why, and the reason in words.
Ending = tuple[TrialState, EndCause, str]


def cap_reached(cfg: TrialConfig, billable_s: float, phases_s: Mapping[str, float]) -> Ending | None:
    """How a trial past its cap ends, or None while it may go on: the per-trial cap on billable seconds, or the race
    cap on equal terms (billable seconds less start-up and compilation)."""
    if billable_s >= cfg.cap_s:
        return TrialState.CAPPED, EndCause.CAP, f"per-trial cap of {cfg.cap_s:g} billable seconds reached"
    race_s = billable_s - one_time_s(phases_s)
    if cfg.race_cap_s is not None and race_s >= cfg.race_cap_s:
        return (
            TrialState.CAPPED,
            EndCause.RACE_CAP,
            f"capped at the best known cost to target on equal terms, times the race slack ({cfg.race_cap_s:.1f} "
            "billable s past start-up and compilation)",
        )
    return None


#: How a throughput probe ends (``phase='probe'``): after its first round of training, before any held-out pass.
PROBE_END: Ending = (TrialState.CAPPED, EndCause.PROBE, "throughput probe: one round of training, no held-out pass")
#: How a screen trial ends (``phase='screen'``): after its :data:`SCREEN_ITERATIONS`, before any held-out pass.
SCREEN_END: Ending = (
    TrialState.CAPPED,
    EndCause.PROBE,
    f"throughput screen: {SCREEN_ITERATIONS} iterations of training, no held-out pass",
)


def throughput_end(phase: str) -> Ending | None:
    """How a trial of study ``phase`` ends after its first round of training (:data:`THROUGHPUT_PHASES`); None for a
    trial that trains to its target or cap."""
    return {"probe": PROBE_END, "screen": SCREEN_END}.get(phase)


def end_state(success: float | None, target: float, answer: str) -> Ending | None:
    """How a trial ends after a checkpoint row, or None when it goes on: reached once its held-out success meets the
    target, else as the planner's ``answer`` says. The one rule for every runner."""
    if success is not None and success >= target:
        return TrialState.REACHED, EndCause.REACHED, f"held-out success {success:.3f} >= target {target:g}"
    if answer == Decision.PRUNE:
        return TrialState.PRUNED, EndCause.PRUNED, "stopped by the planner: cannot beat the best cost to target"
    if answer == Decision.STOP:
        return TrialState.CAPPED, EndCause.STUDY_END, "stopped by the planner: study budget spent"
    return None


@dataclass
class TrialConfig:
    """Everything one trial needs; every field can be set on the command line as ``key=value``."""

    backend: str = "mjx_locomotion"
    """Simulator backend (registry name)."""
    profile: str = "cpu"
    """Task difficulty profile of the backend ('cpu' or 'gpu' for mjx_locomotion)."""
    num_envs: int = 256
    """Parallel environments in the training env."""
    num_steps_per_env: int = 24
    """Rollout horizon: control steps per env per PPO iteration."""
    num_mini_batches: int = 4
    """PPO mini-batches per epoch."""
    num_learning_epochs: int = 5
    """PPO epochs per iteration."""
    seed: int = 1
    """Training seed, in [0, 2**31); held-out seeds are above that range."""
    target: float = 0.9
    """Held-out success rate that ends the trial as 'reached'."""
    eval_episodes: int = DEFAULT_EPISODES
    """Episodes in the held-out panel (one env each)."""
    eval_every_steps: int = 240
    """Control steps per env between held-out evaluations (rounded to whole iterations)."""
    eval_gate: float = 0.0
    """Skip a checkpoint's held-out pass while the training-side signal ``eval_gate_signal`` is below this (0:
    never); a pass always runs at the cap and whenever the trainer or env gives no such value."""
    eval_gate_signal: str = "train_success"
    """The training-side signal ``eval_gate`` reads (:data:`sweep.trial.evaluation.GATE_SIGNALS`)."""
    success_term: str | None = None
    """A task's own success rule: the termination term that ends a successful episode (``target.success_term`` of a
    space); None with ``success_fn`` None: the backend's own rule."""
    success_fn: str | None = None
    """A task's own success rule: ``module:function`` called after each step (``target.success_fn`` of a space)."""
    cap_s: float = 600.0
    """Per-trial cap in billable seconds; the trial ends 'capped' past it."""
    race_cap_s: float | None = None
    """Cap on billable seconds past start-up and compilation (the best known cost to target on equal terms times
    ``race_slack``, set by the planner when it prunes); None: only ``cap_s``."""
    mode: str = "sweep"
    """'sweep' (this runner, perf flags apply) or 'stock' (rsl-rl OnPolicyRunner.learn unchanged)."""
    device: str = "auto"
    """'auto' (the GPU when there is one), 'cpu', 'cuda' or 'cuda:N'."""
    flags: dict[str, Any] = field(default_factory=dict)
    """Performance flags by name (see sweep.perf); missing flags take their defaults."""
    save_checkpoints: bool = True
    """Write the latest model to the trial folder at every checkpoint (sweep.checkpoints)."""
    checkpoints: str = "all"
    """Which checkpoints stay on disk when the trial ends: 'all' (every trial's latest) or 'reached' (only
    trials that reached the target; the others' files are deleted). A reached one is never deleted."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. the recorded table of the replay backend)."""
    phase: str = "search"
    """The study phase the trial belongs to, recorded on its ledger rows: 'screen' (a config's throughput over
    :data:`SCREEN_ITERATIONS`, no held-out pass), 'search', 'probe' (a throughput probe: it ends after its first round
    of training, with no held-out pass) or 'confirm' (a finalist re-run on a further training seed by the planner's
    confirmation)."""
    baseline: bool = False
    """The trial runs the study's baseline config (recorded on its ledger rows, for the comparison)."""

    @classmethod
    def of(cls, saved: Mapping[str, Any]) -> TrialConfig:
        """A config as saved (``dataclasses.asdict``: a study's user attribute, ``recommended.yaml``'s ``trial``
        section), by this or an earlier version of sweep: keys it no longer has are left out."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in saved.items() if k in names})

    @property
    def eval_every(self) -> int:
        """Iterations between evaluations."""
        return max(1, round(self.eval_every_steps / self.num_steps_per_env))

    def validate(self) -> TrialConfig:
        """Reject bad values before anything is built (errors name the key); the names a backend, the flag
        catalog and the checkpoint policy know are checked where those live (:func:`sweep.trial.runner.checked`)."""
        for key in ("num_envs", "num_steps_per_env", "num_mini_batches", "num_learning_epochs", "eval_episodes"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{key}: must be a positive integer (got {value!r})")
        for key in ("eval_every_steps", "cap_s"):
            if not isinstance(getattr(self, key), (int, float)) or getattr(self, key) <= 0:
                raise ConfigError(f"{key}: must be > 0 (got {getattr(self, key)!r})")
        if not 0 < self.target <= 1:
            raise ConfigError(f"target: must be in (0, 1] (got {self.target!r})")
        if not 0 <= self.eval_gate < self.target:
            raise ConfigError(f"eval_gate: must be in [0, target) (got {self.eval_gate!r}); 0 evaluates every time")
        if self.eval_gate_signal not in GATE_SIGNALS:
            raise ConfigError(f"eval_gate_signal: must be one of {list(GATE_SIGNALS)} (got {self.eval_gate_signal!r})")
        check_success_rule(success_rule(self))
        if self.phase not in STUDY_PHASES:
            raise ConfigError(f"phase: must be one of {list(STUDY_PHASES)} (got {self.phase!r})")
        if self.mode not in ("sweep", "stock"):
            raise ConfigError(f"mode: must be 'sweep' or 'stock' (got {self.mode!r})")
        if self.num_envs * self.num_steps_per_env < self.num_mini_batches:
            raise ConfigError("num_mini_batches: more mini-batches than samples per iteration")
        check_training_seed(self.seed)
        return self


class TrialRunner(Protocol):
    """Runs one trial to its end: every row goes to ``sink`` (which answers), the end row is returned.
    :func:`sweep.trial.runner.run_trial` simulates; :func:`sweep.backends.replay.replay_trial` serves a recording."""

    def __call__(
        self,
        cfg: TrialConfig,
        sink: Sink,
        *,
        run_id: str = ...,
        trial: int = ...,
        price_usd_per_hour: float = ...,
        price_label: str = ...,
        out_dir: str | Path | None = ...,
    ) -> Row: ...


class TrialPool(Protocol):
    """Where the planner's trials run (:class:`sweep.execution.workers.WorkerPool`,
    :class:`sweep.execution.inline.InlinePool`)."""

    size: int
    """Trials that can run at once."""
    fresh: set[int]
    """Trials submitted to a worker that had run none before (each paid its worker's whole start-up)."""

    def idle(self) -> int:
        """Free slots now."""

    def submit(self, trial: int, cfg: TrialConfig, run_id: str, price: Any, out_dir: str) -> str:
        """Start a trial; returns where it runs (a node id)."""

    def drain_rows(self) -> list[Row]:
        """Rows sent by running trials since the last call."""

    def wait_rows(self, timeout_s: float) -> None:
        """Return as soon as a row is waiting to be drained, or after ``timeout_s`` seconds."""

    def lost(self) -> list[tuple[int, str]]:
        """Trials whose worker died since the last call: (trial, reason)."""

    def decide(self, trial: int, iteration: int, answer: str) -> None:
        """Answer a trial's checkpoint row."""

    def stop_all(self) -> None:
        """Stop every worker."""
