"""rsl-rl's PPO with the update-level performance flags (fused Adam, finite check, lazy losses, chunked critic).

With every flag off this class is never used: the trial builds rsl-rl's own ``PPO``. The update
below is the same algorithm as rsl-rl 5.5.1's feed-forward update (clipped surrogate, clipped value
loss, entropy bonus, adaptive KL learning rate, per-network gradient clipping); recurrent models,
RND and symmetry fall back to the parent's update.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import torch
from rsl_rl.algorithms import PPO


class FastPPO(PPO):
    """PPO whose update follows ``perf_flags`` (see :data:`sweep.perf.CATALOG`)."""

    def __init__(self, *args: Any, perf_flags: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.perf_flags = dict(perf_flags or {})
        if self.perf_flags.get("fused_optimizer"):
            params = chain(self.actor.parameters(), self.critic.parameters())
            self.optimizer = type(self.optimizer)(params, lr=self.learning_rate, fused=True)
        self._skipped = torch.zeros((), dtype=torch.long, device=self.device)
        self.graphs = None
        if self.perf_flags.get("cuda_graph_update") and str(self.device).startswith("cuda"):
            from sweep.perf.graphs import GraphedUpdate

            self.graphs = GraphedUpdate(self)

    def capture_s(self) -> float:
        """Seconds of one-time CUDA-graph capture so far (:attr:`sweep.perf.graphs.GraphedUpdate.capture_s`; 0
        without the graph)."""
        return self.graphs.capture_s if self.graphs is not None else 0.0

    def skipped_updates(self) -> int:
        """Optimizer steps skipped for a non-finite gradient norm (read at log time: one sync)."""
        return int(self._skipped)

    def _values(self, batch: Any) -> torch.Tensor:
        """Critic values of a mini-batch, in chunks of ``critic_chunk`` samples when set."""
        chunk = int(self.perf_flags.get("critic_chunk") or 0)
        n = batch.observations.batch_size[0]
        if chunk <= 0 or chunk >= n:
            return self.critic(batch.observations)
        return torch.cat([self.critic(batch.observations[i : i + chunk]) for i in range(0, n, chunk)])

    def _adapt_learning_rate(self, old_params: tuple, new_params: tuple) -> None:
        """rsl-rl's adaptive schedule: shrink or grow the rate to keep the KL near ``desired_kl``."""
        if self.desired_kl is None or self.schedule != "adaptive":
            return
        with torch.inference_mode():
            kl = self.actor.get_kl_divergence(old_params, new_params).mean().item()
        if kl > self.desired_kl * 2.0:
            self.learning_rate = max(1e-5, self.learning_rate / 1.5)
        elif 0.0 < kl < self.desired_kl / 2.0:
            self.learning_rate = min(1e-2, self.learning_rate * 1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    def _losses(
        self, batch: Any, adapt_lr: Any, sample: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(total loss, value loss, surrogate loss, mean entropy) of one mini-batch: rsl-rl 5.5.1's PPO objective.

        ``adapt_lr(old_params, new_params)`` applies the adaptive-KL schedule (on the host, or on the
        device inside a CUDA graph) between the forward pass and the losses, as rsl-rl does.
        """
        advantages = batch.advantages
        if self.normalize_advantage_per_mini_batch:
            with torch.no_grad():
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        device_type = torch.device(self.device).type
        with torch.amp.autocast(device_type=device_type, enabled=self.use_mixed_precision, dtype=torch.bfloat16):
            if sample:  # rsl-rl's forward draws (and discards) a sample
                self.actor(batch.observations, stochastic_output=True)
            else:  # the same distribution without drawing: no random numbers inside a CUDA graph
                self.actor.distribution.update(self.actor.mlp(self.actor.get_latent(batch.observations)))
            log_prob = self.actor.get_output_log_prob(batch.actions)
            values = self._values(batch)
            entropy = self.actor.output_entropy
            adapt_lr(batch.old_distribution_params, self.actor.output_distribution_params)
            ratio = torch.exp(log_prob - torch.squeeze(batch.old_actions_log_prob))
            adv = torch.squeeze(advantages)
            clipped_ratio = torch.clamp(ratio, 1.0 - self.clip_param, 1.0 + self.clip_param)
            surrogate_loss = torch.max(-adv * ratio, -adv * clipped_ratio).mean()
            if self.use_clipped_value_loss:
                v_clipped = batch.values + (values - batch.values).clamp(-self.clip_param, self.clip_param)
                value_loss = torch.max((values - batch.returns).pow(2), (v_clipped - batch.returns).pow(2)).mean()
            else:
                value_loss = (batch.returns - values).pow(2).mean()
            loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy.mean()
        return loss, value_loss, surrogate_loss, entropy.mean()

    def _clipped_norm(self) -> torch.Tensor:
        """Clip actor and critic gradients separately (as rsl-rl does); the sum of their norms."""
        norm = torch.nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_grad_norm)
        return norm + torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm)

    def update(self) -> dict[str, Any]:
        if self.rnd or self.symmetry or self.actor.is_recurrent or self.critic.is_recurrent or self.is_multi_gpu:
            return super().update()
        if self.graphs is not None:
            return self.graphs.update()
        lazy = bool(self.perf_flags.get("lazy_loss_readout"))
        check = bool(self.perf_flags.get("fast_finite_check"))
        fused = bool(self.perf_flags.get("fused_optimizer"))
        sums = torch.zeros(3, device=self.device)
        good = torch.zeros((), device=self.device)
        host = [0.0, 0.0, 0.0]
        host_good = 0
        for batch in self.storage.mini_batch_generator(self.num_mini_batches, self.num_learning_epochs):
            loss, value_loss, surrogate_loss, entropy = self._losses(batch, self._adapt_learning_rate)
            self.optimizer.zero_grad()
            loss.backward()
            norm = self._clipped_norm()
            bad = ~torch.isfinite(norm) if check else None
            if bad is None:
                self.optimizer.step()
            elif fused:  # the fused kernel skips the step on the device when found_inf is set: no sync
                self._skipped += bad
                self.optimizer.found_inf = bad.float()
                self.optimizer.step()
            elif bool(bad):
                self._skipped += 1
                self.optimizer.zero_grad()
                continue
            else:
                self.optimizer.step()
            # Losses of skipped steps are left out of the means.
            parts = torch.stack([value_loss.detach(), surrogate_loss.detach(), entropy.detach()]).float()
            if lazy:
                ok = torch.ones((), device=self.device) if bad is None else (~bad).float()
                sums += torch.nan_to_num(parts) * ok
                good += ok
            else:
                if bad is not None and bool(bad):
                    continue
                host = [h + p for h, p in zip(host, parts.tolist(), strict=True)]
                host_good += 1
        if fused:
            self.optimizer.found_inf = None
        self._update_normalizers()
        self.storage.clear()
        if lazy:
            means = sums / good  # NaN when every step was skipped
            return {"value": means[0], "surrogate": means[1], "entropy": means[2]}
        n = host_good or float("nan")
        return {"value": host[0] / n, "surrogate": host[1] / n, "entropy": host[2] / n}

    def _update_normalizers(self) -> None:
        """rsl-rl's observation-normalizer update, keeping every buffer at its address (CUDA graphs read them)."""
        obs = self.storage.observations.flatten(0, 1)
        for model in (self.actor, self.critic):
            before = {name: buf for name, buf in model.named_buffers()}
            model.update_normalization(obs)
            for name, buf in model.named_buffers():
                old = before.get(name)
                if old is not None and buf is not old:  # EmpiricalNormalization reassigns its std
                    old.copy_(buf)
                    module_name, _, attr = name.rpartition(".")
                    setattr(model.get_submodule(module_name) if module_name else model, attr, old)
