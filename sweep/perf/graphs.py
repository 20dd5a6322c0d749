"""CUDA-graph capture of the PPO mini-batch update (CUDA only).

At a 3x128 MLP the update is launch-bound: hundreds of tiny kernels per mini-batch. Each
mini-batch step (forward, losses, backward, per-network clipping, capturable fused Adam) is
captured once and replayed, the mini-batch chosen by a static index buffer and the adaptive-KL
learning rate kept on the device (rsl-rl's rule: /1.5 above 2x the desired KL, x1.5 below half of
it, clamped to [1e-5, 1e-2]). The losses are rsl-rl's; the captured forward builds the action
distribution without drawing the sample rsl-rl draws and discards, so the random stream of later
rollouts differs from an eager run's (the flag is marked as changing numerics for that reason).

The first mini-batches of the first update run eagerly on a side stream to warm up; the graph is
captured at the next one, which it then replays. Every mini-batch step runs exactly once. The capture runs no
training: its seconds, with any wait for :data:`CAPTURING`, are one-time work (:attr:`GraphedUpdate.capture_s`),
which the trial bills to 'compile', not to 'learn'.
"""

from __future__ import annotations

import threading
import time
from itertools import chain
from typing import Any

import torch
from tensordict import TensorDict

#: Eager steps before capture (allocations, autotuning, optimizer state).
WARMUP_STEPS = 3
#: Held while a graph is captured, and by a thread of the same process around its own device work
#: (:mod:`sweep.execution.preload`), so that the two never overlap.
CAPTURING = threading.Lock()
#: The capture's ``cudaStreamCaptureMode``: only the capturing thread's unsafe calls (allocations, syncs) break it.
#: In the default, "global", any thread's did: a trial's capture failed ("operation failed due to a previous error
#: during capture") while no other thread of the worker but JAX's own runtime was working, and the worker process
#: died in its next trial (docs/decisions/0015-cuda-graph-capture.md).
CAPTURE_MODE = "thread_local"


