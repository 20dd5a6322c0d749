"""One trial: build the envs and rsl-rl PPO, train with phase timers, evaluate on held-out seeds, stop.

Reads top to bottom: :func:`run_trial` builds, compiles, then loops rollout -> learn -> log, and
every ``eval_every`` iterations checks that the learner's weights are finite, evaluates and
checkpoints, hands a ledger row to ``sink`` and obeys its answer. It ends ``reached`` (held-out
success >= target), ``capped`` (per-trial cap or stop asked), ``pruned`` (the planner said so) or
``failed`` (with the reason: "diverged: ..." for non-finite weights). ``mode='stock'`` trains
with rsl-rl's own ``OnPolicyRunner.learn`` unchanged, as the baseline.

CLI: ``python -m sweep.trial num_envs=256 num_steps_per_env=24 profile=cpu price.gpu=h200``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from sweep import checkpoints, perf
from sweep.backends import get_backend
from sweep.backends.base import Backend, resolve_device
from sweep.contract import (
    EndCause,
    Ending,
    Sink,
    TrialConfig,
    TrialRunner,
    TrialState,
    cap_reached,
    end_state,
    panel_seeds,
    success_rule,
    throughput_end,
)
from sweep.ledger import PhaseClock, Progress, Row, TrialRows
from sweep.params import trial_params
from sweep.trial.evaluation import EvalResult, evaluate, pass_due, warm_up_panel
from sweep.trial.learner import build_learner, describe_device, device_sync, gpu_slot
from sweep.trial.tblog import TrialScalars


def peak_memory_gib(device: str, env: Any) -> tuple[float | None, float | None]:
    """(peak device memory used by torch + the simulator, device capacity), GiB; (None, None) on CPU."""
    if not device.startswith("cuda"):
        return None, None
    used = torch.cuda.max_memory_allocated(device)
    stats = getattr(env, "memory_stats", lambda: {})() or {}
    used += stats.get("peak_bytes_in_use", 0)
    return used / 2**30, torch.cuda.get_device_properties(device).total_memory / 2**30


@dataclass
class Built:
    """What a trial builds before it trains: the training env, the held-out seeds and the learner; the panel's env
    on first use (:attr:`eval_env`)."""

    device: str
    flags: perf.Flags
    env: Any
    make_eval_env: Callable[[], Any]
    seeds: list[int]
    trainer: Any
    alg: Any
    ahead: threading.Thread
    """The thread compiling the training env's shape beside the trial's build (:func:`compile_ahead`)."""
    panel_compiled: bool = False
    """Whether what the held-out passes run is compiled (before the first pass: :func:`evaluate_once`)."""

    @cached_property
    def eval_env(self) -> Any:
        """The held-out panel's env, built at the first pass (:func:`evaluate_once`), not before training: on a GPU
        worker its shape is being loaded beside the trial (:mod:`sweep.execution.preload`) until then."""
        return self.make_eval_env()


def compile_ahead(backend: Any, num_envs: int, device: str, profile: str, knobs: dict[str, Any]) -> threading.Thread:
    """Start compiling (or loading) the training env's shape in a thread (:meth:`Backend.preload`), so that its step
    compiles while the trial builds the env's reset and the learner; the trial joins it before it trains. Its error,
    if any, is raised again where the trial's own build meets it."""

    def run() -> None:
        with contextlib.suppress(Exception):
            backend.preload(num_envs, device, profile, **knobs)

    thread = threading.Thread(target=run, name="sweep-compile-ahead", daemon=True)
    thread.start()
    return thread


def env_knobs(cfg: TrialConfig, backend: Backend, flags: perf.Flags) -> dict[str, Any]:
    """The knobs a trial's envs are built with, the training scene's and the held-out panel's alike: the perf flags'
    that act in the backend, the backend options it knows, and the task's own success rule (if the trial names one)
    with the target that its untrained policy must not meet already."""
    knobs = perf.backend_knobs(flags, backend.knobs)
    knobs.update((k, v) for k, v in cfg.backend_options.items() if k in backend.knobs)
    rule = success_rule(cfg)
    if rule:
        knobs["success"] = {**rule, "target": cfg.target}
    return knobs


