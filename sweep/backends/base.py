"""The backend contract: what a simulator must give a trial.

A backend builds batched environments as rsl-rl ``VecEnv`` objects (rsl-rl-lib 5.5.1 interface) and
names the task's control period, its success rule and its knobs. The same class builds the
training environment and a separate evaluation environment; only the evaluation one is ever reset
with held-out panel seeds (:mod:`sweep.trial.evaluation`). A backend whose task registers its own rsl-rl
config trains with it (:meth:`Backend.agent_config`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from sweep.backends.policy import MlpPolicy, PolicyShape
from sweep.contract import TrialRunner
from sweep.errors import ConfigError

#: The default memory model (:meth:`Backend.memory_gib`), the embedded MJX task's measured order: device bytes per
#: env of the simulator state plus XLA work buffers, and rollout-storage bytes per env per horizon step (obs x2,
#: actions, values, log-probs, ... in float32).
SIM_BYTES_PER_ENV = 256 * 1024
STORAGE_BYTES_PER_ENV_STEP = 1024


class TaskEnv(VecEnv):
    """An rsl-rl ``VecEnv`` with what sweep needs on top.

    ``step`` must put in ``extras``:

    - ``"time_outs"``: bool tensor (num_envs,), episodes cut by the time limit (not a terminal state);
    - ``"success"``: bool tensor (num_envs,), meaningful where ``dones`` is set: the finished episode
      met the backend's success rule (survived and tracked the command well enough).

    It may also put ``"cannot_succeed"``: bool tensor (num_envs,), episodes still running whose failure is
    already decided (e.g. their tracking error so far exceeds what the rule allows over a whole episode), so
    that an evaluation pass can reach its verdict before they end.

    Finished environments are reset inside ``step``; the returned observation is the new episode's.
    """

    control_dt_s: float
    """Seconds of simulated time per ``step`` (one policy decision)."""

    @abstractmethod
    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """Start episode ``i`` of every environment ``i`` from ``seeds[i]`` and return the observations.

        Used by the held-out evaluation only: ``len(seeds) == num_envs``.
        """

    def warm_up(self) -> None:
        """Compile whatever the first ``step`` would compile, and leave the env as it was.

        Lets a trial bill compilation as its own phase. The default does nothing.
        """

    def policy_steps(self, policy: MlpPolicy, steps: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Run ``steps`` control steps of ``policy`` on the simulator's own device, with no Python per step, and
        return which envs have finished their first episode since :meth:`reset_with_seeds` and which of those
        succeeded, by the rules of :func:`sweep.trial.evaluation.evaluate` (a decided failure finishes an episode).
        None: this env cannot (the default), and the caller steps the policy itself."""
        return None

    def compile_policy_steps(self, shape: PolicyShape) -> bool:
        """Compile what :meth:`policy_steps` runs for a policy of ``shape``; False when this env has no such loop
        (the default)."""
        return False

    def on_track_share(self, min_steps: int) -> float | None:
        """Training side, read once per checkpoint: the share of the envs at least ``min_steps`` control steps into
        their episode that would count as a success if it ended now. Unlike the success of the episodes that ended,
        it does not lag the policy by the episodes still running. None: this env does not say (the default), or no
        env is that far into an episode."""
        return None

    def kernel_load_s(self) -> float:
        """Seconds this process has spent so far compiling (or loading from a disk cache) simulator kernels at their
        first launch, a one-time cost per process that a JIT simulator pays inside its first steps; the trial moves
        what its steps paid from 'sim' to 'compile', so a config's cost on equal terms does not depend on whether
        its trial was its worker's first. The default: 0.0 (a simulator that compiles before it steps)."""
        return 0.0

    def synchronize(self) -> None:
        """Wait for queued simulator work; called at phase boundaries only. The default does nothing."""

    def sim_only_step(self, actions: torch.Tensor) -> None:
        """Advance the simulator without returning anything to the caller (the throughput limit).

        The default simply calls ``step``; backends may skip the observation hand-over.
        """
        self.step(actions)

    def close(self) -> None:
        """Release simulator resources (nothing by default)."""


def sim_only_rate(env: TaskEnv, steps: int) -> float:
    """Env steps per second of the simulator alone, fixed random actions, nothing learned (the limit)."""
    import time

    actions = torch.randn(env.num_envs, env.num_actions, device=env.device) * 0.5
    env.sim_only_step(actions)  # compile outside the timing
    env.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        env.sim_only_step(actions)
    env.synchronize()
    return env.num_envs * steps / (time.perf_counter() - t0)


@dataclass(frozen=True)
class Profile:
    """A named difficulty level of a task: what a trial's success means and how hard it is."""

    name: str
    """Profile name used on the command line (``profile=cpu``)."""
    episode_steps: int
    """Episode length in control steps; an episode that lasts this long has survived."""
    success_threshold: float
    """Largest allowed mean tracking error for a successful episode (task units, e.g. m/s)."""
    description: str
    """One line for reports: floor, disturbances, commands."""


