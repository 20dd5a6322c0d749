"""The Isaac Lab backend: knobs -> overrides, export sections, the install error, the adapter, the search space.

Everything here runs without Isaac Lab (a fake wrapper stands in for ``RslRlVecEnvWrapper``); the tests marked
``isaaclab`` build a real Isaac Lab env and are skipped when Isaac Lab is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml
from tensordict import TensorDict

from sweep import config
from sweep.backends import get_backend
from sweep.backends.isaaclab import backend as il
from sweep.backends.isaaclab import cfg as ilc
from sweep.config import validation
from sweep.contract import TrialConfig, panel_seeds
from sweep.errors import ConfigError, MissingExtraError, SweepError
from sweep.ledger import read_rows
from sweep.planner import space
from sweep.report.export import implied_agent_config
from sweep.trial.cli import checked
from sweep.trial.evaluation import evaluate
from tests import isaaclab_standin as standin
from tests.helpers import run_module

FLAT = "Isaac-Velocity-Flat-AnymalD"
OLD_FLAT = "Isaac-Velocity-Flat-Anymal-D-v0"  # Isaac Lab 2.x
ISAAC_MODULES = ("isaaclab", "isaaclab_tasks", "isaaclab_rl", "isaacsim", "omni")
#: CI's Isaac Lab environment sets SWEEP_REQUIRE_ISAACLAB=1: there a missing Isaac Lab fails these tests.
needs_isaaclab = pytest.mark.skipif(
    importlib.util.find_spec("isaaclab") is None and not os.environ.get("SWEEP_REQUIRE_ISAACLAB"),
    reason="Isaac Lab is not installed",
)


def isaac_modules_loaded() -> list[str]:
    return [name for name in sys.modules if name.split(".")[0] in ISAAC_MODULES]


# -- knobs -> Hydra overrides -------------------------------------------------------------------------------------


def test_overrides_map_each_knob_to_its_isaac_lab_path() -> None:
    physx = {"physics_preset": "physx", "gpu_max_num_partitions": 4}
    lines = ilc.overrides(4096, 24, 7, physx, num_mini_batches=8, num_learning_epochs=5)
    assert lines == [
        "presets=physx",
        "env.scene.num_envs=4096",
        "env.sim.physics.gpu_max_num_partitions=4",
        "agent.num_steps_per_env=24",
        "agent.algorithm.num_mini_batches=8",
        "agent.algorithm.num_learning_epochs=5",
        "agent.seed=7",
    ]
    knobs = {"newton_cuda_graph": False, "env": {"sim": {"physics": {"solver_cfg": {"njmax": 200}}}}}
    newton = ilc.overrides(1024, 12, 1, knobs)  # Newton MJWarp is the default preset
    assert newton == [
        "presets=newton_mjwarp",  # first: a preset replaces the whole section the scalars then land in
        "env.scene.num_envs=1024",
        "env.sim.physics.use_cuda_graph=false",
        "env.sim.physics.solver_cfg.njmax=200",  # task settings from backend_options.env
        "agent.num_steps_per_env=12",
        "agent.seed=1",
    ]
    assert ilc.overrides(2048, None, 3, {}) == ["presets=newton_mjwarp", "env.scene.num_envs=2048", "agent.seed=3"]


@pytest.mark.parametrize(
    ("knobs", "key"),
    [
        ({"physics_preset": "physx", "gpu_max_num_partitions": 3}, "gpu_max_num_partitions"),
        ({"physics_preset": "physx", "gpu_max_num_partitions": 64}, "gpu_max_num_partitions"),
        ({"physics_preset": "physx", "gpu_max_num_partitions": True}, "gpu_max_num_partitions"),
        ({"gpu_max_num_partitions": 8}, "gpu_max_num_partitions"),  # the default preset is Newton
        ({"physics_preset": "physx", "newton_cuda_graph": True}, "newton_cuda_graph"),
        ({"newton_cuda_graph": "yes"}, "newton_cuda_graph"),
        ({"physics_preset": "bullet"}, "physics_preset"),
        ({"asset_root": 3}, "asset_root"),
        ({"env": [1, 2]}, "backend_options.env"),
        ({"num_threads": 4}, "num_threads"),
    ],
)
def test_bad_knobs_are_config_errors_naming_the_key(knobs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        ilc.overrides(1024, 24, 1, knobs)


def test_parse_override_reads_hydra_scalars_and_rejects_other_roots() -> None:
    assert ilc.parse_override("env.scene.num_envs=4096") == ("env", ("scene", "num_envs"), 4096)
    assert ilc.parse_override("env.sim.physics.use_cuda_graph=false") == (
        "env",
        ("sim", "physics", "use_cuda_graph"),
        False,
    )
    assert ilc.parse_override("agent.algorithm.learning_rate=0.001") == ("agent", ("algorithm", "learning_rate"), 0.001)
    assert ilc.parse_override("agent.experiment_name=anymal") == ("agent", ("experiment_name",), "anymal")
    assert ilc.parse_override("presets=newton_mjwarp,eval") == ("presets", (), ("newton_mjwarp", "eval"))
    for bad in ("scene.num_envs=1", "env=3", "env.scene.num_envs", "trainer.lr=1"):
        with pytest.raises(ConfigError, match="override"):
            ilc.parse_override(bad)


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
    """Like Isaac Lab's resolve_presets for one preset node, env.sim.physics (default: Newton)."""
    if isinstance(cfg, EnvCfg):
        cfg.sim.physics = PhysxCfg() if "physx" in selected else NewtonCfg()


