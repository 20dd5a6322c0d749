"""Performance flags: semantics-preserving flags give the same actions and first-update losses as flags off."""

from __future__ import annotations

import contextlib
import copy
import io
import math

import pytest
import torch

from sweep import perf
from sweep.backends.agent import agent_config
from sweep.backends.mjx.locomotion import MjxLocomotionEnv, with_overrides
from sweep.contract import TrialConfig
from sweep.errors import ConfigError
from sweep.ledger import PhaseClock
from sweep.trial.learner import SweepLoop

N, T = 16, 8
#: Relative tolerance for flags documented as exact "within 1e-5 relative" (different float summation order).
RTOL = 1e-5


def one_iteration(flags: dict, seed: int = 5) -> tuple[torch.Tensor, dict[str, float], object]:
    """Build env + PPO with ``flags``, run one rollout and one update; return (actions, losses, alg)."""
    from rsl_rl.algorithms import PPO

    flags = perf.resolve(flags)
    cfg = TrialConfig(num_envs=N, num_steps_per_env=T, num_mini_batches=2, num_learning_epochs=2, flags=flags)
    env = MjxLocomotionEnv(N, seed, "cpu", with_overrides("cpu", episode_steps=50), donate=flags["buffer_donation"])
    train_cfg = agent_config(cfg, flags)
    perf.apply_to_process(flags)
    torch.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):
        alg = PPO.construct_algorithm(
            env.get_observations(), env, {**copy.deepcopy(train_cfg), "multi_gpu": None}, "cpu"
        )
    perf.apply_to_algorithm(alg, flags)
    captured = {}
    update = alg.update

    def spy():
        captured["actions"] = alg.storage.actions.clone()
        return update()

    alg.update = spy
    loop = SweepLoop(alg, env, cfg, {**flags, "log_every": 1}, PhaseClock(), "cpu")
    loop(1)
    return captured["actions"], loop.last_losses, alg


@pytest.fixture(scope="module")
def baseline() -> tuple[torch.Tensor, dict[str, float], object]:
    return one_iteration({})


#: CUDA-only flags do nothing on a CPU: their equivalence is checked in tests/perf/test_flags_gpu.py.
EXACT = [name for name, flag in perf.CATALOG.items() if flag.exact and not name.startswith("cuda_graph")]


@pytest.mark.parametrize("name", EXACT)
def test_exact_flags_keep_actions_and_losses(name: str, baseline) -> None:
    flag = perf.CATALOG[name]
    value = 8 if name == "critic_chunk" else flag.choices[-1]
    actions, losses, _ = one_iteration({name: value})
    base_actions, base_losses, _ = baseline
    assert torch.equal(actions, base_actions), f"{name} changed the actions"
    for key, ref in base_losses.items():
        if flag.tolerance == "bitwise":
            assert losses[key] == pytest.approx(ref, rel=1e-7, abs=1e-9), (name, key)
        else:
            assert losses[key] == pytest.approx(ref, rel=RTOL, abs=1e-7), (name, key)


def test_flags_that_change_numerics_say_so() -> None:
    for name, flag in perf.CATALOG.items():
        if not flag.exact:
            assert "numerics" in flag.description or "rounding" in flag.description, name
        assert flag.default == flag.choices[0], f"{name}: the default must be rsl-rl's behaviour"


def test_all_flags_on_still_trains(baseline) -> None:
    on = perf.all_on()
    on["torch_compile"] = "none"  # compiling is slow on CI CPUs; covered by the benchmark
    actions, losses, _ = one_iteration(on)
    assert torch.equal(actions, baseline[0])  # the rollout is untouched until the first update
    assert all(math.isfinite(v) for v in losses.values())


def test_unknown_flag_or_value_is_rejected() -> None:
    from sweep.errors import ConfigError

    with pytest.raises(ConfigError, match="warp"):
        perf.resolve({"warp": True})
    with pytest.raises(ConfigError, match="fused_optimizer"):
        perf.resolve({"fused_optimizer": "yes"})
    with pytest.raises(ConfigError, match="torch_compile"):
        perf.resolve({"torch_compile": "max-autotune"})


