"""Isaac Lab fidelity: one config trained as before or as now, its held-out success curve against env steps and the
seconds of one held-out pass; and the pair of saved agent configs (a trial's and Isaac Lab's trainer's).

    # the code before (sweep's own agent config, no random episode start, the panel a view of the training scene):
    mkdir -p bench_old && git archive 220363e sweep | tar -x -C bench_old
    python benchmarks/isaaclab_fidelity.py curve --behaviour old --old-tree bench_old --out $OUT/old.json
    # this code (the task's agent config, its random start, the panel in its own process):
    python benchmarks/isaaclab_fidelity.py curve --behaviour new --out $OUT/new.json
    # the agent.yaml / env.yaml pair: a short sweep trial, then its exported line in Isaac Lab's trainer
    python benchmarks/isaaclab_fidelity.py pair --out benchmarks/data/isaaclab_fidelity

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
from pathlib import Path
from typing import Any

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
        seed=args.seed,
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
    from sweep.backends.isaaclab import cfg as ilc
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
        shutil.copyfile(trial_dir / ilc.PARAMS_DIR / f"{kind}.yaml", out / f"sweep_{kind}.yaml")
        shutil.copyfile(saved / f"{kind}.yaml", out / f"isaaclab_{kind}.yaml")
        found = ilc.params_differences(
            kind, ilc.read_params(out / f"sweep_{kind}.yaml"), ilc.read_params(out / f"isaaclab_{kind}.yaml")
        )
        differences[kind] = {path: [repr(a), repr(b)] for path, (a, b) in found.items()}
        print(f"{kind}.yaml: {len(found)} difference(s) besides {sorted(ilc.RUN_ONLY[kind])}", flush=True)
        for path, (a, b) in found.items():
            print(f"  {path}: sweep {a!r}, Isaac Lab {b!r}")
    return {"override": section["override"], "differences": differences, "work": str(work)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("curve", "pair"))
    parser.add_argument("--behaviour", choices=("old", "new"), default="new")
    parser.add_argument("--old-tree", help="a folder holding the sweep package before this change (--behaviour old)")
    parser.add_argument("--task", default=FLAT)
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--horizon", type=int, default=24, help="num_steps_per_env")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--eval-every-steps", type=int, default=1200, help="control steps per env between passes")
    parser.add_argument("--env-steps", type=int, default=60_000_000, help="curve: train until this many env steps")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--flags", help='perf flags as JSON, e.g. {"fused_optimizer": true}')
    parser.add_argument("--asset-root", help="ISAACSIM_ASSET_ROOT: a local copy (or stand-in) of Isaac Lab's assets")
    parser.add_argument("--episode-length-s", type=float, help="the task's episode_length_s (default: the task's 20 s)")
    parser.add_argument("--task-env", help="task settings as JSON (default: the shipped space's njmax/nconmax)")
    parser.add_argument("--cap-s", type=float, default=120.0, help="pair: the sweep trial's cap, billable seconds")
    parser.add_argument("--max-iterations", type=int, default=2, help="pair: Isaac Lab trainer's iterations")
    parser.add_argument("--out", required=True, help="curve: a JSON file; pair: a folder")
    args = parser.parse_args()
    if args.mode == "curve":
        result = curve(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        return 0
    result = pair(args)
    (Path(args.out) / "pair.json").write_text(json.dumps(result, indent=1))
    return 1 if any(result["differences"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