class _Batch:
    """The fields FastPPO._losses reads from a mini-batch."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class GraphedUpdate:
    """The captured mini-batch step of one FastPPO instance."""

    def __init__(self, alg: Any) -> None:
        self.alg = alg
        self.device = torch.device(alg.device)
        # capturable fused Adam with the learning rate as a device tensor
        self.lr = torch.tensor(float(alg.learning_rate), device=self.device)
        params = chain(alg.actor.parameters(), alg.critic.parameters())
        alg.optimizer = torch.optim.Adam(params, lr=self.lr, fused=True, capturable=True)
        self.found_inf = torch.zeros((), device=self.device)
        # Warm-ups and captures share one side stream: autograd's gradient accumulators remember the stream
        # they were created on, and a mismatch at capture time would force a sync that breaks the capture.
        self.stream = torch.cuda.Stream(self.device)
        self.update_graph: torch.cuda.CUDAGraph | None = None
        self.update_steps = 0
        self.flat: dict[str, Any] | None = None  # static views of the rollout storage, bound at the first update
        self.capture_s = 0.0
        """Seconds spent capturing the graph, waiting for :data:`CAPTURING` included (a thread loading a later
        trial's env shapes holds it for seconds): one-time work, no training in it."""

    # -- update -----------------------------------------------------------------------------------
    def update(self) -> dict[str, torch.Tensor]:
        alg, st = self.alg, self.alg.storage
        if self.flat is None:
            self._bind(st)
        self.adv.copy_(st.advantages.flatten(0, 1))
        self.sums.zero_()
        self.good.zero_()
        n_mb, epochs = alg.num_mini_batches, alg.num_learning_epochs
        size = self.idx.shape[0]
        perm = torch.randperm(n_mb * size, device=self.device)  # one split for every epoch, as rsl-rl
        for _ in range(epochs):
            for i in range(n_mb):
                self.idx.copy_(perm[i * size : (i + 1) * size])
                self._step()
        alg._update_normalizers()
        st.clear()
        means = self.sums / self.good
        return {"value": means[0], "surrogate": means[1], "entropy": means[2]}

    def _bind(self, st: Any) -> None:
        """Static views of the rollout storage (allocated once by rsl-rl) and static scratch buffers."""
        self.flat = {
            "observations": st.observations.flatten(0, 1),
            "actions": st.actions.flatten(0, 1),
            "values": st.values.flatten(0, 1),
            "returns": st.returns.flatten(0, 1),
            "old_actions_log_prob": st.actions_log_prob.flatten(0, 1),
        }
        self.old_params = tuple(p.flatten(0, 1) for p in st.distribution_params)
        self.adv = torch.empty_like(st.advantages.flatten(0, 1))
        batch = st.num_envs * st.num_transitions_per_env
        self.idx = torch.zeros(batch // self.alg.num_mini_batches, dtype=torch.long, device=self.device)
        self.sums = torch.zeros(3, device=self.device)
        self.good = torch.zeros((), device=self.device)

    def _step(self) -> None:
        if self.update_graph is None and self.update_steps < WARMUP_STEPS:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                self.alg.optimizer.zero_grad(set_to_none=True)
                self._step_body()
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            self.update_steps += 1
            return
        if self.update_graph is None:
            # Gradients set to None: backward inside the capture allocates them from the graph's pool and
            # overwrites them on every replay, so no zeroing is recorded.
            self.alg.optimizer.zero_grad(set_to_none=True)
            self.update_graph = torch.cuda.CUDAGraph()
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            torch.cuda.synchronize(self.device)  # the warm-up steps' kernels are training: they end before the clock
            t0 = time.perf_counter()
            with CAPTURING, torch.cuda.graph(self.update_graph, stream=self.stream, capture_error_mode=CAPTURE_MODE):
                self._step_body()
            self.capture_s += time.perf_counter() - t0
        self.update_graph.replay()

    def _step_body(self) -> None:
        alg, idx = self.alg, self.idx
        obs = self.flat["observations"]
        batch = _Batch(  # plain tensor gathers: TensorDict indexing may read the index on the host
            observations=TensorDict({k: obs[k][idx] for k in obs.keys()}, batch_size=[idx.shape[0]]),  # noqa: SIM118
            actions=self.flat["actions"][idx],
            values=self.flat["values"][idx],
            returns=self.flat["returns"][idx],
            old_actions_log_prob=self.flat["old_actions_log_prob"][idx],
            advantages=self.adv[idx],
            old_distribution_params=tuple(p[idx] for p in self.old_params),
        )
        loss, value_loss, surrogate_loss, entropy = alg._losses(batch, self._adapt_lr, sample=False)
        loss.backward()
        norm = alg._clipped_norm()
        if alg.perf_flags.get("fast_finite_check"):
            bad = ~torch.isfinite(norm)
            self.found_inf.copy_(bad.float())
            alg.optimizer.found_inf = self.found_inf
            alg._skipped += bad
            ok = (~bad).float()
        else:
            ok = torch.ones((), device=self.device)
        alg.optimizer.step()
        parts = torch.stack([value_loss.detach(), surrogate_loss.detach(), entropy.detach()]).float()
        self.sums += torch.nan_to_num(parts) * ok
        self.good += ok

    def _adapt_lr(self, old_params: tuple, new_params: tuple) -> None:
        """rsl-rl's adaptive-KL rule, on the device (no host read)."""
        alg = self.alg
        if alg.desired_kl is None or alg.schedule != "adaptive":
            return
        with torch.no_grad():
            kl = alg.actor.get_kl_divergence(old_params, new_params).mean()
            lower = torch.clamp(self.lr / 1.5, min=1e-5)
            upper = torch.clamp(self.lr * 1.5, max=1e-2)
            grow = (kl < alg.desired_kl / 2.0) & (kl > 0.0)
            self.lr.copy_(torch.where(kl > alg.desired_kl * 2.0, lower, torch.where(grow, upper, self.lr)))