class Backend(ABC):
    """A simulator + task able to build training and evaluation environments."""

    name: str
    """Registry name (``backend=mjx_locomotion``)."""
    success_rule: str
    """Human-readable success rule, shown in reports and the exported YAML."""
    knobs: tuple[str, ...]
    """Task knobs the planner may sweep (besides num_envs and num_steps_per_env)."""
    requires: tuple[str, ...] = ()
    """Modules every trial of this backend imports, some only lazily deep inside a simulator: the driver imports
    them before any worker starts, so a missing one is one line naming its package, not a failed trial each."""
    import_noise: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Per module of :attr:`requires`, the opening words of lines it prints on import that say nothing to a user
    (kept off the screen by :func:`sweep.errors.import_quietly`), so a run's first line is sweep's own."""
    success_keys: tuple[str, ...] = ()
    """The keys of a task's own success rule this backend takes (``target.success_term``, ``target.success_fn``: of
    :data:`sweep.contract.SUCCESS_KEYS`); none: it judges success by :attr:`success_rule` only."""
    xla_cache: bool = False
    """Its env shapes compile through XLA into the persistent cache (``compile_cache``), so they can be compiled
    ahead of the trials that need them (:mod:`sweep.execution.precompile`)."""

    @abstractmethod
    def profiles(self) -> dict[str, Profile]:
        """The difficulty profiles this backend offers, by name."""

    @abstractmethod
    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> TaskEnv:
        """Build ``num_envs`` environments on ``device`` whose training randomness derives from ``seed``."""

    def make_eval_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> TaskEnv:
        """Build the held-out panel's env of ``num_envs`` envs (reset with panel seeds only); by default another
        :meth:`make_env` in this process, with the trial's ``seed`` for what the panel's seeds do not reset."""
        return self.make_env(num_envs, seed, device, profile, **knobs)

    def agent_config(self, cfg: Any, flags: dict[str, Any], trial_dir: Path | None = None) -> dict[str, Any]:
        """The rsl-rl runner/agent config a trial of ``cfg`` trains with, the resolved perf ``flags`` applied: sweep's
        own (:func:`sweep.backends.agent.agent_config`) unless the backend's task registers one. ``trial_dir``: the
        folder of a trial that ran it, where a backend that records its config (:meth:`record_configs`) reads it
        back."""
        from sweep.backends.agent import agent_config

        return agent_config(cfg, flags)

    def record_configs(self, train_cfg: dict[str, Any], env: TaskEnv, folder: Path) -> None:  # noqa: B027 (optional)
        """Write into a trial's ``folder`` the configs it trains with, as the task's own trainer writes them; the
        default writes nothing."""

    def preload(  # noqa: B027 (optional)
        self, num_envs: int, device: str, profile: str, policy: PolicyShape | None = None, **knobs: object
    ) -> None:
        """Compile, or load from the persistent cache, what an env of this shape would compile, without building an
        env, so that a later env of this shape in this process compiles nothing: a training env's step, or with
        ``policy``, what a held-out panel's pass runs there (its policy loop, :meth:`TaskEnv.policy_steps`, where the
        env has one on that device; else its step). Safe to call from a thread other
        than the trial's. The default does nothing."""

    def check_installed(self) -> None:  # noqa: B027 (optional hook: most backends need nothing)
        """Raise :class:`~sweep.errors.MissingExtraError` naming the install step if the simulator is absent."""

    def check_profile(self, profile: str, key: str = "profile") -> None:
        """Reject an unknown profile in one line listing the valid ones (no simulator import)."""
        if profile not in self.profiles():
            raise ConfigError(f"{key}: unknown profile {profile!r}; valid: {', '.join(self.profiles())}")

    def preflight(self, profile: str, options: dict[str, Any], success: dict[str, str] | None = None) -> None:
        """Everything checkable before compute on this machine (installed, task, files, what the success rule names:
        ``success``, the rule's keys that are set, :func:`sweep.contract.success_rule`); by default the install."""
        self.check_installed()

    def starter_space(self, profile: str, options: dict[str, Any], success: dict[str, str] | None = None) -> str:
        """A search space file's text for ``profile``, written from what its task registers (``sweep init``); a
        backend whose tasks are all its own has none."""
        raise ConfigError(f"backend={self.name}: sweep init writes spaces for Isaac Lab tasks (backend=isaaclab)")

    def success_text(self, cfg: Any) -> str:
        """The success rule a trial of ``cfg`` (a TrialConfig) is judged by, in words: :attr:`success_rule` unless the
        backend takes a task's own rule."""
        return self.success_rule

    def control_dt_s(self, profile: str) -> float:
        """Seconds of simulated time per policy step for ``profile`` (used by the update-period constraint)."""
        return 0.02

    def versions(self) -> dict[str, str]:
        """Package versions that define this backend's physics, for the exported YAML."""
        return {}

    def memory_gib(self, num_envs: int, num_steps_per_env: int, eval_episodes: int) -> float:
        """Order-of-magnitude device memory of a config (GiB): the simulator's training and held-out envs and the
        rollout storage, by the embedded task's measured sizes unless a backend knows its own. The planner marks
        configs that would not fit as infeasible, nothing run."""
        sim = (num_envs + eval_episodes) * SIM_BYTES_PER_ENV
        return (sim + num_envs * num_steps_per_env * STORAGE_BYTES_PER_ENV_STEP) / 2**30

    def trial_runner(self) -> TrialRunner | None:
        """The runner of this backend's trials when they are not simulated by :func:`sweep.trial.runner.run_trial`
        (the replay serves recorded trials); None, the default: simulated."""
        return None

    def export_section(self, cfg: Any, agent_cfg: dict[str, Any]) -> dict[str, Any]:
        """What ``recommended.yaml`` holds for this backend besides the common sections, from the trial's config and
        the rsl-rl ``agent_cfg`` it trained with: top-level keys, which may replace ``agent`` with what the backend's
        own trainer reads. Nothing by default."""
        return {}

    def trainer_command(self, doc: dict[str, Any]) -> str | None:
        """The line that trains the recommended config in the backend's own trainer, from the ``recommended.yaml``
        document ``doc`` (its :meth:`export_section`); None where the backend has no trainer of its own."""
        return None


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device}: torch sees no GPU; use device=cpu or device=auto")
    return device
