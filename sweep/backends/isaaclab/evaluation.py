"""Isaac Lab's held-out panel in a process of its own, so that no evaluation touches a trial's training scene.

Isaac Lab hosts one simulation per process (a second ``gym.make`` beside a live env fails), so the panel's scene of
``eval_episodes`` envs lives in a child process: ``python -m sweep.backends.isaaclab.panel FD``, one per worker,
started at the first pass of the worker's first trial and kept for its later trials with the same task, device
and options. The trial's side is :class:`PanelEnv`, a ``TaskEnv`` whose passes the child runs:

- ``reset_with_seeds(seeds)``: the child reseeds its scene with the panel's first seed (``2**31``) and resets every
  env; the scene was built from that seed too, so nothing in it ever draws from a training seed's stream;
- ``policy_steps(policy, n)``: the child runs ``n`` control steps of the deterministic policy (the actor's weights and
  observation normalizer, sent once per pass as arrays) and answers which envs finished their first episode and
  which of those succeeded, by the task's success rule. :func:`sweep.trial.evaluation.evaluate` drives the pass as on
  any env: the same checks every ``CHECK_EVERY`` steps, the same early verdict, the same Wilson interval.

Under a task's own success rule, the child's first pass is preceded by one of the untrained policy (the trial's
actor freshly initialized, from the panel's seed): a rule that it already meets at the target measures no training,
and every pass of that panel is refused with one line naming the rule's key (a ``ConfigError`` in the trial).

The wait is synchronous: the trial waits for each verdict, billed to its ``eval`` phase (the child's start to
``startup``, its first step to ``compile``). The training envs are neither reseeded, reset nor held: training
resumes exactly where it stopped. Messages are pickled tuples over a socket pair (the child's output, Isaac Lab's log,
goes to an unnamed temporary file whose tail a failure quotes); the child exits when the trial's process closes the
socket, and goes with its worker when Ray stops one.
"""

from __future__ import annotations

import atexit
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from sweep.backends.base import TaskEnv
from sweep.backends.policy import MlpPolicy, PolicyShape
from sweep.contract import EVAL_SEED_BASE
from sweep.errors import ConfigError

#: Seconds the child may take to build its scene: a cold Warp kernel cache costs minutes on a GPU.
BUILD_TIMEOUT_S = 1800.0
#: Seconds one request (a reset, one stretch of policy steps) may take before the child is taken for hung.
REQUEST_TIMEOUT_S = 900.0
#: Lines of the child's log quoted when it fails.
LOG_TAIL_LINES = 8