def test_apply_overrides_sets_the_config_objects_the_exported_line_names() -> None:
    env, agent = EnvCfg(), AgentCfg()
    physx = {"physics_preset": "physx", "gpu_max_num_partitions": 16}
    lines = ilc.overrides(1024, 48, 9, physx, num_mini_batches=8)
    ilc.apply_overrides(env, agent, lines, fake_resolve_presets)
    assert env.scene.num_envs == 1024 and env.sim.physics.gpu_max_num_partitions == 16
    assert agent.num_steps_per_env == 48 and agent.seed == 9 and agent.algorithm["num_mini_batches"] == 8
    ilc.check_physics(env, "physx")
    with pytest.raises(ConfigError, match="physics_preset"):
        ilc.check_physics(env, "newton_mjwarp")

    env, agent = EnvCfg(), AgentCfg()
    knobs = {"newton_cuda_graph": False, "env": {"sim": {"device": "cpu"}}}
    ilc.apply_overrides(env, agent, ilc.overrides(256, None, 2, knobs), fake_resolve_presets)
    assert isinstance(env.sim.physics, NewtonCfg) and env.sim.physics.use_cuda_graph is False
    assert env.sim.device == "cpu"
    ilc.check_physics(env, "newton_mjwarp")


def test_apply_overrides_refuses_fields_the_task_does_not_have() -> None:
    with pytest.raises(ConfigError, match=r"no 'njmax'; fix backend_options.env"):
        lines = ilc.overrides(64, 24, 1, {"env": {"sim": {"njmax": 200}}})
        ilc.apply_overrides(EnvCfg(), AgentCfg(), lines, fake_resolve_presets)


def test_kit_is_launched_only_for_physx() -> None:
    assert ilc.needs_kit("physx") and not ilc.needs_kit("newton_mjwarp")


def test_task_ids_come_from_the_registry_and_a_2x_id_names_its_3_0_id() -> None:
    registered = [FLAT, "Isaac-Velocity-Rough-AnymalD", "Isaac-Cartpole-Direct"]
    assert ilc.resolve_task_id(FLAT, registered) == FLAT
    with pytest.raises(ConfigError, match=f"2.x task id; Isaac Lab 3.0 registers it as profile={FLAT}$"):
        ilc.resolve_task_id(OLD_FLAT, registered)
    with pytest.raises(ConfigError, match=rf"velocity tasks: {FLAT}, Isaac-Velocity-Rough-AnymalD$"):
        ilc.resolve_task_id("Isaac-Velocity-Flat-Spot", registered)
    backend = get_backend("isaaclab")
    with pytest.raises(ConfigError, match=f"registers it as {FLAT}"):  # before any Isaac Lab import
        backend.check_profile(OLD_FLAT)
    with pytest.raises(ConfigError, match="not an Isaac Lab task id"):
        backend.check_profile("cpu")
    with pytest.raises(ConfigError, match=f"registers it as {FLAT}"):
        validation.validate(config.load("anymal_d_flat", {"profile": OLD_FLAT}, has_gpu=True))
    assert not isaac_modules_loaded()


