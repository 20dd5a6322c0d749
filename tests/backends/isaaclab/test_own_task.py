"""A task of the user's own Isaac Lab project, used as a user uses it: ``tests/backends/isaaclab/own_project`` is
laid out as Isaac Lab 3.0's template generator lays an external project out, and registers two Go2 tasks, a
manager-based velocity task with its own reward weights (``Mydog-Walk-GO2``) and a direct-workflow ``DirectRLEnv``
that stands up from a crouch (``Mydog-Stand-GO2-Direct``), whose success is a function of the project (``stood_up``).

The tests without Isaac Lab check the keys and what they are checked against (the form of a rule, the task facts,
the export, the starter space); those marked ``isaaclab`` register the project's tasks in Isaac Lab's registry, refuse
every bad input in one line before any trial, sweep each task with ``sweep.run`` to a recommendation, and replay the
exported line in the project's own trainer script, which must save the configs the trial trained with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml

from sweep import config
from sweep import init as init_mod
from sweep import run as run_mod
from sweep.backends import get_backend
from sweep.backends.isaaclab import cfg as ilc
from sweep.backends.isaaclab import panel as ilp
from sweep.backends.isaaclab import params as ilpar
from sweep.backends.isaaclab import scene as ils
from sweep.backends.isaaclab.starter import starter_space
from sweep.backends.isaaclab.success import FnRule, TermRule
from sweep.backends.isaaclab.tasks import SuccessSpec, TaskFacts, load_success_fn, resolve_success
from sweep.cli import run_main
from sweep.config import validation
from sweep.contract import TrialConfig, success_rule
from sweep.errors import ConfigError
from sweep.ledger import read_rows
from sweep.planner import space
from sweep.trial.cli import checked
from tests.backends.isaaclab.test_backend import FakeWrapper, isaac_modules_loaded, needs_isaaclab
from tests.helpers import ROOT

PROJECT = ROOT / "tests" / "backends" / "isaaclab" / "own_project"
SRC = PROJECT / "src"
WALK = "Mydog-Walk-GO2"
STAND = "Mydog-Stand-GO2-Direct"
STOOD = "mydog.tasks.stand_direct.config.go2.env:stood_up"
MODULE = "mydog.tasks"

WALK_FACTS = TaskFacts(WALK, "manager-based", 0.02, 1000, "base_velocity", (0.5, 0.4), ("time_out", "base_contact"))
STAND_FACTS = TaskFacts(STAND, "direct", 0.02, 100, None, (0.5, 0.4), ())
CARTPOLE_FACTS = TaskFacts("Isaac-Cartpole", "manager-based", 0.02, 250, None, (0.5, 0.4), ("time_out", "cart_oob"))


# -- the keys, before any Isaac Lab ------------------------------------------------------------------------------


def test_a_success_rule_is_one_key_of_the_right_form_for_a_backend_that_takes_one() -> None:
    def line(overrides: dict[str, Any], space_name: str = "anymal_d_flat") -> str:
        with pytest.raises(ConfigError) as info:
            validation.validate(config.load(space_name, overrides, has_gpu=True), cli_keys=overrides)
        return str(info.value)

    assert line({"target.success_fn": "stood_up"}).startswith("command line: target.success_fn='stood_up': module:")
    assert line({"target.success_term": "goal reached"}).startswith("command line: target.success_term='goal reached'")
    both = {"target.success_term": "reached", "target.success_fn": STOOD}
    assert "success_term and success_fn: name one success rule, not both" in line(both)
    assert "backend mjx_locomotion judges success by its own rule" in line({"target.success_term": "t"}, "locomotion")
    cfg = validation.validate(config.load("anymal_d_flat", {"target.success_fn": STOOD}, has_gpu=True))
    assert success_rule(cfg.target) == {"success_fn": STOOD}
    params = {**{name: values[0] for name, values in space.choices(cfg).items()}}
    trial = space.trial_config(params, cfg, cfg.profile, seed=1, cap_s=60.0)  # what a worker runs
    assert (trial.success_fn, trial.success_term) == (STOOD, None) and success_rule(trial) == {"success_fn": STOOD}
    with pytest.raises(ConfigError, match=r"^success_fn='x': module:function"):
        TrialConfig(backend="isaaclab", profile=STAND, success_fn="x").validate()
    with pytest.raises(ConfigError, match=r"^success_term: backend mjx_locomotion judges success by its own rule"):
        checked(TrialConfig(success_term="fell"))
    assert not isaac_modules_loaded()


@pytest.mark.parametrize("modules", ["", "my project.tasks", ["mydog.tasks", 3], [], 7])
def test_tasks_module_is_a_module_name_or_a_list_of_them(modules: Any) -> None:
    assert ilc.check_knobs({"tasks_module": ["mydog.tasks", "other.tasks"]})
    with pytest.raises(ConfigError, match=r"^backend_options.tasks_module=.*the module that registers your tasks"):
        ilc.check_knobs({"tasks_module": modules})


def test_a_success_function_must_import_and_take_env_and_ended() -> None:
    assert load_success_fn("tests.backends.isaaclab.rules:breaks").__name__ == "breaks"
    cases = {
        "nowhere.rules:stood_up": "module nowhere.rules does not import (ModuleNotFoundError",
        "tests.backends.isaaclab.rules:missing": "tests.backends.isaaclab.rules has no 'missing'",
        "tests.backends.isaaclab.rules:NOT_A_FUNCTION": "'NOT_A_FUNCTION' is a int, not a function",
        "tests.backends.isaaclab.rules:one_argument": "it is one_argument(env: 'Any') -> 'Any'; a success function "
        "takes",
    }
    for spec, needle in cases.items():
        with pytest.raises(ConfigError) as info:
            load_success_fn(spec)
        assert str(info.value).startswith(f"target.success_fn={spec}: ") and needle in str(info.value), info.value


def test_the_rule_is_resolved_against_the_task() -> None:
    default = resolve_success(WALK_FACTS, {})
    assert (default.kind, default.name, default.key) == ("velocity", "base_velocity", "")
    assert resolve_success(WALK_FACTS, {"success_term": "base_contact"}) == SuccessSpec("term", "base_contact")
    with pytest.raises(ConfigError, match=rf"^target.success_term=reached: {WALK} has no termination term 'reached'; "):
        resolve_success(WALK_FACTS, {"success_term": "reached"})
    with pytest.raises(ConfigError, match=r"^target.success_term=time_out: .* a direct-workflow task .*success_fn"):
        resolve_success(STAND_FACTS, {"success_term": "time_out"})
    with pytest.raises(ConfigError, match=r"no velocity command .* target.success_fn=module:function \(a direct"):
        resolve_success(STAND_FACTS, {})
    with pytest.raises(ConfigError, match=r"target.success_term=<termination term> \(its terms: time_out, cart_oob\)"):
        resolve_success(CARTPOLE_FACTS, {})
    assert resolve_success(STAND_FACTS, {"success_fn": "tests.backends.isaaclab.rules:breaks"}).kind == "fn"


def test_a_terms_and_a_functions_rule_count_only_episodes_that_ended() -> None:
    ended = torch.tensor([True, True, False, False])
    fired = torch.tensor([True, False, True, False])
    env = SimpleNamespace(termination_manager=SimpleNamespace(get_term=lambda name: fired if name == "reached" else 0))
    assert TermRule("reached").update(env, ended.long()).tolist() == [True, False, False, False]
    env.flag = torch.tensor([True, True, True, False])
    assert FnRule(lambda env, ended: env.flag, "m:f").update(env, ended).tolist() == [True, True, False, False]
    with pytest.raises(RuntimeError, match=r"^target.success_fn=m:f raised ValueError: held_at_end is not recorded"):
        FnRule(load_success_fn("tests.backends.isaaclab.rules:breaks"), "m:f").update(env, ended)
    with pytest.raises(RuntimeError, match=r"^target.success_fn=m:f returned a torch.int64 tensor of shape \(\); it"):
        FnRule(load_success_fn("tests.backends.isaaclab.rules:counts"), "m:f").update(env, ended)
    # on the TaskEnv adapter: a function that raises ends the step, naming itself; a rule of its own gives no on-track
    spec = SuccessSpec("fn", "tests.backends.isaaclab.rules:breaks")
    adapter = ils.IsaacLabEnv(FakeWrapper(4), None, "NewtonCfg/NewtonMJWarpManager", success=spec)
    assert adapter.on_track_share(1) is None
    with pytest.raises(
        RuntimeError, match=r"^target.success_fn=tests.backends.isaaclab.rules:breaks raised ValueError"
    ):
        adapter.step(torch.zeros(4, 2))


class UntrainedPanel:
    """Stands in for the panel's scene: every episode succeeds when ``always`` (a rule that is always true)."""

    num_envs, device, max_episode_length = 8, "cpu", 50

    def __init__(self, always: bool) -> None:
        self.always, self.resets, self.steps = always, [], []

    def reset_with_seeds(self, seeds: list[int]) -> None:
        self.resets.append(seeds[0])

    def policy_steps(self, policy: Any, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.steps.append((policy, steps))
        done = torch.ones(self.num_envs, dtype=torch.bool)
        return done, done & self.always


def test_a_rule_the_untrained_policy_meets_is_refused_in_one_line() -> None:
    arrays = {"layers": [(torch.ones(16, 46).numpy(), torch.ones(16).numpy())], "eps": 0.0, "activation": "elu"}
    arrays["layers"].append((torch.ones(12, 16).numpy(), torch.ones(12).numpy()))
    policy = ilp.untrained_policy(arrays, "cpu")
    assert [tuple(w.shape) for w, _ in policy.layers] == [(16, 46), (12, 16)]
    assert all(w.abs().max() <= 1 / w.shape[1] ** 0.5 and w.std() > 0 for w, _ in policy.layers)  # drawn anew
    assert torch.equal(policy.layers[0][0], ilp.untrained_policy(arrays, "cpu").layers[0][0])  # from the panel's seed
    success = {"success_fn": STOOD, "target": 0.9}
    always = UntrainedPanel(always=True)
    line = ilp.untrained_verdict(always, arrays, success, [2**31 + i for i in range(8)])
    assert line == (
        f"target.success_fn={STOOD}: the untrained policy already meets it (8 of 8 held-out episodes succeed, "
        "target 0.9), so held-out success would not measure training; make the rule stricter"
    )
    assert always.resets == [2**31, 2**31] and always.steps[0][1] == 51  # a whole episode, then reset for the pass
    assert ilp.untrained_verdict(UntrainedPanel(always=False), arrays, success, [2**31] * 8) is None


def test_the_export_names_the_projects_trainer_script_and_the_rule(tmp_path) -> None:
    from tests.backends.isaaclab.test_backend import recorded_trial

    options = {"tasks_module": MODULE, "env": {"episode_length_s": 1.0}}
    cfg = TrialConfig(backend="isaaclab", profile=STAND, num_envs=16, success_fn=STOOD, backend_options=options)
    backend = get_backend("isaaclab")
    section = backend.export_section(cfg, backend.agent_config(cfg, {}, recorded_trial(tmp_path, cfg)))["isaaclab"]
    assert section["command"] == (
        f"python scripts/rsl_rl/train.py --task {STAND} presets=newton_mjwarp env.scene.num_envs=16 "
        "env.episode_length_s=1.0 agent.num_steps_per_env=24 agent.algorithm.num_mini_batches=4 "
        "agent.algorithm.num_learning_epochs=5 agent.seed=1"
    )
    assert section["tasks_module"] == [MODULE] and "imports mydog.tasks" in section["trainer"]
    assert section["success"] == {
        "rule": f"{STOOD}(env, ended) was true for the episode at its last step (target.success_fn)",
        "source": f"target.success_fn={STOOD}",
    }
    assert backend.success_text(cfg) == section["success"]["rule"]
    isaacs = TrialConfig(backend="isaaclab", profile="Isaac-Velocity-Flat-UnitreeGo2")
    plain = backend.export_section(isaacs, backend.agent_config(isaacs, {}, recorded_trial(tmp_path, isaacs)))
    assert plain["isaaclab"]["command"].startswith("python -m isaaclab train --rl_library rsl_rl --task Isaac-Velocity")
    assert "tasks_module" not in plain["isaaclab"] and "velocity command" in plain["isaaclab"]["success"]["source"]
    assert not isaac_modules_loaded()


@pytest.mark.parametrize("facts", [WALK_FACTS, STAND_FACTS], ids=["velocity", "direct"])
def test_the_starter_space_is_the_tasks_own_config_with_knobs_around_it(facts: TaskFacts) -> None:
    entries = ("mydog.tasks.x.env_cfg:EnvCfg", "mydog.tasks.x.agents.rsl_rl_ppo_cfg:PPORunnerCfg")
    text = starter_space(facts, 1024, 24, 4, (MODULE,), {}, entries)
    data = yaml.safe_load(text)
    for has_gpu in (True, False):
        cfg = validation.validate(config.compose(data, {}, "starter.yaml", has_gpu))
        assert cfg.profile == facts.task and cfg.backend_options["tasks_module"] == MODULE
        assert cfg.confirm.baseline.num_steps_per_env == 24 and cfg.search.initial[0]["num_steps_per_env"] == 24
    gpu = validation.validate(config.compose(data, {}, "starter.yaml", True))
    assert gpu.knobs.num_envs == [256, 512, 1024, 2048] and gpu.knobs.num_steps_per_env == [12, 24, 48]
    assert gpu.confirm.baseline.num_envs == 1024 and gpu.knobs.num_mini_batches == [4]
    assert gpu.target.eval_every_steps >= facts.episode_steps and success_rule(gpu.target) == {}
    rule_line = next(line for line in text.splitlines() if "success_fn:" in line)
    assert ("NAME ONE" in rule_line) == (facts.velocity_command is None)
    named = yaml.safe_load(starter_space(facts, 1024, 24, 4, (MODULE,), {"success_fn": STOOD}, entries))
    assert success_rule(validation.validate(config.compose(named, {}, "s.yaml", True)).target) == {"success_fn": STOOD}


def test_sweep_init_refuses_bad_input_in_one_line(tmp_path, capsys) -> None:
    (tmp_path / "taken.yaml").write_text("kept: true\n")
    cases = [
        (["tasks_module=mydog.tasks"], "command line: profile: the task id"),
        ([f"profile={STAND}", "colour=red"], "command line: unknown key 'colour'"),
        ([f"profile={STAND}", "success_fn=stood_up"], "command line: success_fn='stood_up': module:function"),
        ([f"profile={STAND}", "out=taken.yaml"], "command line: out=taken.yaml: the file exists"),
        (["profile=cpu"], "command line: profile: 'cpu' is not an Isaac Lab task id"),
    ]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for argv, needle in cases:
            with pytest.raises(SystemExit) as exit_info:
                run_main(init_mod.main, argv)
            err = capsys.readouterr().err.strip().splitlines()
            assert exit_info.value.code == 2 and len(err) == 1 and err[0].startswith(f"error: {needle}"), err
    finally:
        os.chdir(cwd)
    assert (tmp_path / "taken.yaml").read_text() == "kept: true\n"


# -- with Isaac Lab: the project's tasks, as a user runs them ---------------------------------------------------


def with_project(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``python args...`` with the project importable (as ``pip install -e`` of it would make it), output captured."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(SRC)))}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def reject(argv: list[str], capsys) -> str:
    """The one ``error:`` line of ``sweep.run`` refusing ``argv`` (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        run_main(run_mod.main, argv)
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]  # Isaac Lab's import may warn on stderr before
    assert exit_info.value.code == 2 and len(errors) == 1 and err[-1] == errors[0], err
    return errors[0].removeprefix("error: ")


@pytest.mark.isaaclab
@needs_isaaclab
def test_the_projects_tasks_register_and_bad_input_is_one_line_before_any_trial(
    isaac_asset_root, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.syspath_prepend(str(SRC))  # the project, importable as an installed one is
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        run_main(init_mod.main, [f"profile={STAND}", f"tasks_module={MODULE}", "out=stand.yaml"])
    assert done.value.code == 0 and "wrote stand.yaml" in capsys.readouterr().out
    base = ["space=stand.yaml", f"out={tmp_path / 'reports'}", f"backend_options.asset_root={isaac_asset_root}"]
    registered = f"mydog.tasks: {STAND}, {WALK}"
    cases = {
        "profile=Mydog-Run-GO2": f"profile=Mydog-Run-GO2: not a registered task; backend_options.tasks_module "
        f"registered {registered}",
        "backend_options.tasks_module=mydog.nowhere": "backend_options.tasks_module=mydog.nowhere: does not import "
        "(ModuleNotFoundError: No module named 'mydog.nowhere')",
        "target.success_fn=tests.backends.isaaclab.rules:one_argument": "target.success_fn="
        "tests.backends.isaaclab.rules:one_argument: it is one_argument(env: 'Any')",
        "target.success_fn=mydog.rules:stood_up": "target.success_fn=mydog.rules:stood_up: module mydog.rules does "
        "not import",
        "target.success_term=time_out": f"target.success_term=time_out: {STAND} is a direct-workflow task",
        f"profile={WALK} target.success_term=reached": f"target.success_term=reached: {WALK} has no termination "
        "term 'reached'; its terms: time_out, base_contact",
        "": f"profile={STAND}: the task has no velocity command (base_velocity), which the default success rule "
        "reads; name its own rule: target.success_fn=module:function (a direct-workflow task)",
    }
    for extra, needle in cases.items():
        assert reject([*base, *extra.split()], capsys).startswith(needle), extra
    assert not (tmp_path / "reports").exists()  # nothing ran, nothing was written
    # the task's own control period, read from its config (here halved by an override of its decimation)
    backend = get_backend("isaaclab")
    backend.preflight(STAND, {"tasks_module": MODULE, "env": {"decimation": 2}}, {"success_fn": STOOD})
    assert backend.control_dt_s(STAND) == pytest.approx(0.01)
    backend.preflight(WALK, {"tasks_module": MODULE}, {})  # a velocity task: the default rule
    assert backend.control_dt_s(WALK) == pytest.approx(0.02)


def sweep_and_replay(task: str, rule: list[str], target: float, root: str, tmp_path: Path) -> dict[str, Any]:
    """``sweep init`` for ``task``, a tiny ``sweep.run`` of the space it wrote, then the exported line through the
    project's trainer script; returns recommended.yaml after checking that the trainer saved the trial's configs."""
    made = with_project("-m", "sweep.init", f"profile={task}", f"tasks_module={MODULE}", cwd=tmp_path, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    (spec,) = tmp_path.glob("*.yaml")
    small = [f"target.success={target}", "budget.usd=0.02", "budget.trial_usd=0.0075", "budget.max_trials=2"]
    args = [f"space={spec.name}", f"backend_options.asset_root={root}", "run_id=own", f"out={tmp_path}"]
    proc = with_project("-m", "sweep.run", *args, *small, *rule, cwd=tmp_path, timeout=1200)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run_dir = tmp_path / "own"
    rows = read_rows(run_dir / "ledger.jsonl")
    assert all(r.params["profile"] == task for r in rows) and any(r.state == "reached" for r in rows)
    doc = yaml.safe_load((run_dir / "recommended.yaml").read_text())
    section, trial = doc["isaaclab"], doc["evidence"]["trial"]
    assert section["command"].startswith(f"python scripts/rsl_rl/train.py --task {task} presets=newton_mjwarp ")
    assert doc["task"]["success_rule"] == section["success"]["rule"]
    # the exported line as the user runs it, in the project (on CPU the trainer also needs both devices)
    command = [*section["command"].split()[1:], "--max_iterations", "1", "--device", "cpu", "agent.device=cpu"]
    project = tmp_path / "project"  # the project's trainer, run from a copy of its root: its logs/ land here
    project.mkdir()
    (project / "scripts").symlink_to(PROJECT / "scripts")
    os.environ[ils.ASSET_ROOT_ENV] = root  # as the recommendation's asset_root says (this process set it already)
    replay = with_project(*command, cwd=project, timeout=600)
    assert replay.returncode == 0, (replay.stdout + replay.stderr)[-3000:]
    (saved,) = (project / "logs" / "rsl_rl").glob("*/*/params")
    ours = run_dir / "trials" / f"{trial:04d}" / ilpar.PARAMS_DIR
    for kind in ("agent", "env"):
        theirs = ilpar.read_params(saved / f"{kind}.yaml")
        assert ilpar.params_differences(kind, ilpar.read_params(ours / f"{kind}.yaml"), theirs) == {}, kind
    return doc


@pytest.mark.isaaclab
@pytest.mark.slow
@needs_isaaclab
def test_a_sweep_of_the_projects_velocity_task_recommends_and_its_line_replays(isaac_asset_root, tmp_path) -> None:
    # a velocity task cannot learn to walk in a CPU minute: its target is the share of its 16-episode panel that the
    # first checkpoint tracks (1 of 16), so this sweep tests the plumbing, the stand task's tests the learning
    doc = sweep_and_replay(WALK, [], 0.05, isaac_asset_root, tmp_path)
    assert doc["isaaclab"]["success"]["source"].startswith("the default: the task's velocity command")
    agent = doc["agent"]
    assert agent["experiment_name"] == "mydog_walk" and agent["algorithm"]["entropy_coef"] == 0.005  # the project's


@pytest.mark.isaaclab
@pytest.mark.slow
@needs_isaaclab
def test_a_sweep_of_the_projects_direct_task_judged_by_its_function_recommends_and_replays(
    isaac_asset_root, tmp_path
) -> None:
    doc = sweep_and_replay(STAND, [f"target.success_fn={STOOD}"], 0.75, isaac_asset_root, tmp_path)
    assert doc["isaaclab"]["success"] == {
        "rule": f"{STOOD}(env, ended) was true for the episode at its last step (target.success_fn)",
        "source": f"target.success_fn={STOOD}",
    }
    assert doc["trial"]["success_fn"] == STOOD and doc["agent"]["experiment_name"] == "mydog_stand"
    recorded = yaml.safe_load((tmp_path / "own" / "config.yaml").read_text())
    assert recorded["target"]["success_fn"] == STOOD and recorded["success_rule"] == doc["task"]["success_rule"]


#: One real trial of the stand task on CPU: 16 envs, 1 s episodes, a held-out pass every 2 iterations.
STAND_TRIAL = (
    "backend=isaaclab",
    f"profile={STAND}",
    "num_envs=16",
    "num_steps_per_env=24",
    "eval_episodes=16",
    "eval_every_steps=48",
    "device=cpu",
    "target=0.75",
    "cap_s=120",
    f"backend_options.tasks_module={MODULE}",
    "backend_options.env.episode_length_s=1.0",
)


@pytest.mark.isaaclab
@pytest.mark.slow
@needs_isaaclab
@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        # the crouch the task starts from is already above this height: the rule is met without training
        (
            [f"success_fn={STOOD}", "backend_options.env.stand_height=0.05"],
            f"ConfigError: target.success_fn={STOOD}: the untrained policy already meets it (16 of 16 held-out "
            "episodes succeed, target 0.75)",
        ),
        (
            ["success_fn=tests.backends.isaaclab.rules:breaks"],
            "target.success_fn=tests.backends.isaaclab.rules:breaks raised ValueError",
        ),
    ],
    ids=["always-true-rule", "function-raises"],
)
def test_a_trial_whose_rule_cannot_measure_training_or_raises_ends_failed_naming_it(
    extra: list[str], reason: str, isaac_asset_root, tmp_path
) -> None:
    args = [*STAND_TRIAL, *extra, f"backend_options.asset_root={isaac_asset_root}", f"out={tmp_path}"]
    proc = with_project("-m", "sweep.trial", *args, cwd=tmp_path, timeout=600)
    rows = read_rows(tmp_path / "ledger.jsonl")
    assert rows and rows[-1].state == "failed", (proc.stdout + proc.stderr)[-3000:]
    assert reason in rows[-1].reason, rows[-1].reason
    assert not any(r.state == "running" and r.success is not None for r in rows)  # no pass was counted


@pytest.mark.isaaclab
@needs_isaaclab
def test_an_installed_project_registers_its_tasks_through_its_entry_point(tmp_path) -> None:
    # what `pip install` of the project leaves for importlib.metadata: its distribution and its isaaclab.tasks entry
    # point (tests/backends/isaaclab/own_project/pyproject.toml), and the package on the path
    dist = tmp_path / "mydog-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mydog\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[isaaclab.tasks]\nmydog = mydog.tasks\n")
    check = (
        "from sweep.backends import get_backend; "
        f"get_backend('isaaclab').preflight('{WALK}', {{}}, {{}}); print('registered')"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(SRC), str(tmp_path)))}
    proc = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0 and "registered" in proc.stdout, proc.stderr[-3000:]  # no tasks_module needed
    cfg = TrialConfig(backend="isaaclab", profile=WALK)
    assert (
        get_backend("isaaclab")
        .export_section(cfg, {})["isaaclab"]["command"]
        .startswith(
            f"python -m isaaclab train --rl_library rsl_rl --task {WALK} "  # Isaac Lab's trainer finds it the same way
        )
    )


@pytest.mark.isaaclab
@needs_isaaclab
def test_a_termination_term_judges_the_episodes_of_a_real_manager_based_task(isaac_asset_root, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(SRC))
    knobs = {"tasks_module": MODULE, "env": {"episode_length_s": 0.5}, "asset_root": isaac_asset_root}
    env = get_backend("isaaclab").make_env(8, 1, "cpu", WALK, success={"success_term": "time_out"}, **knobs)
    try:
        terms = env.wrapper.unwrapped.termination_manager
        assert env.success == SuccessSpec("term", "time_out") and env.max_episode_length == 25
        judged = torch.zeros(8, dtype=torch.bool)
        with torch.inference_mode():
            for _ in range(env.max_episode_length):
                _, _, dones, extras = env.step(torch.zeros(8, env.num_actions))
                # read after step returns, through the reset: success is exactly "ended by the time-out term"
                assert torch.equal(extras["success"], dones.bool() & terms.get_term("time_out"))
                judged |= extras["success"]
        assert judged.any()  # the episodes that lasted 0.5 s ended by time-out: successes
    finally:
        env.close()
