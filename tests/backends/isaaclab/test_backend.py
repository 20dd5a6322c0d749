"""The Isaac Lab backend: knobs -> overrides, export sections, the install error, the adapter, the search space.

Everything here runs without Isaac Lab (a fake wrapper stands in for ``RslRlVecEnvWrapper``); the tests marked
``isaaclab`` build a real Isaac Lab env and are skipped when Isaac Lab is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml
from tensordict import TensorDict

from sweep import config, perf
from sweep.backends import get_backend
from sweep.backends.isaaclab import backend as il
from sweep.backends.isaaclab import cfg as ilc
from sweep.backends.isaaclab import evaluation as ile
from sweep.backends.isaaclab import params as ilpar
from sweep.backends.isaaclab import scene as ils
from sweep.backends.policy import MlpPolicy
from sweep.config import validation
from sweep.contract import TrialConfig, panel_seeds
from sweep.errors import ConfigError, MissingExtraError, SweepError
from sweep.ledger import PhaseClock, read_rows
from sweep.planner import space
from sweep.trial.cli import checked
from sweep.trial.evaluation import evaluate
from tests.backends.isaaclab import standin
from tests.helpers import ROOT, run_module

FLAT = "Isaac-Velocity-Flat-AnymalD"
#: Isaac Lab's own Go2 task on a real Go2 model (tests/backends/isaaclab/go2.py): the CPU smoke trials and sweep run
#: on it.
GO2 = "Isaac-Velocity-Flat-UnitreeGo2"
CONTRIB_FLAT = "IsaacContrib-Velocity-Flat-AnymalC"  # physics defaults to PhysX; the stand-in root has its robot
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
    fields = {"check_for_nan": False, "algorithm.use_mixed_precision": True}
    assert ilc.overrides(64, 12, 3, {}, agent=fields)[-3:] == [
        "agent.check_for_nan=false",
        "agent.algorithm.use_mixed_precision=true",
        "agent.seed=3",
    ]


def test_perf_flags_set_isaac_lab_fields_as_overrides_and_keep_the_rest_apart() -> None:
    assert ilc.flag_settings(perf.resolve({})) == ({}, {})  # flags at their defaults leave the task's values
    assert ilc.flag_settings(perf.resolve({"tf32": True, "deferred_episode_stats": True})) == ({}, {})
    on = perf.resolve({"fast_finite_check": True, "torch_compile": "default", "bf16_update": True})
    fields, only = ilc.flag_settings(on)
    assert fields == {"check_for_nan": False, "torch_compile_mode": "default", "algorithm.use_mixed_precision": True}
    assert (
        only["algorithm.class_name"] == "sweep.perf.ppo:FastPPO" and only["algorithm.perf_flags"]["fast_finite_check"]
    )
    cfg = TrialConfig(backend="isaaclab", profile=FLAT, num_envs=64, num_steps_per_env=12, seed=4, flags=on)
    lines = ilc.trial_overrides(cfg, on)
    assert "agent.check_for_nan=false" in lines and "agent.torch_compile_mode=default" in lines
    assert lines[-1] == "agent.seed=4" and not any("FastPPO" in line or "perf_flags" in line for line in lines)
    task = {"seed": 42, "check_for_nan": True, "algorithm": {"class_name": "PPO", "gamma": 0.99}, "actor": {}}
    trained = ilc.with_rsl_rl_only(task, only)
    assert trained["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO" and task["algorithm"]["class_name"] == "PPO"
    back, apart = ilc.split_agent_config(trained)
    assert back == task and list(back["algorithm"]) == list(task["algorithm"]) and apart == only


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
    with pytest.raises(
        ConfigError, match=rf"velocity tasks: {FLAT}, Isaac-Velocity-Rough-AnymalD \(.*backend_options.tasks_module="
    ):
        ilc.resolve_task_id("Isaac-Velocity-Flat-Spot", registered)
    own = {"my_project.tasks": ("My-Walk-Go2", "My-Stand-Go2-Direct"), "other.tasks": ()}
    with pytest.raises(
        ConfigError,
        match=r"^profile=My-Run-Go2: not a registered task; backend_options.tasks_module registered "
        r"my_project.tasks: My-Walk-Go2, My-Stand-Go2-Direct; other.tasks: none$",
    ):
        ilc.resolve_task_id("My-Run-Go2", [*registered, "My-Walk-Go2", "My-Stand-Go2-Direct"], own)
    backend = get_backend("isaaclab")
    with pytest.raises(ConfigError, match=f"registers it as {FLAT}"):  # before any Isaac Lab import
        backend.check_profile(OLD_FLAT)
    for bad in ("cpu", "auto", "Isaac Velocity"):
        with pytest.raises(ConfigError, match="not an Isaac Lab task id"):
            backend.check_profile(bad)
    backend.check_profile(CONTRIB_FLAT)  # contrib ids are Isaac Lab task ids too (checked in the registry later)
    backend.check_profile("Template-Stand-Go2-Direct-v0")  # so is a project's own
    assert ilc.velocity_tasks([*registered, CONTRIB_FLAT, "IsaacContrib-Cartpole"]) == [
        FLAT,
        "Isaac-Velocity-Rough-AnymalD",
        CONTRIB_FLAT,
    ]
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
    monkeypatch.delenv(ils.ASSET_ROOT_ENV, raising=False)
    ils.use_asset_root(None)
    assert ils.ASSET_ROOT_ENV not in __import__("os").environ
    with pytest.raises(ConfigError, match=r"asset_root=.*no such folder"):
        ils.use_asset_root(str(tmp_path / "nowhere"))
    ils.use_asset_root(str(tmp_path))
    assert __import__("os").environ[ils.ASSET_ROOT_ENV] == str(tmp_path.resolve())
    monkeypatch.setitem(sys.modules, "isaaclab.utils.assets", SimpleNamespace(NUCLEUS_ASSET_ROOT_DIR="/elsewhere"))
    with pytest.raises(ConfigError, match="already imported"):
        ils.use_asset_root(str(tmp_path))


def test_physx_without_isaac_sim_is_one_line_naming_the_newton_preset(monkeypatch) -> None:
    monkeypatch.setattr(ils, "_find_spec", lambda name: None if name == "isaacsim" else object())
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
    tracker = ils.SuccessTracker(5, "cpu")
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
        assert tracker.on_track(101) is None
        reset_state = torch.full((5, 3), 99.0)  # a finished env already shows its next episode: ignored
        success = tracker.update(command, reset_state, torch.ones(5), torch.tensor([False, True, False, False, False]))
    assert success.tolist() == [True, False, False, False, True]
    assert on_track == 3 / 5  # env 1 was on track until it fell
    assert tracker.steps.tolist() == [0.0] * 5  # the next episodes start from zero
    tracker.reset()  # outside inference mode, after inference-mode updates


# -- the TaskEnv adapter over a fake RslRlVecEnvWrapper -----------------------------------------------------------


class FakeWrapper:
    """Stands in for ``RslRlVecEnvWrapper``: ``n`` envs, 3 observations, 2 actions; the robot tracks its command
    perfectly; tests set which envs end (``dones``, per step) and how (time-out or termination)."""

    def __init__(self, n: int = 4) -> None:
        self.num_envs, self.num_actions, self.max_episode_length, self.device, self.cfg = n, 2, 1000, "cpu", None
        self.episode_length_buf = torch.zeros(n, dtype=torch.long)
        self.dones = torch.zeros(n, dtype=torch.long)
        self.schedule: dict[int, torch.Tensor] = {}
        """Step number -> dones of that step (overrides ``dones``)."""
        command = SimpleNamespace(
            command=torch.tensor([[1.0, 0.0, 0.0]]).repeat(n, 1), cfg=SimpleNamespace(asset_name="r")
        )
        data = SimpleNamespace(
            root_lin_vel_b=SimpleNamespace(torch=torch.tensor([[1.0, 0.0, 0.0]]).repeat(n, 1)),
            root_ang_vel_b=SimpleNamespace(torch=torch.zeros(n, 3)),
        )
        self.unwrapped = SimpleNamespace(
            step_dt=0.02,
            reset_terminated=torch.zeros(n, dtype=torch.bool),
            reset_time_outs=torch.zeros(n, dtype=torch.bool),
            reset=self._reset,
            command_manager=SimpleNamespace(get_term=lambda name: command),
            scene={"r": SimpleNamespace(data=data)},
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
        dones = self.schedule.get(len(self.actions), self.dones).clone()
        extras = {"time_outs": self.unwrapped.reset_time_outs.clone(), "log": {}}
        return self.get_observations(), torch.ones(self.num_envs), dones, extras

    def close(self) -> None:
        self.closed = True


def fake_env(n: int = 4, panel: bool = False) -> ils.IsaacLabEnv:
    return ils.IsaacLabEnv(FakeWrapper(n), None, "NewtonCfg/NewtonMJWarpManager", panel=panel)


#: A deterministic policy of the fake's sizes (3 observations -> 2 actions), as a pass evaluates it.
ZERO_POLICY = MlpPolicy(torch.zeros(3), torch.ones(3), 0.0, ((torch.zeros(2, 3), torch.zeros(2)),), "elu")


def test_the_env_steps_and_adds_time_outs_and_success() -> None:
    env = fake_env(4)
    assert (env.num_envs, env.num_actions, env.control_dt_s, env.max_episode_length) == (4, 2, 0.02, 1000)
    env.wrapper.dones = torch.tensor([1, 1, 0, 0])
    env.wrapper.unwrapped.reset_time_outs = torch.tensor([True, False, False, False])
    env.wrapper.unwrapped.reset_terminated = torch.tensor([False, True, False, False])
    obs, rewards, dones, extras = env.step(torch.ones(4, 2))
    assert obs.batch_size == torch.Size([4]) and rewards.shape == (4,) and dones.tolist() == [1, 1, 0, 0]
    assert extras["time_outs"].tolist() == [True, False, False, False]
    assert extras["success"].tolist() == [True, False, False, False]  # the terminated one fell
    assert "log" in extras  # Isaac Lab's own extras pass through
    env.episode_length_buf = torch.tensor([5, 6, 7, 8])  # what rsl-rl's random start writes
    assert env.wrapper.episode_length_buf.tolist() == [5, 6, 7, 8]


def test_the_on_track_share_reads_the_envs_under_way() -> None:
    env = fake_env(4)
    env.tracker.steps = torch.tensor([120.0, 120.0, 30.0, 120.0])
    env.tracker.err_xy_sum = torch.tensor([12.0, 120.0, 0.0, 0.0])  # 0.1 and 1.0 m/s on average
    env.tracker.err_yaw_sum = torch.zeros(4)
    assert env.on_track_share(100) == 2 / 3
    assert env.on_track_share(200) is None


def test_a_training_scene_is_never_reset_with_held_out_seeds() -> None:
    env = fake_env(4)
    with pytest.raises(RuntimeError, match="never reset with held-out seeds"):
        env.reset_with_seeds(panel_seeds(4))
    with pytest.raises(RuntimeError, match="never reset with held-out seeds"):
        evaluate(ZERO_POLICY, env, panel_seeds(4))
    env.warm_up()  # the trial's compile phase: the task's trainer takes no step before its first rollout either
    assert env.wrapper.seeds == [] and env.wrapper.actions == []
    panel = fake_env(4, panel=True)
    panel.warm_up()  # a panel is reset before every pass: a step to load what a first step loads costs nothing
    assert len(panel.wrapper.actions) == 1


class Stepped(ils.IsaacLabEnv):
    """The same env without its own pass loop: evaluate steps it from Python, one control step at a time."""

    def policy_steps(self, policy: MlpPolicy, steps: int) -> None:
        return None


def test_a_panel_pass_in_policy_steps_counts_as_evaluate_counts_step_by_step() -> None:
    results = []
    for cls in (ils.IsaacLabEnv, Stepped):
        panel = cls(FakeWrapper(4), None, "NewtonCfg/NewtonMJWarpManager", panel=True)
        w = panel.wrapper
        w.unwrapped.reset_time_outs = torch.tensor([True, False, True, True])
        w.unwrapped.reset_terminated = torch.tensor([False, True, False, False])
        w.schedule = {20: torch.tensor([1, 1, 0, 0]), 60: torch.tensor([0, 0, 1, 0]), 70: torch.tensor([1, 0, 0, 1])}
        w.max_episode_length = panel.max_episode_length = 80
        panel.tracker.err_xy_sum = torch.full((4,), 500.0)  # left over from before: the reset must forget it
        results.append(evaluate(ZERO_POLICY, panel, panel_seeds(4)))
        assert w.seeds == [2**31]  # reseeded with the panel's first seed, once
    fused, stepped = results
    # env 1 fell; env 0's second end is ignored (a loop of whole stretches may simulate more steps: no count changes)
    assert (fused.successes, fused.episodes, fused.failures) == (stepped.successes, stepped.episodes, None)
    assert (fused.successes, fused.episodes) == (3, 4)


def test_make_env_refuses_a_second_scene_in_one_process(monkeypatch) -> None:
    env = fake_env(4)
    monkeypatch.setattr(ils, "_SCENE", env)
    with pytest.raises(ConfigError, match="one simulation per process"):
        get_backend("isaaclab").make_env(2, 1, "cpu", FLAT)
    env.close()
    assert env.wrapper.closed and ils._SCENE is None


class FakeProcess:
    """Stands in for the panel process: records the requests and answers as the child does."""

    def __init__(self, n: int = 4) -> None:
        self.info = {"num_envs": n, "num_actions": 2, "max_episode_length": 80, "control_dt_s": 0.02, "physics": "N"}
        self.requests: list[tuple[str, Any]] = []

    def request(self, kind: str, payload: Any = None) -> Any:
        self.requests.append((kind, payload))
        n = self.info["num_envs"]
        return (
            (torch.ones(n, dtype=torch.bool).numpy(), torch.ones(n, dtype=torch.bool).numpy())
            if kind == "steps"
            else None
        )


def test_the_panel_env_sends_held_out_seeds_and_the_policy_once_per_pass() -> None:
    process = FakeProcess(4)
    panel = ile.PanelEnv(process)  # type: ignore[arg-type]
    assert (panel.num_envs, panel.max_episode_length, panel.device) == (4, 80, "cpu")
    with pytest.raises(ValueError, match="held-out seeds"):
        panel.reset_with_seeds([0, 1, 2, 3])
    with pytest.raises(RuntimeError, match="its own process"):
        panel.step(torch.zeros(4, 2))
    for _ in range(2):
        result = evaluate(ZERO_POLICY, panel, panel_seeds(4))
        assert (result.successes, result.episodes) == (4, 4)
    kinds = [kind for kind, _ in process.requests]
    assert kinds == ["reset", "steps", "reset", "steps"] and process.requests[0][1] == panel_seeds(4)
    panel.reset_with_seeds(panel_seeds(4))
    panel.policy_steps(ZERO_POLICY, 10)
    panel.policy_steps(ZERO_POLICY, 10)
    sent = [payload[0] for kind, payload in process.requests if kind == "steps"]
    assert sent[-2] is not None and sent[-1] is None  # the weights travel once per pass

    weights = MlpPolicy(torch.randn(3), torch.rand(3) + 0.5, 1e-2, ((torch.randn(5, 3), torch.randn(5)),), "tanh")
    again = ile.policy_from_arrays(ile.policy_arrays(weights), "cpu")
    obs = torch.randn(7, 3)
    assert torch.equal(again(obs), weights(obs))


def test_the_panel_process_relays_its_failure_in_one_line_and_ends(monkeypatch) -> None:
    """A real child process. Its scene cannot build (no Isaac Lab here, or no Isaac Sim for PhysX in the Isaac Lab
    env): the reason comes back in one line and the child is ended. A child that dies: its output's tail is quoted."""
    ended: list[int | None] = []
    close = ile.PanelProcess.close

    def recorded(self: ile.PanelProcess) -> None:
        close(self)
        ended.append(self.proc.returncode)

    monkeypatch.setattr(ile.PanelProcess, "close", recorded)
    spec = {"task": FLAT, "num_envs": 4, "device": "cpu", "knobs": {"physics_preset": "physx"}}
    with pytest.raises(RuntimeError, match=r"^held-out panel process, build: (MissingExtraError|ConfigError): "):
        ile.PanelProcess(("key",), spec)
    assert ended == [0]  # asked to close, it exited

    process = ile.PanelProcess.__new__(ile.PanelProcess)
    process.proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    process.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by process.close)
    process.log.write(b"Traceback (most recent call last):\nlast words\n")
    ours, theirs = socket.socketpair()
    process.conn = Connection(ours.detach())
    process.proc.wait()
    with pytest.raises(
        RuntimeError, match=r"reset: the held-out panel's process ended \(3\); its output ends: .*last words"
    ):
        process.request("reset", [2**31])
    theirs.close()
    process.close()


