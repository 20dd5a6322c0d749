"""benchmarks/loop_overheads.py: a real tiny trial's loop, timed piece by piece."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import benchmark, tiny_trial


def test_each_piece_of_a_real_loop_is_timed_and_every_round_counted(tmp_path: Path) -> None:
    bench = benchmark("loop_overheads")
    cfg = tiny_trial(num_envs=16, num_steps_per_env=8, eval_every_steps=16)  # rounds of 2 iterations
    figures = bench.measure(cfg, rounds=2, repeats=3, out_dir=tmp_path)
    assert figures["device"] == "cpu" and figures["iterations per round"] == 2
    for name in ("log", "other"):
        values = figures[f"{name} ms per iteration, each round"]
        assert len(values) == 2 and all(v >= 0 for v in values)
    ms = figures["median ms a call"]
    assert set(ms) == {"sync", "env sync", "torch sync", "empty phase", "signals", "row figures", "finite check",
                       "checkpoint", "scalars", "policy timer", "policy timer, new events"}  # fmt: skip
    assert ms["checkpoint"] > 0 and ms["scalars"] > 0 and ms["empty phase"] > 0 and ms["finite check"] > 0
    assert (tmp_path / "trials" / "0000" / "checkpoint.pt").is_file()  # the checkpoint it timed was written
