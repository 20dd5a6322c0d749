"""``python -m sweep.run space=locomotion [key=value ...]`` or ``python -m sweep.run resume=reports/<run_id>``.

Composes and validates the config (every error before any trial starts), starts the worker pool,
runs the planner with its progress on stderr (a live view on a terminal, a plain line in a pipe or a log), then writes
``recommended.yaml`` and the report into ``reports/<run_id>/`` and prints the decision and where they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import yaml

from sweep import config as config_mod
from sweep import faults, runlock, stops
from sweep.cli import safe_print
from sweep.config import validation
from sweep.deps import torch_sees_gpu
from sweep.errors import ConfigError, check_imports

RUN_FILES = ("config.yaml", "study.db")
#: What the driver imports only once trials have run (the pool, the study, the report): checked up front, so a
#: missing package cannot cost a sweep its report.
DRIVER_MODULES = (
    *("ray", "optuna", "sweep.planner", "sweep.execution", "sweep.report", "sweep.report.export"),
    "plotly.graph_objects",  # the report's charts import it only as they draw
)


#: Exit status of a run whose trials all failed before any was evaluated (bad input is 2, a stop signal 128 + its
#: number: Ctrl-C 130, SIGTERM 143, SIGHUP 129).
EXIT_ALL_FAILED = 1

#: The key of config.yaml that records the SHA-256 of the space file the run was composed from.
SPACE_HASH = "space_sha256"
#: The key of config.yaml that records, in words, the success rule its trials are judged by (the backend's own, or
#: the task's that target.success_term / target.success_fn name).
SUCCESS_RULE = "success_rule"

#: Top-level keys a resumed run may change (the study's space, target and seeds stay as they were).
#: Keys whose command-line values are paths or names, kept as typed (``out=00`` is the folder ``00``).
TEXT_KEYS = frozenset({"space", "out", "run_id", "resume"})
RESUME_OVERRIDABLE = ("budget", "price", "workers", "search.prune", "checkpoints")


def prepare(argv: list[str]) -> tuple[config_mod.RunConfig, Path, bool]:
    """Overrides -> (validated config, run folder, resuming?). Nothing runs here."""
    from sweep.cli import parse_overrides

    overrides = parse_overrides(argv, text_keys=TEXT_KEYS)
    has_gpu = torch_sees_gpu()
    resume = overrides.pop("resume", None)
    if resume is not None and (not isinstance(resume, str) or not resume.strip()):
        raise ConfigError(f"resume={resume}: give the run folder to continue (resume=reports/<run_id>)")
    if resume:
        run_dir = Path(str(resume))
        if not all(config_mod.is_file(run_dir / name) for name in ("config.yaml", "study.db")):
            raise ConfigError(
                f"resume={resume}: not a sweep run folder (needs config.yaml and study.db); "
                "give a folder under reports/ written by sweep.run"
            )
        runlock.check_free(run_dir)  # said before the checks below; the lock itself is taken once they pass
        saved = config_mod.saved_config(config_mod.read_yaml(run_dir / "config.yaml"))
        saved.pop(SPACE_HASH, None)  # records of the space file and of the rule, not settings
        saved.pop(SUCCESS_RULE, None)
        fixed = sorted(k for k in overrides if not any(k == ok or k.startswith(ok + ".") for ok in RESUME_OVERRIDABLE))
        if fixed:
            raise ConfigError(
                f"{fixed[0]}: a resumed run keeps its search space, target and seeds (its study was made with them); "
                f"only {', '.join(RESUME_OVERRIDABLE)} may change on resume; start a new run for the rest"
            )
        cfg = config_mod.compose(saved, overrides, str(run_dir / "config.yaml"), has_gpu)
        check_study(run_dir)
        return validation.validate(replace(cfg, resume=str(run_dir)), cli_keys=overrides), run_dir, True
    space = str(overrides.pop("space", "locomotion"))
    cfg = config_mod.load(space, overrides, has_gpu)
    narrowed = any(key == "knobs" or key.startswith("knobs.") for key in overrides)
    notes: list[str] = []
    design = any(k == "search" or k.startswith("search.initial") for k in overrides)
    if narrowed and not design:  # knobs narrowed on the command line: the space's design follows
        cfg, notes = validation.drop_unfit_initial(cfg)
    cfg = replace(cfg, run_id=cfg.run_id or time.strftime("%Y%m%d-%H%M%S"))
    cfg = validation.validate(cfg, cli_keys=overrides)
    for note in notes:  # after the checks: bad input gets its one line alone
        safe_print(f"sweep: {note}", file=sys.stderr)
    run_dir = Path(cfg.out) / cfg.run_id
    try:
        runlock.check_free(run_dir)
        check_new(cfg, run_dir)
    except OSError as exc:  # a name the filesystem refuses (too long, ...)
        msg = f"out={cfg.out}: cannot use the run folder {run_dir} ({exc.strerror}); choose another out="
        raise ConfigError(msg) from exc
    return cfg, run_dir, False


def check_new(cfg: config_mod.RunConfig, run_dir: Path) -> None:
    """A new run's folder must hold no run yet."""
    if (run_dir / "study.db").exists():
        raise ConfigError(f"run_id={cfg.run_id}: {run_dir} already holds a run; continue it with resume={run_dir}")


