"""The learner: its agent config is data (building it changes nothing else), it names the GPU it runs on, and its
policy timer reuses its CUDA events."""

from __future__ import annotations

import pytest

from sweep import perf
from sweep.backends.agent import agent_config
from sweep.contract import TrialConfig
from sweep.report import export
from sweep.trial import learner
from sweep.trial.learner import gpu_slot


def test_the_agent_config_has_no_side_effect_and_carries_the_flags(monkeypatch) -> None:
    def forbidden() -> None:
        raise AssertionError("building an agent config switched the XLA compile cache on")

    monkeypatch.setattr("sweep.perf.apply.enable_compile_cache", forbidden)
    flags = perf.resolve({"compile_cache": True, "fast_finite_check": True, "fused_optimizer": True})
    cfg = TrialConfig(num_envs=64, num_steps_per_env=8, flags=flags)
    agent = agent_config(cfg, flags)
    assert agent["check_for_nan"] is False and agent["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO"
    assert export.implied_agent_config(cfg) == agent
    assert agent_config(cfg)["check_for_nan"] is True  # without flags: rsl-rl's own settings
    with pytest.raises(AssertionError, match="compile cache"):
        perf.apply_to_process(flags)  # the one place that switches it on, called where a trial is built


def test_a_trial_names_the_machines_own_index_of_its_gpu(monkeypatch) -> None:
    import socket

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # what Ray sets for an actor given GPUs 2 and 3
    assert gpu_slot("cuda:1") == f"{socket.gethostname()}:3"
    assert gpu_slot("cuda") == f"{socket.gethostname()}:2"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_slot("cuda:1") == f"{socket.gethostname()}:1"  # every GPU visible: torch's index is the machine's
    assert gpu_slot("cpu") == ""


def test_the_policy_timer_sums_its_spans_and_makes_each_cuda_event_once(monkeypatch) -> None:
    now = [0.0]  # seconds on a fake device clock

    class FakeEvent:
        made = 0

        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            FakeEvent.made += 1

        def record(self) -> None:
            self.at = now[0]

        def elapsed_time(self, end: FakeEvent) -> float:
            return (end.at - self.at) * 1000.0  # ms, as torch's

    monkeypatch.setattr(learner.torch.cuda, "Event", FakeEvent)
    timer = learner.PolicyTimer("cuda:0")
    for _ in range(2):  # two iterations of three control steps: the policy, the env, the storage
        for _ in range(3):
            timer.start()
            now[0] += 0.5
            timer.stop()
            now[0] += 2.0  # the simulator: not the policy's
            timer.start()
            now[0] += 0.25
            timer.stop()
        assert timer.take() == pytest.approx(3 * 0.75)
    assert FakeEvent.made == 12  # four a step of one iteration, recorded again in the next


def test_one_time_work_inside_a_training_phase_is_billed_to_compile() -> None:
    import time

    from sweep.ledger import PhaseClock

    class JitEnv:  # a simulator that compiles a kernel inside its first step, as Warp does on a fresh machine
        loads_s = 0.0

        def kernel_load_s(self) -> float:
            return self.loads_s

    class CapturingPPO:  # a learner that captures its update's CUDA graph in its first update
        captured_s = 0.0

        def capture_s(self) -> float:
            return self.captured_s

    env, alg, clock = JitEnv(), CapturingPPO(), PhaseClock()
    with learner.one_time_to_compile(learner.kernel_meter(env), "sim", clock), clock.phase("sim"):
        time.sleep(0.05)
        env.loads_s = 0.03  # 30 ms of those 50 compiled kernels
    assert clock.seconds["compile"] == pytest.approx(0.03)
    assert clock.seconds["sim"] >= 0.019  # the rest stays simulation
    with learner.one_time_to_compile(learner.kernel_meter(env), "sim", clock), clock.phase("sim"):
        pass  # nothing new loaded
    assert clock.seconds["compile"] == pytest.approx(0.03)
    with learner.one_time_to_compile(learner.capture_meter(alg), "learn", clock), clock.phase("learn"):
        time.sleep(0.05)
        alg.captured_s = 0.04  # the capture, its wait for another thread's device work included
    assert clock.seconds["compile"] == pytest.approx(0.07)
    assert clock.seconds["learn"] >= 0.009  # the update's own seconds stay learning
    # rsl-rl's env and PPO compile and capture nothing
    assert learner.kernel_meter(object())() == learner.capture_meter(object())() == 0.0
