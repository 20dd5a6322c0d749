"""The learner: its agent config is data (building it changes nothing else), and it names the GPU it runs on."""

from __future__ import annotations

import pytest

from sweep import export, perf
from sweep.contract import TrialConfig
from sweep.learner import agent_config, gpu_slot


def test_the_agent_config_has_no_side_effect_and_carries_the_flags(monkeypatch) -> None:
    def forbidden() -> None:
        raise AssertionError("building an agent config switched the XLA compile cache on")

    monkeypatch.setattr(perf, "enable_compile_cache", forbidden)
    flags = perf.resolve({"compile_cache": True, "fast_finite_check": True, "fused_optimizer": True})
    cfg = TrialConfig(num_envs=64, num_steps_per_env=8, flags=flags)
    agent = agent_config(cfg, flags)
    assert agent["check_for_nan"] is False and agent["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO"
    assert export.implied_agent_config(cfg) == agent
    assert agent_config(cfg)["check_for_nan"] is True  # without flags: rsl-rl's own settings
    with pytest.raises(AssertionError, match="compile cache"):
        perf.apply_to_process(flags)  # the one place that switches it on, called by build_learner


def test_a_trial_names_the_machines_own_index_of_its_gpu(monkeypatch) -> None:
    import socket

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # what Ray sets for an actor given GPUs 2 and 3
    assert gpu_slot("cuda:1") == f"{socket.gethostname()}:3"
    assert gpu_slot("cuda") == f"{socket.gethostname()}:2"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_slot("cuda:1") == f"{socket.gethostname()}:1"  # every GPU visible: torch's index is the machine's
    assert gpu_slot("cpu") == ""