def space_record(space: str) -> dict[str, str]:
    """How a new run's config.yaml names its space (``space`` is the file it was composed from): a shipped space by
    its name (``locomotion``), a file given by a relative path as given, one given by an absolute path by its file name
    (a run folder names no machine's paths), with the SHA-256 of the file, which identifies its content wherever it
    lies. A resume reads the config from config.yaml itself, never from the space file."""
    path = Path(space)
    if path.parent.resolve() == config_mod.spaces_dir().resolve():
        name = path.stem
    else:
        name = path.name if path.is_absolute() else space
    return {"space": name, SPACE_HASH: hashlib.sha256(path.read_bytes()).hexdigest()}


def recorded_space(run_dir: Path) -> dict[str, str]:
    """The space record of a run folder's config.yaml (kept as it is on resume); a run written before the hash was
    recorded has its ``space`` alone."""
    saved = config_mod.read_yaml(run_dir / "config.yaml")
    return {k: str(saved[k]) for k in ("space", SPACE_HASH) if saved.get(k)}


def make_run_dir(cfg: config_mod.RunConfig, run_dir: Path) -> None:
    """Create the run folder once every check has passed; if it cannot be written, remove what was made and say so
    in one line."""
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".write-test-{os.getpid()}"  # two drivers may make one folder at once
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        for folder in made:  # deepest first: leave nothing behind
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise ConfigError(
            f"out={cfg.out}: cannot write the run folder {run_dir} ({exc.strerror}); choose a writable out="
        ) from exc


def check_study(run_dir: Path) -> None:
    """Refuse, in one line and before Ray starts, a study that cannot be read or lacks trials the ledger bills.

    The ledger is the record of spend: a resume on a damaged or replaced ``study.db`` would start a new study,
    reuse trial numbers and drop those dollars from the report and the budget. It only reads: the folder is not held
    yet (torn ledger lines are moved aside by the planner's ledger writer, once it holds the folder).
    """
    import optuna

    from sweep.ledger import read_rows

    billed = {r.trial for r in read_rows(run_dir / "ledger.jsonl")}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    keep = f"the ledger keeps every row and dollar; restore {run_dir / 'study.db'} from a copy or start a new run"
    try:
        study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{(run_dir / 'study.db').resolve()}")
        known = {t.number for t in study.get_trials(deepcopy=False)}
    except Exception as exc:  # sqlalchemy's DatabaseError, Optuna's KeyError for a study that is not there, ...
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"resume={run_dir}: study.db cannot be read ({reason}); {keep}") from None
    missing = sorted(billed - known)
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise ConfigError(
            f"resume={run_dir}: study.db does not match the ledger: it lacks trial(s) {shown} that the ledger bills; "
            f"{keep}"
        )


