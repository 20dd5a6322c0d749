"""A pool of Ray actors that run trials: one per GPU, or one per CPU slot when there is no GPU.

Workers are stateless executors: each runs :func:`sweep.trial.runner.run_trial` and streams every ledger
row to a small hub actor; the driver drains the hub, writes the ledger and posts the planner's
answer (continue / prune / stop), which the worker waits for at each checkpoint. A dead actor's
trial is reported as lost and the actor is replaced; so is a GPU actor whose trial failed, before it
runs another (:attr:`WorkerPool.retire_failed`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import asdict
from typing import Any

from sweep.config import Workers
from sweep.contract import Decision, Row, TrialState
from sweep.errors import ConfigError, SweepError, require
from sweep.prices import Price

#: Seconds a worker waits for the planner's answer before carrying on.
ANSWER_TIMEOUT_S = 120.0


class _NoAuthNotice(logging.Filter):
    """Drops Ray's notice that token authentication is on (printed on every run; the setting stays as it is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Token authentication is enabled for this Ray cluster" not in record.getMessage()


logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(_NoAuthNotice())


def _hub_class() -> Any:
    ray = require("ray")

    @ray.remote(num_cpus=0)
    class Hub:
        """Rows go in from workers; answers come back from the driver."""

        def __init__(self) -> None:
            import asyncio

            self.asyncio = asyncio
            self.rows: list[Row] = []
            self.answers: dict[tuple[int, int], Any] = {}
            self.arrived = asyncio.Event()

        async def report(self, row: Row) -> str:
            self.rows.append(row)
            self.arrived.set()
            if row.state != TrialState.RUNNING:
                return Decision.CONTINUE
            key = (row.trial, row.iteration)
            future = self.answers.setdefault(key, self.asyncio.get_running_loop().create_future())
            try:
                return await self.asyncio.wait_for(future, ANSWER_TIMEOUT_S)
            except TimeoutError:
                return Decision.CONTINUE
            finally:
                self.answers.pop(key, None)

        async def drain(self) -> list[Row]:
            rows, self.rows = self.rows, []
            return rows

        async def wait(self, timeout_s: float) -> None:
            if not self.rows:
                with contextlib.suppress(TimeoutError):
                    await self.asyncio.wait_for(self.arrived.wait(), timeout_s)
            self.arrived.clear()  # a row reported since is still in self.rows: the next wait returns at once

        async def decide(self, trial: int, iteration: int, answer: str) -> None:
            key = (trial, iteration)
            future = self.answers.setdefault(key, self.asyncio.get_running_loop().create_future())
            if not future.done():
                future.set_result(answer)

    return Hub


