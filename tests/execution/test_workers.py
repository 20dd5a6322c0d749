"""The Ray worker pool: bound to 127.0.0.1, dashboard off, normal priority, wakes the driver on each row, trials spread
over a 2-node cluster, one GPU per actor, reservations across side-by-side trials."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sweep import config as config_mod
from sweep.config import Workers, validation
from sweep.contract import CONTINUE, TrialConfig
from sweep.execution.workers import WorkerPool, wait_ready
from sweep.ledger import LedgerView, Row, metrics, read_rows
from sweep.planner.loop import Planner
from sweep.planner.phase import Phase
from sweep.prices import resolve
from tests.test_run import space_file

ray = pytest.importorskip("ray")


@pytest.fixture(scope="class")
def pool():
    """A pool on the local Ray it starts itself, shared by the tests of one class (a Ray start is about 3 s on 2
    cores) and shut down before the tests that start their own."""
    pool = WorkerPool(Workers(num=1, cpus_per_trial=1), use_gpu=False)
    try:
        wait_ready(pool)
        yield pool
    finally:
        pool.shutdown()


class TestALocalPool:
    """The tests on one pool's own local Ray (the class-scoped `pool`)."""

    def test_local_ray_is_bound_to_localhost_with_the_dashboard_off(self, pool: WorkerPool) -> None:
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        assert pool.dashboard_url is None
        # trials run at normal priority (Ray's default niceness 15 lets any other process starve a billed trial)
        assert ray.get(ray.remote(lambda: __import__("os").nice(0)).remote()) == 0
        if shutil.which("ss"):  # every socket Ray's processes listen on is a loopback one
            lines = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout.splitlines()
            ray_lines = [ln for ln in lines if any(k in ln for k in ("raylet", "gcs_server", "ray::"))]
            assert ray_lines and all("127.0.0.1" in ln for ln in ray_lines), ray_lines

    def test_the_driver_wakes_as_soon_as_a_worker_reports_a_row(self, pool: WorkerPool) -> None:
        # A trial waits for the answer to each checkpoint row with the GPU idle: the driver must not sleep through it.
        pool.wait_rows(0.01)  # nothing reported: back at the timeout
        waiter = threading.Thread(target=pool.wait_rows, args=(90.0,), daemon=True)
        waiter.start()
        ray.get(pool.hub.report.remote(Row.of({"trial": 0, "state": "capped", "billable_s": 1.0})))
        waiter.join(45.0)
        assert not waiter.is_alive(), "the driver slept through a reported row"
        assert [r.trial for r in pool.drain_rows()] == [0]
        pool.wait_rows(0.01)  # drained: waits again


@pytest.mark.slow
def test_trials_run_on_both_nodes_of_a_two_node_cluster(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address)
        data = yaml.safe_load(space_file(tmp_path).read_text())
        data["workers"] = {"num": 2, "cpus_per_trial": 1, "address": cluster.address}
        data["budget"]["max_trials"] = 6
        cfg = validation.validate(config_mod.compose({**data, "run_id": "two-nodes"}, {}, "test", has_gpu=False))
        pool = WorkerPool(cfg.workers, use_gpu=False)
        assert len(set(pool.nodes())) == 2  # one actor per node
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        study = Planner(cfg, run_dir, pool, resolve("custom", usd_per_hour=3600.0), "recorded", 0.02).run()
        ran = [t for t in study.trials if "node" in t.user_attrs]
        assert len({t.user_attrs["node"] for t in ran}) == 2, "trials did not run on both nodes"
        assert len(LedgerView(read_rows(run_dir / "ledger.jsonl")).last) == len(study.trials)
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_each_gpu_worker_sees_only_its_own_gpu() -> None:
    # Ray hands out GPUs it is told of without touching them: each GPU actor gets one in CUDA_VISIBLE_DEVICES,
    # which torch and JAX in its trials read (their cuda:0 is that GPU; the ledger's `gpu` names it)
    ray.init(num_cpus=2, num_gpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, namespace="sweep")
    try:
        pool = WorkerPool(Workers(num=0, cpus_per_trial=1), use_gpu=True)
        wait_ready(pool)
        assert pool.size == 2
        assert sorted(pool.gpus()) == ["0", "1"]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_trials_side_by_side_never_spend_past_the_budget(tmp_path: Path) -> None:
    # three worker slots, a budget that pays two trials at their cap and not three: two run side by side, and the
    # third waits on their reservations instead of starting on money they may still spend
    data = yaml.safe_load(space_file(tmp_path).read_text())
    data["backend_options"]["time_scale"] = 0.05  # 1 recorded s = 50 ms: trials last long enough to overlap
    data["budget"] = {"usd": 70.0, "trial_usd": 30.0, "max_trials": 8}
    data["workers"] = {"num": 3, "cpus_per_trial": 1}
    data["search"] = {
        "initial": [{"num_envs": 128, "num_steps_per_env": 8}, {"num_envs": 128, "num_steps_per_env": 16}]
    }
    cfg = validation.validate(config_mod.compose({**data, "run_id": "side-by-side"}, {}, "test", has_gpu=False))
    ray.init(num_cpus=3, _node_ip_address="127.0.0.1", include_dashboard=False, namespace="sweep")
    try:
        pool = WorkerPool(cfg.workers, use_gpu=False)
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        planner = Planner(cfg, run_dir, pool, resolve("custom", usd_per_hour=3600.0), "recorded", 0.02)
        planner.run()
    finally:
        ray.shutdown()
    rows = read_rows(run_dir / "ledger.jsonl")
    ends = LedgerView(rows).last
    spans: dict[int, tuple[float, float]] = {}
    for r in rows:
        lo, hi = spans.get(r.trial, (r.wall_time, r.wall_time))
        spans[r.trial] = (min(lo, r.wall_time), max(hi, r.wall_time))
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert a0 < b1 and b0 < a1, "the two initial trials did not run side by side"
    assert sorted(t for t, r in ends.items() if r.billable_s > 0) == [0, 1]  # both capped at $30: no third fits
    assert sum(metrics(r).usd for r in ends.values()) <= 70.0
    assert planner.phase.now is Phase.OVER and "budget" in planner.phase.why, planner.phase.log


