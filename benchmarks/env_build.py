"""Seconds a trial spends building and compiling its envs in a fresh process (run it twice: cold, then warm cache).

    HOME=/tmp/envbuild python benchmarks/env_build.py 48          # num_envs; the held-out panel has 16 episodes
    HOME=/tmp/envbuild python benchmarks/env_build.py 64 --split  # one env's step: trace, lower, compile or load

Prints the seconds of ``sweep.trial.runner.build`` (both envs and the learner) and of each env's warm-up (its step
compiled, or loaded from the persistent cache that the ``compile_cache`` flag keeps under ``$HOME/.cache/sweep``).
With ``--split``, the seconds of each stage of one env's step function ahead of time instead.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack

from sweep.contract import TrialConfig
from sweep.ledger import PhaseClock
from sweep.trial.runner import build


def main(num_envs: int) -> None:
    cfg = TrialConfig(num_envs=num_envs, num_steps_per_env=8, eval_episodes=16, seed=3, flags={"compile_cache": True})
    t0 = time.perf_counter()
    with ExitStack() as stack:
        built = build(cfg.validate(), PhaseClock(), None, 0, stack)
        t1 = time.perf_counter()
        built.env.warm_up()
        t2 = time.perf_counter()
        built.eval_env.warm_up()
        t3 = time.perf_counter()
    print(
        f"build {t1 - t0:.2f} s, train env warm-up {t2 - t1:.2f} s, held-out env warm-up {t3 - t2:.2f} s, "
        f"total {t3 - t0:.2f} s"
    )


def split(num_envs: int) -> None:
    import jax

    from sweep import perf
    from sweep.backends import get_backend

    perf.enable_compile_cache()
    env = get_backend("mjx_locomotion").make_env(num_envs, 3, "cpu", "cpu")
    actions = jax.numpy.zeros((num_envs, env.num_actions))
    t0 = time.perf_counter()
    traced = env._fn["step"].trace(env._state, actions)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    lowered.compile()
    t3 = time.perf_counter()
    print(f"step: trace {t1 - t0:.2f} s, lower {t2 - t1:.2f} s, compile or load {t3 - t2:.2f} s")


if __name__ == "__main__":
    (split if "--split" in sys.argv else main)(int(sys.argv[1]))
