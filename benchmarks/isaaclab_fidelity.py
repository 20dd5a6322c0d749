"""Isaac Lab fidelity: one config trained as before or as now, its held-out success curve against env steps and the
seconds of one held-out pass; the pair of saved agent configs (a trial's and Isaac Lab's trainer's); and Isaac Lab's
trainer on a run's recommendation, scored on the run's held-out panel.

    # the code before (sweep's own agent config, no random episode start, the panel a view of the training scene):
    mkdir -p bench_old && git archive 220363e sweep | tar -x -C bench_old
    python benchmarks/isaaclab_fidelity.py curve --behaviour old --old-tree bench_old --out $OUT/old.json
    # this code (the task's agent config, its random start, the panel in its own process):
    python benchmarks/isaaclab_fidelity.py curve --behaviour new --out $OUT/new.json
    # the agent.yaml / env.yaml pair: a short sweep trial, then its exported line in Isaac Lab's trainer
    python benchmarks/isaaclab_fidelity.py pair --out benchmarks/data/isaaclab_fidelity
    # Isaac Lab's trainer on a finished run's recommendation, as long as its best trial trained, on the run's panel
    python benchmarks/isaaclab_fidelity.py replay --run reports/<run_id> [--seed N] --out $OUT/replay

``curve`` trains in rounds of ``--eval-every-steps`` control steps per env and after each round runs one full held-out
pass (no early verdict: every episode to its end), until ``--env-steps``; it prints one line per checkpoint (env
steps, held-out success with its 95% interval, the pass's seconds, the round's training seconds) and a summary (mean
pass seconds, the passes' share of the wall clock), and writes them as JSON. Both behaviours run the same config
(task, envs, horizon, seed, flags, task settings) through the trial build of their own tree, so what differs is
what the trees do. One behaviour per process: a process hosts one Isaac Lab simulation. The panel process's start
and the panel's first step (compile) are reported apart from the passes, as a trial bills them apart.

``pair`` runs ``python -m sweep.trial`` for ``--cap-s`` billable seconds with the config, builds the exported override
line as recommended.yaml does, runs it in ``python -m isaaclab train`` for ``--max-iterations``, copies both
``params/agent.yaml`` and ``params/env.yaml`` to ``--out`` (``sweep_agent.yaml``, ``isaaclab_agent.yaml``,
``sweep_env.yaml``, ``isaaclab_env.yaml``) and compares them leaf by leaf as the CI test does; exit 1 on a difference.

``replay`` reads a finished ``sweep.run`` folder of the isaaclab backend: from its ledger, the recommended config's best
trial (its cheapest seed to the target, the recommendation's deliverable) and the training iteration of its first
reached row; from ``recommended.yaml``, the exported trainer line and the trial's config. It runs that line in ``python
-m isaaclab train`` for that many iterations with ``--seed`` (default: the recommended config's first confirmation
seed, else 1), loads the trainer's final checkpoint (``model_<iteration>.pt``, the highest) into the actor its
``params/agent.yaml`` describes, and scores it on the trial's held-out panel: the same scene in its own process,
``eval_episodes`` episodes on the held-out seeds, the run's success rule; every episode runs to its end (no early
verdict against the target), so the rate is measured, not bounded. It prints the held-out success with its 95%
interval, the episodes, the iteration and the seed, writes ``replay.json`` and copies the trainer's configs to
``--out`` (``trainer_agent.yaml``, ``trainer_env.yaml``); exit 1 with one ``error:`` line when the run has no
recommendation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]
FLAT = "Isaac-Velocity-Flat-AnymalD"
#: The shipped space's task settings for 4096 envs (search_spaces/anymal_d_flat.yaml): the flat task's njmax 60 /
#: nconmax 25 overflow there.
SPACE_ENV = {"sim": {"physics": {"solver_cfg": {"njmax": 200, "nconmax": 50}}}}


def use_tree(behaviour: str, old_tree: str | None) -> Path:
    """Put the tree whose ``sweep`` runs first on the import path (and on the children's), before any import of it."""
    if behaviour == "old" and not old_tree:
        raise SystemExit("--behaviour old needs --old-tree (a folder holding the old sweep package; see the docstring)")
    tree = Path(old_tree).resolve() if behaviour == "old" else HERE
    if not (tree / "sweep" / "__init__.py").is_file():
        raise SystemExit(f"{tree}: no sweep package there")
    sys.path.insert(0, str(tree))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    return tree


def trial_config(args: argparse.Namespace) -> Any:
    """The config both behaviours run (a ``TrialConfig`` of the tree in use)."""
    from sweep.contract import TrialConfig

    env: dict[str, Any] = json.loads(args.task_env) if args.task_env else dict(SPACE_ENV)
    if args.episode_length_s is not None:
        env["episode_length_s"] = args.episode_length_s
    options: dict[str, Any] = {"env": env}
    if args.asset_root:
        options["asset_root"] = args.asset_root
    return TrialConfig(
        backend="isaaclab",
        profile=args.task,
        num_envs=args.num_envs,
        num_steps_per_env=args.horizon,
        eval_episodes=args.eval_episodes,
        eval_every_steps=args.eval_every_steps,
        seed=1 if args.seed is None else args.seed,
        device=args.device,
        flags=json.loads(args.flags) if args.flags else {},
        backend_options=options,
    ).validate()


def curve(args: argparse.Namespace) -> dict[str, Any]:
    """Train the config round by round with a full held-out pass after each; the rows and a summary."""
    tree = use_tree(args.behaviour, args.old_tree)
    from sweep.ledger import PhaseClock

    if (tree / "sweep" / "trial" / "runner.py").is_file():  # the package layout
        from sweep.trial.evaluation import evaluate, warm_up_panel
        from sweep.trial.learner import describe_device, device_sync
        from sweep.trial.runner import build, compile_training
    else:  # the flat layout the old tree has
        from sweep.evaluation import evaluate, warm_up_panel
        from sweep.learner import describe_device, device_sync

        from sweep.trial import build, compile_training

    cfg = trial_config(args)
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        t0 = time.perf_counter()
        clock = PhaseClock()
        built = build(cfg, clock, None, 0, stack)
        clock.sync = sync = device_sync(built.device, built.env)
        compile_training(built)
        build_s = time.perf_counter() - t0
        policy = built.alg.get_policy()
        t = time.perf_counter()
        eval_env = built.eval_env  # the panel: a view of the training scene (old) or its own process (new)
        panel_start_s = time.perf_counter() - t
        t = time.perf_counter()
        warm_up_panel(eval_env, policy)
        panel_warm_s = time.perf_counter() - t
        env_steps, iteration = 0, 0
        print(
            f"{args.behaviour} ({tree}): {cfg.num_envs} x {cfg.num_steps_per_env}, panel {cfg.eval_episodes}, "
            f"{describe_device(built.device)}; built in {build_s:.1f} s, panel started in {panel_start_s:.1f} s, "
            f"warmed in {panel_warm_s:.1f} s",
            flush=True,
        )
        print(f"{'env steps':>12} {'success':>8} {'95% CI':>13} {'pass s':>8} {'train s':>8}", flush=True)
        while env_steps < args.env_steps:
            sync()
            t = time.perf_counter()
            n = built.trainer(cfg.eval_every)
            sync()
            train_s = time.perf_counter() - t
            iteration += n
            env_steps += n * cfg.num_envs * cfg.num_steps_per_env
            t = time.perf_counter()
            result = evaluate(built.alg.get_policy(), eval_env, built.seeds)  # no target: every episode to its end
            sync()
            pass_s = time.perf_counter() - t
            lo, hi = result.interval
            row = {
                "iteration": iteration,
                "env_steps": env_steps,
                "success": result.rate,
                "success_lo": lo,
                "success_hi": hi,
                "pass_s": pass_s,
                "pass_steps": result.steps,
                "train_s": train_s,
            }
            rows.append(row)
            print(
                f"{env_steps:>12,} {result.rate:>8.3f} {lo:>6.3f}-{hi:<6.3f} {pass_s:>8.2f} {train_s:>8.1f}", flush=True
            )
    passes, trained = sum(r["pass_s"] for r in rows), sum(r["train_s"] for r in rows)
    summary = {
        "behaviour": args.behaviour,
        "tree": str(tree),
        "device": describe_device(built.device),
        "config": {
            k: getattr(cfg, k)
            for k in (
                "profile",
                "num_envs",
                "num_steps_per_env",
                "eval_episodes",
                "eval_every_steps",
                "seed",
                "flags",
                "backend_options",
            )
        },
        "build_s": build_s,
        "panel_start_s": panel_start_s,
        "panel_warm_s": panel_warm_s,
        "mean_pass_s": passes / len(rows) if rows else None,
        "passes_share_of_train_and_passes": passes / (passes + trained) if rows else None,
        "train_env_steps_per_s": env_steps / trained if trained else None,
        "rows": rows,
    }
    print(
        f"mean pass {summary['mean_pass_s']:.2f} s; passes {100 * summary['passes_share_of_train_and_passes']:.1f}% "
        f"of training + passes; training {summary['train_env_steps_per_s']:,.0f} env steps/s",
        flush=True,
    )
    return summary


def trainer_line(command: str, iterations: int, device: str, seed: int | None = None) -> list[str]:
    """The exported trainer ``command`` (``recommended.yaml``'s ``isaaclab.command``) as this Python runs it, for
    ``iterations`` training iterations, with ``--seed`` when given (it replaces the line's ``agent.seed``). On a
    device other than CUDA the trainer also needs the env's and the agent's device; ``auto`` leaves both to it."""
    line = [sys.executable, *command.split()[1:], "--max_iterations", str(iterations)]
    if seed is not None:
        line += ["--seed", str(seed)]
    if not device.startswith("cuda") and device != "auto":
        line += ["--device", device, f"agent.device={device}"]
    return line


def run_trainer(line: list[str], work: Path, asset_root: str | None) -> Path:
    """Run Isaac Lab's trainer ``line`` (:func:`trainer_line`) in ``work``, with ``ISAACSIM_ASSET_ROOT`` from
    ``asset_root`` when given; the folder of its run (``logs/rsl_rl/<experiment>/<run>``: ``params/agent.yaml``,
    ``params/env.yaml`` and its ``model_<iteration>.pt`` checkpoints)."""
    from sweep.backends.isaaclab.scene import ASSET_ROOT_ENV

    env = dict(os.environ)
    if asset_root:
        env[ASSET_ROOT_ENV] = str(Path(asset_root).resolve())
    print("Isaac Lab's trainer:", " ".join(line[1:]), flush=True)
    if subprocess.run(line, cwd=work, env=env).returncode != 0:
        raise SystemExit("Isaac Lab's trainer failed")
    (saved,) = (work / "logs" / "rsl_rl").glob("*/*/params")
    return saved.parent


def pair(args: argparse.Namespace) -> dict[str, Any]:
    """A short sweep trial and its exported line in Isaac Lab's trainer; both saved configs copied and compared."""
    use_tree("new", None)
    from sweep.backends import get_backend
    from sweep.backends.isaaclab import params as ilpar
    from sweep.report.export import implied_agent_config

    cfg = trial_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="isaaclab-fidelity-"))
    trial_args = [
        "backend=isaaclab",
        f"profile={cfg.profile}",
        f"num_envs={cfg.num_envs}",
        f"num_steps_per_env={cfg.num_steps_per_env}",
        f"eval_episodes={cfg.eval_episodes}",
        f"eval_every_steps={cfg.eval_every_steps}",
        f"seed={cfg.seed}",
        f"device={cfg.device}",
        "target=1.0",
        f"cap_s={args.cap_s}",
        f"out={work / 'trial'}",
        *(f"flags.{k}={json.dumps(v)}" for k, v in cfg.flags.items()),
        *(f"backend_options.{k}={json.dumps(v)}" for k, v in cfg.backend_options.items()),
    ]
    run = subprocess.run([sys.executable, "-m", "sweep.trial", *trial_args], cwd=work)
    if run.returncode not in (0, 1):
        raise SystemExit(f"the sweep trial failed (rc {run.returncode})")
    trial_dir = work / "trial" / "trials" / "0000"
    section = get_backend("isaaclab").export_section(cfg, implied_agent_config(cfg, trial_dir))["isaaclab"]
    line = trainer_line(section["command"], args.max_iterations, str(cfg.device))
    saved = run_trainer(line, work, args.asset_root) / "params"
    differences: dict[str, Any] = {}
    for kind in ("agent", "env"):
        shutil.copyfile(trial_dir / ilpar.PARAMS_DIR / f"{kind}.yaml", out / f"sweep_{kind}.yaml")
        shutil.copyfile(saved / f"{kind}.yaml", out / f"isaaclab_{kind}.yaml")
        found = ilpar.params_differences(
            kind, ilpar.read_params(out / f"sweep_{kind}.yaml"), ilpar.read_params(out / f"isaaclab_{kind}.yaml")
        )
        differences[kind] = {path: [repr(a), repr(b)] for path, (a, b) in found.items()}
        print(f"{kind}.yaml: {len(found)} difference(s) besides {sorted(ilpar.RUN_ONLY[kind])}", flush=True)
        for path, (a, b) in found.items():
            print(f"  {path}: sweep {a!r}, Isaac Lab {b!r}")
    return {"override": section["override"], "differences": differences, "work": str(work)}