def resolve_runtime(cfg: config_mod.RunConfig, has_gpu: bool) -> tuple[str, Any, float]:
    """(profile, price, control period) for this machine."""
    from sweep import prices
    from sweep.backends import get_backend
    from sweep.contract import success_rule

    profile = cfg.profile if cfg.profile != "auto" else ("gpu" if has_gpu else "cpu")
    gpu = cfg.price.gpu
    if gpu == "auto":
        gpu = prices.detect_gpu("cuda" if has_gpu else "cpu") if cfg.price.usd_per_hour is None else "custom"
    price = prices.resolve(gpu, cfg.price.kind, cfg.price.usd_per_hour, key=f"{cfg.space}: price")
    backend = get_backend(cfg.backend)
    check_imports(DRIVER_MODULES, who="sweep.run's driver and report")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ConfigError(f"{cfg.space}: device: {cfg.device!r} is not a device; use auto, cpu, cuda or cuda:N")
    if cfg.workers.address is None:  # a cluster's workers may have what this driver lacks
        check_imports(
            ("sweep.trial", *backend.requires), who=f"the trials of backend {cfg.backend}", noise=backend.import_noise
        )
        backend.preflight(profile, cfg.backend_options, success_rule(cfg.target))
        slots = gpu_count() if has_gpu else os.cpu_count() or 1
        if not has_gpu and cfg.workers.cpus_per_trial > slots:
            raise ConfigError(
                f"{cfg.space}: workers.cpus_per_trial={cfg.workers.cpus_per_trial}: this machine has {slots} CPU(s) "
                "for a local Ray's workers; lower it"
            )
        if cfg.workers.num > slots:
            raise ConfigError(
                f"{cfg.space}: workers.num={cfg.workers.num}: this machine has {slots} "
                f"{'GPU' if has_gpu else 'CPU'}(s) for a local Ray's workers; lower it (0: as many as fit)"
            )
        if cfg.device.startswith("cuda") and not has_gpu:
            raise ConfigError(
                f"{cfg.space}: device={cfg.device}: this machine has no CUDA GPU; use device=auto or device=cpu"
            )
    return profile, price, backend.control_dt_s(profile)


def gpu_count() -> int:
    """The GPUs torch sees (imported only on a machine with one)."""
    import torch

    return torch.cuda.device_count()


def plan(argv: list[str]) -> tuple[config_mod.RunConfig, Path, bool, tuple[str, Any, float]]:
    """Every check a run makes before it writes anything or starts a worker: the config, the machine (device,
    price, installed packages) and a space that something can run in. Returns (config, run folder, resuming?,
    (profile, price, control period))."""
    from sweep.planner import space

    cfg, run_dir, resuming = prepare(argv)
    runtime = resolve_runtime(cfg, torch_sees_gpu())
    space.feasible_count(cfg, runtime[2], runtime[1].memory_gib)  # a space nothing can run in: say so before Ray
    return cfg, run_dir, resuming, runtime


def main(argv: list[str]) -> int:
    stops.reset()
    previous = stops.install()  # SIGTERM and SIGHUP end a run as Ctrl-C does, from the first check on
    try:
        faults.arm()
        cfg, run_dir, resuming, runtime = plan(argv)
        if not resuming:
            make_run_dir(cfg, run_dir)
        with runlock.acquire(run_dir) as lock:
            faults.point("lock")
            if not resuming:
                check_new(cfg, run_dir)  # again, holding it: another driver may have run here since the checks
            return drive(cfg, run_dir, resuming, runtime, lock)
    finally:
        stops.restore(previous)


