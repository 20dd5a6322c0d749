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
from pathlib import Path
from typing import Any

import torch

from sweep import checkpoints, perf
from sweep.backends import get_backend
from sweep.contract import PRUNE, STOP, TrialConfig, trial_params
from sweep.evaluation import evaluate, panel_seeds
from sweep.learner import build_learner, describe_device, device_sync, resolve_device
from sweep.ledger import PhaseClock, Row
from sweep.tblog import TrialScalars


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
    """One line saying why a trial failed (its first line, whole)."""
    lowered = str(exc).lower()
    if isinstance(exc, torch.cuda.OutOfMemoryError) or any(
        k in lowered for k in ("out of memory", "not enough memory", "resource_exhausted")
    ):
        return "out of device memory: " + str(exc).splitlines()[0]
    if isinstance(exc, SystemExit):  # raised by a simulator that wanted to end the process
        return f"SystemExit: the simulator tried to exit the process (code {exc.code})"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"  # whole in the ledger; the report shortens what it shows


if __name__ == "__main__":
    import functools

    from sweep.cli import run_main
    from sweep.trial_cli import main

    run_main(functools.partial(main, run=run_trial))
