"""One trial: build the envs and rsl-rl PPO, train with phase timers, evaluate on held-out seeds, stop.

Reads top to bottom: :func:`run_trial` builds, compiles, then loops rollout -> learn -> log, and
every ``eval_every`` iterations evaluates and checkpoints, hands a ledger row to ``sink`` and obeys
its answer. It ends ``reached`` (held-out success >= target), ``capped`` (per-trial cap or stop
asked), ``pruned`` (the planner said so) or ``failed`` (with the reason). ``mode='stock'`` trains
with rsl-rl's own ``OnPolicyRunner.learn`` unchanged, as the baseline.

CLI: ``python -m sweep.trial num_envs=256 num_steps_per_env=24 profile=cpu price.gpu=h200``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sweep import checkpoints, perf
from sweep.backends import get_backend
from sweep.errors import ConfigError
from sweep.evaluation import DEFAULT_EPISODES, check_training_seed, evaluate, panel_seeds
from sweep.learner import build_learner, device_sync
from sweep.ledger import PhaseClock, Row
from sweep.tblog import TrialScalars

#: What a sink may answer after each checkpoint row.
CONTINUE, PRUNE, STOP = "continue", "prune", "stop"


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
    cap_s: float = 600.0
    """Per-trial cap in billable seconds; the trial ends 'capped' past it."""
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


def agent_config(cfg: TrialConfig) -> dict[str, Any]:
    """The rsl-rl 5.5 runner/agent config this trial trains with (also what the exported YAML shows)."""
    return {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "check_for_nan": True,
        "logger": "tensorboard",
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": cfg.num_learning_epochs,
            "num_mini_batches": cfg.num_mini_batches,
            "clip_param": 0.2,
            "gamma": 0.99,
            "lam": 0.95,
            "value_loss_coef": 1.0,
            "entropy_coef": 0.005,
            "learning_rate": 1e-3,
            "max_grad_norm": 1.0,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "use_clipped_value_loss": True,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [128, 128, 128],
            "activation": "elu",
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": [128, 128, 128],
            "activation": "elu",
            "obs_normalization": True,
        },
    }


def describe_device(device: str) -> str:
    """'cpu', or the GPU's name for a CUDA device (what the ledger records)."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device}: torch sees no GPU; use device=cpu or device=auto")
    return device


def peak_memory_gib(device: str, env: Any) -> tuple[float | None, float | None]:
    """(peak device memory used by torch + the simulator, device capacity), GiB; (None, None) on CPU."""
    if not device.startswith("cuda"):
        return None, None
    used = torch.cuda.max_memory_allocated(device)
    stats = getattr(env, "memory_stats", lambda: {})() or {}
    used += stats.get("peak_bytes_in_use", 0)
    return used / 2**30, torch.cuda.get_device_properties(device).total_memory / 2**30


