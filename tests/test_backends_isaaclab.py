"""The Isaac Lab backend: knobs -> overrides, export sections, the install error, the adapter, the search space.

Everything here runs without Isaac Lab (a fake wrapper stands in for ``RslRlVecEnvWrapper``); the tests marked
``isaaclab`` build a real Isaac Lab env and are skipped when Isaac Lab is not installed.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml
from tensordict import TensorDict

from sweep import config, space
from sweep.backends import get_backend
from sweep.backends import isaaclab as il
from sweep.errors import ConfigError, MissingExtraError, SweepError
from sweep.evaluation import evaluate, panel_seeds
from sweep.trial import TrialConfig

FLAT = "Isaac-Velocity-Flat-Anymal-D-v0"
ISAAC_MODULES = ("isaaclab", "isaaclab_tasks", "isaaclab_rl", "isaacsim", "omni")
needs_isaaclab = pytest.mark.skipif(importlib.util.find_spec("isaaclab") is None, reason="Isaac Lab is not installed")


def isaac_modules_loaded() -> list[str]:
    return [name for name in sys.modules if name.split(".")[0] in ISAAC_MODULES]


# -- knobs -> Hydra overrides -------------------------------------------------------------------------------------


def test_overrides_map_each_knob_to_its_isaac_lab_path() -> None:
    lines = il.overrides(4096, 24, 7, {"gpu_max_num_partitions": 4}, num_mini_batches=8, num_learning_epochs=5)
    assert lines == [
        "env.scene.num_envs=4096",
        "env.sim.physics.gpu_max_num_partitions=4",
        "agent.num_steps_per_env=24",
        "agent.algorithm.num_mini_batches=8",
        "agent.algorithm.num_learning_epochs=5",
        "agent.seed=7",
    ]
    newton = il.overrides(1024, 12, 1, {"physics_preset": "newton_mjwarp", "newton_cuda_graph": False})
    assert newton == [
        "presets=newton_mjwarp",  # first: a preset replaces the whole section the scalars then land in
        "env.scene.num_envs=1024",
        "env.sim.physics.use_cuda_graph=false",
        "agent.num_steps_per_env=12",
        "agent.seed=1",
    ]
    assert il.overrides(2048, None, 3, {"physics_preset": "physx"}) == ["env.scene.num_envs=2048", "agent.seed=3"]


@pytest.mark.parametrize(
    ("knobs", "key"),
    [
        ({"gpu_max_num_partitions": 3}, "gpu_max_num_partitions"),
        ({"gpu_max_num_partitions": 64}, "gpu_max_num_partitions"),
        ({"gpu_max_num_partitions": True}, "gpu_max_num_partitions"),
        ({"physics_preset": "newton_mjwarp", "gpu_max_num_partitions": 8}, "gpu_max_num_partitions"),
        ({"newton_cuda_graph": True}, "newton_cuda_graph"),  # the default preset is PhysX
        ({"physics_preset": "newton_mjwarp", "newton_cuda_graph": "yes"}, "newton_cuda_graph"),
        ({"physics_preset": "bullet"}, "physics_preset"),
        ({"num_threads": 4}, "num_threads"),
    ],
)
def test_bad_knobs_are_config_errors_naming_the_key(knobs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        il.overrides(1024, 24, 1, knobs)


def test_parse_override_reads_hydra_scalars_and_rejects_other_roots() -> None:
    assert il.parse_override("env.scene.num_envs=4096") == ("env", ("scene", "num_envs"), 4096)
    assert il.parse_override("env.sim.physics.use_cuda_graph=false") == (
        "env",
        ("sim", "physics", "use_cuda_graph"),
        False,
    )
    assert il.parse_override("agent.algorithm.learning_rate=0.001") == ("agent", ("algorithm", "learning_rate"), 0.001)
    assert il.parse_override("agent.experiment_name=anymal") == ("agent", ("experiment_name",), "anymal")
    assert il.parse_override("presets=newton_mjwarp,eval") == ("presets", (), ("newton_mjwarp", "eval"))
    for bad in ("scene.num_envs=1", "env=3", "env.scene.num_envs", "trainer.lr=1"):
        with pytest.raises(ConfigError, match="override"):
            il.parse_override(bad)


# -- applying overrides to config objects (stand-ins with Isaac Lab 3.0's layout) ---------------------------------


@dataclass
class PhysxCfg:
    gpu_max_num_partitions: int = 8


@dataclass
class NewtonCfg:
    use_cuda_graph: bool = True


@dataclass
class SimCfg:
    physics: Any = field(default_factory=PhysxCfg)
    device: str = "cuda:0"


@dataclass
class EnvCfg:
    scene: Any = field(default_factory=lambda: SimpleNamespace(num_envs=4096))
    sim: SimCfg = field(default_factory=SimCfg)
    seed: int | None = None


@dataclass
class AgentCfg:
    num_steps_per_env: int = 24
    seed: int = 42
    clip_actions: float | None = None
    algorithm: Any = field(default_factory=lambda: {"num_mini_batches": 4, "num_learning_epochs": 5})


def fake_resolve_presets(cfg: Any, selected: set[str]) -> None:
    """Like Isaac Lab's resolve_presets for one preset node: env.sim.physics."""
    if isinstance(cfg, EnvCfg) and "newton_mjwarp" in selected:
        cfg.sim.physics = NewtonCfg()