class PanelProcess:
    """The child process hosting a panel scene; requests are answered in order, one at a time."""

    def __init__(self, key: tuple[Any, ...], spec: dict[str, Any]) -> None:
        self.key = key
        ours, theirs = socket.socketpair()
        # an unnamed file (gone from /tmp already): nothing is left behind when Ray kills a worker and its children
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the process's life)
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # the folder holding ``sweep``: the child imports this code
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.backends.isaaclab.panel", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        try:
            self.info: dict[str, Any] = self.request("build", spec, BUILD_TIMEOUT_S)
            """What the child's scene is: ``num_envs``, ``num_actions``, ``max_episode_length``, ``control_dt_s``,
            ``physics``."""
        except BaseException:
            self.close()  # a child whose scene failed to build serves nobody
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.conn.closed

    def request(self, kind: str, payload: Any = None, timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        """Send one request and wait for its answer; the child's failure, death or silence is a RuntimeError."""
        try:
            self.conn.send_bytes(pickle.dumps((kind, payload)))
        except OSError:
            raise RuntimeError(self._death(f"{kind}: the held-out panel's process is gone")) from None
        deadline = time.monotonic() + timeout_s
        while not self.conn.poll(1.0):
            if self.proc.poll() is not None:
                raise RuntimeError(self._death(f"{kind}: the held-out panel's process ended ({self.proc.returncode})"))
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(self._death(f"{kind}: the held-out panel's process was silent {timeout_s:g} s"))
        status, answer = pickle.loads(self.conn.recv_bytes())
        if status == "refused":  # the task's rule cannot measure training: the user's to fix, said as bad input is
            raise ConfigError(answer)
        if status == "error":
            raise RuntimeError(f"held-out panel process, {kind}: {answer}")
        return answer

    def _death(self, what: str) -> str:
        """``what`` with the tail of the child's output (its traceback, or Isaac Lab's last words)."""
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace").strip().splitlines()[-LOG_TAIL_LINES:]
        return f"{what}; its output ends: " + " | ".join(tail)

    def close(self) -> None:
        """Ask the child to exit, then make sure it has."""
        if self.proc.poll() is None:
            try:
                self.conn.send_bytes(pickle.dumps(("close", None)))
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.conn.close()
        self.log.close()


_PROCESS: PanelProcess | None = None  # this worker's panel process, kept between its trials


def open_panel(
    task: str, num_envs: int, device: str, knobs: dict[str, Any], success: dict[str, Any] | None = None
) -> PanelEnv:
    """The held-out panel's env of ``num_envs`` envs of ``task``: this worker's panel process if it hosts the same
    scene, else a new one (the old one closed first: one panel per worker). ``success``: the task's own rule
    (``success_term`` / ``success_fn``) and the ``target`` that the untrained policy must not meet already."""
    global _PROCESS
    key = (task, num_envs, device, repr(sorted(knobs.items())), repr(sorted((success or {}).items())))
    if _PROCESS is not None and (_PROCESS.key != key or not _PROCESS.alive()):
        _PROCESS.close()
        _PROCESS = None
    if _PROCESS is None:
        spec = {"task": task, "num_envs": num_envs, "device": device, "knobs": knobs, "success": success}
        _PROCESS = PanelProcess(key, spec)
    return PanelEnv(_PROCESS)


@atexit.register
def _close_panel() -> None:
    global _PROCESS
    if _PROCESS is not None:
        _PROCESS.close()
        _PROCESS = None


def policy_arrays(policy: MlpPolicy) -> dict[str, Any]:
    """A policy as host arrays (plain pickle: no shared memory or CUDA handles cross the socket)."""
    return {
        "mean": policy.mean.detach().cpu().numpy(),
        "std": policy.std.detach().cpu().numpy(),
        "eps": float(policy.eps),
        "layers": [(w.detach().cpu().numpy(), b.detach().cpu().numpy()) for w, b in policy.layers],
        "activation": policy.activation,
    }


def policy_from_arrays(arrays: dict[str, Any], device: str) -> MlpPolicy:
    """The policy of :func:`policy_arrays` again, on ``device``."""

    def tensor(a: Any) -> torch.Tensor:
        return torch.as_tensor(a, device=device)

    layers = tuple((tensor(w), tensor(b)) for w, b in arrays["layers"])
    return MlpPolicy(tensor(arrays["mean"]), tensor(arrays["std"]), arrays["eps"], layers, arrays["activation"])


class PanelEnv(TaskEnv):
    """The held-out panel as a trial sees it: a ``TaskEnv`` whose passes run in the panel process's own scene.

    Its results live on the CPU (``device``); it has no step of its own: a pass runs as :meth:`policy_steps`, so the
    actor must be rsl-rl's plain MLP (:func:`sweep.backends.policy.mlp_policy`).
    """

    def __init__(self, process: PanelProcess) -> None:
        info = process.info
        self._process, self.num_envs = process, int(info["num_envs"])
        self.num_actions, self.max_episode_length = int(info["num_actions"]), int(info["max_episode_length"])
        self.control_dt_s, self.physics = float(info["control_dt_s"]), str(info["physics"])
        self.device, self.cfg = "cpu", None
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long)
        self._sent: MlpPolicy | None = None

    def get_observations(self) -> TensorDict:
        raise RuntimeError(self._own_scene())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        raise RuntimeError(self._own_scene())

    @staticmethod
    def _own_scene() -> str:
        return (
            "Isaac Lab's held-out panel runs in its own process and steps rsl-rl's plain MLP actor there "
            "(policy_steps); this actor is not one"
        )

    def reset_with_seeds(self, seeds: Sequence[int]) -> TensorDict:
        """Reseed the panel's scene with ``seeds[0]`` and reset every env (in the panel process)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset_with_seeds needs {self.num_envs} seeds, got {len(seeds)}")
        if min(seeds) < EVAL_SEED_BASE:
            raise ValueError(f"the panel's seeds are held-out seeds (>= {EVAL_SEED_BASE}); got {min(seeds)}")
        self._process.request("reset", [int(s) for s in seeds])
        self._sent = None
        return TensorDict({}, batch_size=[self.num_envs])

    def policy_steps(self, policy: MlpPolicy, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``steps`` control steps of ``policy`` in the panel process; (finished, succeeded) since the reset, CPU."""
        arrays = None if policy is self._sent else policy_arrays(policy)
        finished, success = self._process.request("steps", (arrays, int(steps)))
        self._sent = policy
        return torch.from_numpy(finished), torch.from_numpy(success)

    def compile_policy_steps(self, shape: PolicyShape) -> bool:
        """Step the panel's scene once, so that what its first step loads is loaded before the first pass."""
        self._process.request("warm_up")
        return True

    def close(self) -> None:
        """Nothing: the panel process stays for this worker's next trial (closed when the worker exits)."""
