"""The per-round check of a learner's own weights: it names the parts that turned non-finite."""

from __future__ import annotations

import torch

from sweep import perf
from tests.perf.test_flags import one_iteration


def test_a_learner_names_the_parts_that_turned_non_finite() -> None:
    _, _, alg = one_iteration({})  # a real rsl-rl PPO after one update
    assert perf.nonfinite_parts(alg) == []
    buffers = [b for b in alg.actor.buffers() if b.is_floating_point()]
    assert buffers, "the actor's observation normalizer keeps its statistics in buffers"
    with torch.no_grad():
        next(alg.critic.parameters()).view(-1)[0] = float("nan")
        buffers[0].view(-1)[0] = float("inf")
    assert perf.nonfinite_parts(alg) == ["actor buffers", "critic weights"]