def test_apply_overrides_sets_the_config_objects_the_exported_line_names() -> None:
    env, agent = EnvCfg(), AgentCfg()
    lines = il.overrides(1024, 48, 9, {"gpu_max_num_partitions": 16}, num_mini_batches=8)
    il.apply_overrides(env, agent, lines, fake_resolve_presets)
    assert env.scene.num_envs == 1024 and env.sim.physics.gpu_max_num_partitions == 16
    assert agent.num_steps_per_env == 48 and agent.seed == 9 and agent.algorithm["num_mini_batches"] == 8
    il.check_physics(env, "physx")
    with pytest.raises(ConfigError, match="physics_preset"):
        il.check_physics(env, "newton_mjwarp")

    env, agent = EnvCfg(), AgentCfg()
    knobs = {"physics_preset": "newton_mjwarp", "newton_cuda_graph": False}
    il.apply_overrides(env, agent, il.overrides(256, None, 2, knobs), fake_resolve_presets)
    assert isinstance(env.sim.physics, NewtonCfg) and env.sim.physics.use_cuda_graph is False
    il.check_physics(env, "newton_mjwarp")


def test_apply_overrides_refuses_fields_the_task_does_not_have() -> None:
    env = EnvCfg(sim=SimCfg(physics=NewtonCfg()))  # a task whose default physics is Newton
    with pytest.raises(ConfigError, match="gpu_max_num_partitions"):
        il.apply_overrides(env, AgentCfg(), il.overrides(64, 24, 1, {"gpu_max_num_partitions": 8}))
    with pytest.raises(ConfigError, match="presets"):  # an Isaac Lab without presets cannot select one
        il.apply_overrides(EnvCfg(), AgentCfg(), il.overrides(64, 24, 1, {"physics_preset": "newton_mjwarp"}))


def test_kit_is_launched_only_for_physx() -> None:
    assert il.needs_kit("physx") and not il.needs_kit("newton_mjwarp")


def test_task_ids_resolve_with_or_without_the_version_suffix() -> None:
    assert il.resolve_task_id(FLAT, [FLAT, "Isaac-Cartpole-v0"]) == FLAT
    assert il.resolve_task_id(FLAT, ["Isaac-Velocity-Flat-Anymal-D"]) == "Isaac-Velocity-Flat-Anymal-D"
    with pytest.raises(ConfigError, match="Isaac-Velocity-Flat-Anymal-C-v0"):
        il.resolve_task_id(FLAT, ["Isaac-Velocity-Flat-Anymal-C-v0", "Isaac-Cartpole-v0"])


# -- success rule -----------------------------------------------------------------------------------------------


def test_success_needs_no_fall_and_mean_errors_under_both_thresholds() -> None:
    tracker = il.SuccessTracker(5, "cpu")
    command = torch.tensor([[1.0, 0.0, 0.5]]).repeat(5, 1)
    velocity = torch.tensor(
        [
            [0.9, 0.0, 0.5],  # good
            [0.9, 0.0, 0.5],  # good tracking, but it falls
            [0.4, 0.0, 0.5],  # xy error 0.6 m/s
            [1.0, 0.0, 0.0],  # yaw error 0.5 rad/s
            [1.0, 0.0, 0.5],  # perfect except one 40 m/s spike below: the rule is a mean, not a max
        ]
    )
    running = torch.zeros(5, dtype=torch.long)
    no_fall = torch.zeros(5, dtype=torch.bool)
    with torch.inference_mode():  # as in a rollout
        for step in range(100):
            v = velocity.clone()
            if step == 50:
                v[4, 0] = 41.0
            assert not tracker.update(command, v, running, no_fall).any()
        reset_state = torch.full((5, 3), 99.0)  # a finished env already shows its next episode: ignored
        success = tracker.update(command, reset_state, torch.ones(5), torch.tensor([False, True, False, False, False]))
    assert success.tolist() == [True, False, False, False, True]
    assert tracker.steps.tolist() == [0.0] * 5  # the next episodes start from zero
    tracker.reset()  # outside inference mode, after inference-mode updates