def test_episodes_start_at_random_lengths_once_as_rsl_rl_does() -> None:
    from sweep.trial.learner import _stock_chunk, random_episode_start

    env = SimpleNamespace(episode_length_buf=torch.zeros(512, dtype=torch.long), max_episode_length=50)
    random_episode_start(env)
    buf = env.episode_length_buf
    assert buf.min() >= 0 and buf.max() < 50 and len(buf.unique()) > 25

    calls: list[bool] = []
    runner = SimpleNamespace(
        env=env,
        alg=SimpleNamespace(update=lambda: {}),
        learn=lambda n, init_at_random_ep_len=False: calls.append(init_at_random_ep_len),
    )
    chunk = _stock_chunk(runner, PhaseClock(), random_start=True)
    chunk(2)
    chunk(2)
    assert calls == [True, False]  # the trial's chunks are one training run: one random start


def test_saved_configs_are_compared_leaf_by_leaf_except_what_drives_the_run() -> None:
    ours = {"seed": 1, "max_iterations": 300, "actor": {"obs_normalization": False, "hidden_dims": [128, 128]}}
    theirs = {"seed": 1, "max_iterations": 2, "actor": {"obs_normalization": False, "hidden_dims": [128, 128]}}
    assert ilpar.params_differences("agent", ours, theirs) == {}
    theirs["actor"] = {"obs_normalization": True, "hidden_dims": [128, 128], "extra": {}}
    assert ilpar.params_differences("agent", ours, theirs) == {
        "actor.extra": ("<absent>", {}),
        "actor.obs_normalization": (False, True),
    }
    differences = ilpar.params_differences("env", {"log_dir": None, "seed": 1}, {"log_dir": "/x", "seed": 2})
    assert differences == {"seed": (1, 2)}


