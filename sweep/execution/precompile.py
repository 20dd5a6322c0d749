"""Ahead-of-time compilation: fill the persistent XLA cache with a space's env shapes while the GPU trains.

A trial that meets an env shape (``num_envs``, backend knobs) its worker has not built yet compiles it, on its own
bill: far longer cold than from the persistent cache (``compile_cache`` flag). On a GPU machine
``sweep.run`` starts ``python -m sweep.precompile`` beside the workers (up to 4 side by side, see :func:`jobs`):
they compile what an env of each shape the study may need compiles (:meth:`Backend.preload`: XLA compiles on the
host CPU, idle while the GPU trains; no env is built) and train nothing. Their seconds
overlap the trials' billed seconds on the same machine, so they are not billed again; they run at a lower
priority (niceness 10) than the trials, and a trial they still slow pays that in its own bill. Each writes one
JSON line per shape (num_envs, knobs, seconds, and ``at``: when it was ready, Unix s) to ``precompile.jsonl`` in
the run folder; each GPU worker then loads the shape from the cache ahead of its trials
(:mod:`sweep.execution.preload`).

CLI (started by ``sweep.run``): ``python -m sweep.execution.precompile <plan.json>``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sweep import perf
from sweep.backends.policy import planned
from sweep.config import RunConfig
from sweep.params import named_flags

#: The longest a later process waits for the first one's first shape before it starts anyway (s).
STAGGER_MAX_S = 120.0


def backend_variants(cfg: RunConfig, backend_knobs: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every distinct set of backend knobs the space's flag choices lead to (e.g. buffer donation on / off)."""
    names = list(cfg.knobs.flags)
    seen: list[dict[str, Any]] = []
    for combo in itertools.product(*(cfg.knobs.flags[n] for n in names)):
        knobs = _knobs(dict(zip(names, combo, strict=True)), cfg, backend_knobs)
        if knobs not in seen:
            seen.append(knobs)
    return seen


