"""The training iterations of a trial: this runner's loop (flags decide its details) or rsl-rl's own.

:func:`build_learner` returns a callable that trains ``n`` PPO iterations and bills them to the
trial's :class:`~sweep.ledger.PhaseClock`: rollout time goes to ``sim`` and ``policy``, the update
to ``learn``, loss read-out to ``log``. The device is synchronized only at those phase boundaries.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from sweep import perf
from sweep.backends.agent import agent_config
from sweep.errors import TrialFailed
from sweep.ledger import PhaseClock


class PolicyTimer:
    """Accumulates time spent in torch (policy inference, storage) inside the rollout, without syncing.

    On a GPU it records CUDA events and reads them once, at the phase boundary. The events are made once and
    recorded again every iteration (four a control step): none is created or destroyed per step.
    """

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.events: list[Any] = []
        """CUDA events, in pairs (start, stop); the first ``recorded`` hold this iteration's spans."""
        self.recorded = 0
        self.cpu_s = 0.0
        self._t0 = 0.0

    def _record(self) -> None:
        if self.recorded == len(self.events):
            self.events.append(torch.cuda.Event(enable_timing=True))
        self.events[self.recorded].record()
        self.recorded += 1

    def start(self) -> None:
        if self.cuda:
            self._record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            self._record()
        else:
            self.cpu_s += time.perf_counter() - self._t0

    def take(self) -> float:
        """Seconds accumulated since the last take (call after a device sync: every recorded event has happened)."""
        spans = self.events[: self.recorded]
        seconds = self.cpu_s + sum(a.elapsed_time(b) for a, b in zip(spans[::2], spans[1::2], strict=True)) / 1000.0
        self.recorded, self.cpu_s = 0, 0.0
        return seconds


def describe_device(device: str) -> str:
    """'cpu', or the GPU's name for a CUDA device (what the ledger records)."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def gpu_slot(device: str) -> str:
    """Which GPU of which machine a CUDA device is, ``<host>:<index>``, the index the machine itself gives it: a
    Ray actor sees only its own GPU, as ``cuda:0``, and ``CUDA_VISIBLE_DEVICES`` (which Ray sets per actor) says
    which one that is. '' for a CPU device."""
    if not device.startswith("cuda"):
        return ""
    index = torch.device(device).index or 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return f"{socket.gethostname()}:{visible[index] if index < len(visible) else index}"


def build_learner(
    cfg: Any,
    env: Any,
    device: str,
    flags: Mapping[str, Any],
    clock: PhaseClock,
    out_dir: str | Path | None = None,
    trial: int = 0,
    train_cfg: dict[str, Any] | None = None,
) -> tuple[Callable[..., int], Any]:
    """(train ``n`` iterations callable, PPO algorithm) for ``cfg.mode``; seeds torch with ``cfg.seed``.

    ``train_cfg``: the rsl-rl config to train with (the backend's, :meth:`sweep.backends.Backend.agent_config`);
    None: :func:`agent_config`. Its ``init_at_random_ep_len`` (absent: False) starts every env at a random point of
    its episode once, before the first rollout, as rsl-rl's ``OnPolicyRunner.learn`` does. ``flags``: the trial's
    :class:`sweep.perf.Flags` (a mapping of some flags is resolved here); the process-wide switches
    (:func:`sweep.perf.apply_to_process`) are the caller's, before its env is built."""
    from rsl_rl.algorithms import PPO

    flags = perf.Flags.of(flags)
    torch.manual_seed(cfg.seed)
    if train_cfg is None:
        train_cfg = agent_config(cfg, flags)
    random_start = bool(train_cfg.get("init_at_random_ep_len", False))
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model structure
        if cfg.mode == "stock":
            runner, alg = _stock_runner(env, train_cfg, device, out_dir, trial)
        else:
            alg_cfg = {**copy.deepcopy(train_cfg), "multi_gpu": None}
            alg = PPO.construct_algorithm(env.get_observations(), env, alg_cfg, device)
    perf.apply_to_algorithm(alg, flags)
    if cfg.mode == "stock":
        return _stock_chunk(runner, clock, random_start), alg
    return SweepLoop(alg, env, cfg, flags, clock, device, random_start), alg


def device_sync(device: str, env: Any) -> Callable[[], None]:
    def sync() -> None:
        env.synchronize()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    return sync


class SweepLoop:
    """This runner's training iterations: rollout (sim + policy), learn, log; flags decide the details."""

    def __init__(
        self,
        alg: Any,
        env: Any,
        cfg: Any,
        flags: Mapping[str, Any],
        clock: PhaseClock,
        device: str,
        random_start: bool = False,
    ) -> None:
        self.alg, self.env, self.cfg, self.flags, self.clock = alg, env, cfg, perf.Flags.of(flags), clock
        self.random_start = random_start
        """Start every env at a random point of its episode before the first rollout (rsl-rl's
        ``init_at_random_ep_len``); done once."""
        self.timer = PolicyTimer(device)
        self.stats = perf.EpisodeStats(env.num_envs, device, deferred=self.flags.deferred_episode_stats)
        self.obs = env.get_observations()
        self.iteration = 0
        self.last_losses: dict[str, float] = {}
        alg.train_mode()

    def __call__(self, n_iters: int, until: Callable[[], bool] | None = None) -> int:
        """Train up to ``n_iters`` iterations, stopping after one where ``until()`` holds; returns how many ran."""
        alg, env, clock = self.alg, self.env, self.clock
        if self.random_start:
            with clock.phase("sim"):
                random_episode_start(env)
            self.random_start = False
        for done in range(1, n_iters + 1):
            with one_time_to_compile(kernel_meter(env), "sim", clock), clock.phase("sim"), torch.inference_mode():
                obs = self.obs
                for _ in range(self.cfg.num_steps_per_env):
                    self.timer.start()
                    actions = alg.act(obs)
                    self.timer.stop()
                    obs, rewards, dones, extras = env.step(actions)
                    self.timer.start()
                    if not self.flags.fast_finite_check:  # rsl-rl check_for_nan: a sync per step
                        perf.check_nan(obs, rewards, dones)
                    alg.process_env_step(obs, rewards, dones, extras)
                    self.stats.update(rewards, dones, extras.get("success"))
                    self.timer.stop()
                self.obs = obs
            policy_s = self.timer.take()
            clock.add("sim", -policy_s)
            clock.add("policy", policy_s)
            with one_time_to_compile(capture_meter(alg), "learn", clock), clock.phase("learn"):
                with torch.inference_mode():
                    alg.compute_returns(self.obs)
                losses = alg.update()
            self.iteration += 1
            with clock.phase("log"):
                if perf.should_log(self.flags, self.iteration):
                    self.last_losses = {k: float(v) for k, v in losses.items()}
                    # With the fast finite check a non-finite step was skipped (and counted), not fatal.
                    finite = all(math.isfinite(v) for v in self.last_losses.values())
                    if not finite and not self.flags.fast_finite_check:
                        raise TrialFailed(f"diverged: non-finite PPO loss at iteration {self.iteration} ({losses})")
            if until is not None and until():
                return done
        return n_iters

    def take_mean_return(self) -> float | None:
        return self.stats.take_mean()

    def train_success(self) -> float | None:
        """Success share of the training episodes (stochastic policy, training commands) of the window the last
        :meth:`take_mean_return` closed: a training-side signal, not the held-out measure."""
        return self.stats.success_share


@contextmanager
def one_time_to_compile(meter: Callable[[], float], phase: str, clock: PhaseClock) -> Iterator[None]:
    """What ``meter`` (cumulative seconds of one-time work) grew by inside the block is billed to 'compile', not to
    ``phase``: the simulator compiling its kernels at their first launch (:func:`kernel_meter`), the learner
    capturing its CUDA graph (:func:`capture_meter`)."""
    before = meter()
    yield
    spent = meter() - before
    if spent:
        clock.add(phase, -spent)
        clock.add("compile", spent)


def kernel_meter(env: Any) -> Callable[[], float]:
    """The simulator's seconds compiling kernels at their first launch
    (:meth:`sweep.backends.base.TaskEnv.kernel_load_s`); an env that is no ``TaskEnv`` (a plain rsl-rl ``VecEnv``)
    compiles nothing there."""
    return getattr(env, "kernel_load_s", _nothing)


def capture_meter(alg: Any) -> Callable[[], float]:
    """The learner's seconds capturing its CUDA-graph update (:meth:`sweep.perf.ppo.FastPPO.capture_s`); rsl-rl's
    own PPO captures nothing."""
    return getattr(alg, "capture_s", _nothing)


def _nothing() -> float:
    return 0.0


def random_episode_start(env: Any) -> None:
    """Put every env at a uniform random step of its episode, as rsl-rl's ``OnPolicyRunner.learn`` does with
    ``init_at_random_ep_len`` (same draw, torch's global generator): the first episodes end at spread-out times
    instead of all at once."""
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))


