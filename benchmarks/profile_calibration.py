"""Does a variant of an MJX profile measure learning? Held-out success fresh, then after training, by command.

    python benchmarks/profile_calibration.py --profile cpu --set 'cmd_vx=[-0.2,-0.05]' --iters 100

Builds a trial as ``sweep.trial.runner`` does (256 envs x 24 steps, the CPU flags, seed 1) on the profile with the given
``TaskParams`` fields replaced, then runs full held-out passes (256 panel episodes, every episode to its end):
the fresh policy's action mean; after ``--iters`` PPO iterations, the action mean (what ``sweep`` measures) and
sampled actions (what the training episodes see). Each pass prints its success share, its fall share, and the
success share in 4 bins of the forward command. A profile fit for ``sweep`` scores under 0.2 fresh and reaches the
target within the space's per-trial cap.
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import Any

import numpy as np
import torch

from sweep.backends.mjx import locomotion as mjx_locomotion
from sweep.contract import TrialConfig
from sweep.ledger import PhaseClock
from sweep.trial.runner import build

CPU_FLAGS = ("fused_optimizer", "deferred_episode_stats", "fast_finite_check", "lazy_loss_readout", "buffer_donation")


def full_pass(built: Any, act: Any) -> dict[str, Any]:
    """One pass over the panel with ``act(obs) -> actions``; shares overall and by forward command."""
    env = built.eval_env
    obs = env.reset_with_seeds(built.seeds)
    cmd_vx = np.asarray(env._state.cmd)[:, 0]
    ended = np.zeros(env.num_envs, bool)
    success, fell = np.zeros_like(ended), np.zeros_like(ended)
    with torch.inference_mode():
        for _ in range(int(env.max_episode_length) + 1):
            obs, _, dones, extras = env.step(act(obs))
            new = dones.bool().numpy() & ~ended
            success |= new & extras["success"].numpy()
            fell |= new & ~extras["time_outs"].numpy()
            ended |= new
            if ended.all():
                break
    lo, hi = env.params.cmd_vx
    edges = np.linspace(lo, hi, 5)
    index = np.clip(np.digitize(cmd_vx, edges[1:-1]), 0, 3)
    by_cmd = {f"{edges[i]:.2f}..{edges[i + 1]:.2f}": round(float(success[index == i].mean()), 3) for i in range(4)}
    return {"success": float(success.mean()), "fell": float(fell.mean()), "success_by_cmd_vx": by_cmd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--set", action="append", default=[], help="FIELD=JSON, a TaskParams field to replace")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fields = {}
    for item in args.set:
        key, value = item.split("=", 1)
        parsed = json.loads(value)
        fields[key] = tuple(parsed) if isinstance(parsed, list) else parsed
    mjx_locomotion.PROFILES["calibration"] = mjx_locomotion.with_overrides(args.profile, **fields)
    flags = {"compile_cache": True, **dict.fromkeys(CPU_FLAGS, True)}
    cfg = TrialConfig(profile="calibration", num_envs=256, num_steps_per_env=24, seed=args.seed, flags=flags)
    with ExitStack() as stack:
        built = build(cfg.validate(), PhaseClock(), None, 0, stack)
        policy = built.alg.get_policy()
        policy.eval()
        print(json.dumps({"pass": "fresh, action mean", **full_pass(built, policy)}), flush=True)
        policy.train()
        built.trainer(args.iters)
        policy.eval()
        print(json.dumps({"pass": f"after {args.iters} iterations, action mean", **full_pass(built, policy)}))
        sampled = full_pass(built, lambda obs: built.alg.actor(obs, stochastic_output=True))
        print(json.dumps({"pass": f"after {args.iters} iterations, sampled actions", **sampled}), flush=True)


if __name__ == "__main__":
    main()
