"""Ahead-of-time compilation fills the persistent XLA cache that a later trial's env reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep import config
from sweep.config import validation
from sweep.execution import precompile

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_covers_every_size_and_donation_choice_in_the_order_trials_meet_them() -> None:
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=True))
    found = precompile.shapes(cfg, ("buffer_donation",))
    off, on = {"buffer_donation": False}, {"buffer_donation": True}
    every = [(n, k) for n in sorted({*cfg.knobs.num_envs, cfg.target.eval_episodes}) for k in (off, on)]
    assert sorted(found, key=str) == sorted([s for s in every if s != (4096, off)], key=str)
    # trial 0 (legged_gym's 4096 x 24, stock) builds its training envs itself
    # its panel first (built while it compiles), then the second initial config's envs and panel
    assert found[:3] == [(256, off), (4096, on), (256, on)]
    distance = [abs(n - 4096) for n, _ in found[3:]]
    assert distance == sorted(distance)  # then the sizes nearest the first trial's first
    assert not precompile.wanted(cfg, has_gpu=False)  # on CPU it would take the trials' cores


def test_the_plan_is_shared_among_side_by_side_processes_first_shapes_first(tmp_path: Path, monkeypatch) -> None:
    assert [precompile.jobs(c) for c in (1, 2, 8, 16, 128)] == [1, 1, 2, 4, 4]
    started: list[list[str]] = []

    class Recorder:
        def __init__(self, cmd: list[str], **_: object) -> None:
            started.append(cmd)

        def poll(self) -> int:
            return 0

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(precompile.subprocess, "Popen", Recorder)
    monkeypatch.setattr(precompile, "jobs", lambda: 3)
    cfg = validation.validate(config.load("locomotion", {}, has_gpu=True))
    procs = precompile.start(cfg, tmp_path, "gpu", has_gpu=True)
    planned = [[n, k] for n, k in precompile.shapes(cfg, ("buffer_donation",))]
    plans = [json.loads(Path(cmd[-1]).read_text()) for cmd in started]
    # the first trial's panel is the workers' (sweep.execution.preload); each process starts with one of the next
    # three shapes
    assert len(procs) == 3 and [p["shapes"] for p in plans] == [planned[1:][i::3] for i in range(3)]
    # all but the first once the first has built its own
    assert [p["wait_for_lines"] for p in plans] == [0, 1, 1]
    precompile.stop(procs)
    assert precompile.start(cfg, tmp_path, "gpu", has_gpu=False) == []
    out = tmp_path / "precompile.jsonl"
    out.write_text('{"num_envs": 256}\n')  # an earlier call's line (a resume): the later ones wait for a new one
    started.clear()
    precompile.start(cfg, tmp_path, "gpu", has_gpu=True)
    assert [json.loads(Path(cmd[-1]).read_text())["wait_for_lines"] for cmd in started] == [0, 2, 2]


def test_a_later_process_waits_for_the_first_ones_line_but_not_forever(tmp_path: Path) -> None:
    import threading
    import time

    out = tmp_path / "precompile.jsonl"
    threading.Timer(0.3, lambda: out.write_text('{"num_envs": 256}\n')).start()
    t0 = time.monotonic()
    precompile.wait_for(out, 1, poll_s=0.05, max_s=60.0)
    assert out.exists() and time.monotonic() - t0 < 60.0  # returned once the line came, before the deadline
    precompile.wait_for(tmp_path / "never.jsonl", 1, poll_s=0.05, max_s=0.2)  # returns at the deadline


@pytest.mark.slow
def test_a_precompiled_shape_is_a_cache_hit_in_a_later_process(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    plan = {"backend": "mjx_locomotion", "profile": "cpu", "device": "cpu", "shapes": [[8, {}]]}
    plan["out"] = str(tmp_path / "precompile.jsonl")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    subprocess.run(
        [sys.executable, "-m", "sweep.execution.precompile", str(tmp_path / "plan.json")],
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    line = json.loads((tmp_path / "precompile.jsonl").read_text())
    assert line["num_envs"] == 8 and line["seconds"] > 0
    probe = (
        "import collections, jax; from sweep import perf; perf.enable_compile_cache(); c = collections.Counter();"
        "jax.monitoring.register_event_listener(lambda name, **kw: c.update([name]));"
        "from sweep.backends import get_backend; e = get_backend('mjx_locomotion').make_env(8, 5, 'cpu', 'cpu');"
        "e.warm_up(); print(c['/jax/compilation_cache/cache_hits'], c['/jax/compilation_cache/cache_misses'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, check=True, timeout=600, capture_output=True, text=True
    )
    hits, misses = map(int, out.stdout.split()[-2:])
    assert hits > 0 and misses == 0, out.stdout