def shapes(cfg: RunConfig, backend_knobs: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    """(num_envs, backend knobs) the study may build, in the order its trials will meet them.

    First the held-out panel under the first trial's knobs (built while that trial compiles its own training envs,
    which are left to it), then the envs and panels of the other initial configs in their order, then the panel
    under every other knob set (every trial builds one), then every other size, nearest the first trial's first.
    """
    variants = backend_variants(cfg, backend_knobs)
    panel = cfg.target.eval_episodes
    initial = first_shapes(cfg, backend_knobs)
    n0, knobs0 = initial[0]
    ordered = [(panel, knobs0)]
    for n, knobs in initial[1:]:
        ordered += [(n, knobs), (panel, knobs)]
    ordered += [(panel, k) for k in variants]
    sizes = sorted(set(cfg.knobs.num_envs), key=lambda n: abs(n - n0))
    ordered += [(n, k) for n in sizes for k in variants]
    out: list[tuple[int, dict[str, Any]]] = []
    for shape in ordered:
        if shape not in out and shape != (n0, knobs0):
            out.append(shape)
    return out


def first_shapes(cfg: RunConfig, backend_knobs: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    """The training env shapes of the study's first trials, in order: the baseline's when the study runs it first
    (``budget.runs``), then the ``initial`` entries'; the smallest size's when there are none."""
    out = [_baseline_shape(cfg, backend_knobs)] if cfg.budget.runs is not None else []
    out += [_shape_of(entry, cfg, backend_knobs) for entry in cfg.search.initial]
    return out or [(cfg.knobs.num_envs[0], {})]


def first_shape(cfg: RunConfig, backend_knobs: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
    """The first trial's training env shape (:func:`first_shapes`)."""
    return first_shapes(cfg, backend_knobs)[0]


def _baseline_shape(cfg: RunConfig, backend_knobs: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
    """The baseline's training env shape: its flags, and the space's fixed ones it takes (a stock baseline only
    those a stock run may carry, as :func:`sweep.planner.space.baseline_params` resolves them)."""
    base = cfg.confirm.baseline
    fixed = {
        name: values[0]
        for name, values in cfg.knobs.flags.items()
        if len(values) == 1 and (base.mode == "sweep" or name in perf.STOCK_FLAGS)
    }
    return int(base.num_envs or cfg.knobs.num_envs[0]), _knobs({**fixed, **dict(base.flags)}, cfg, backend_knobs)


def _shape_of(entry: dict[str, Any], cfg: RunConfig, backend_knobs: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
    """The training env shape of one ``initial`` entry (flags it leaves out at their default)."""
    flags = named_flags(entry)
    return int(entry.get("num_envs", cfg.knobs.num_envs[0])), _knobs(flags, cfg, backend_knobs)


def _knobs(flags: dict[str, Any], cfg: RunConfig, backend_knobs: tuple[str, ...]) -> dict[str, Any]:
    """The backend knobs a trial with these flags builds its envs with (the space's backend options win)."""
    knobs = perf.backend_knobs(perf.resolve(flags), backend_knobs)
    knobs.update((k, v) for k, v in cfg.backend_options.items() if k in backend_knobs)
    return knobs


def panel(cfg: RunConfig) -> dict[str, Any]:
    """What a plan says of the held-out panel: its size, and the policy loop a panel shape compiles
    (:func:`sweep.backends.policy.planned`): the trials' actor in stretches of
    :data:`sweep.trial.evaluation.CHECK_EVERY` steps."""
    from sweep.backends.agent import ACTOR_ACTIVATION, ACTOR_HIDDEN_DIMS
    from sweep.trial.evaluation import CHECK_EVERY

    policy = {"hidden": list(ACTOR_HIDDEN_DIMS), "activation": ACTOR_ACTIVATION, "steps": CHECK_EVERY}
    return {"panel": cfg.target.eval_episodes, "policy": policy}


def wanted(cfg: RunConfig, has_gpu: bool) -> bool:
    """Only on a GPU machine (on a CPU one it would take cores from the trials), for a backend that compiles
    with XLA, and when every trial reads the persistent cache."""
    from sweep.backends import get_backend

    cached = all(cfg.knobs.flags.get("compile_cache", [True]))
    return has_gpu and cached and get_backend(cfg.backend).xla_cache


def jobs(cpus: int | None = None) -> int:
    """Compiling processes to run side by side: one per 4 host cores, at most 4: the trials keep the other cores, and
    more processes finish a space's shapes sooner (docs/decisions/0012-precompiler.md)."""
    return max(1, min(4, (cpus if cpus is not None else os.cpu_count() or 1) // 4))


def worker_plan(cfg: RunConfig, run_dir: Path, profile: str, has_gpu: bool) -> dict[str, Any] | None:
    """What each GPU worker loads ahead of its trials (:mod:`sweep.execution.preload`); None when nothing is
    compiled ahead.

    At once: the first trial's panel, then its training shape (which that trial compiles itself in a new study,
    but which a resumed study's new process would otherwise meet cold in the baseline's confirmation); then every
    other shape of the plan, read from the persistent cache once this module's line says it is there.
    """
    from sweep.backends import get_backend

    if not wanted(cfg, has_gpu):
        return None
    knobs = get_backend(cfg.backend).knobs
    planned = shapes(cfg, knobs)
    plan = {"backend": cfg.backend, "profile": profile, "device": cfg.device, "at_once": 2, **panel(cfg)}
    plan.update(shapes=[planned[0], first_shape(cfg, knobs), *planned[1:]])
    plan["ready"] = str(run_dir.resolve() / "precompile.jsonl")
    return plan


def start(cfg: RunConfig, run_dir: Path, profile: str, has_gpu: bool, n: int | None = None) -> list[subprocess.Popen]:
    """Start ``n`` (default :func:`jobs`) compiling processes for this study (none when not wanted), each with every
    ``n``-th shape of the plan but its first, so the shapes first needed are compiled first and side by side; stop
    them with :func:`stop`. The plan's first shape, the first trial's held-out panel, is each worker's to compile
    beside that trial (:mod:`sweep.execution.preload`). All but the first process wait until it has built its first
    shape: while the first trial compiles cold, two compiles beside it (the panel's and one process's), not
    ``n + 1``."""
    from sweep.backends import get_backend

    if not wanted(cfg, has_gpu):
        return []
    planned = shapes(cfg, get_backend(cfg.backend).knobs)[1:]
    n = n or jobs()
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    log = open(run_dir / "precompile.log", "ab")  # noqa: SIM115 - the children keep it open
    out = run_dir / "precompile.jsonl"
    ready = len(out.read_text().splitlines()) if out.exists() else 0  # lines of an earlier call (a resume)
    procs = []
    for i in range(min(n, len(planned))):
        plan = {
            "backend": cfg.backend,
            "profile": profile,
            "device": cfg.device,
            **panel(cfg),
            "shapes": planned[i::n],
            "out": str(out),
            "wait_for_lines": ready + 1 if i > 0 else 0,
        }
        plan_path = run_dir / f"precompile_plan{i}.json"
        plan_path.write_text(json.dumps(plan))
        cmd = [sys.executable, "-m", "sweep.execution.precompile", str(plan_path)]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env))
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    """End the compiling processes (the study is over: what they have not compiled yet is not needed)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_for(path: Path, lines: int, poll_s: float = 1.0, max_s: float = STAGGER_MAX_S) -> None:
    """Return once ``path`` holds ``lines`` lines (another process's shapes), or after ``max_s`` seconds."""
    deadline = time.monotonic() + max_s
    while lines > 0 and time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        time.sleep(poll_s)


def main(argv: list[str]) -> int:
    """Compile every shape of the plan in turn into the persistent cache, one JSON line each."""
    from sweep.backends import get_backend
    from sweep.backends.base import resolve_device

    plan = json.loads(Path(argv[0]).read_text())
    wait_for(Path(plan["out"]), int(plan.get("wait_for_lines", 0)))  # before JAX and the device start up
    perf.enable_compile_cache()
    backend = get_backend(plan["backend"])
    device = resolve_device(plan["device"])
    with open(plan["out"], "a") as out:
        for num_envs, knobs in plan["shapes"]:
            t0 = time.perf_counter()
            backend.preload(int(num_envs), device, plan["profile"], planned(plan, int(num_envs)), **knobs)
            line = {"num_envs": num_envs, "knobs": knobs, "seconds": time.perf_counter() - t0, "at": time.time()}
            out.write(json.dumps(line) + "\n")  # one short line per write: the processes' lines do not interleave
            out.flush()
    return 0


if __name__ == "__main__":
    from sweep.cli import run_main

    os.nice(10)  # idle CPU only: the billed trials beside it come first
    run_main(main)