# -- the TaskEnv adapter over a fake RslRlVecEnvWrapper -----------------------------------------------------------


class FakeWrapper:
    """Stands in for ``RslRlVecEnvWrapper``: ``n`` envs, 2 actions; tests set dones / time-outs / terminations."""

    def __init__(self, n: int = 4) -> None:
        self.num_envs, self.num_actions, self.max_episode_length, self.device, self.cfg = n, 2, 1000, "cpu", None
        self.episode_length_buf = torch.zeros(n, dtype=torch.long)
        self.dones = torch.zeros(n, dtype=torch.long)
        self.unwrapped = SimpleNamespace(
            step_dt=0.02,
            reset_terminated=torch.zeros(n, dtype=torch.bool),
            reset_time_outs=torch.zeros(n, dtype=torch.bool),
            reset=self._reset,
        )
        self.actions: list[torch.Tensor] = []
        self.seeds: list[int] = []
        self.closed = False

    def _reset(self, seed: int) -> None:
        self.seeds.append(seed)

    def get_observations(self) -> TensorDict:
        obs = torch.arange(self.num_envs * 3, dtype=torch.float32).reshape(self.num_envs, 3)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        self.actions.append(actions)
        extras = {"time_outs": self.unwrapped.reset_time_outs.clone(), "log": {}}
        return self.get_observations(), torch.ones(self.num_envs), self.dones.clone(), extras

    def close(self) -> None:
        self.closed = True


def fake_scene(n: int = 4) -> il._Scene:
    command = torch.tensor([[1.0, 0.0, 0.0]]).repeat(n, 1)
    return il._Scene((FLAT, "cpu", ()), FakeWrapper(n), il.SuccessTracker(n, "cpu"), lambda: (command, command))


def test_a_view_pads_actions_and_slices_everything_it_returns() -> None:
    scene = fake_scene(4)
    view = il.IsaacLabEnv(scene, 2, owner=False)
    assert (view.num_envs, view.num_actions, view.control_dt_s, view.max_episode_length) == (2, 2, 0.02, 1000)
    scene.wrapper.dones = torch.tensor([1, 1, 0, 0])
    scene.wrapper.unwrapped.reset_time_outs = torch.tensor([True, False, False, False])
    scene.wrapper.unwrapped.reset_terminated = torch.tensor([False, True, False, False])
    obs, rewards, dones, extras = view.step(torch.ones(2, 2))
    sent = scene.wrapper.actions[-1]
    assert sent.shape == (4, 2) and sent[:2].eq(1).all() and sent[2:].eq(0).all()
    assert obs.batch_size == torch.Size([2]) and rewards.shape == (2,) and dones.tolist() == [1, 1]
    assert extras["time_outs"].tolist() == [True, False] and extras["success"].tolist() == [True, False]
    assert "log" in extras  # Isaac Lab's own extras pass through
    view.episode_length_buf = torch.tensor([5, 6])
    assert scene.wrapper.episode_length_buf.tolist() == [5, 6, 0, 0]


def test_reset_with_seeds_reseeds_the_scene_with_the_panel_and_evaluate_runs_on_the_view() -> None:
    scene = fake_scene(4)
    view = il.IsaacLabEnv(scene, 2, owner=False)
    scene.tracker.steps = torch.full((4,), 7.0)
    obs = view.reset_with_seeds(panel_seeds(2))
    assert scene.wrapper.seeds == [2**31] and obs["policy"].shape == (2, 3) and scene.tracker.steps.eq(0).all()
    with pytest.raises(ValueError, match="2 seeds"):
        view.reset_with_seeds(panel_seeds(3))

    class ZeroPolicy(torch.nn.Module):
        def forward(self, td: TensorDict) -> torch.Tensor:
            return torch.zeros(td.batch_size[0], 2)

    scene.wrapper.dones = torch.ones(4, dtype=torch.long)
    scene.wrapper.unwrapped.reset_time_outs = torch.ones(4, dtype=torch.bool)
    result = evaluate(ZeroPolicy(), view, panel_seeds(2))
    assert result.episodes == 2 and result.successes == 2  # the fake tracks its command perfectly


