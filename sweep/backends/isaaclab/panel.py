"""The held-out panel's process (``python -m sweep.backends.isaaclab.panel FD``): one Isaac Lab scene of the
panel's envs, serving the requests of :class:`sweep.backends.isaaclab.evaluation.PanelProcess` over the socket ``FD``
until asked to close or until the trial's process is gone. The protocol and why the panel has a process of its own:
:mod:`sweep.backends.isaaclab.evaluation`.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from sweep.backends.isaaclab.backend import build_env
from sweep.backends.isaaclab.evaluation import policy_from_arrays
from sweep.backends.policy import MlpPolicy
from sweep.contract import EVAL_SEED_BASE


def serve(conn: Connection) -> None:
    """The panel process's loop: answer requests until ``close`` or until the trial's process is gone."""
    env: Any = None
    policy: MlpPolicy | None = None
    while True:
        try:
            kind, payload = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        try:
            if kind == "build":
                spec = payload
                env = build_env(spec["task"], spec["num_envs"], EVAL_SEED_BASE, spec["device"], spec["knobs"], True)
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
                env.reset_with_seeds(payload)
                answer = None
            elif kind == "steps":
                arrays, steps = payload
                if arrays is not None:
                    policy = policy_from_arrays(arrays, env.device)
                finished, success = env.policy_steps(policy, steps)
                answer = (finished.cpu().numpy(), success.cpu().numpy())
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