def build(
    cfg: TrialConfig,
    clock: PhaseClock,
    out_dir: str | Path | None,
    trial: int,
    stack: ExitStack,
    parts: dict[str, float] | None = None,
) -> Built:
    """The training env and the learner, and how to build the panel's env; each env is closed by ``stack`` however
    the trial ends. ``parts`` (if given) gets the seconds of each step: backend (import and flags), env, learner,
    and eval_env once it is built."""
    parts = {} if parts is None else parts
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        parts[name] = now - t
        t = now

    backend = get_backend(cfg.backend)
    flags = perf.Flags.of(cfg.flags)  # the one resolution: every layer below reads this object
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    perf.apply_to_process(flags)  # before the first env: its reset compiles too, and must read the persistent cache
    knobs = env_knobs(cfg, backend, flags)
    ahead = compile_ahead(backend, cfg.num_envs, device, cfg.profile, knobs)
    stack.callback(ahead.join)  # however the trial ends, nothing of it outlives the trial
    lap("backend")
    env = backend.make_env(cfg.num_envs, cfg.seed, device, cfg.profile, **knobs)
    stack.callback(env.close)
    lap("env")

    def make_eval_env() -> Any:
        t0 = time.perf_counter()
        eval_env = backend.make_eval_env(cfg.eval_episodes, cfg.seed, device, cfg.profile, **knobs)
        stack.callback(eval_env.close)
        parts["eval_env"] = time.perf_counter() - t0
        return eval_env

    train_cfg = backend.agent_config(cfg, flags)
    trainer, alg = build_learner(cfg, env, device, flags, clock, out_dir, trial, train_cfg=train_cfg)
    if out_dir is not None:
        backend.record_configs(train_cfg, env, checkpoints.trial_dir(out_dir, trial))
    lap("learner")
    return Built(device, flags, env, make_eval_env, panel_seeds(cfg.eval_episodes), trainer, alg, ahead)


class TrialLog:
    """A trial's progress and the rows it sends: TensorBoard scalars first (billed to 'log'), then the sink."""

    def __init__(self, cfg: TrialConfig, rows: TrialRows, clock: PhaseClock, sink: Sink, out_dir: Any) -> None:
        self.cfg, self.rows, self.clock, self.sink, self.out_dir = cfg, rows, clock, sink, out_dir
        self.progress = Progress(device=describe_device("cpu"))
        """The trial's figures so far, but for what each row reads from the clock and the device."""
        self.startup_parts: dict[str, float] = {}
        """Where the start-up's seconds went (:func:`build` fills it)."""
        self.built: Built | None = None
        self.scalars = TrialScalars(checkpoints.trial_dir(out_dir, rows.trial)) if out_dir is not None else None

    def row(self, state: TrialState, reason: str = "", cause: EndCause | None = None) -> Row:
        billable, phases = self.clock.snapshot()
        peak: tuple[float | None, float | None] = (None, None)
        if self.built is not None:
            peak = peak_memory_gib(self.built.device, self.built.env)
        figures = replace(
            self.progress,
            billable_s=billable,
            phases_s=phases,
            peak_gpu_gib=peak[0],
            gpu_capacity_gib=peak[1],
            startup_parts_s=dict(self.startup_parts),
        )
        return self.rows.row(state, figures, reason, cause)

    def send(self, state: TrialState, reason: str = "", cause: EndCause | None = None) -> tuple[Row, str]:
        """Send a row and return it with the planner's answer; the wait is billed to 'answer' (in the next row)."""
        row = self.row(state, reason, cause)
        if self.scalars is not None:
            with self.clock.phase("log"):
                self.scalars.write(row)
        t0 = time.perf_counter()  # no device sync: the checkpoint phase ended with one, and the wait queues nothing
        answer = self.sink(row)
        self.clock.add("answer", time.perf_counter() - t0)
        return row, answer

    def end(self, ending: Ending) -> Row:
        """The end row, sent; a trial that did not reach the target drops its checkpoint if asked to."""
        state, cause, reason = ending
        if state != TrialState.REACHED and self.cfg.checkpoints == "reached" and self.progress.checkpoint:
            checkpoints.prune(self.out_dir, self.rows.trial)
            self.progress = replace(self.progress, checkpoint="")
        return self.send(state, reason, cause)[0]

    def close(self) -> None:
        if self.scalars is not None:
            self.scalars.close()


