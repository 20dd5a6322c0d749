"""The held-out panel's process (``python -m sweep.backends.isaaclab.panel FD``): one Isaac Lab scene of the
panel's envs, serving the requests of :class:`sweep.backends.isaaclab.evaluation.PanelProcess` over the socket ``FD``
until asked to close or until the trial's process is gone. The protocol and why the panel has a process of its own:
:mod:`sweep.backends.isaaclab.evaluation`.
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

import torch

from sweep.backends.isaaclab.evaluation import policy_from_arrays
from sweep.backends.isaaclab.scene import build_env
from sweep.backends.policy import MlpPolicy
from sweep.contract import EVAL_SEED_BASE


def untrained_policy(arrays: dict[str, Any], device: str) -> MlpPolicy:
    """The policy PPO starts a trial from, for the actor that ``arrays`` holds: its layers drawn anew as PyTorch
    initializes a ``Linear`` layer (uniform within 1/sqrt(fan_in)), from the panel's first seed; an identity
    observation normalizer, as a fresh one is."""
    generator = torch.Generator().manual_seed(EVAL_SEED_BASE)

    def draw(*shape: int, fan_in: int) -> torch.Tensor:
        return ((torch.rand(*shape, generator=generator) * 2 - 1) / math.sqrt(fan_in)).to(device)

    layers = tuple((draw(*w.shape, fan_in=w.shape[1]), draw(*b.shape, fan_in=w.shape[1])) for w, b in arrays["layers"])
    dim = layers[0][0].shape[1]
    zeros, ones = torch.zeros(dim, device=device), torch.ones(dim, device=device)
    return MlpPolicy(zeros, ones, arrays["eps"], layers, arrays["activation"])


def untrained_verdict(env: Any, arrays: dict[str, Any], success: dict[str, Any], seeds: list[int]) -> str | None:
    """Run one full pass of the untrained policy (:func:`untrained_policy`) on the panel's ``seeds``: the line that
    refuses the task's own rule (``success``: its key and the ``target``) when that policy already meets the target,
    else None. The scene is left reset for the pass that follows."""
    env.reset_with_seeds(seeds)
    _, succeeded = env.policy_steps(untrained_policy(arrays, env.device), env.max_episode_length + 1)
    env.reset_with_seeds(seeds)
    wins, n, target = int(succeeded.sum()), env.num_envs, float(success["target"])
    if wins < target * n:
        return None
    key, value = next((k, v) for k, v in success.items() if k != "target")
    return (
        f"target.{key}={value}: the untrained policy already meets it ({wins} of {n} held-out episodes succeed, "
        f"target {target:g}), so held-out success would not measure training; make the rule stricter"
    )


def serve(conn: Connection) -> None:
    """The panel process's loop: answer requests until ``close`` or until the trial's process is gone."""
    env: Any = None
    policy: MlpPolicy | None = None
    success: dict[str, Any] | None = None  # the task's own rule, checked against the untrained policy once
    verdicts: dict[Any, str | None] = {}  # per actor shape: the line refusing the rule, or None
    seeds: list[int] = []
    while True:
        try:
            kind, payload = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        try:
            if kind == "build":
                spec = payload
                success = spec.get("success")
                rule = {k: v for k, v in (success or {}).items() if k != "target"}
                env = build_env(
                    spec["task"], spec["num_envs"], EVAL_SEED_BASE, spec["device"], spec["knobs"], True, rule
                )
                answer: Any = {
                    "num_envs": env.num_envs,
                    "num_actions": env.num_actions,
                    "max_episode_length": env.max_episode_length,
                    "control_dt_s": env.control_dt_s,
                    "physics": env.physics,
                }
            elif kind == "warm_up":
                answer = env.warm_up()
            elif kind == "reset":
                seeds = list(payload)
                env.reset_with_seeds(seeds)
                answer = None
            elif kind == "steps":
                arrays, steps = payload
                if arrays is not None:
                    policy = policy_from_arrays(arrays, env.device)
                    shape = tuple(w.shape for w, _ in arrays["layers"])
                    if success and shape not in verdicts:
                        verdicts[shape] = untrained_verdict(env, arrays, success, seeds)
                    if success and verdicts[shape]:
                        conn.send_bytes(pickle.dumps(("refused", verdicts[shape])))
                        continue
                finished, succeeded = env.policy_steps(policy, steps)
                answer = (finished.cpu().numpy(), succeeded.cpu().numpy())
            elif kind == "close":
                break
            else:
                raise ValueError(f"unknown request {kind!r}")
            reply = ("ok", answer)
        except Exception as exc:  # the trial's process gets the reason; this process serves on
            traceback.print_exc()  # into the log, whose tail a later failure quotes
            first = str(exc).splitlines()[0] if str(exc) else ""
            reply = ("error", f"{type(exc).__name__}: {first}")
        try:
            conn.send_bytes(pickle.dumps(reply))
        except OSError:  # the trial's process is gone (a worker stopped at the study's end): nobody to answer
            break


if __name__ == "__main__":
    connection = Connection(int(sys.argv[1]))
    serve(connection)
    connection.close()
    sys.stdout.flush()
    # Isaac Lab's exit handlers may wait on the simulation; the scene has nothing left to save
    os._exit(0)