def test_non_finite_gradient_is_skipped_and_counted() -> None:
    _, _, alg = one_iteration({"fast_finite_check": True})
    before = [p.detach().clone() for p in alg.actor.parameters()]
    # Fill the storage with one rollout whose rewards hold a NaN: every mini-batch's gradient is non-finite.
    obs = alg.storage.observations[0].clone()  # the update cleared the storage; refill it by hand
    with torch.inference_mode():
        for _ in range(T):
            alg.act(obs)
            alg.process_env_step(obs, torch.full((N,), float("nan")), torch.zeros(N, dtype=torch.long), {})
        alg.compute_returns(obs)
    alg.update()
    assert alg.skipped_updates() == 2 * 2  # epochs x mini-batches
    for p, q in zip(alg.actor.parameters(), before, strict=True):
        assert torch.equal(p, q), "a non-finite step changed the weights"


def test_the_flags_object_has_a_field_per_catalog_flag_with_its_default_and_resolves_once() -> None:
    import dataclasses

    assert {f.name: f.default for f in dataclasses.fields(perf.Flags)} == {
        n: f.default for n, f in perf.CATALOG.items()
    }
    flags = perf.Flags.of({"fused_optimizer": True})
    assert flags.fused_optimizer and dict(flags) == perf.resolve({"fused_optimizer": True})
    assert perf.Flags.of(flags) is flags  # a resolved object passes through every layer as it is
    with pytest.raises(ConfigError, match="unknown flag"):
        perf.Flags.of({"warp_drive": True})


def held_out_curve(flags: dict, rounds: int = 3) -> list[tuple]:
    """A tiny real trial's held-out passes (rate and bounds) and training return over its first ``rounds``
    checkpoints, flags ``flags`` (the training seed fixed)."""
    from sweep.contract import CONTINUE, STOP
    from sweep.trial import runner
    from tests.helpers import tiny_trial

    rows = []

    def sink(row) -> str:
        rows.append(row)
        return STOP if len(rows) >= rounds else CONTINUE

    runner.run_trial(tiny_trial(flags={"compile_cache": True, **flags}, eval_every_steps=64), sink)
    return [(r.success, r.success_lo, r.success_hi, r.success_max, r.mean_return) for r in rows[:rounds]]


@pytest.fixture(scope="module")
def held_out_off() -> list[tuple]:
    return held_out_curve({})


@pytest.mark.slow
@pytest.mark.parametrize("name", EXACT)
def test_exact_flags_keep_the_held_out_curve(name: str, held_out_off: list[tuple]) -> None:
    """What lets a throughput probe decide an exact flag (``search.probe``): the same held-out curve for a fixed seed.
    A bitwise flag gives it exactly; one exact to a tolerance gives the same first pass and a training return within
    it, after which the rounding compounds, as any change of float summation order does."""
    flag = perf.CATALOG[name]
    curve = held_out_curve({name: 8 if name == "critic_chunk" else flag.choices[-1]})
    returns = [(a[-1], b[-1]) for a, b in zip(curve, held_out_off, strict=True) if None not in (a[-1], b[-1])]
    if flag.tolerance == "bitwise":
        assert [c[:-1] for c in curve] == [c[:-1] for c in held_out_off], name
        if flag.where.startswith("sweep.perf.stats."):  # a flag on the episode statistics sums the returns it
            # reports in float32 on the device, rsl-rl's logger in float64 on the host: the training is the same, the
            # reported return equal to rounding
            assert all(a == pytest.approx(b, rel=RTOL) for a, b in returns), name
        else:
            assert all(a == b for a, b in returns), name
    else:
        assert curve[0][:-1] == held_out_off[0][:-1], name
        assert returns[0][0] == pytest.approx(returns[0][1], rel=RTOL), name