def _stock_runner(env: Any, train_cfg: dict, device: str, out_dir: str | Path | None, trial: int) -> tuple[Any, Any]:
    """rsl-rl's OnPolicyRunner, unchanged, logging to TensorBoard as users run it."""
    import tempfile

    from rsl_rl.runners import OnPolicyRunner

    base = Path(out_dir) / "trials" / f"{trial:04d}" if out_dir is not None else Path(tempfile.mkdtemp())
    runner = OnPolicyRunner(env, copy.deepcopy(train_cfg), log_dir=str(base / "tensorboard"), device=device)
    return runner, runner.alg


def _stock_chunk(runner: Any, clock: PhaseClock, random_start: bool = False) -> Callable[..., int]:
    """Train ``n`` iterations with ``runner.learn``; the update's own time goes to 'learn', the rest to 'sim'.

    Timing the update needs no sync: rsl-rl's update already ends with ``.item()`` calls. ``random_start`` is
    ``learn``'s ``init_at_random_ep_len`` for the first call only: the trial's chunks are one training run.
    """
    first = [random_start]
    update = runner.alg.update
    learn_s = [0.0]

    def timed_update() -> dict:
        t0 = time.perf_counter()
        out = update()
        learn_s[0] += time.perf_counter() - t0
        return out

    runner.alg.update = timed_update

    def chunk(n_iters: int, until: Callable[[], bool] | None = None) -> int:
        """``n_iters`` iterations in one ``learn`` call (``until`` is not consulted: learn cannot stop early)."""
        learn_s[0] = 0.0
        with one_time_to_compile(kernel_meter(runner.env), "sim", clock), clock.phase("sim"):
            runner.learn(n_iters, init_at_random_ep_len=first[0])
        first[0] = False
        clock.add("sim", -learn_s[0])
        clock.add("learn", learn_s[0])
        return n_iters

    return chunk