def run_trial(
    cfg: TrialConfig,
    sink: Sink,
    *,
    run_id: str = "trial",
    trial: int = 0,
    price_usd_per_hour: float = 0.0,
    price_label: str = "",
    out_dir: str | Path | None = None,
) -> Row:
    """Run one trial to its end, sending a ledger row to ``sink`` per checkpoint and one at the end."""
    clock = PhaseClock()
    rows = TrialRows(
        run_id, trial, trial_params(cfg), cfg.seed, price_usd_per_hour, price_label, cfg.phase, cfg.baseline
    )
    log = TrialLog(cfg, rows, clock, sink, out_dir)
    with ExitStack() as stack:
        stack.callback(log.close)
        try:
            with clock.phase("startup"):
                log.built = built = build(cfg, clock, out_dir, trial, stack, log.startup_parts)
                log.progress = replace(log.progress, device=describe_device(built.device), gpu=gpu_slot(built.device))
            clock.sync = device_sync(built.device, built.env)
            with clock.phase("compile"):  # the panel's compile waits for the first pass (see evaluate_once)
                compile_training(built)
            return train(cfg, built, clock, log)
        except (Exception, SystemExit) as exc:  # any failure ends the trial, billed, with its reason (never the worker)
            return log.end((TrialState.FAILED, EndCause.FAILED, failure_reason(exc)))


def compile_training(built: Built) -> None:
    """Compile what the trial trains: wait for its step's compile beside the build (nothing of it may run beside the
    learner's CUDA-graph capture), then warm up the env and the learner's performance flags."""
    built.ahead.join()
    built.env.warm_up()
    perf.warm_up(built.alg, built.env, built.flags)


def train(cfg: TrialConfig, built: Built, clock: PhaseClock, log: TrialLog) -> Row:
    """Train in rounds of ``eval_every`` iterations; after each, evaluate, checkpoint, send a row, obey the answer."""
    steps_per_iter = cfg.num_envs * cfg.num_steps_per_env
    measured = throughput_end(cfg.phase)  # a throughput probe or screen: one round of training, nothing else
    while True:
        # The cap is checked after every iteration, so a trial overruns it by at most one iteration.
        n_iters = built.trainer(cfg.eval_every, lambda: cap_reached(cfg, clock.billable_s(), clock.seconds) is not None)
        log.progress = replace(
            log.progress,
            iteration=log.progress.iteration + n_iters,
            env_steps=log.progress.env_steps + n_iters * steps_per_iter,
            skipped_updates=perf.skipped_updates(built.alg),
            mean_return=getattr(built.trainer, "take_mean_return", lambda: None)(),
            train_success=getattr(built.trainer, "train_success", lambda: None)(),
            on_track=built.env.on_track_share(ON_TRACK_MIN_STEPS),
        )
        if measured is not None:
            return log.end(measured)
        broken = perf.nonfinite_parts(built.alg)
        if broken:  # it cannot recover: every later round would be billed for nothing
            why = f"diverged: non-finite {' and '.join(broken)} by iteration {log.progress.iteration}"
            return log.end((TrialState.FAILED, EndCause.FAILED, why))
        capped = cap_reached(cfg, clock.billable_s(), clock.seconds)
        # the cap's pass always runs: nothing goes unevaluated
        if capped or pass_due(getattr(log.progress, cfg.eval_gate_signal), cfg.eval_gate):
            result = evaluate_once(cfg, built, clock)
            log.progress = record(log.progress, result, cfg.target, cfg.eval_episodes)
            if capped and not result.reached(cfg.target):
                return log.end(capped)
        else:
            log.progress = replace(
                log.progress, success=None, success_lo=None, success_hi=None, success_max=None, eval_episodes=0
            )  # a checkpoint whose held-out pass was skipped: no bounds
        with clock.phase("checkpoint"):
            if cfg.save_checkpoints and log.out_dir is not None:
                meta = checkpoint_meta(cfg, log.rows, log.progress, built.alg, built.env)
                saved = checkpoints.save(built.alg.save(), meta, log.out_dir, log.rows.trial)
                log.progress = replace(log.progress, checkpoint=saved)
        _, answer = log.send(TrialState.RUNNING)
        ending = end_state(log.progress.success, cfg.target, answer)
        if ending is not None:
            return log.end(ending)


