"""A starter search space for an Isaac Lab task, written from the task's registered configs (``sweep init``).

The baseline is the task as its project trains it: its own ``env.scene.num_envs`` and the agent config's
``num_steps_per_env`` and ``num_mini_batches``, with stock rsl-rl. The knobs go around them (a quarter to twice the
envs, half to twice the horizon); the target, the success rule, the budget and the CPU smoke block are written with
what each key means, for the user to check before the first run. Nothing here imports Isaac Lab: the backend hands
the task's facts and numbers in.
"""

from __future__ import annotations

import math
import time
from typing import Any

from sweep.backends.isaaclab.tasks import TaskFacts

#: The perf flags a starter space sweeps: those that keep rsl-rl's semantics and act on Isaac Lab's trials (the
#: MJX/JAX-only ones left out).
FLAGS = ("fused_optimizer", "deferred_episode_stats", "fast_finite_check", "lazy_loss_readout", "cuda_graph_update")


def _c(text: str, comment: str) -> str:
    """A line of the file with its comment, comments aligned."""
    return f"{text:<{max(26, len(text) + 2)}}# {comment}"  # YAML reads a '#' as a comment only after a space


def _flow(values: list[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _rule_lines(facts: TaskFacts, rule: dict[str, str]) -> list[str]:
    """The ``target`` section's rule keys, with what the task offers."""
    term, fn = rule.get("success_term"), rule.get("success_fn")
    if term or fn:
        return [
            _c(f"  success_term: {term or 'null'}", "an episode succeeds when it ends by this termination term")
            if term
            else "  success_term: null",
            _c(f"  success_fn: {fn}", "called after each step as function(env, ended) -> bool tensor")
            if fn
            else "  success_fn: null",
        ]
    if facts.velocity_command is not None:
        xy, yaw = facts.thresholds
        return [
            _c("  success_term: null", "both null: the default rule, tracking of the task's velocity command"),
            _c(
                "  success_fn: null",
                f"'{facts.velocity_command}': no fall, episode-mean errors < {xy:g} m/s (xy), < {yaw:g} rad/s (yaw)",
            ),
        ]
    if facts.workflow == "manager-based":
        return [
            _c("  success_term: null", "NAME ONE: the termination term that ends a successful episode; the task's: ")
            + ", ".join(facts.terminations),
            _c("  success_fn: null", "or module:function, called as function(env, ended) -> bool tensor"),
        ]
    return [
        _c("  success_term: null", "a direct-workflow task names no termination terms"),
        _c("  success_fn: null", "NAME ONE: module:function, called after each step as function(env, ended) -> bool"),
    ]


def starter_space(
    facts: TaskFacts,
    num_envs: int,
    horizon: int,
    mini_batches: int,
    modules: tuple[str, ...],
    rule: dict[str, str],
    entry_points: tuple[str, str],
) -> str:
    """The space file's text for the task of ``facts``, whose own config trains ``num_envs`` envs x ``horizon`` steps
    in ``mini_batches`` mini-batches; ``modules``: the modules that register it (``backend_options.tasks_module``);
    ``rule``: the success rule's keys given to ``sweep init``; ``entry_points``: its env and agent config entry
    points, named in the header."""
    dt = facts.control_dt_s
    envs = sorted({max(mini_batches, num_envs // 4), max(mini_batches, num_envs // 2), num_envs, num_envs * 2})
    horizons = sorted({max(1, horizon // 2), horizon, horizon * 2})
    period = max(1.0, math.ceil(max(horizons) * dt * 100) / 100)
    every = math.ceil(1.2 * facts.episode_steps / horizon) * horizon  # a full pass fits between two checks
    cpu_horizons = sorted({max(1, horizon // 2), horizon})
    cpu_every = 2 * max(cpu_horizons)
    stock = ", ".join(f"flags.{name}: false" for name in FLAGS)
    tasks_module = (
        _c(
            f"  tasks_module: {modules[0] if len(modules) == 1 else _flow(list(modules))}",
            "registers the task (not needed once your project is installed: its isaaclab.tasks entry point)",
        )
        if modules
        else _c("  tasks_module: null", "the module that registers your own tasks (my_project.tasks), if any")
    )
    lines = [
        f"# Search space for {facts.task}, written by `sweep init` on {time.strftime('%Y-%m-%d')} from the task's",
        f"# registered configs: env {entry_points[0]}",
        f"# agent {entry_points[1]}",
        f"# ({facts.workflow} workflow; {dt:g} s control period; {facts.episode_steps}-step episodes). Check it, then:",
        "#   python -m sweep.run space=<this file>          (any key can be changed on the command line)",
        "# Keys: sweep/config/schema.py; the Isaac Lab options and the success rule: docs/isaaclab.md.",
        "backend: isaaclab",
        f"profile: {facts.task}",
        "",
        _c("backend_options:", "fixed for the run; they reach every trial and the exported override line"),
        tasks_module,
        _c(
            "  physics_preset: newton_mjwarp",
            "Newton with the MuJoCo-Warp solver, no Isaac Sim (physx needs Isaac Sim)",
        ),
        _c("  asset_root: null", "a local copy of Isaac Lab's assets (ISAACSIM_ASSET_ROOT); null: downloaded"),
        _c("  env: {}", "task settings as env.<path>=value overrides, e.g. {episode_length_s: 10.0}"),
        "",
        _c("knobs:", "what the search chooses; one value: fixed"),
        _c(f"  num_envs: {_flow(envs)}", f"the task's own: {num_envs}"),
        _c(f"  num_steps_per_env: {_flow(horizons)}", f"the task's own: {horizon}; x {dt:g} s between PPO updates"),
        _c(f"  num_mini_batches: [{mini_batches}]", "the task's own"),
        _c("  flags:", "performance flags (docs/perf-flags.md); false is rsl-rl's own behaviour"),
        *(
            _c(f"    {name}: [false, true]", "CUDA only")
            if name == "cuda_graph_update"
            else f"    {name}: [false, true]"
            for name in FLAGS
        ),
        "",
        "target:",
        _c("  success: 0.9", "the held-out success a trial must reach: the share of held-out episodes (seeds no"),
        _c("", "training run uses) that meet the success rule below, with the deterministic policy"),
        *_rule_lines(facts, rule),
        _c("  eval_episodes: 256", "held-out episodes per pass: a scene of their own in its own process"),
        _c(f"  eval_every_steps: {every}", "control steps per env between passes (a full pass is one episode)"),
        _c("  eval_gate: 0", "0: a pass at every checkpoint"),
        "",
        "budget:",
        _c("  usd: 5.0", "the whole study: every trial, pruned and failed ones included"),
        _c("  trial_usd: 0.5", "one trial's cap: a trial that has not reached the target by then ends capped"),
        "  max_trials: 16",
        "",
        "price:",
        _c("  gpu: auto", "the device's row of sweep/prices.yaml; or h200 / h100 / a100 / l40s"),
        _c("  kind: on_demand", "or spot"),
        _c("  usd_per_hour: null", "your own price per device-hour, over the table"),
        "",
        "constraints:",
        _c(f"  max_update_period_s: {period:g}", "horizon x control period"),
        "  memory_share: 0.9",
        "",
        "search:",
        _c("  sampler: cost", "expected improvement per dollar"),
        _c("  intensify: 2", "a config that takes the lead runs a second seed before the search goes on"),
        _c("  initial:", "tried first: the task's own config, with stock rsl-rl"),
        f"    - {{num_envs: {num_envs}, num_steps_per_env: {horizon}, {stock}}}",
        "",
        _c("confirm:", "after the search: its best configs and the baseline on further seeds"),
        "  seeds: 3",
        "  top: 2",
        "  budget_share: 0.4",
        _c(f"  baseline: {{num_envs: {num_envs}, num_steps_per_env: {horizon}, flags: {{}}}}", "the task's own config"),
        "",
        _c("when_cpu:", "a smoke run on a machine without a GPU (Newton on a CPU is slow): few envs, short"),
        _c("  backend_options:", "episodes (success then means what the rule says of a 1 s episode)"),
        "    env: {episode_length_s: 1.0}",
        "  knobs:",
        "    num_envs: [16, 32]",
        f"    num_steps_per_env: {_flow(cpu_horizons)}",
        "    flags: {cuda_graph_update: [false]}",
        "  target:",
        "    eval_episodes: 16",
        f"    eval_every_steps: {cpu_every}",
        "  budget:",
        _c("    usd: 0.02", "about 12 minutes of a 2-vCPU instance (sweep/prices.yaml, cpu)"),
        "    trial_usd: 0.005",
        "    max_trials: 4",
        "  confirm:",
        _c("    seeds: 1", "a smoke run: no confirmation"),
        f"    baseline: {{num_envs: 16, num_steps_per_env: {horizon}}}",
        "  search:",
        "    intensify: 1",
        "    initial:",
        f"      - {{num_envs: 16, num_steps_per_env: {horizon}, {stock}}}",
    ]
    return "\n".join(lines) + "\n"
