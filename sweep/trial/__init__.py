"""One trial, worker side: build the env and rsl-rl PPO (:mod:`~sweep.trial.learner`), train with phase timers,
evaluate on the held-out panel (:mod:`~sweep.trial.evaluation`), write checkpoints and TensorBoard scalars
(:mod:`~sweep.trial.tblog`), and send one ledger row per checkpoint (:mod:`~sweep.trial.runner`);
``python -m sweep.trial`` runs one from the command line (:mod:`~sweep.trial.cli`)."""

from sweep.trial.runner import run_trial, runner_for

__all__ = ["run_trial", "runner_for"]