@dataclass(frozen=True)
class ReplayPlan:
    """What ``replay`` trains and scores, read from a finished run folder (its ledger and ``recommended.yaml``)."""

    trial: int
    """The recommended config's best trial: its cheapest seed to the target (the recommendation's deliverable)."""
    iteration: int
    """Training iterations the trial had run when it reached the target (its first reached row)."""
    seed: int
    """Isaac Lab's trainer's training seed (``--seed``)."""
    trial_seed: int
    """The best trial's own training seed."""
    trial_success: float | None
    """The best trial's held-out success at that iteration, with its 95% interval."""
    trial_ci95: tuple[float | None, float | None]
    cfg: Any
    """The trial's config (``recommended.yaml``'s ``trial`` section, a ``TrialConfig``): task, panel, rule, options."""
    command: str
    """Isaac Lab's trainer line that ``recommended.yaml`` exports (``isaaclab.command``)."""
    checkpoint: str
    """The trial's checkpoint, relative to the run folder: its ``checkpoint.json`` gives the actor's sizes."""


def replay_plan(run_dir: Path, seed: int | None = None) -> ReplayPlan:
    """The plan of ``replay`` for the run folder ``run_dir``: the recommendation from the ledger, the iteration at
    which its best trial reached the target, the trainer's line from ``recommended.yaml``; ``seed`` (None: the
    recommended config's first confirmation seed, else 1). A run without a recommendation, without its
    ``recommended.yaml`` or with one left from an earlier recommendation is a ``ConfigError``."""
    from sweep.analysis.summary import summarize
    from sweep.contract import TrialConfig, TrialState
    from sweep.errors import ConfigError
    from sweep.ledger import LedgerView, read_rows
    from sweep.report.export import trainer_command

    ledger = run_dir / "ledger.jsonl"
    if not ledger.is_file():
        raise ConfigError(f"{run_dir}: no ledger.jsonl here; give a run folder written by sweep.run")
    view = LedgerView.of(read_rows(ledger))
    rec = summarize(view).recommendation
    if rec is None:
        raise ConfigError(f"{run_dir}: no recommendation (no trial reached the target), so nothing to replay")
    trial = rec.trial.trial
    reached = [r for r in view.of_trial(trial) if r.state == TrialState.REACHED]
    if not reached:  # a recommendation is only made of a config that reached; a ledger cut short says otherwise
        raise ConfigError(f"{run_dir}: trial {trial} of the recommended config has no reached row in the ledger")
    row = reached[0]
    path = run_dir / "recommended.yaml"
    command = trainer_command(run_dir, trial)
    if command is None:
        raise ConfigError(
            f"{path}: missing, or it recommends another trial than the ledger's {trial} (or names no trainer line); "
            f"python -m sweep.report {run_dir} writes it again"
        )
    doc = yaml.safe_load(path.read_text())
    cfg = TrialConfig.of(doc["trial"])
    if cfg.backend != "isaaclab" or doc["isaaclab"].get("tasks_module"):
        raise ConfigError(f"{path}: replay trains Isaac Lab's own tasks in its own trainer (backend {cfg.backend})")
    if not doc.get("checkpoint"):
        raise ConfigError(f"{path}: trial {trial} saved no checkpoint, whose checkpoint.json gives the actor's sizes")
    if seed is None:
        confirmed = [view.last[t] for t in rec.config.trials if view.last[t].phase == "confirm"]
        seed = int(confirmed[0].seed) if confirmed else 1
    return ReplayPlan(
        trial=trial,
        iteration=int(row.iteration),
        seed=seed,
        trial_seed=int(row.seed),
        trial_success=row.success,
        trial_ci95=(row.success_lo, row.success_hi),
        cfg=cfg,
        command=command,
        checkpoint=str(doc["checkpoint"]["path"]),
    )


