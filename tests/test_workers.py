"""The Ray worker pool: bound to 127.0.0.1, dashboard off, normal priority, trials spread over a 2-node cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sweep import config as config_mod
from sweep import validation
from sweep.config import Workers
from sweep.ledger import last_rows, read_rows
from sweep.planner import Planner
from sweep.prices import resolve
from sweep.workers import WorkerPool, wait_ready
from tests.test_run import space_file

ray = pytest.importorskip("ray")


def test_local_ray_is_bound_to_localhost_with_the_dashboard_off() -> None:
    pool = WorkerPool(Workers(num=1, cpus_per_trial=1), use_gpu=False)
    try:
        wait_ready(pool)
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        assert pool.dashboard_url is None
        # trials run at normal priority (Ray's default niceness 15 lets any other process starve a billed trial)
        assert ray.get(ray.remote(lambda: __import__("os").nice(0)).remote()) == 0
        if shutil.which("ss"):  # every socket Ray's processes listen on is a loopback one
            lines = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout.splitlines()
            ray_lines = [ln for ln in lines if any(k in ln for k in ("raylet", "gcs_server", "ray::"))]
            assert ray_lines and all("127.0.0.1" in ln for ln in ray_lines), ray_lines
    finally:
        pool.shutdown()


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
        assert len(last_rows(read_rows(run_dir / "ledger.jsonl"))) == len(study.trials)
    finally:
        ray.shutdown()
        cluster.shutdown()