def test_make_env_returns_a_view_of_the_process_scene_and_only_the_owner_closes_it(monkeypatch) -> None:
    scene = fake_scene(4)
    monkeypatch.setattr(il, "_SCENE", scene)
    backend = get_backend("isaaclab")
    view = backend.make_env(2, 1, "cpu", FLAT)
    assert view.num_envs == 2 and not view._owner
    with pytest.raises(ConfigError, match="eval_episodes"):
        backend.make_env(8, 1, "cpu", FLAT)
    with pytest.raises(ConfigError, match="already hosts"):
        backend.make_env(2, 1, "cpu", FLAT, physics_preset="newton_mjwarp")
    view.close()
    assert not scene.wrapper.closed and il._SCENE is scene
    il.IsaacLabEnv(scene, 4, owner=True).close()
    assert scene.wrapper.closed and il._SCENE is None


# -- without Isaac Lab ------------------------------------------------------------------------------------------


def test_make_env_without_isaac_lab_names_the_install_step(monkeypatch) -> None:
    monkeypatch.setattr(il, "_find_spec", lambda name: None)
    monkeypatch.setattr(il, "_SCENE", None)
    with pytest.raises(MissingExtraError) as info:
        get_backend("isaaclab").make_env(64, 1, "cpu", FLAT)
    assert isinstance(info.value, SweepError)
    assert "https://isaac-sim.github.io/IsaacLab" in str(info.value) and "Isaac Lab 3.0" in str(info.value)
    assert not isaac_modules_loaded()
    assert get_backend("isaaclab").versions() == {"isaaclab": "not installed"}


def test_make_env_checks_profile_and_knobs_before_importing_anything(monkeypatch) -> None:
    monkeypatch.setattr(il, "_SCENE", None)
    backend = get_backend("isaaclab")
    with pytest.raises(ConfigError, match="unknown Isaac Lab task"):
        backend.make_env(64, 1, "cpu", "Isaac-Velocity-Flat-Anymal-Z-v0")
    with pytest.raises(ConfigError, match="physics_preset"):
        backend.make_env(64, 1, "cpu", FLAT, physics_preset="bullet")
    assert not isaac_modules_loaded()


def test_backend_facts_come_from_isaac_labs_velocity_env() -> None:
    backend = get_backend("isaaclab")
    profiles = backend.profiles()
    assert {FLAT, "Isaac-Velocity-Rough-Anymal-D-v0"} <= set(profiles)
    assert profiles[FLAT].episode_steps == 1000 and profiles[FLAT].success_threshold == 0.5
    assert backend.control_dt_s(FLAT) == pytest.approx(0.02)
    assert set(backend.knobs) == {"gpu_max_num_partitions", "physics_preset", "newton_cuda_graph"}
    assert TrialConfig(backend="isaaclab", profile=FLAT, num_envs=4096).validate().profile == FLAT


# -- recommended.yaml's isaaclab section --------------------------------------------------------------------------


def test_export_keeps_declared_fields_in_agent_and_env_and_the_rest_apart() -> None:
    flags = {"fused_optimizer": True, "fast_finite_check": True, "torch_compile": "default", "bf16_update": True}
    options = {"physics_preset": "physx", "gpu_max_num_partitions": 16}
    cfg = TrialConfig(
        backend="isaaclab",
        profile=FLAT,
        num_envs=8192,
        num_steps_per_env=12,
        seed=5,
        flags=flags,
        backend_options=options,
    )
    section = get_backend("isaaclab").export_section(cfg)["isaaclab"]
    expected = il.overrides(8192, 12, 5, options, num_mini_batches=4, num_learning_epochs=5)
    assert section["task"] == FLAT and section["override"] == " ".join(expected)
    assert section["command"].endswith(f"--task={FLAT} --headless {section['override']}")
    agent = section["agent"]
    assert set(agent) <= il.RUNNER_FIELDS and "save_interval" not in agent
    assert set(agent["algorithm"]) <= il.ALGORITHM_FIELDS and agent["algorithm"]["class_name"] == "PPO"
    assert set(agent["actor"]) <= il.MODEL_FIELDS and set(agent["critic"]) <= il.MODEL_FIELDS
    assert agent["num_steps_per_env"] == 12 and agent["seed"] == 5 and agent["algorithm"]["num_mini_batches"] == 4
    assert section["env"] == {"scene": {"num_envs": 8192}, "sim": {"physics": {"gpu_max_num_partitions": 16}}}
    extra = section["rsl_rl_only"]
    assert extra["check_for_nan"] is False and extra["torch_compile_mode"] == "default"
    assert extra["algorithm.use_mixed_precision"] is True and extra["algorithm.class_name"] == "sweep.perf.ppo:FastPPO"
    assert extra["perf_flags"]["fused_optimizer"] is True and "algorithm.perf_flags" in extra
    assert yaml.safe_load(yaml.safe_dump(section)) == section