def final_checkpoint(run: Path) -> Path:
    """The last checkpoint of a trainer's run folder: ``model_<iteration>.pt`` with the highest iteration."""
    models = sorted(run.glob("model_*.pt"), key=lambda p: int(p.stem.removeprefix("model_")))
    if not models:
        raise SystemExit(f"{run}: Isaac Lab's trainer saved no model_*.pt")
    return models[-1]


def replay(args: argparse.Namespace) -> dict[str, Any]:
    """Isaac Lab's trainer on the run's recommendation, for as many iterations as its best trial took to the target;
    its final checkpoint scored on the trial's held-out panel, as a trial's pass scores."""
    from sweep import checkpoints, perf
    from sweep.backends import get_backend
    from sweep.backends.base import resolve_device
    from sweep.backends.isaaclab import params as ilpar
    from sweep.contract import panel_seeds
    from sweep.report.policy import load_actor
    from sweep.trial.evaluation import evaluate, warm_up_panel
    from sweep.trial.learner import describe_device
    from sweep.trial.runner import env_knobs

    run_dir = Path(args.run)
    plan = replay_plan(run_dir, args.seed)
    cfg = plan.cfg
    if args.asset_root:  # this machine's copy of the root the run had (the panel's scene loads its assets too)
        cfg = replace(cfg, backend_options={**cfg.backend_options, "asset_root": args.asset_root})
    asset_root = cfg.backend_options.get("asset_root")
    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="isaaclab-replay-"))
    line = trainer_line(plan.command, plan.iteration, device, plan.seed)
    trained = run_trainer(line, work, asset_root)
    model = final_checkpoint(trained)
    for kind in ("agent", "env"):
        shutil.copyfile(trained / "params" / f"{kind}.yaml", out / f"trainer_{kind}.yaml")
    meta = checkpoints.read_meta(run_dir, plan.checkpoint)
    agent = ilpar.read_params(trained / "params" / "agent.yaml")
    actor = load_actor(agent, model, meta["obs_dim"], meta["num_actions"], where=str(model))

    backend = get_backend(cfg.backend)
    knobs = env_knobs(cfg, backend, perf.Flags.of(cfg.flags))
    panel = backend.make_eval_env(cfg.eval_episodes, cfg.seed, device, cfg.profile, **knobs)
    try:
        warm_up_panel(panel, actor)
        result = evaluate(actor, panel, panel_seeds(cfg.eval_episodes))  # no target: every episode to its end
    finally:
        panel.close()
    lo, hi = result.interval
    print(
        f"replay: held-out success {result.rate:.3f} (95% CI {lo:.3f}-{hi:.3f}, {result.episodes} episodes) after "
        f"{plan.iteration} iteration(s) of Isaac Lab's trainer, seed {plan.seed}; the trial {plan.trial} (seed "
        f"{plan.trial_seed}) measured {plan.trial_success:.3f} there",
        flush=True,
    )
    return {
        "run": str(run_dir),
        "command": " ".join(["python", *line[1:]]),
        "iteration": plan.iteration,
        "seed": plan.seed,
        "success": result.rate,
        "success_ci95": [lo, hi],
        "episodes": result.episodes,
        "device": describe_device(device),
        "checkpoint": str(model.relative_to(work)),
        "trial": {
            "trial": plan.trial,
            "seed": plan.trial_seed,
            "success": plan.trial_success,
            "success_ci95": list(plan.trial_ci95),
        },
        "work": str(work),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("curve", "pair", "replay"))
    parser.add_argument("--behaviour", choices=("old", "new"), default="new")
    parser.add_argument("--old-tree", help="a folder holding the sweep package before this change (--behaviour old)")
    parser.add_argument("--run", help="replay: a finished sweep.run folder (recommended.yaml, ledger.jsonl)")
    parser.add_argument("--task", default=FLAT)
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--horizon", type=int, default=24, help="num_steps_per_env")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--eval-every-steps", type=int, default=1200, help="control steps per env between passes")
    parser.add_argument("--env-steps", type=int, default=60_000_000, help="curve: train until this many env steps")
    parser.add_argument(
        "--seed",
        type=int,
        help="training seed (curve, pair: default 1; replay: Isaac Lab's trainer's, default the recommended config's "
        "first confirmation seed, else 1)",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--flags", help='perf flags as JSON, e.g. {"fused_optimizer": true}')
    parser.add_argument("--asset-root", help="ISAACSIM_ASSET_ROOT: a local copy (or stand-in) of Isaac Lab's assets")
    parser.add_argument("--episode-length-s", type=float, help="the task's episode_length_s (default: the task's 20 s)")
    parser.add_argument("--task-env", help="task settings as JSON (default: the shipped space's njmax/nconmax)")
    parser.add_argument("--cap-s", type=float, default=120.0, help="pair: the sweep trial's cap, billable seconds")
    parser.add_argument("--max-iterations", type=int, default=2, help="pair: Isaac Lab trainer's iterations")
    parser.add_argument("--out", required=True, help="curve: a JSON file; pair, replay: a folder")
    args = parser.parse_args()
    if args.mode == "curve":
        result = curve(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        return 0
    if args.mode == "replay":
        if not args.run:
            parser.error("replay needs --run <run folder>")
        use_tree("new", None)
        from sweep.errors import ConfigError

        try:
            result = replay(args)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        (Path(args.out) / "replay.json").write_text(json.dumps(result, indent=1))
        return 0
    result = pair(args)
    (Path(args.out) / "pair.json").write_text(json.dumps(result, indent=1))
    return 1 if any(result["differences"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