def test_asset_paths_walk_the_config_tree_and_missing_ones_are_listed(tmp_path) -> None:
    root = str(tmp_path)

    @dataclass
    class Spawn:
        usd_path: str = f"{root}/Isaac/IsaacLab/Robots/robot.usd"

    @dataclass
    class Robot:
        spawn: Spawn = field(default_factory=Spawn)
        actuators: dict = field(default_factory=lambda: {"legs": SimpleNamespace(), "net": {"file": f"{root}/n.pt"}})
        names: tuple = ("https://elsewhere/x.usd",)
        visual_material: dict = field(default_factory=lambda: {"mdl_path": f"{root}/tiles.mdl"})  # rendering only

    cfg = {"scene": Robot(), "again": [Robot()], "count": 3}
    assert ilc.asset_paths(cfg, root) == [f"{root}/Isaac/IsaacLab/Robots/robot.usd", f"{root}/n.pt"]
    (tmp_path / "n.pt").write_bytes(b"")
    assert ilc.missing_assets(ilc.asset_paths(cfg, root), tmp_path) == ["Isaac/IsaacLab/Robots/robot.usd"]


def test_asset_root_is_set_before_isaac_lab_is_imported(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(il.ASSET_ROOT_ENV, raising=False)
    il.use_asset_root(None)
    assert il.ASSET_ROOT_ENV not in __import__("os").environ
    with pytest.raises(ConfigError, match=r"asset_root=.*no such folder"):
        il.use_asset_root(str(tmp_path / "nowhere"))
    il.use_asset_root(str(tmp_path))
    assert __import__("os").environ[il.ASSET_ROOT_ENV] == str(tmp_path.resolve())
    monkeypatch.setitem(sys.modules, "isaaclab.utils.assets", SimpleNamespace(NUCLEUS_ASSET_ROOT_DIR="/elsewhere"))
    with pytest.raises(ConfigError, match="already imported"):
        il.use_asset_root(str(tmp_path))


def test_physx_without_isaac_sim_is_one_line_naming_the_newton_preset(monkeypatch) -> None:
    monkeypatch.setattr(il, "_find_spec", lambda name: None if name == "isaacsim" else object())
    with pytest.raises(ConfigError, match="needs Isaac Sim, which is not installed; use physics_preset=newton_mjwarp"):
        get_backend("isaaclab").preflight(FLAT, {"physics_preset": "physx"})


def test_a_system_exit_inside_a_trial_is_a_failed_trial_not_a_dead_worker(monkeypatch) -> None:
    from sweep.trial.runner import run_trial

    def exits(*args: Any, **kwargs: Any) -> None:
        raise SystemExit(1)  # what Isaac Lab's app launcher does without Isaac Sim

    monkeypatch.setattr(il.IsaacLab, "make_env", exits)
    rows: list[Any] = []
    final = run_trial(TrialConfig(backend="isaaclab", profile=FLAT, num_envs=64, eval_episodes=16), rows.append)
    assert final.state == "failed" and "SystemExit" in final.reason and "code 1" in final.reason
    assert rows == [final] and final.billable_s > 0


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
        # the on-track share a checkpoint reads is the same rule applied to the episodes under way (no fall yet)
        on_track = tracker.on_track(100)
        assert (tracker.on_track(101), tracker.on_track(100, n=2)) == (None, 1.0)
        reset_state = torch.full((5, 3), 99.0)  # a finished env already shows its next episode: ignored
        success = tracker.update(command, reset_state, torch.ones(5), torch.tensor([False, True, False, False, False]))
    assert success.tolist() == [True, False, False, False, True]
    assert on_track == 3 / 5  # env 1 was on track until it fell
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
    tracker = il.SuccessTracker(n, "cpu")
    return il._Scene((FLAT, "cpu", "[]"), FakeWrapper(n), tracker, lambda: (command, command), training_seed=7)


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


def test_the_on_track_share_reads_the_envs_of_the_view_under_way() -> None:
    scene = fake_scene(4)
    scene.tracker.steps = torch.tensor([120.0, 120.0, 30.0, 120.0])
    scene.tracker.err_xy_sum = torch.tensor([12.0, 120.0, 0.0, 0.0])  # 0.1 and 1.0 m/s on average
    scene.tracker.err_yaw_sum = torch.zeros(4)
    assert il.IsaacLabEnv(scene, 4, owner=True).on_track_share(100) == 2 / 3
    assert il.IsaacLabEnv(scene, 2, owner=False).on_track_share(100) == 1 / 2
    assert il.IsaacLabEnv(scene, 4, owner=True).on_track_share(200) is None


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


def test_training_after_an_evaluation_reseeds_from_the_training_stream_once() -> None:
    scene = fake_scene(4)
    train, view = il.IsaacLabEnv(scene, 4, owner=True), il.IsaacLabEnv(scene, 2, owner=False)
    train.step(torch.zeros(4, 2))
    assert scene.wrapper.seeds == []  # no evaluation yet: nothing to undo
    for k in (1, 2):
        view.reset_with_seeds(panel_seeds(2))
        view.step(torch.zeros(2, 2))  # the panel's own steps never reseed
        train.step(torch.zeros(4, 2))
        train.step(torch.zeros(4, 2))
        assert scene.wrapper.seeds[-2:] == [2**31, il.training_reseed(7, k)]
    assert len(scene.wrapper.seeds) == 4 and all(seed < 2**31 for seed in scene.wrapper.seeds[1::2])


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
    assert "pip install isaaclab==3.0.0" in str(info.value) and "Python 3.12" in str(info.value)
    assert not isaac_modules_loaded()
    assert get_backend("isaaclab").versions() == {"isaaclab": "not installed"}


def test_make_env_checks_profile_and_knobs_before_importing_anything(monkeypatch) -> None:
    monkeypatch.setattr(il, "_SCENE", None)
    backend = get_backend("isaaclab")
    with pytest.raises(ConfigError, match=r"2\.x task id"):
        backend.make_env(64, 1, "cpu", OLD_FLAT)
    with pytest.raises(ConfigError, match="physics_preset"):
        backend.make_env(64, 1, "cpu", FLAT, physics_preset="bullet")
    assert not isaac_modules_loaded()


def test_backend_facts_come_from_isaac_labs_velocity_env() -> None:
    backend = get_backend("isaaclab")
    profiles = backend.profiles()
    assert {FLAT, "Isaac-Velocity-Rough-AnymalD"} <= set(profiles)
    assert profiles[FLAT].episode_steps == 1000 and profiles[FLAT].success_threshold == 0.5
    assert backend.control_dt_s(FLAT) == pytest.approx(0.02)
    assert set(backend.knobs) == {"gpu_max_num_partitions", "physics_preset", "newton_cuda_graph", "asset_root", "env"}
    assert checked(TrialConfig(backend="isaaclab", profile=FLAT, num_envs=4096)).profile == FLAT


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
    section = get_backend("isaaclab").export_section(cfg, implied_agent_config(cfg))["isaaclab"]
    expected = ilc.overrides(8192, 12, 5, options, num_mini_batches=4, num_learning_epochs=5)
    assert section["task"] == FLAT and section["override"] == " ".join(expected)
    assert section["command"] == f"python -m isaaclab train --rl_library rsl_rl --task {FLAT} {section['override']}"
    agent = section["agent"]
    assert set(agent) <= ilc.RUNNER_FIELDS and "save_interval" not in agent
    assert set(agent["algorithm"]) <= ilc.ALGORITHM_FIELDS and agent["algorithm"]["class_name"] == "PPO"
    assert set(agent["actor"]) <= ilc.MODEL_FIELDS and set(agent["critic"]) <= ilc.MODEL_FIELDS
    assert agent["num_steps_per_env"] == 12 and agent["seed"] == 5 and agent["algorithm"]["num_mini_batches"] == 4
    assert section["env"] == {"scene": {"num_envs": 8192}, "sim": {"physics": {"gpu_max_num_partitions": 16}}}
    extra = section["rsl_rl_only"]
    assert extra["check_for_nan"] is False and extra["torch_compile_mode"] == "default"
    assert extra["algorithm.use_mixed_precision"] is True and extra["algorithm.class_name"] == "sweep.perf.ppo:FastPPO"
    assert extra["perf_flags"]["fused_optimizer"] is True and "algorithm.perf_flags" in extra
    assert yaml.safe_load(yaml.safe_dump(section)) == section


def test_export_without_isaac_only_knobs_sets_only_the_scene() -> None:
    cfg = TrialConfig(backend="isaaclab", profile=FLAT, num_envs=2048, num_steps_per_env=48)
    section = get_backend("isaaclab").export_section(cfg, implied_agent_config(cfg))["isaaclab"]
    assert section["env"] == {"scene": {"num_envs": 2048}} and section["physics_preset"] == "newton_mjwarp"
    assert section["rsl_rl_only"]["check_for_nan"] is True and "torch_compile_mode" not in section["rsl_rl_only"]


# -- the search space -------------------------------------------------------------------------------------------


def test_the_anymal_space_validates_without_isaac_lab() -> None:
    cfg = validation.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    assert cfg.backend == "isaaclab" and cfg.profile == FLAT
    options = ilc.check_knobs(cfg.backend_options)
    assert options["physics_preset"] == "newton_mjwarp" and options["asset_root"] is None
    assert min(cfg.knobs.num_envs) >= cfg.target.eval_episodes  # evaluation runs on the training scene
    assert max(cfg.knobs.num_steps_per_env) * il.CONTROL_DT_S <= cfg.constraints.max_update_period_s
    params = {**{name: values[0] for name, values in space.choices(cfg).items()}, **cfg.search.initial[0]}
    first = space.trial_config(params, cfg, cfg.profile, seed=1, cap_s=60.0)
    assert first.validate().backend_options == options
    assert not isaac_modules_loaded()


def test_sweep_run_stops_before_starting_anything_without_isaac_lab(monkeypatch) -> None:
    from sweep import run

    monkeypatch.setattr(il, "_find_spec", lambda name: None)
    cfg = validation.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    with pytest.raises(MissingExtraError, match=r"pip install isaaclab==3\.0\.0"):
        run.resolve_runtime(cfg, has_gpu=False)
    cfg = replace(cfg, workers=replace(cfg.workers, address="auto"))  # a cluster: its workers, not this driver, need it
    assert run.resolve_runtime(cfg, has_gpu=False)[0] == FLAT


# -- with Isaac Lab ---------------------------------------------------------------------------------------------


@pytest.mark.isaaclab
@needs_isaaclab
def test_exported_agent_fields_are_declared_by_isaac_labs_config_classes() -> None:
    from dataclasses import fields

    from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg, RslRlPpoAlgorithmCfg

    cfg = TrialConfig(backend="isaaclab", profile=FLAT)
    section = get_backend("isaaclab").export_section(cfg, implied_agent_config(cfg))["isaaclab"]
    assert set(section["agent"]) <= {f.name for f in fields(RslRlOnPolicyRunnerCfg)}
    assert set(section["agent"]["algorithm"]) <= {f.name for f in fields(RslRlPpoAlgorithmCfg)}


@pytest.fixture(scope="module")
def asset_root(tmp_path_factory) -> str:
    """The stand-in asset root (tests/isaaclab_standin.py), set for this process before Isaac Lab is imported."""
    from tests.isaaclab_standin import write_asset_root

    root = str(write_asset_root(tmp_path_factory.mktemp("isaac-assets")))
    il.use_asset_root(root)
    return root


#: A CPU-sized flat ANYmal: 1 s episodes (50 control steps) so that a held-out pass ends in seconds.
CPU_OPTIONS = ("backend_options.env.episode_length_s=1.0",)


@pytest.mark.isaaclab
@needs_isaaclab
def test_preflight_lists_every_missing_asset_before_anything_runs(tmp_path) -> None:
    empty = tmp_path / "empty-root"
    empty.mkdir()
    proc = run_module(
        "sweep.run",
        "space=anymal_d_flat",
        f"backend_options.asset_root={empty}",
        f"out={tmp_path}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    missing = [line.split("missing: ")[1] for line in proc.stderr.splitlines() if "missing: " in line]
    assert sorted(missing) == sorted(str(p) for p in (standin.ACTUATOR_NET, standin.GROUND, standin.ROBOT))
    assert "Traceback" not in proc.stderr and "worker(s)" not in proc.stdout  # stopped before Ray started


@pytest.mark.isaaclab
@needs_isaaclab
def test_a_flat_anymal_honours_the_task_env_contract_and_evaluates_on_the_panel(asset_root) -> None:
    backend = get_backend("isaaclab")
    knobs = {"asset_root": asset_root, "env": {"episode_length_s": 1.0}}
    backend.preflight(FLAT, knobs)  # every asset the task loads is under the stand-in root
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = backend.make_env(32, 1, device, FLAT, **knobs)
    view = backend.make_env(16, 1, device, FLAT, **knobs)
    unwrapped = env._scene.wrapper.unwrapped
    seeds: list[int] = []
    reset = unwrapped.reset
    unwrapped.reset = lambda seed=None, **kw: (seeds.append(seed), reset(seed=seed, **kw))[1]
    try:
        assert env.get_observations()["policy"].shape == (32, 48) and env.num_actions == 12
        assert env.control_dt_s == pytest.approx(0.02) and env.max_episode_length == 50
        obs, rewards, dones, extras = env.step(torch.zeros(32, env.num_actions, device=env.device))
        assert obs["policy"].shape[0] == 32 and rewards.shape == (32,) and dones.shape == (32,)
        assert extras["success"].dtype == torch.bool and extras["time_outs"].shape == (32,)
        assert rewards.isfinite().all()
        assert 0 <= env.on_track_share(1) <= 1 and env.on_track_share(51) is None  # no episode runs past 50 steps

        class ZeroPolicy(torch.nn.Module):
            def forward(self, td: TensorDict) -> torch.Tensor:
                return torch.zeros(td.batch_size[0], 12, device=device)

        result = evaluate(ZeroPolicy(), view, panel_seeds(16))
        assert result.episodes == 16 and 0 <= result.successes <= 16
        env.step(torch.zeros(32, env.num_actions, device=env.device))  # training resumes: reseeded from its stream
        assert seeds == [2**31, il.training_reseed(1, 1)]
        env.synchronize()
    finally:
        view.close()
        env.close()


@pytest.mark.isaaclab
@needs_isaaclab
def test_one_real_isaac_lab_trial_trains_evaluates_and_writes_its_ledger(asset_root, tmp_path) -> None:
    knobs = f"profile={FLAT} num_envs=16 num_steps_per_env=12 eval_episodes=16 eval_every_steps=24 device=cpu"
    args = [*knobs.split(), "target=1.0", "cap_s=90", f"backend_options.asset_root={asset_root}", *CPU_OPTIONS]
    proc = run_module("sweep.trial", "backend=isaaclab", *args, f"out={tmp_path}", cwd=tmp_path, timeout=400)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = read_rows(tmp_path / "ledger.jsonl")
    checkpoints = [r for r in rows if r["state"] == "running"]
    assert checkpoints and checkpoints[0]["iteration"] >= 2 and checkpoints[0]["eval_episodes"] == 16
    assert all(0 <= r["success"] <= 1 and r["success_lo"] <= r["success"] <= r["success_hi"] for r in checkpoints)
    assert rows[-1]["state"] in ("capped", "reached") and rows[-1]["env_steps"] == rows[-1]["iteration"] * 16 * 12
    assert rows[-1]["phases_s"]["eval"] > 0 and rows[-1]["billable_s"] >= sum(checkpoints[-1]["phases_s"].values()) - 1
    assert rows[-1]["params"]["backend"] == "isaaclab" and rows[-1]["seed"] == 1


@pytest.mark.isaaclab
@needs_isaaclab
def test_sweep_run_on_isaac_lab_ends_with_a_report(asset_root, tmp_path) -> None:
    proc = run_module(
        "sweep.run",
        "space=anymal_d_flat",
        f"backend_options.asset_root={asset_root}",
        "run_id=isaac",
        f"out={tmp_path}",
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "isaac"
    rows = read_rows(run_dir / "ledger.jsonl")
    ends = [r for r in rows if r["state"] != "running"]
    assert ends and all(r["params"]["backend"] == "isaaclab" for r in rows)
    assert any(r["success"] is not None for r in rows)  # at least one held-out evaluation ran
    assert (run_dir / "report.html").stat().st_size > 10_000
    assert "report:" in proc.stdout