def test_export_without_isaac_only_knobs_sets_only_the_scene() -> None:
    cfg = TrialConfig(backend="isaaclab", profile=FLAT, num_envs=2048, num_steps_per_env=48)
    section = get_backend("isaaclab").export_section(cfg)["isaaclab"]
    assert section["env"] == {"scene": {"num_envs": 2048}} and section["physics_preset"] == "physx"
    assert section["rsl_rl_only"]["check_for_nan"] is True and "torch_compile_mode" not in section["rsl_rl_only"]


# -- the search space -------------------------------------------------------------------------------------------


def test_the_anymal_space_validates_without_isaac_lab() -> None:
    cfg = config.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    assert cfg.backend == "isaaclab" and cfg.profile == FLAT
    assert il.check_knobs(cfg.backend_options) == {"physics_preset": "physx"}
    assert min(cfg.knobs.num_envs) >= cfg.target.eval_episodes  # evaluation runs on the training scene
    assert max(cfg.knobs.num_steps_per_env) * il.CONTROL_DT_S <= cfg.constraints.max_update_period_s
    params = {**{name: values[0] for name, values in space.choices(cfg).items()}, **cfg.initial[0]}
    first = space.trial_config(params, cfg, cfg.profile, seed=1, cap_s=60.0)
    assert first.validate().backend_options == {"physics_preset": "physx"}
    assert not isaac_modules_loaded()


def test_sweep_run_stops_before_starting_anything_without_isaac_lab(monkeypatch) -> None:
    from sweep import run

    monkeypatch.setattr(il, "_find_spec", lambda name: None)
    cfg = config.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    with pytest.raises(MissingExtraError, match=r"Isaac Lab 3\.0"):
        run.resolve_runtime(cfg, has_gpu=False)
    cfg.workers.address = "auto"  # a cluster: the workers, not this driver, need Isaac Lab
    assert run.resolve_runtime(cfg, has_gpu=False)[0] == FLAT


# -- with Isaac Lab ---------------------------------------------------------------------------------------------


@pytest.mark.isaaclab
@needs_isaaclab
def test_exported_agent_fields_are_declared_by_isaac_labs_config_classes() -> None:
    from dataclasses import fields

    from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg, RslRlPpoAlgorithmCfg

    section = get_backend("isaaclab").export_section(TrialConfig(backend="isaaclab", profile=FLAT))["isaaclab"]
    assert set(section["agent"]) <= {f.name for f in fields(RslRlOnPolicyRunnerCfg)}
    assert set(section["agent"]["algorithm"]) <= {f.name for f in fields(RslRlPpoAlgorithmCfg)}


@pytest.mark.isaaclab
@needs_isaaclab
def test_a_64_env_flat_anymal_honours_the_task_env_contract() -> None:
    backend = get_backend("isaaclab")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = backend.make_env(64, 1, device, FLAT)
    view = backend.make_env(16, 1, device, FLAT)
    try:
        assert env.get_observations()["policy"].shape[0] == 64 and env.num_actions == 12
        assert env.control_dt_s == pytest.approx(0.02) and env.max_episode_length == 1000
        obs, rewards, dones, extras = env.step(torch.zeros(64, env.num_actions, device=env.device))
        assert obs["policy"].shape[0] == 64 and rewards.shape == (64,) and dones.shape == (64,)
        assert extras["success"].dtype == torch.bool and extras["time_outs"].shape == (64,)
        assert view.reset_with_seeds(panel_seeds(16))["policy"].shape[0] == 16
        _, _, dones, extras = view.step(torch.zeros(16, view.num_actions, device=view.device))
        assert dones.shape == (16,) and extras["success"].shape == (16,)
        env.synchronize()
    finally:
        view.close()
        env.close()