def drive(
    cfg: config_mod.RunConfig,
    run_dir: Path,
    resuming: bool,
    runtime: tuple[str, Any, float],
    lock: runlock.RunLock,
) -> int:
    """Run the study in a folder this driver holds, then write its outputs; returns the exit status."""
    profile, price, control_dt_s = runtime
    has_gpu = torch_sees_gpu()
    # On resume too: a raised budget must be what the report and the next resume read.
    record = recorded_space(run_dir) if resuming else space_record(cfg.space)
    from sweep.backends import get_backend

    record[SUCCESS_RULE] = get_backend(cfg.backend).success_text(cfg.target)
    write_atomic(run_dir / "config.yaml", yaml.safe_dump({**asdict(cfg), **record}, sort_keys=False))
    safe_print(
        f"sweep: run {run_dir} | space {record['space']} | backend {cfg.backend} profile {profile} | "
        f"budget ${cfg.budget.usd:g} (per trial ${cfg.budget.trial_usd:g}) at {price.label} ${price.usd_per_hour:g}/h",
        flush=True,
    )
    from sweep.execution import precompile
    from sweep.execution.workers import WorkerPool, wait_ready
    from sweep.planner.loop import Planner
    from sweep.report.live import Progress

    pool = WorkerPool(cfg.workers, use_gpu=has_gpu)
    stops.install()  # ray.init put its own SIGTERM handler (and its core worker's stack dump) in place of ours
    progress = Progress()
    interrupted = False

    def stop_requested() -> str:
        lock.check()  # taken over by another driver: raise, and write nothing more
        return stops.requested()

    compiling: list = []
    try:
        wait_ready(pool)
        where = f"one per GPU: {', '.join(pool.gpus())}" if has_gpu else "CPU slots"
        safe_print(f"sweep: {pool.size} worker(s) ({where})", flush=True)
        compiling = precompile.start(cfg, run_dir, profile, has_gpu)
        pool.preload(precompile.worker_plan(cfg, run_dir, profile, has_gpu))
        Planner(cfg, run_dir, pool, price, profile, control_dt_s, progress, interrupted=stop_requested).run()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with stops.held():  # a stop signal now waits for the workers' end, then the report
            precompile.stop(compiling)
            progress.close()
            pool.shutdown()
    lock.check()
    with stops.held():  # a stop signal now lets the report be written first
        outcome = finish(cfg, run_dir)
    if interrupted or stops.requested():
        return stops.exit_status()
    if outcome.failed_trials and not outcome.evaluated:
        safe_print("sweep: every trial failed before its first held-out pass: nothing was measured", file=sys.stderr)
        return EXIT_ALL_FAILED
    return 0


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` and rename it over ``path``: a kill mid-write leaves the old file whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def finish(cfg: config_mod.RunConfig, run_dir: Path) -> Any:
    """Write the report and recommended.yaml from the ledger and study, say where they are, and return the
    ledger's :class:`~sweep.analysis.summary.Summary`."""
    from sweep.analysis import summary
    from sweep.ledger import read_rows
    from sweep.report import export
    from sweep.report import page as report

    rows_path = run_dir / "ledger.jsonl"
    faults.point("report")
    try:
        recommended = export.write(run_dir)  # first: the report's card quotes its Isaac Lab trainer line
    finally:  # the report is written even when the export fails
        faults.point("report")
        html = report.write(run_dir)
    faults.point("report")
    outcome = summary.summarize(read_rows(rows_path))
    best = outcome.recommended
    trainer = export.trainer_command(run_dir, best.trial) if best is not None else None
    safe_print(summary.run_text(outcome, rows_path, trainer, export.study_end(run_dir)))
    safe_print(f"report:      {html}")
    safe_print(f"recommended: {recommended if recommended else '(no trial reached the target)'}")
    safe_print(f"ledger:      {rows_path}")
    safe_print(f"resume with: python -m sweep.run resume={run_dir}")
    return outcome


if __name__ == "__main__":
    from sweep.cli import run_main

    run_main(main)