def evaluate_once(cfg: TrialConfig, built: Built, clock: PhaseClock) -> EvalResult:
    """One held-out pass, billed to 'eval'; before the trial's first, the panel's env is built (billed to
    'startup') and what passes run is compiled (billed to 'compile'). Not before training: on a GPU worker the
    panel is being loaded beside the trial (:mod:`sweep.execution.preload`) while it trains, and is ready by its first
    pass, which comes after some training."""
    policy = built.alg.get_policy()
    if not built.panel_compiled:
        with clock.phase("startup"):
            eval_env = built.eval_env
        with clock.phase("compile"):
            warm_up_panel(eval_env, policy)
        built.panel_compiled = True
    with clock.phase("eval"):
        return evaluate(policy, built.eval_env, built.seeds, target=cfg.target)


#: Control steps an episode must have run to count in a checkpoint's on-track share (2 s of simulated time on the
#: embedded task): shorter ones say little of how the episode will end.
ON_TRACK_MIN_STEPS = 100


def record(progress: Progress, result: EvalResult, target: float, episodes: int) -> Progress:
    """``progress`` with a pass of ``episodes`` episodes as the ledger records it. A pass stopped below the target
    has no rate (``success`` None), only the bounds of what a full pass would have measured; the pruner extrapolates
    full passes only."""
    lo, hi = result.interval
    if not result.decided_early:
        rate, most = result.rate, None
    else:
        rate, most = (result.rate if result.reached(target) else None), result.rate_max
    return replace(progress, success=rate, success_lo=lo, success_hi=hi, success_max=most, eval_episodes=episodes)


def runner_for(backend: str) -> TrialRunner:
    """The trial runner of a backend: its own where it has one (:meth:`Backend.trial_runner`: the replay serves
    recorded trials), else :func:`run_trial`, which simulates."""
    return get_backend(backend).trial_runner() or run_trial


def run_any(cfg: TrialConfig, sink: Sink, **kwargs: Any) -> Row:
    """Run a trial with its backend's runner (:func:`runner_for`): what ``python -m sweep.trial`` calls."""
    return runner_for(cfg.backend)(cfg, sink, **kwargs)


def checkpoint_meta(cfg: TrialConfig, rows: TrialRows, progress: Progress, alg: Any, env: Any) -> dict[str, Any]:
    """What ``checkpoint.json`` records: the ledger row the checkpoint belongs to and the actor's sizes."""
    return {
        "run_id": rows.run_id,
        "trial": rows.trial,
        "iteration": progress.iteration,
        "env_steps": progress.env_steps,
        "success": progress.success,
        "success_lo": progress.success_lo,
        "success_hi": progress.success_hi,
        "eval_episodes": cfg.eval_episodes,
        "reached": progress.success is not None and progress.success >= cfg.target,
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
