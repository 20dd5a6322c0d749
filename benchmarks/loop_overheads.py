"""What a trial spends outside its training phases, piece by piece: the ledger's 'other', 'log' and 'checkpoint'.

    python benchmarks/loop_overheads.py --config 4096x24 --profile gpu --rounds 3 --repeats 50 --json out.json

Builds one real trial (:func:`sweep.trial.runner.build`: env, learner, the given perf flags), compiles it, trains
``--rounds`` rounds of ``eval_every`` iterations and takes from its :class:`~sweep.ledger.PhaseClock` each round's
'log' seconds and the seconds no phase claimed ('other': the loop's own work between phases). Then it times,
``--repeats`` times each on the trained trial, what happens between phases or at a checkpoint (median ms a call):

- ``sync``: the device sync at each phase boundary (:func:`sweep.trial.learner.device_sync`: the env's, then torch's);
  ``env sync`` and ``torch sync`` alone; a phase starts and ends with one, three phases an iteration;
- ``empty phase``: a phase with nothing in it (two syncs and the clock);
- ``policy timer``: one iteration's policy timings (:class:`sweep.trial.learner.PolicyTimer`, two spans a step),
  recorded and read; ``policy timer, new events``: the same with a new CUDA event for every record
  (:class:`FreshEvents`);
- ``signals``: what a checkpoint reads of the training side (on-track share, mean return, training success);
- ``row figures``: the row's peak-memory figures (:func:`sweep.trial.runner.peak_memory_gib`);
- ``finite check``: whether the learner's weights and buffers are all finite (:func:`sweep.perf.nonfinite_parts`),
  what ends a diverged trial after each round;
- ``checkpoint``: ``PPO.save()`` and its files (:func:`sweep.checkpoints.save`), the 'checkpoint' phase;
- ``scalars``: a row's TensorBoard scalars (:class:`sweep.trial.tblog.TrialScalars`), in the 'log' phase.

Not timed here: the planner's answer (the ledger's 'answer' phase measures it in every sweep).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from sweep import checkpoints, perf
from sweep.contract import TrialConfig, TrialState
from sweep.ledger import PhaseClock, PhaseSeconds, Progress, TrialRows
from sweep.params import trial_params
from sweep.trial.learner import PolicyTimer, describe_device, device_sync
from sweep.trial.runner import ON_TRACK_MIN_STEPS, build, compile_training, peak_memory_gib
from sweep.trial.tblog import TrialScalars


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def per_iteration_ms(built: Any, clock: PhaseClock, iterations: int, rounds: int) -> dict[str, list[float]]:
    """Each round's 'log' and 'other' ms per iteration: the clock's seconds of each over the round, by its
    iterations."""
    out: dict[str, list[float]] = {"log": [], "other": []}
    for _ in range(rounds):
        before = clock.snapshot()[1]
        done = built.trainer(iterations)
        after = clock.snapshot()[1]
        for name, values in out.items():
            values.append((after[name] - before[name]) / done * 1e3)
    return out


class FreshEvents(PolicyTimer):
    """The reference: a policy timer that makes a new CUDA event for every record and drops them all when read (what
    :class:`~sweep.trial.learner.PolicyTimer` did before it reused its events)."""

    def _record(self) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        self.events.append(event)
        self.recorded += 1

    def take(self) -> float:
        seconds = super().take()
        self.events = []
        return seconds


def timer_iteration(timer: PolicyTimer, device: str, steps: int) -> None:
    """One iteration's policy timings: two spans a step recorded, the device synced, the spans read."""
    for _ in range(2 * steps):
        timer.start()
        timer.stop()
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    timer.take()


def measure(cfg: TrialConfig, rounds: int, repeats: int, out_dir: Path) -> dict[str, Any]:
    """The figures of one trial's loop (see the module's docstring), as printed."""
    clock = PhaseClock()
    with ExitStack() as stack:
        built = build(cfg, clock, out_dir, 0, stack)
        clock.sync = sync = device_sync(built.device, built.env)
        compile_training(built)
        rounds_ms = per_iteration_ms(built, clock, cfg.eval_every, rounds)
        rows = TrialRows("loop_overheads", 0, trial_params(cfg), cfg.seed, 1.0, "bench")
        scalars = TrialScalars(checkpoints.trial_dir(out_dir, 0))
        stack.callback(scalars.close)
        progress = Progress(billable_s=1.0, phases_s=PhaseSeconds.of(clock.snapshot()[1]), env_steps=1)
        row = rows.row(TrialState.RUNNING, progress)
        cuda = built.device.startswith("cuda")

        def empty_phase() -> None:
            with clock.phase("log"):
                pass

        def signals() -> None:
            built.env.on_track_share(ON_TRACK_MIN_STEPS)
            built.trainer.take_mean_return()
            built.trainer.train_success()

        def save() -> None:
            checkpoints.save(built.alg.save(), {"trial": 0}, out_dir, 0)

        pieces = {
            "sync": sync,
            "env sync": built.env.synchronize,
            "torch sync": (lambda: torch.cuda.synchronize(built.device)) if cuda else (lambda: None),
            "empty phase": empty_phase,
            "signals": signals,
            "row figures": lambda: peak_memory_gib(built.device, built.env),
            "finite check": lambda: perf.nonfinite_parts(built.alg),
            "checkpoint": save,
            "scalars": lambda: scalars.write(row),
        }
        ms = {name: median_ms(fn, repeats) for name, fn in pieces.items()}
        for name, timer in (("policy timer", PolicyTimer), ("policy timer, new events", FreshEvents)):
            one = timer(built.device)
            ms[name] = median_ms(lambda one=one: timer_iteration(one, built.device, cfg.num_steps_per_env), repeats)
    return {
        "device": describe_device(built.device),
        "config": f"{cfg.num_envs} x {cfg.num_steps_per_env}",
        "iterations per round": cfg.eval_every,
        **{f"{k} ms per iteration, each round": [round(x, 3) for x in v] for k, v in rounds_ms.items()},
        "median ms a call": {k: round(v, 4) for k, v in ms.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="4096x24", help="num_envs x num_steps_per_env")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--flags", default="{}", help="perf flags as JSON, e.g. '{\"cuda_graph_update\": true}'")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--eval-every-steps", type=int, default=240)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    n, horizon = (int(x) for x in args.config.split("x"))
    cfg = TrialConfig(
        profile=args.profile,
        num_envs=n,
        num_steps_per_env=horizon,
        eval_every_steps=args.eval_every_steps,
        flags={"compile_cache": True, **json.loads(args.flags)},
    ).validate()
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(cfg, args.rounds, args.repeats, Path(tmp))
    print(json.dumps(figures, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