def _worker_class() -> Any:
    ray = require("ray")

    @ray.remote(max_restarts=0)
    class TrialWorker:
        """Runs one trial at a time and streams its rows to the hub."""

        def node(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def gpus(self) -> str:
            """The GPUs this actor's trials see: ``CUDA_VISIBLE_DEVICES`` as Ray set it ('' for a CPU slot)."""
            return os.environ.get("CUDA_VISIBLE_DEVICES", "")

        def preload(self, plan: dict) -> None:
            """Start loading the study's env shapes beside the trials (:mod:`sweep.execution.preload`)."""
            import sweep.execution.preload as preload  # the module, not the package: its __init__ imports this one

            preload.start(plan)

        def run(self, cfg: dict, run_id: str, trial: int, price: dict, out_dir: str, hub: Any) -> Row:
            from sweep.contract import TrialConfig
            from sweep.trial.runner import runner_for

            def sink(row: Row) -> str:
                return ray.get(hub.report.remote(row))

            trial_cfg = TrialConfig(**cfg)
            return runner_for(trial_cfg.backend)(
                trial_cfg,
                sink,
                run_id=run_id,
                trial=trial,
                price_usd_per_hour=price["usd_per_hour"],
                price_label=price["label"],
                out_dir=out_dir,
            )

    return TrialWorker


class WorkerPool:
    """Ray actors (local Ray bound to 127.0.0.1, or an existing cluster) and the trials they run."""

    def __init__(self, cfg: Workers, use_gpu: bool) -> None:
        if not cfg.address and cfg.host in ("127.0.0.1", "localhost"):
            _loopback_only()
        ray = require("ray")
        self.ray = ray
        self.use_gpu = use_gpu
        self.cfg = cfg
        self.owns_ray = False
        self.dashboard_url: str | None = None
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            kwargs: dict[str, Any] = {"namespace": "sweep", "log_to_driver": False, "configure_logging": False}
            if cfg.address:
                kwargs["address"] = cfg.address
            else:
                kwargs.update(
                    address="local",  # its own instance, even beside another Ray on this machine
                    _node_ip_address=cfg.host,
                    include_dashboard=cfg.dashboard,
                    dashboard_host=cfg.host,
                    # Trials are billed by the second: at Ray's default niceness (15) any other process starves
                    # them (docs/decisions/0016-worker-priority.md).
                    _system_config={"worker_niceness": 0},
                )
            try:
                context = ray.init(**kwargs)
                self.dashboard_url = getattr(context, "dashboard_url", None) or None
            except ConnectionError as exc:
                raise ConfigError(f"workers.address={cfg.address}: cannot join the Ray cluster ({exc})") from exc
            except Exception as exc:  # Ray's own start-up (raylet, GCS): nothing has run yet, say why in one line
                if cfg.address:
                    raise
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise SweepError(
                    f"the local Ray did not start ({why}); nothing ran and nothing was spent: run the same command "
                    "again, or free CPU and memory first (`ray stop --force` ends leftover Ray processes)"
                ) from exc
            self.owns_ray = True
        self.hub = _hub_class().remote()
        self.worker_cls = _worker_class()
        self.plan: dict | None = None  # env shapes each worker loads ahead of its trials (see preload)
        # A trial that failed on a GPU may leave its process's device state broken (a CUDA error, a failed graph
        # capture): the next trial of such a worker has died at its start (docs/decisions/0015-cuda-graph-capture.md).
        # So a GPU worker whose trial failed is replaced; the new one starts, and loads the plan, before its first
        # trial. A CPU slot keeps its process.
        self.retire_failed = use_gpu
        self.size = self._count()
        self.actors: list[Any] = [self._new_actor() for _ in range(self.size)]
        self.busy: dict[Any, tuple[int, Any]] = {}  # ObjectRef -> (trial number, actor)
        self._nodes: dict[Any, str] = {}  # actor -> its node id, once it has been given a trial
        self.fresh: set[int] = set()
        """Trials that were their actor's first (each paid its worker's whole start-up)."""

    def _count(self) -> int:
        resources = self.ray.cluster_resources()
        if self.cfg.num > 0:
            kind = "GPU" if self.use_gpu else "CPU"
            have = int(resources.get(kind, 0))
            per = 1 if self.use_gpu else self._cpus_per_actor()
            if self.cfg.num * per > have:
                raise ConfigError(
                    f"workers.num={self.cfg.num}: each worker needs {per} {kind} and the Ray cluster has {have}; "
                    "lower workers.num (0: as many as fit) or workers.cpus_per_trial"
                )
            return self.cfg.num
        if self.use_gpu:
            return max(1, int(resources.get("GPU", 0)))
        return max(1, int(resources.get("CPU", 1)) // self.cfg.cpus_per_trial)

    def _cpus_per_actor(self) -> int:
        """CPUs a CPU-slot actor asks for: ``cpus_per_trial``, or all the cluster has if that is fewer."""
        return min(self.cfg.cpus_per_trial, max(1, int(self.ray.cluster_resources().get("CPU", 1))))

    def _new_actor(self) -> Any:
        if self.use_gpu:
            actor = self.worker_cls.options(num_gpus=1, num_cpus=1).remote()
        else:
            actor = self.worker_cls.options(num_cpus=self._cpus_per_actor()).remote()
        if self.plan is not None:
            actor.preload.remote(self.plan)  # queued before any trial the actor is given
        return actor

    def preload(self, plan: dict | None) -> None:
        """Have every worker, and every one that replaces a dead one, load ``plan``'s env shapes ahead of its
        trials (:func:`sweep.execution.precompile.worker_plan`; None: nothing to load)."""
        self.plan = plan
        if plan is not None:
            for actor in self.actors:
                actor.preload.remote(plan)

    def idle(self) -> int:
        return len(self.actors) - len(self.busy)

    def submit(self, trial: int, cfg: Any, run_id: str, price: Price, out_dir: str) -> str:
        """Start a trial on an idle actor; returns the Ray node id it runs on."""
        used = {actor for _, actor in self.busy.values()}
        actor = next(a for a in self.actors if a not in used)
        if actor not in self._nodes:  # its first trial
            self._nodes[actor] = self.ray.get(actor.node.remote())
            self.fresh.add(trial)
        ref = actor.run.remote(asdict(cfg), run_id, trial, asdict(price), out_dir, self.hub)
        self.busy[ref] = (trial, actor)
        return self._nodes[actor]

    def drain_rows(self) -> list[Row]:
        """Rows workers reported since the last call; finished trials free their actor."""
        rows = self.ray.get(self.hub.drain.remote())
        if self.busy:
            done, _ = self.ray.wait(list(self.busy), num_returns=len(self.busy), timeout=0)
            self._finished = []
            for ref in done:
                trial, actor = self.busy.pop(ref)
                try:
                    final = self.ray.get(ref)
                except Exception as exc:  # actor death, or an error outside the trial
                    self._finished.append((trial, _one_line(exc)))
                    self._replace(actor)
                    continue
                if self.retire_failed and final.state == TrialState.FAILED:
                    self._replace(actor)
            if done:  # rows sent just before the trial returned
                rows += self.ray.get(self.hub.drain.remote())
        return rows

    def wait_rows(self, timeout_s: float) -> None:
        """Until a worker reports a row, or ``timeout_s`` (a worker that dies reports none: the timeout finds it)."""
        self.ray.get(self.hub.wait.remote(timeout_s))

    def lost(self) -> list[tuple[int, str]]:
        """Trials whose worker died (or raised outside the trial) since the last drain."""
        out, self._finished = getattr(self, "_finished", []), []
        return out

    def decide(self, trial: int, iteration: int, answer: str) -> None:
        self.hub.decide.remote(trial, iteration, answer)

    def stop_all(self) -> None:
        """Kill the running trials' actors (Ctrl-C); they are replaced if the pool is used again."""
        for _, actor in self.busy.values():
            self.ray.kill(actor, no_restart=True)
        self.busy.clear()

    def _replace(self, actor: Any) -> None:
        """End ``actor`` (dead already, or retired) and start a new one in its place."""
        self.ray.kill(actor, no_restart=True)
        self.actors = [a for a in self.actors if a is not actor]
        self._nodes.pop(actor, None)
        self.actors.append(self._new_actor())

    def nodes(self) -> list[str]:
        """Node id of every actor (used to show where trials ran)."""
        return self.ray.get([a.node.remote() for a in self.actors])

    def gpus(self) -> list[str]:
        """The GPUs each actor sees (its ``CUDA_VISIBLE_DEVICES``: one each with GPUs, '' for CPU slots)."""
        return self.ray.get([a.gpus.remote() for a in self.actors])

    def shutdown(self) -> None:
        if self.owns_ray:
            self.ray.shutdown()


def _loopback_only() -> None:
    """Make a local Ray take 127.0.0.1 as its node address (so its services listen on loopback only).

    Ray turns an explicit 127.0.0.1 into the machine's routable address unless multi-node clusters
    are disabled (as it does on macOS and Windows); that switch is read when ``ray`` is imported.
    """
    import sys

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # ray already imported in this process: flip the switch it read
        constants.ENABLE_RAY_CLUSTER = False


def _one_line(exc: BaseException) -> str:
    """The error's type and last line, whole (the ledger keeps it; the report shortens what it shows)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"


def wait_ready(pool: WorkerPool, timeout_s: float = 60.0) -> None:
    """Block until every actor answers (so start-up errors surface before the first trial)."""
    try:
        pool.ray.get([a.node.remote() for a in pool.actors], timeout=timeout_s)
    except pool.ray.exceptions.GetTimeoutError as exc:
        raise SweepError(
            f"workers: {pool.size} worker(s) did not start within {timeout_s:g} s; check the cluster's free "
            "resources (`ray status`) or lower workers.num"
        ) from exc