def test_the_committed_gpu_pair_agrees_on_every_field() -> None:
    """The configs a GPU trial of the Go2 task saved and those Isaac Lab's trainer saved from its exported line
    (``benchmarks/isaaclab_fidelity.py pair``) are the same training: every leaf but the run's own."""
    pair = ROOT / "benchmarks" / "data" / "isaaclab_fidelity"
    for kind in ("agent", "env"):
        ours, theirs = (ilpar.read_params(pair / f"{side}_{kind}.yaml") for side in ("sweep", "isaaclab"))
        assert ilpar.params_differences(kind, ours, theirs) == {}
    agent = ilpar.read_params(pair / "sweep_agent.yaml")
    assert agent["algorithm"]["entropy_coef"] == 0.01  # the Go2 task's own, not sweep's MJX default
    assert agent["num_steps_per_env"] == 24 and agent["seed"] == 1
    assert ilpar.read_params(pair / "sweep_env.yaml")["scene"]["num_envs"] == 4096


def test_saved_params_read_back_with_their_tuples_and_slices(tmp_path) -> None:
    data = {"std_range": (1e-6, 1e6), "ids": slice(None, None, None), "nested": {"empty": {}, "list": [1, 2]}}
    ilpar.write_params(tmp_path / "params" / "agent.yaml", data)
    text = (tmp_path / "params" / "agent.yaml").read_text()
    assert "!!python/tuple" in text and "builtins.slice" in text  # as Isaac Lab's dump_yaml writes them
    assert ilpar.read_params(tmp_path / "params" / "agent.yaml") == data
    (tmp_path / "evil.yaml").write_text("x: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(yaml.YAMLError):
        ilpar.read_params(tmp_path / "evil.yaml")


# -- without Isaac Lab ------------------------------------------------------------------------------------------


def test_make_env_without_isaac_lab_names_the_install_step(monkeypatch) -> None:
    monkeypatch.setattr(ils, "_find_spec", lambda name: None)
    monkeypatch.setattr(ils, "_SCENE", None)
    with pytest.raises(MissingExtraError) as info:
        get_backend("isaaclab").make_env(64, 1, "cpu", FLAT)
    assert isinstance(info.value, SweepError)
    assert "pip install isaaclab==3.0.0" in str(info.value) and "Python 3.12" in str(info.value)
    assert not isaac_modules_loaded()
    assert get_backend("isaaclab").versions() == {"isaaclab": "not installed"}


def test_make_env_checks_profile_and_knobs_before_importing_anything(monkeypatch) -> None:
    monkeypatch.setattr(ils, "_SCENE", None)
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
    assert set(backend.knobs) == {
        "gpu_max_num_partitions",
        "physics_preset",
        "newton_cuda_graph",
        "asset_root",
        "env",
        "tasks_module",
    }
    assert checked(TrialConfig(backend="isaaclab", profile=FLAT, num_envs=4096)).profile == FLAT


# -- recommended.yaml's isaaclab section --------------------------------------------------------------------------


#: What Isaac Lab 3.0's trainer saved for the flat ANYmal-D task (params/agent.yaml of a real run): a task's agent
#: config as Isaac Lab's to_dict gives it, to stand in for one without Isaac Lab.
ISAAC_AGENT = ROOT / "benchmarks" / "data" / "isaaclab_h200" / "train_agent.yaml"


def recorded_trial(tmp_path, cfg: TrialConfig) -> Any:
    """A trial folder holding the agent config a trial of ``cfg`` recorded (the task's, with the trial's overrides)."""
    agent = ilpar.read_params(ISAAC_AGENT)
    fields, _ = ilc.flag_settings(perf.resolve(cfg.flags))
    agent.update(seed=cfg.seed, num_steps_per_env=cfg.num_steps_per_env, max_iterations=300)
    agent["algorithm"].update(num_mini_batches=cfg.num_mini_batches, num_learning_epochs=cfg.num_learning_epochs)
    for path, value in fields.items():
        head, _, leaf = path.partition(".")
        if leaf:
            agent[head][leaf] = value
        else:
            agent[head] = value
    ilpar.write_params(tmp_path / ilpar.PARAMS_DIR / "agent.yaml", agent)
    return tmp_path


def test_export_is_isaac_labs_agent_config_with_the_override_line_and_the_rest_apart(tmp_path) -> None:
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
    backend = get_backend("isaaclab")
    trained = backend.agent_config(cfg, perf.resolve(flags), recorded_trial(tmp_path, cfg))  # read back, no Isaac Lab
    assert trained["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO" and trained["check_for_nan"] is False
    out = backend.export_section(cfg, trained)
    section = out["isaaclab"]
    fields = {"torch_compile_mode": "default", "check_for_nan": False, "algorithm.use_mixed_precision": True}
    expected = ilc.overrides(8192, 12, 5, options, agent=fields, num_mini_batches=4, num_learning_epochs=5)
    assert section["task"] == FLAT and section["override"] == " ".join(expected)
    assert section["command"] == f"python -m isaaclab train --rl_library rsl_rl --task {FLAT} {section['override']}"
    agent = section["agent"]
    assert out["agent"] == agent  # recommended.yaml's agent section is Isaac Lab's config
    assert agent == ilpar.plain(ilpar.read_params(tmp_path / ilpar.PARAMS_DIR / "agent.yaml"))
    assert set(agent) <= ilc.RUNNER_FIELDS and set(agent["algorithm"]) <= ilc.ALGORITHM_FIELDS
    assert agent["actor"]["obs_normalization"] is False and agent["init_at_random_ep_len"] is True  # the task's
    assert agent["check_for_nan"] is False and agent["torch_compile_mode"] == "default"  # flags: Isaac Lab fields
    assert agent["algorithm"]["use_mixed_precision"] is True and agent["algorithm"]["class_name"] == "PPO"
    assert agent["num_steps_per_env"] == 12 and agent["seed"] == 5 and agent["algorithm"]["num_mini_batches"] == 4
    assert section["env"] == {"scene": {"num_envs": 8192}, "sim": {"physics": {"gpu_max_num_partitions": 16}}}
    extra = section["rsl_rl_only"]
    assert extra["algorithm.class_name"] == "sweep.perf.ppo:FastPPO" and "algorithm.perf_flags" in extra
    assert extra["perf_flags"]["fused_optimizer"] is True and "Isaac Lab's trainer" in extra["how"]
    assert not {"check_for_nan", "torch_compile_mode", "algorithm.use_mixed_precision"} & set(extra)
    assert yaml.safe_load(yaml.safe_dump(out)) == out


def test_export_without_isaac_only_knobs_sets_only_the_scene(tmp_path) -> None:
    cfg = TrialConfig(backend="isaaclab", profile=FLAT, num_envs=2048, num_steps_per_env=48)
    backend = get_backend("isaaclab")
    agent = backend.agent_config(cfg, perf.resolve({}), recorded_trial(tmp_path, cfg))
    section = backend.export_section(cfg, agent)["isaaclab"]
    assert section["env"] == {"scene": {"num_envs": 2048}} and section["physics_preset"] == "newton_mjwarp"
    assert "agent.check_for_nan" not in section["override"] and set(section["rsl_rl_only"]) == {"how", "perf_flags"}
    assert not isaac_modules_loaded()


# -- the search space -------------------------------------------------------------------------------------------


def test_the_anymal_space_validates_without_isaac_lab() -> None:
    cfg = validation.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    assert cfg.backend == "isaaclab" and cfg.profile == FLAT
    options = ilc.check_knobs(cfg.backend_options)
    assert options["physics_preset"] == "newton_mjwarp" and options["asset_root"] is None
    assert max(cfg.knobs.num_steps_per_env) * ils.CONTROL_DT_S <= cfg.constraints.max_update_period_s
    params = {**{name: values[0] for name, values in space.choices(cfg).items()}, **cfg.search.initial[0]}
    first = space.trial_config(params, cfg, cfg.profile, seed=1, cap_s=60.0)
    assert first.validate().backend_options == options
    assert not isaac_modules_loaded()


def test_sweep_run_stops_before_starting_anything_without_isaac_lab(monkeypatch) -> None:
    from sweep import run

    monkeypatch.setattr(ils, "_find_spec", lambda name: None)
    cfg = validation.validate(config.load("anymal_d_flat", {}, has_gpu=True))
    with pytest.raises(MissingExtraError, match=r"pip install isaaclab==3\.0\.0"):
        run.resolve_runtime(cfg, has_gpu=False)
    cfg = replace(cfg, workers=replace(cfg.workers, address="auto"))  # a cluster: its workers, not this driver, need it
    assert run.resolve_runtime(cfg, has_gpu=False)[0] == FLAT


# -- with Isaac Lab ---------------------------------------------------------------------------------------------


@pytest.mark.isaaclab
@needs_isaaclab
def test_the_fields_sweep_takes_for_isaac_labs_are_declared_by_its_config_classes() -> None:
    from dataclasses import fields

    from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg, RslRlPpoAlgorithmCfg

    assert {f.name for f in fields(RslRlOnPolicyRunnerCfg)} == ilc.RUNNER_FIELDS
    assert {f.name for f in fields(RslRlPpoAlgorithmCfg)} == ilc.ALGORITHM_FIELDS


@pytest.fixture(scope="module")
def asset_root(isaac_asset_root) -> str:
    """The session's asset root (tests/conftest.py): the ANYmal stand-in and the real Go2, set for this process."""
    return isaac_asset_root


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
    (line,) = [line for line in proc.stderr.splitlines() if "asset_root" in line]  # one, however many files
    missing = line.split("(missing: ")[1].split("); ")[0].split(", ")
    assert sorted(missing) == sorted(str(p) for p in (standin.ACTUATOR_NET, standin.GROUND, standin.ROBOT))
    assert "Traceback" not in proc.stderr and "worker(s)" not in proc.stdout  # stopped before Ray started


class ZeroActor(torch.nn.Module):
    """rsl-rl's plain MLP actor shape (48 observations -> 12 actions) with zero weights: stands still."""

    def __init__(self) -> None:
        super().__init__()
        self.obs_groups = ["policy"]
        self.obs_normalizer = torch.nn.Identity()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(48, 12))
        torch.nn.init.zeros_(self.mlp[0].weight)
        torch.nn.init.zeros_(self.mlp[0].bias)


@pytest.mark.isaaclab
@needs_isaaclab
@pytest.mark.slow
def test_the_task_trains_with_its_own_config_and_its_panel_never_touches_the_training_scene(asset_root) -> None:
    from sweep.trial.learner import build_learner

    backend = get_backend("isaaclab")
    knobs = {"asset_root": asset_root, "env": {"episode_length_s": 1.0}}
    backend.preflight(FLAT, knobs)  # every asset the task loads is under the stand-in root
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = backend.make_env(32, 1, device, FLAT, **knobs)
    unwrapped = env.wrapper.unwrapped
    resets: list[Any] = []
    reset = unwrapped.reset
    unwrapped.reset = lambda seed=None, **kw: (resets.append(seed), reset(seed=seed, **kw))[1]
    try:
        assert (
            env.physics == "NewtonCfg/NewtonMJWarpManager" and type(unwrapped.sim.cfg.physics).__name__ == "NewtonCfg"
        )
        assert env.get_observations()["policy"].shape == (32, 48) and env.num_actions == 12
        assert env.control_dt_s == pytest.approx(0.02) and env.max_episode_length == 50
        obs, rewards, dones, extras = env.step(torch.zeros(32, env.num_actions, device=env.device))
        assert obs["policy"].shape[0] == 32 and rewards.shape == (32,) and dones.shape == (32,)
        assert extras["success"].dtype == torch.bool and extras["time_outs"].shape == (32,)
        assert rewards.isfinite().all()
        assert 0 <= env.on_track_share(1) <= 1 and env.on_track_share(51) is None  # no episode runs past 50 steps

        # the task's own agent config, as Isaac Lab's trainer builds it, and its random episode start
        cfg = TrialConfig(backend="isaaclab", profile=FLAT, num_envs=32, num_steps_per_env=12, device=device)
        cfg.backend_options = knobs
        flags = perf.resolve({})
        train_cfg = backend.agent_config(cfg, flags)
        assert train_cfg["actor"]["obs_normalization"] is False and train_cfg["num_steps_per_env"] == 12
        assert train_cfg["init_at_random_ep_len"] is True and train_cfg["experiment_name"] == "anymal_d_flat"
        assert train_cfg["device"] == ils.agent_device(device) and train_cfg["seed"] == 1
        assert "stochastic" not in train_cfg["actor"]  # Isaac Lab's handle_deprecated_rsl_rl_cfg ran
        assert len(env.episode_length_buf.unique()) == 1  # every env started together
        trainer, _ = build_learner(cfg, env, device, flags, PhaseClock(), train_cfg=train_cfg)
        assert trainer(1) == 1
        assert len(env.episode_length_buf.unique()) > 5  # spread by the random start before the first rollout

        # the held-out panel: its own scene in its own process, reseeded with the panel's seeds
        before = {"buf": env.episode_length_buf.clone(), "obs": env.get_observations()["policy"].clone()}
        panel = backend.make_eval_env(16, 1, device, FLAT, **knobs)
        assert isinstance(panel, ile.PanelEnv) and panel.physics == env.physics and panel.num_envs == 16
        results = [evaluate(ZeroActor(), panel, panel_seeds(16)) for _ in range(2)]
        assert results[0].episodes == 16 and 0 <= results[0].successes <= 16
        assert results[0] == results[1]  # one panel: the same seeds, the same policy, the same verdict
        assert backend.make_eval_env(16, 1, device, FLAT, **knobs)._process is panel._process  # kept per worker
        assert resets == []  # the training scene was neither reseeded nor reset ...
        assert torch.equal(env.episode_length_buf, before["buf"])  # ... nor stepped
        assert torch.equal(env.get_observations()["policy"], before["obs"])
        assert trainer(1) == 1  # and training goes on where it stopped
    finally:
        env.close()
        ile._close_panel()


@pytest.mark.isaaclab
@needs_isaaclab
def test_a_contrib_task_runs_the_chosen_newton_preset_and_other_ids_are_one_line(asset_root) -> None:
    backend = get_backend("isaaclab")
    knobs = {"asset_root": asset_root, "env": {"episode_length_s": 1.0}}
    _, default_cfg, _ = ils.task_configs(CONTRIB_FLAT, [])
    assert "Physx" in type(default_cfg.sim.physics).__name__  # left alone, the contrib flat task runs PhysX
    backend.preflight(CONTRIB_FLAT, knobs)
    env = backend.make_env(8, 1, "cpu", CONTRIB_FLAT, **knobs)
    try:
        assert env.physics == "NewtonCfg/NewtonMJWarpManager"
        assert type(env.wrapper.unwrapped.sim.cfg.physics).__name__ == "NewtonCfg"
        assert env.step(torch.zeros(8, env.num_actions))[1].isfinite().all()
    finally:
        env.close()
    with pytest.raises(
        ConfigError,
        match=r"^profile=Isaac-Cartpole: the task has no velocity command \(base_velocity\), which the default success "
        r"rule reads; name its own rule: target.success_term=<termination term> \(its terms: time_out, ",
    ):
        backend.preflight("Isaac-Cartpole", knobs)
    with pytest.raises(ConfigError, match=r"^backend_options.physics_preset=newton_mjwarp: the task has Physx"):
        backend.preflight("IsaacContrib-Velocity-Flat-AnymalC-Direct", knobs)  # a PhysX-only task
    with pytest.raises(ConfigError, match=r"^profile=Isaac-Velocity-Flat-Nowhere: not a registered Isaac Lab task"):
        backend.preflight("Isaac-Velocity-Flat-Nowhere", knobs)


#: The real trial the next two tests read: a swept knob off the task's value (2 mini-batches, the task has 4) and a
#: perf flag that acts through a field of Isaac Lab's config (check_for_nan) as well as outside it (FastPPO).
TRIAL_ARGS = (
    f"profile={GO2}",
    "num_envs=16",
    "num_steps_per_env=12",
    "num_mini_batches=2",
    "flags.fast_finite_check=true",
    "eval_episodes=16",
    "eval_every_steps=24",
    "device=cpu",
    "target=1.0",
    "cap_s=60",
    *CPU_OPTIONS,
)


@pytest.fixture(scope="module")
def real_trial(asset_root, tmp_path_factory) -> tuple[Any, Any]:
    """(the finished process, its out folder) of one ``python -m sweep.trial`` on Isaac Lab."""
    out = tmp_path_factory.mktemp("isaac-trial")
    args = [*TRIAL_ARGS, f"backend_options.asset_root={asset_root}", f"out={out}"]
    return run_module("sweep.trial", "backend=isaaclab", *args, cwd=out, timeout=400), out


@pytest.mark.isaaclab
@needs_isaaclab
@pytest.mark.slow
def test_one_real_isaac_lab_trial_trains_evaluates_and_writes_its_ledger(real_trial) -> None:
    proc, out = real_trial
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = read_rows(out / "ledger.jsonl")
    checkpoints = [r for r in rows if r.state == "running"]
    assert checkpoints and checkpoints[0].iteration >= 2 and checkpoints[0].eval_episodes == 16
    assert all(0 <= r.success <= 1 and r.success_lo <= r.success <= r.success_hi for r in checkpoints)
    assert rows[-1].state in ("capped", "reached") and rows[-1].env_steps == rows[-1].iteration * 16 * 12
    assert rows[-1].phases_s.eval > 0 and rows[-1].billable_s >= sum(checkpoints[-1].phases_s.values()) - 1
    assert rows[-1].startup_parts_s["eval_env"] > 0  # the panel process's start, billed to the trial
    assert rows[-1].params["backend"] == "isaaclab" and rows[-1].seed == 1
    assert {p.name for p in (out / "trials" / "0000" / ilpar.PARAMS_DIR).iterdir()} == {"agent.yaml", "env.yaml"}


@pytest.mark.slow
@pytest.mark.isaaclab
@needs_isaaclab
def test_a_stock_trial_on_isaac_lab_trains_with_rsl_rls_own_runner(asset_root, tmp_path) -> None:
    # the baseline's mode: rsl-rl's OnPolicyRunner.learn, unchanged, which prints its own iterations
    kept = [a for a in TRIAL_ARGS if not a.startswith(("flags.", "cap_s="))]  # a stock run carries no training flag
    args = [*kept, "mode=stock", "cap_s=30", f"backend_options.asset_root={asset_root}", f"out={tmp_path}"]
    proc = run_module("sweep.trial", "backend=isaaclab", *args, cwd=tmp_path, timeout=400)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = read_rows(tmp_path / "ledger.jsonl")
    assert rows[-1].params["mode"] == "stock" and rows[-1].env_steps > 0
    assert rows[-1].phases_s.learn > 0 and "Learning iteration" in proc.stdout


@pytest.mark.isaaclab
@needs_isaaclab
@pytest.mark.slow
def test_the_exported_line_in_isaac_labs_trainer_saves_the_configs_the_trial_trained_with(
    real_trial, asset_root, tmp_path
) -> None:
    from sweep.cli import parse_overrides
    from sweep.report.export import implied_agent_config
    from sweep.trial.cli import config_from_overrides

    proc, out = real_trial
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    args = ["backend=isaaclab", *TRIAL_ARGS, f"backend_options.asset_root={asset_root}"]
    cfg, _ = config_from_overrides(parse_overrides(args))  # the trial's config, as python -m sweep.trial read it
    trial_dir = out / "trials" / "0000"
    section = get_backend("isaaclab").export_section(cfg, implied_agent_config(cfg, trial_dir))["isaaclab"]
    assert section["command"].startswith(f"python -m isaaclab train --rl_library rsl_rl --task {GO2} presets=")
    assert (
        "agent.check_for_nan=false" in section["override"]
        and "agent.algorithm.num_mini_batches=2" in section["override"]
    )
    # the line as a user runs it; on CPU the trainer also needs the env's and the agent's device
    command = [
        sys.executable,
        *section["command"].split()[1:],
        "--max_iterations",
        "1",
        "--device",
        "cpu",
        "agent.device=cpu",
    ]
    env = {**os.environ, ils.ASSET_ROOT_ENV: asset_root, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    (saved,) = (tmp_path / "logs" / "rsl_rl").glob("*/*/params")
    for kind in ("agent", "env"):
        ours = ilpar.read_params(trial_dir / ilpar.PARAMS_DIR / f"{kind}.yaml")
        theirs = ilpar.read_params(saved / f"{kind}.yaml")
        assert ilpar.params_differences(kind, ours, theirs) == {}, kind
    agent, task_env = ilpar.read_params(saved / "agent.yaml"), ilpar.read_params(saved / "env.yaml")
    assert agent["algorithm"]["num_mini_batches"] == 2 and agent["check_for_nan"] is False and agent["seed"] == 1
    assert agent["num_steps_per_env"] == 12 and agent["actor"]["obs_normalization"] is False
    assert agent["algorithm"]["entropy_coef"] == 0.01  # the Go2 task's own (sweep's own config has 0.005)
    assert task_env["scene"]["num_envs"] == 16 and task_env["episode_length_s"] == 1.0 and task_env["seed"] == 1


@pytest.mark.isaaclab
@needs_isaaclab
@pytest.mark.slow
def test_sweep_run_on_isaac_labs_go2_ends_with_a_report(asset_root, tmp_path) -> None:
    proc = run_module(
        "sweep.run",
        "space=go2_flat",
        f"backend_options.asset_root={asset_root}",
        "run_id=isaac",
        f"out={tmp_path}",
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "isaac"
    rows = read_rows(run_dir / "ledger.jsonl")
    ends = [r for r in rows if r.state != "running"]
    assert ends and all(r.params["backend"] == "isaaclab" for r in rows)
    assert any(r.success is not None for r in rows)  # at least one held-out evaluation ran
    assert (run_dir / "report.html").stat().st_size > 10_000
    assert "report:" in proc.stdout


@pytest.mark.isaaclab
@needs_isaaclab
def test_warps_first_launch_of_a_kernel_is_metered_and_its_later_launches_are_not(monkeypatch) -> None:
    import warp as wp

    from sweep.backends.isaaclab.scene import kernel_load_s

    monkeypatch.setattr(wp.config, "cache_kernels", False)  # compiled here, not read from an earlier run's cache
    add_one = _add_one_kernel()
    before = kernel_load_s()
    values = wp.zeros(4, dtype=float, device="cpu")
    wp.launch(add_one, dim=4, inputs=[values], device="cpu")
    first = kernel_load_s() - before
    wp.launch(add_one, dim=4, inputs=[values], device="cpu")
    assert first > 0.0 and kernel_load_s() - before == first
    assert values.numpy().tolist() == [2.0] * 4


def _add_one_kernel():
    import warp as wp

    @wp.kernel
    def add_one(values: wp.array(dtype=float)):
        i = wp.tid()
        values[i] = values[i] + 1.0

    return add_one


@pytest.mark.isaaclab
@needs_isaaclab
def test_the_kernel_meter_leaves_warps_launch_path_once_launches_load_nothing(monkeypatch) -> None:
    import warp as wp
    from warp._src.context import Module

    from sweep.backends.isaaclab import scene

    monkeypatch.setattr(scene, "_KERNEL_LOAD_S", None)  # a fresh meter
    monkeypatch.setattr(scene, "_QUIET_LAUNCHES", 3)
    monkeypatch.setattr(Module, "load", Module.load)  # put back after the test whatever the meter did
    scene.kernel_load_s()
    assert Module.load.__qualname__ == "kernel_load_s.<locals>.timed_load"
    add_one, values = _add_one_kernel(), wp.zeros(4, dtype=float, device="cpu")
    for _ in range(5):  # the first launch loads the module, the next three load nothing
        wp.launch(add_one, dim=4, inputs=[values], device="cpu")
    assert Module.load.__qualname__ == "Module.load"  # Warp's own (a meter from an earlier test left as well)
    assert values.numpy().tolist() == [5.0] * 4
