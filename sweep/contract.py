"""The contract between the planner and a trial: what a trial is asked to run, how its config is named in the
ledger, and what the planner may answer after each checkpoint. Below every other module that speaks of trials
(planner, space, scheduler, workers, the trial itself), so none of them imports another to get these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sweep import checkpoints, perf
from sweep.backends import get_backend
from sweep.errors import ConfigError
from sweep.evaluation import DEFAULT_EPISODES, GATE_SIGNALS, check_training_seed
from sweep.ledger import STUDY_PHASES, one_time_s

if TYPE_CHECKING:
    from sweep.ledger import Row


class Decision(str, Enum):
    """What the planner answers a running trial after each checkpoint row (a ``str``: it crosses Ray as text)."""

    CONTINUE = "continue"
    PRUNE = "prune"
    """Stop: it cannot beat the best known cost to target."""
    STOP = "stop"
    """Stop: the study is ending (budget spent, Ctrl-C)."""


CONTINUE, PRUNE, STOP = Decision.CONTINUE, Decision.PRUNE, Decision.STOP

#: Takes each ledger row of a running trial and answers with a :class:`Decision` (as text).
Sink = Callable[["Row"], str]


def capped_reason(cap_s: float) -> str:
    return f"per-trial cap of {cap_s:g} billable seconds reached"


#: How the end reasons of :func:`cap_reached` begin: a trial stopped by its own cap, not by the study's end.
CAP_REASONS = ("per-trial cap of ", "capped at the best known cost")


def stopped_by_cap(row: Mapping[str, Any]) -> bool:
    """Whether a trial's end row says it stopped without reaching because of its cost: pruned after running, or
    capped by its own cap (not by the study's end: budget spent, Ctrl-C). Such a seed is censored: its cost to target
    is more than it spent."""
    if row.get("state") == "pruned":
        return float(row.get("billable_s", 0.0)) > 0
    return row.get("state") == "capped" and str(row.get("reason", "")).startswith(CAP_REASONS)


#: How the reason begins of a trial the planner closed because its driver stopped (``sweep.study_store.close_orphans``).
DRIVER_STOPPED = "driver stopped"


def ended_by_study(row: Mapping[str, Any]) -> bool:
    """Whether a trial ended through no doing of its config: stopped at the study's end (budget spent, Ctrl-C) or
    closed on resume after its driver stopped. Such a trial is no seed of its config: a resumed confirmation runs it
    again (a lost worker, which could recur, is not excused)."""
    if row.get("state") == "capped":
        return not stopped_by_cap(row)
    return row.get("state") == "failed" and str(row.get("reason", "")).startswith(DRIVER_STOPPED)


def cap_reached(cfg: TrialConfig, billable_s: float, phases_s: Mapping[str, float]) -> str | None:
    """Why a trial is past its cap (the end row's reason), or None while it may go on: the per-trial cap on
    billable seconds, or the race cap on equal terms (billable seconds less start-up and compilation)."""
    if billable_s >= cfg.cap_s:
        return capped_reason(cfg.cap_s)
    race_s = billable_s - one_time_s(phases_s)
    if cfg.race_cap_s is not None and race_s >= cfg.race_cap_s:
        return (
            f"capped at the best known cost to target on equal terms, times the race slack ({cfg.race_cap_s:.1f} "
            "billable s past start-up and compilation)"
        )
    return None


def end_state(success: float | None, target: float, answer: str) -> tuple[str, str] | None:
    """How a trial ends after a checkpoint row (state, reason), or None when it goes on: ``reached`` once its
    held-out success meets the target, else as the planner's ``answer`` says. The one rule for every runner."""
    if success is not None and success >= target:
        return "reached", f"held-out success {success:.3f} >= target {target:g}"
    if answer == Decision.PRUNE:
        return "pruned", "stopped by the planner: cannot beat the best cost to target"
    if answer == Decision.STOP:
        return "capped", "stopped by the planner: study budget spent"
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
    """The training-side signal ``eval_gate`` reads (:data:`sweep.evaluation.GATE_SIGNALS`)."""
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
    """The study phase the trial belongs to, recorded on its ledger rows: 'search' or 'confirm' (a finalist re-run
    on a further training seed by the planner's confirmation)."""
    baseline: bool = False
    """The trial runs the study's baseline config (recorded on its ledger rows, for the comparison)."""

    @property
    def eval_every(self) -> int:
        """Iterations between evaluations."""
        return max(1, round(self.eval_every_steps / self.num_steps_per_env))

    def validate(self) -> TrialConfig:
        """Reject bad values before anything is built (errors name the key)."""
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
        if self.phase not in STUDY_PHASES:
            raise ConfigError(f"phase: must be one of {list(STUDY_PHASES)} (got {self.phase!r})")
        if self.mode not in ("sweep", "stock"):
            raise ConfigError(f"mode: must be 'sweep' or 'stock' (got {self.mode!r})")
        if self.num_envs * self.num_steps_per_env < self.num_mini_batches:
            raise ConfigError("num_mini_batches: more mini-batches than samples per iteration")
        check_training_seed(self.seed)
        checkpoints.check_keep(self.checkpoints)
        backend = get_backend(self.backend)
        backend.check_profile(self.profile)
        perf.resolve(self.flags)
        return self


#: How a flag is named in a config's params: ``flags.<name>`` (as under ``knobs.flags`` of a space).
FLAG_PREFIX = "flags."
#: The spelling of ledgers and recorded tables written before the names were unified; read, never written.
OLD_FLAG_PREFIX = "flag."


def named_flags(params: Mapping[str, Any]) -> dict[str, Any]:
    """The flags named in ``params`` (either spelling), unresolved: name -> value."""
    out = {}
    for key, value in params.items():
        for prefix in (FLAG_PREFIX, OLD_FLAG_PREFIX):
            if key.startswith(prefix):
                out[key[len(prefix) :]] = value
    return out


@dataclass(frozen=True)
class TrialParams:
    """What identifies a config: the planner proposes it, the ledger records it, the replay matches on it.

    Backend and profile are not part of it (they are fixed within a study, and a replayed trial matches a
    recording made with another backend).
    """

    num_envs: int
    num_steps_per_env: int
    num_mini_batches: int
    num_learning_epochs: int = 5
    mode: str = "sweep"
    flags: tuple[tuple[str, Any], ...] = ()
    """Every catalog flag with its value (defaults filled in), sorted by name."""

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> TrialParams:
        """From a planner suggestion, a ledger row's ``params`` or a recorded table's (mini-batches and epochs
        default as in :class:`TrialConfig` where a row leaves them out)."""
        return cls(
            num_envs=int(params["num_envs"]),
            num_steps_per_env=int(params["num_steps_per_env"]),
            num_mini_batches=int(params.get("num_mini_batches", 4)),
            num_learning_epochs=int(params.get("num_learning_epochs", 5)),
            mode=str(params.get("mode", "sweep")),
            flags=tuple(sorted(perf.resolve(named_flags(params)).items())),
        )

    @classmethod
    def from_config(cls, cfg: TrialConfig) -> TrialParams:
        return cls(
            cfg.num_envs,
            cfg.num_steps_per_env,
            cfg.num_mini_batches,
            cfg.num_learning_epochs,
            cfg.mode,
            tuple(sorted(perf.resolve(cfg.flags).items())),
        )

    def key(self) -> tuple:
        """The one identity of a config (hashable; equal for equal configs however they were spelled)."""
        return (
            self.num_envs,
            self.num_steps_per_env,
            self.num_mini_batches,
            self.num_learning_epochs,
            self.mode,
            self.flags,
        )

    def as_dict(self) -> dict[str, Any]:
        """The ledger's spelling: knobs by name, flags as ``flags.<name>``."""
        return {
            "num_envs": self.num_envs,
            "num_steps_per_env": self.num_steps_per_env,
            "num_mini_batches": self.num_mini_batches,
            "num_learning_epochs": self.num_learning_epochs,
            "mode": self.mode,
            **{FLAG_PREFIX + k: v for k, v in self.flags},
        }


def trial_params(cfg: TrialConfig) -> dict[str, Any]:
    """A trial's config as the ledger records it: backend, profile and its :class:`TrialParams`."""
    return {"backend": cfg.backend, "profile": cfg.profile, **TrialParams.from_config(cfg).as_dict()}


def config_key(params: Mapping[str, Any]) -> tuple:
    """The identity of the config named by ``params`` (any spelling): ``TrialParams.of(params).key()``."""
    return TrialParams.of(params).key()


class TrialRunner(Protocol):
    """Runs one trial to its end: every row goes to ``sink`` (which answers), the end row is returned.
    :func:`sweep.trial.run_trial` simulates; :func:`sweep.backends.replay.replay_trial` serves a recording."""

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
    """Where the planner's trials run (:class:`sweep.workers.WorkerPool`, :class:`sweep.inline.InlinePool`)."""

    size: int
    """Trials that can run at once."""

    def idle(self) -> int:
        """Free slots now."""

    def submit(self, trial: int, cfg: TrialConfig, run_id: str, price: Any, out_dir: str) -> str:
        """Start a trial; returns where it runs (a node id)."""

    def drain_rows(self) -> list[dict]:
        """Rows sent by running trials since the last call."""

    def wait_rows(self, timeout_s: float) -> None:
        """Return as soon as a row is waiting to be drained, or after ``timeout_s`` seconds."""

    def lost(self) -> list[tuple[int, str]]:
        """Trials whose worker died since the last call: (trial, reason)."""

    def decide(self, trial: int, iteration: int, answer: str) -> None:
        """Answer a trial's checkpoint row."""

    def stop_all(self) -> None:
        """Stop every worker."""