def run_trial(
    cfg: TrialConfig,
    sink: Callable[[Row], str],
    *,
    run_id: str = "trial",
    trial: int = 0,
    price_usd_per_hour: float = 0.0,
    price_label: str = "",
    out_dir: str | Path | None = None,
) -> Row:
    """Run one trial to its end, sending a ledger row to ``sink`` per checkpoint and one at the end."""
    clock = PhaseClock()
    params = trial_params(cfg)
    state = {"it": 0, "env_steps": 0, "success": None, "ci": (None, None), "skipped": 0, "ret": None, "ckpt": ""}
    device = "cpu"
    env = None

    def row(state_name: str, reason: str = "") -> Row:
        billable, phases = clock.snapshot()
        peak, cap = peak_memory_gib(device, env) if env is not None else (None, None)
        return Row(
            run_id=run_id,
            trial=trial,
            state=state_name,
            params=params,
            iteration=state["it"],
            env_steps=state["env_steps"],
            billable_s=billable,
            phases_s=phases,
            price_usd_per_hour=price_usd_per_hour,
            price_label=price_label,
            success=state["success"],
            success_lo=state["ci"][0],
            success_hi=state["ci"][1],
            eval_episodes=cfg.eval_episodes if state["success"] is not None else 0,
            peak_gpu_gib=peak,
            gpu_capacity_gib=cap,
            skipped_updates=state["skipped"],
            mean_return=state["ret"],
            reason=reason,
            device=describe_device(device),
            seed=cfg.seed,
            checkpoint=state["ckpt"],
        )

    backend = get_backend(cfg.backend)
    if hasattr(backend, "serve_trial"):  # a backend that serves recorded trials builds nothing
        return backend.serve_trial(
            cfg,
            sink,
            run_id=run_id,
            trial=trial,
            price_usd_per_hour=price_usd_per_hour,
            price_label=price_label,
            params=params,
        )
    scalars = TrialScalars(checkpoints.trial_dir(out_dir, trial)) if out_dir is not None else None

    def emit(r: Row) -> str:
        """Hand a row to the sink, after writing its TensorBoard scalars (billed to 'log')."""
        if scalars is not None:
            with clock.phase("log"):
                scalars.write(r)
        return sink(r)

    def end(state_name: str, reason: str) -> Row:
        """The trial's end row, sent; a trial that did not reach the target drops its checkpoint if asked."""
        if state_name != "reached" and cfg.checkpoints == "reached" and out_dir is not None and state["ckpt"]:
            checkpoints.prune(out_dir, trial)
            state["ckpt"] = ""
        final = row(state_name, reason)
        emit(final)
        return final

    try:
        flags = perf.resolve(cfg.flags)
        with clock.phase("startup"):
            device = resolve_device(cfg.device)
            torch.manual_seed(cfg.seed)
            knobs = perf.backend_knobs(flags, backend.knobs)
            knobs.update((k, v) for k, v in cfg.backend_options.items() if k in backend.knobs)
            env = backend.make_env(cfg.num_envs, cfg.seed, device, cfg.profile, **knobs)
            eval_env = backend.make_env(cfg.eval_episodes, cfg.seed, device, cfg.profile, **knobs)
            seeds = panel_seeds(cfg.eval_episodes)
            trainer, alg = build_learner(cfg, env, device, flags, clock, out_dir, trial)
        clock.sync = device_sync(device, env)
        with clock.phase("compile"):
            env.warm_up()
            eval_env.warm_up()
            perf.warm_up(alg, env, flags)
        steps_per_iter = cfg.num_envs * cfg.num_steps_per_env
        while True:
            # The cap is checked after every iteration, so a trial overruns it by at most one iteration.
            n_iters = trainer(cfg.eval_every, lambda: clock.billable_s() >= cfg.cap_s)
            state["it"] += n_iters
            state["env_steps"] += n_iters * steps_per_iter
            state["skipped"] = perf.skipped_updates(alg)
            state["ret"] = getattr(trainer, "take_mean_return", lambda: None)()
            if clock.billable_s() >= cfg.cap_s:
                return end("capped", f"per-trial cap of {cfg.cap_s:g} billable seconds reached")
            with clock.phase("eval"):
                result = evaluate(alg.get_policy(), eval_env, seeds)
            state["success"], state["ci"] = result.rate, result.interval
            with clock.phase("checkpoint"):
                if cfg.save_checkpoints and out_dir is not None:
                    meta = checkpoint_meta(cfg, run_id, trial, state, alg, env)
                    state["ckpt"] = checkpoints.save(alg.save(), meta, out_dir, trial)
            answer = emit(row("running"))
            if result.rate >= cfg.target:
                return end("reached", f"held-out success {result.rate:.3f} >= target {cfg.target:g}")
            if answer == PRUNE:
                return end("pruned", "stopped by the planner: cannot beat the best cost to target")
            if answer == STOP:
                return end("capped", "stopped by the planner: study budget spent")
    except (Exception, SystemExit) as exc:  # any failure ends the trial, billed, with its reason (never the worker)
        return end("failed", failure_reason(exc))
    finally:
        for e in (env, locals().get("eval_env")):
            if e is not None:
                e.close()
        if scalars is not None:
            scalars.close()


def checkpoint_meta(cfg: TrialConfig, run_id: str, trial: int, state: dict, alg: Any, env: Any) -> dict[str, Any]:
    """What ``checkpoint.json`` records: the ledger row the checkpoint belongs to and the actor's sizes."""
    return {
        "run_id": run_id,
        "trial": trial,
        "iteration": state["it"],
        "env_steps": state["env_steps"],
        "success": state["success"],
        "success_lo": state["ci"][0],
        "success_hi": state["ci"][1],
        "eval_episodes": cfg.eval_episodes,
        "reached": state["success"] >= cfg.target,
        "obs_dim": int(alg.get_policy().obs_dim),
        "num_actions": int(env.num_actions),
    }


def failure_reason(exc: BaseException) -> str:
    """One line saying why a trial failed."""
    lowered = str(exc).lower()
    if isinstance(exc, torch.cuda.OutOfMemoryError) or any(
        k in lowered for k in ("out of memory", "not enough memory", "resource_exhausted")
    ):
        return "out of device memory: " + str(exc).splitlines()[0][:200]
    if isinstance(exc, SystemExit):  # raised by a simulator that wanted to end the process
        return f"SystemExit: the simulator tried to exit the process (code {exc.code})"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def trial_params(cfg: TrialConfig) -> dict[str, Any]:
    """The knobs that identify a trial's config in the ledger (flags resolved to their values)."""
    return {
        "backend": cfg.backend,
        "profile": cfg.profile,
        "num_envs": cfg.num_envs,
        "num_steps_per_env": cfg.num_steps_per_env,
        "num_mini_batches": cfg.num_mini_batches,
        "num_learning_epochs": cfg.num_learning_epochs,
        "mode": cfg.mode,
        **{f"flag.{k}": v for k, v in perf.resolve(cfg.flags).items()},
    }


if __name__ == "__main__":
    from sweep.cli import run_main
    from sweep.trial_cli import main

    run_main(main)