@pytest.mark.slow
def test_a_gpu_worker_whose_trial_failed_is_replaced_before_the_next_trial(tmp_path: Path) -> None:
    options = yaml.safe_load(space_file(tmp_path).read_text())["backend_options"]  # a recorded table
    pool = WorkerPool(Workers(num=1, cpus_per_trial=1), use_gpu=False)
    try:
        wait_ready(pool)
        assert pool.retire_failed is False  # a CPU slot keeps its process
        pool.retire_failed = True  # as on a GPU worker
        price = resolve("custom", usd_per_hour=3600.0)
        trial = TrialConfig(backend="replay", profile="recorded", backend_options=options, device="cpu")
        first = pool.actors[0]
        pid = ray.get(first.__ray_call__.remote(lambda self: __import__("os").getpid()))
        for number, num_envs in enumerate((128, 4096, 128)):  # recorded, not in the table (failed), recorded
            pool.submit(number, replace(trial, num_envs=num_envs, num_steps_per_env=16), "retire", price, "")
            rows: list[Row] = []
            while pool.busy:
                pool.wait_rows(1.0)
                for row in pool.drain_rows():
                    rows.append(row)
                    if row.state == "running":  # the planner's answer to each checkpoint
                        pool.decide(row.trial, row.iteration, CONTINUE)
            assert (rows[-1].state == "failed") == (number == 1), rows[-1]
            assert (pool.actors == [first]) == (number == 0)  # kept after a trial that ended, not after a failure
        assert pool.fresh == {0, 2}  # each worker's first trial: the first worker's, then its replacement's
        wait_ready(pool)  # the new worker runs
        with pytest.raises(ray.exceptions.RayActorError):  # and the old one is gone, its process with it
            ray.get(first.node.remote(), timeout=60)
        assert ray.get(pool.actors[0].__ray_call__.remote(lambda self: __import__("os").getpid())) != pid
    finally:
        pool.shutdown()


@pytest.mark.slow
def test_a_sweep_starts_its_own_ray_beside_another_one_on_the_machine() -> None:
    """Another local Ray instance (another sweep, a notebook) is left alone: the pool starts its own, with its own
    settings, instead of failing to join it."""
    script = (
        "import ray, sys; ray.init(num_cpus=1, _node_ip_address='127.0.0.1', include_dashboard=False); "
        "print(ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read(); ray.shutdown()"
    )
    other = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = other.stdout.readline().strip()
        assert theirs
        pool = WorkerPool(Workers(num=1, cpus_per_trial=1), use_gpu=False)
        try:
            wait_ready(pool)
            assert ray.get_runtime_context().gcs_address != theirs
            assert ray.get(ray.remote(lambda: __import__("os").nice(0)).remote()) == 0  # its own settings
        finally:
            pool.shutdown()
    finally:
        other.stdin.close()
        other.wait(60)
