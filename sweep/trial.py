"""One trial: build the envs and rsl-rl PPO, train with phase timers, evaluate on held-out seeds, stop.

Reads top to bottom: :func:`run_trial` builds, compiles, then loops rollout -> learn -> log, and
every ``eval_every`` iterations evaluates and checkpoints, hands a ledger row to ``sink`` and obeys
its answer. It ends ``reached`` (held-out success >= target), ``capped`` (per-trial cap or stop
asked), ``pruned`` (the planner said so) or ``failed`` (with the reason). ``mode='stock'`` trains
with rsl-rl's own ``OnPolicyRunner.learn`` unchanged, as the baseline.

CLI: ``python -m sweep.trial num_envs=256 num_steps_per_env=24 profile=cpu price.gpu=h200``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from sweep import perf
from sweep.backends import get_backend
from sweep.errors import ConfigError, TrialFailed
from sweep.evaluation import DEFAULT_EPISODES, check_training_seed, evaluate, panel_seeds
from sweep.ledger import PhaseClock, Row

#: What a sink may answer after each checkpoint row.
CONTINUE, PRUNE, STOP = "continue", "prune", "stop"


@dataclass
class TrialConfig:
    """Everything one trial needs; every field can be set on the command line as ``key=value``."""

    backend: str = "mjx_locomotion"
    """Simulator backend (registry name)."""
    profile: str = "cpu"
    """Task difficulty profile of the backend ('cpu' or 'gpu' for mjx_locomotion)."""
    num_envs: int = 256
    """Parallel environments in the training env."""
    num_steps_per_env: int = 24
    """Rollout horizon: control steps per env per PPO iteration."""
    num_mini_batches: int = 4
    """PPO mini-batches per epoch."""
    num_learning_epochs: int = 5
    """PPO epochs per iteration."""
    seed: int = 1
    """Training seed, in [0, 2**31); held-out seeds are above that range."""
    target: float = 0.9
    """Held-out success rate that ends the trial as 'reached'."""
    eval_episodes: int = DEFAULT_EPISODES
    """Episodes in the held-out panel (one env each)."""
    eval_every_steps: int = 240
    """Control steps per env between held-out evaluations (rounded to whole iterations)."""
    cap_s: float = 600.0
    """Per-trial cap in billable seconds; the trial ends 'capped' past it."""
    mode: str = "sweep"
    """'sweep' (this runner, perf flags apply) or 'stock' (rsl-rl OnPolicyRunner.learn unchanged)."""
    device: str = "auto"
    """'auto' (the GPU when there is one), 'cpu', 'cuda' or 'cuda:N'."""
    flags: dict[str, Any] = field(default_factory=dict)
    """Performance flags by name (see sweep.perf); missing flags take their defaults."""
    save_checkpoints: bool = True
    """Write the latest model to the trial folder at every checkpoint."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. the recorded table of the replay backend)."""

    @property
    def eval_every(self) -> int:
        """Iterations between evaluations."""
        return max(1, round(self.eval_every_steps / self.num_steps_per_env))

    def validate(self) -> TrialConfig:
        """Reject bad values before anything is built (errors name the key)."""
        for key in ("num_envs", "num_steps_per_env", "num_mini_batches", "num_learning_epochs", "eval_episodes"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{key}: must be a positive integer (got {value!r})")
        for key in ("eval_every_steps", "cap_s"):
            if not isinstance(getattr(self, key), (int, float)) or getattr(self, key) <= 0:
                raise ConfigError(f"{key}: must be > 0 (got {getattr(self, key)!r})")
        if not 0 < self.target <= 1:
            raise ConfigError(f"target: must be in (0, 1] (got {self.target!r})")
        if self.mode not in ("sweep", "stock"):
            raise ConfigError(f"mode: must be 'sweep' or 'stock' (got {self.mode!r})")
        if self.num_envs * self.num_steps_per_env < self.num_mini_batches:
            raise ConfigError("num_mini_batches: more mini-batches than samples per iteration")
        check_training_seed(self.seed)
        backend = get_backend(self.backend)
        if self.profile not in backend.profiles():
            raise ConfigError(f"profile: unknown profile '{self.profile}'; valid: {', '.join(backend.profiles())}")
        perf.resolve(self.flags)
        return self


def agent_config(cfg: TrialConfig) -> dict[str, Any]:
    """The rsl-rl 5.5 runner/agent config this trial trains with (also what the exported YAML shows)."""
    return {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "check_for_nan": True,
        "logger": "tensorboard",
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": cfg.num_learning_epochs,
            "num_mini_batches": cfg.num_mini_batches,
            "clip_param": 0.2,
            "gamma": 0.99,
            "lam": 0.95,
            "value_loss_coef": 1.0,
            "entropy_coef": 0.005,
            "learning_rate": 1e-3,
            "max_grad_norm": 1.0,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "use_clipped_value_loss": True,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [128, 128, 128],
            "activation": "elu",
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": [128, 128, 128],
            "activation": "elu",
            "obs_normalization": True,
        },
    }


def describe_device(device: str) -> str:
    """'cpu', or the GPU's name for a CUDA device (what the ledger records)."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device}: torch sees no GPU; use device=cpu or device=auto")
    return device


class PolicyTimer:
    """Accumulates time spent in torch (policy inference, storage) inside the rollout, without syncing.

    On a GPU it records CUDA events and reads them once, at the phase boundary.
    """

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.pairs: list[tuple[Any, Any]] = []
        self.cpu_s = 0.0
        self._t0: Any = None

    def start(self) -> None:
        if self.cuda:
            self._t0 = torch.cuda.Event(enable_timing=True)
            self._t0.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pairs.append((self._t0, end))
        else:
            self.cpu_s += time.perf_counter() - self._t0

    def take(self) -> float:
        """Seconds accumulated since the last take (call after a device sync)."""
        seconds = self.cpu_s + sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0
        self.pairs, self.cpu_s = [], 0.0
        return seconds


def peak_memory_gib(device: str, env: Any) -> tuple[float | None, float | None]:
    """(peak device memory used by torch + the simulator, device capacity), GiB; (None, None) on CPU."""
    if not device.startswith("cuda"):
        return None, None
    used = torch.cuda.max_memory_allocated(device)
    stats = getattr(env, "memory_stats", lambda: {})() or {}
    used += stats.get("peak_bytes_in_use", 0)
    return used / 2**30, torch.cuda.get_device_properties(device).total_memory / 2**30


def run_trial(
    cfg: TrialConfig,
    sink: Callable[[Row], str],
    *,
    run_id: str = "trial",
    trial: int = 0,
    price_usd_per_hour: float = 0.0,
    price_label: str = "",
    out_dir: str | Path | None = None,
) -> Row:
    """Run one trial to its end, sending a ledger row to ``sink`` per checkpoint and one at the end."""
    clock = PhaseClock()
    params = trial_params(cfg)
    state = {"it": 0, "env_steps": 0, "success": None, "ci": (None, None), "skipped": 0, "ret": None}
    device = "cpu"
    env = None

    def row(state_name: str, reason: str = "") -> Row:
        billable, phases = clock.snapshot()
        peak, cap = peak_memory_gib(device, env) if env is not None else (None, None)
        return Row(
            run_id=run_id,
            trial=trial,
            state=state_name,
            params=params,
            iteration=state["it"],
            env_steps=state["env_steps"],
            billable_s=billable,
            phases_s=phases,
            price_usd_per_hour=price_usd_per_hour,
            price_label=price_label,
            success=state["success"],
            success_lo=state["ci"][0],
            success_hi=state["ci"][1],
            eval_episodes=cfg.eval_episodes if state["success"] is not None else 0,
            peak_gpu_gib=peak,
            gpu_capacity_gib=cap,
            skipped_updates=state["skipped"],
            mean_return=state["ret"],
            reason=reason,
            device=describe_device(device),
            seed=cfg.seed,
        )

    backend = get_backend(cfg.backend)
    if hasattr(backend, "serve_trial"):  # a backend that serves recorded trials builds nothing
        return backend.serve_trial(
            cfg,
            sink,
            run_id=run_id,
            trial=trial,
            price_usd_per_hour=price_usd_per_hour,
            price_label=price_label,
            params=params,
        )
    try:
        flags = perf.resolve(cfg.flags)
        with clock.phase("startup"):
            device = resolve_device(cfg.device)
            torch.manual_seed(cfg.seed)
            knobs = perf.backend_knobs(flags, backend.knobs)
            knobs.update((k, v) for k, v in cfg.backend_options.items() if k in backend.knobs)
            env = backend.make_env(cfg.num_envs, cfg.seed, device, cfg.profile, **knobs)
            eval_env = backend.make_env(cfg.eval_episodes, cfg.seed, device, cfg.profile, **knobs)
            seeds = panel_seeds(cfg.eval_episodes)
            trainer, alg = build_learner(cfg, env, device, flags, clock, out_dir, trial)
        clock.sync = _syncer(device, env)
        with clock.phase("compile"):
            env.warm_up()
            eval_env.warm_up()
            perf.warm_up(alg, env, flags)
        steps_per_iter = cfg.num_envs * cfg.num_steps_per_env
        while True:
            n_iters = cfg.eval_every
            trainer(n_iters)
            state["it"] += n_iters
            state["env_steps"] += n_iters * steps_per_iter
            state["skipped"] = perf.skipped_updates(alg)
            state["ret"] = getattr(trainer, "take_mean_return", lambda: None)()
            if clock.billable_s() >= cfg.cap_s:
                final = row("capped", f"per-trial cap of {cfg.cap_s:g} billable seconds reached")
                sink(final)
                return final
            with clock.phase("eval"):
                result = evaluate(alg.get_policy(), eval_env, seeds)
            state["success"], state["ci"] = result.rate, result.interval
            with clock.phase("checkpoint"):
                if cfg.save_checkpoints and out_dir is not None:
                    path = Path(out_dir) / "trials" / f"{trial:04d}" / "checkpoint.pt"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    torch.save(alg.save(), path)
            answer = sink(row("running"))
            if result.rate >= cfg.target:
                final = row("reached", f"held-out success {result.rate:.3f} >= target {cfg.target:g}")
            elif answer == PRUNE:
                final = row("pruned", "stopped by the planner: cannot beat the best cost to target")
            elif answer == STOP:
                final = row("capped", "stopped by the planner: study budget spent")
            else:
                continue
            sink(final)
            return final
    except Exception as exc:  # any failure ends the trial, billed, with its reason
        final = row("failed", failure_reason(exc))
        sink(final)
        return final
    finally:
        for e in (env, locals().get("eval_env")):
            if e is not None:
                e.close()


def build_learner(
    cfg: TrialConfig,
    env: Any,
    device: str,
    flags: dict[str, Any],
    clock: PhaseClock,
    out_dir: str | Path | None = None,
    trial: int = 0,
) -> tuple[Callable[[int], None], Any]:
    """(train ``n`` iterations callable, PPO algorithm) for ``cfg.mode``; seeds torch with ``cfg.seed``."""
    from rsl_rl.algorithms import PPO

    torch.manual_seed(cfg.seed)
    train_cfg = agent_config(cfg)
    perf.apply_to_agent_config(train_cfg, flags)
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints the model structure
        if cfg.mode == "stock":
            runner, alg = _stock_runner(env, train_cfg, device, out_dir, trial)
        else:
            alg_cfg = {**copy.deepcopy(train_cfg), "multi_gpu": None}
            alg = PPO.construct_algorithm(env.get_observations(), env, alg_cfg, device)
    perf.apply_to_algorithm(alg, flags)
    if cfg.mode == "stock":
        return _stock_chunk(runner, clock), alg
    return _SweepLoop(alg, env, cfg, flags, clock, device), alg


def failure_reason(exc: BaseException) -> str:
    """One line saying why a trial failed."""
    text = str(exc).lower()
    if isinstance(exc, torch.cuda.OutOfMemoryError) or any(
        k in text for k in ("out of memory", "not enough memory", "resource_exhausted")
    ):
        return "out of device memory: " + str(exc).splitlines()[0][:200]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def trial_params(cfg: TrialConfig) -> dict[str, Any]:
    """The knobs that identify a trial's config in the ledger (flags resolved to their values)."""
    return {
        "backend": cfg.backend,
        "profile": cfg.profile,
        "num_envs": cfg.num_envs,
        "num_steps_per_env": cfg.num_steps_per_env,
        "num_mini_batches": cfg.num_mini_batches,
        "num_learning_epochs": cfg.num_learning_epochs,
        "mode": cfg.mode,
        **{f"flag.{k}": v for k, v in perf.resolve(cfg.flags).items()},
    }


def _syncer(device: str, env: Any) -> Callable[[], None]:
    def sync() -> None:
        env.synchronize()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    return sync


class _SweepLoop:
    """This runner's training iterations: rollout (sim + policy), learn, log; flags decide the details."""

    def __init__(self, alg: Any, env: Any, cfg: TrialConfig, flags: dict, clock: PhaseClock, device: str) -> None:
        self.alg, self.env, self.cfg, self.flags, self.clock = alg, env, cfg, flags, clock
        self.timer = PolicyTimer(device)
        self.stats = perf.EpisodeStats(env.num_envs, device, deferred=bool(flags["deferred_episode_stats"]))
        self.obs = env.get_observations()
        self.iteration = 0
        self.last_losses: dict[str, float] = {}
        alg.train_mode()

    def __call__(self, n_iters: int) -> None:
        alg, env, clock = self.alg, self.env, self.clock
        for _ in range(n_iters):
            with clock.phase("sim"), torch.inference_mode():
                obs = self.obs
                for _ in range(self.cfg.num_steps_per_env):
                    self.timer.start()
                    actions = alg.act(obs)
                    self.timer.stop()
                    obs, rewards, dones, extras = env.step(actions)
                    self.timer.start()
                    if not self.flags["fast_finite_check"]:  # rsl-rl check_for_nan: a sync per step
                        perf.check_nan(obs, rewards, dones)
                    alg.process_env_step(obs, rewards, dones, extras)
                    self.stats.update(rewards, dones)
                    self.timer.stop()
                self.obs = obs
            policy_s = self.timer.take()
            clock.add("sim", -policy_s)
            clock.add("policy", policy_s)
            with clock.phase("learn"):
                with torch.inference_mode():
                    alg.compute_returns(self.obs)
                losses = alg.update()
            self.iteration += 1
            with clock.phase("log"):
                if perf.should_log(self.flags, self.iteration):
                    self.last_losses = {k: float(v) for k, v in losses.items()}
                    # With the fast finite check a non-finite step was skipped (and counted), not fatal.
                    finite = all(math.isfinite(v) for v in self.last_losses.values())
                    if not finite and not self.flags["fast_finite_check"]:
                        raise TrialFailed(f"diverged: non-finite PPO loss at iteration {self.iteration} ({losses})")

    def take_mean_return(self) -> float | None:
        return self.stats.take_mean()


def _stock_runner(env: Any, train_cfg: dict, device: str, out_dir: str | Path | None, trial: int) -> tuple[Any, Any]:
    """rsl-rl's OnPolicyRunner, unchanged, logging to TensorBoard as users run it."""
    import tempfile

    from rsl_rl.runners import OnPolicyRunner

    base = Path(out_dir) / "trials" / f"{trial:04d}" if out_dir is not None else Path(tempfile.mkdtemp())
    runner = OnPolicyRunner(env, copy.deepcopy(train_cfg), log_dir=str(base / "tensorboard"), device=device)
    return runner, runner.alg


def _stock_chunk(runner: Any, clock: PhaseClock) -> Callable[[int], None]:
    """Train ``n`` iterations with ``runner.learn``; the update's own time goes to 'learn', the rest to 'sim'.

    Timing the update needs no sync: rsl-rl's update already ends with ``.item()`` calls.
    """
    update = runner.alg.update
    learn_s = [0.0]

    def timed_update() -> dict:
        t0 = time.perf_counter()
        out = update()
        learn_s[0] += time.perf_counter() - t0
        return out

    runner.alg.update = timed_update

    def chunk(n_iters: int) -> None:
        learn_s[0] = 0.0
        with clock.phase("sim"):
            runner.learn(n_iters)
        clock.add("sim", -learn_s[0])
        clock.add("learn", learn_s[0])

    return chunk


def format_summary(row: dict, target: float, ledger_path: Path, n_rows: int) -> str:
    """The trial summary, computed from a ledger row (never from in-memory state)."""
    from sweep.ledger import metrics

    m = metrics(row)
    lines = [f"trial {row['trial']}: {row['state']} ({row['reason']})"]
    if row.get("success") is not None:
        lines.append(
            f"  held-out success   {row['success']:.3f} (95% CI {row['success_lo']:.3f}-{row['success_hi']:.3f}, "
            f"{row['eval_episodes']} episodes; target {target:g})"
        )
    lines += [
        f"  env steps          {row['env_steps']:,}",
        f"  throughput         {m['throughput_sps']:,.0f} env steps/s (over {m['training_s']:.1f} training s)",
    ]
    if m["wall_to_target_s"] is not None:
        lines.append(f"  wall to target     {m['wall_to_target_s']:.1f} s (all billable phases)")
        lines.append(
            f"  USD to target      ${m['usd_to_target']:.4f} at {row['price_label']} (${row['price_usd_per_hour']:g}/h)"
        )
    else:
        lines.append(f"  spent              {m['wall_s']:.1f} s, ${m['usd']:.4f} at {row['price_label']}")
    lines += [f"  bottleneck         {m['bottleneck']}", f"  ledger             {ledger_path} ({n_rows} rows)"]
    return "\n".join(lines)


def config_from_overrides(overrides: dict[str, Any]) -> tuple[TrialConfig, dict[str, Any]]:
    """Split ``key=value`` overrides into a validated TrialConfig and the other keys (price, out, run_id)."""
    names = {f.name for f in fields(TrialConfig)}
    extra_keys = {"price", "price.gpu", "price.kind", "price.usd_per_hour", "out", "run_id", "config"}
    cfg_kwargs: dict[str, Any] = _from_file(overrides["config"]) if "config" in overrides else {}
    flags: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in overrides.items():
        if key.startswith("flags."):
            flags[key.split(".", 1)[1]] = value
        elif key in names:
            cfg_kwargs[key] = value
        elif key == "config":
            continue
        elif key in extra_keys:
            extra[key] = value
        else:
            valid = sorted(names | extra_keys | {"flags.<name>"})
            raise ConfigError(f"unknown key '{key}'; valid keys: {', '.join(valid)}")
    if flags:
        cfg_kwargs["flags"] = {**cfg_kwargs.get("flags", {}), **flags}
    try:
        cfg = TrialConfig(**cfg_kwargs)
    except TypeError as exc:
        raise ConfigError(str(exc)) from exc
    return cfg.validate(), extra


def _from_file(path: Any) -> dict[str, Any]:
    """The ``trial`` section of a recommended.yaml (or any YAML holding TrialConfig keys at the top)."""
    from sweep.config import read_yaml

    data = read_yaml(Path(str(path)))
    section = data.get("trial", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config={path}: expected a 'trial' mapping")
    names = {f.name for f in fields(TrialConfig)}
    unknown = sorted(set(section) - names)
    if unknown:
        raise ConfigError(f"config={path}: unknown trial key(s) {unknown}")
    return dict(section)


def resolve_price(extra: dict[str, Any], device: str) -> Any:
    """Price from ``price=`` (a GPU name or a $/hour number), ``price.gpu``, ``price.kind``, ``price.usd_per_hour``."""
    from sweep import prices

    shorthand = extra.get("price")
    rate = extra.get("price.usd_per_hour")
    gpu = extra.get("price.gpu")
    if isinstance(shorthand, (int, float)) and not isinstance(shorthand, bool):
        rate = shorthand
    elif isinstance(shorthand, str):
        gpu = shorthand
    elif shorthand is not None:
        raise ConfigError(f"price: expected a GPU name or a $/hour number (got {shorthand!r})")
    if gpu is None:
        gpu = prices.detect_gpu(device) if rate is None else "custom"
    return prices.resolve(str(gpu), str(extra.get("price.kind", "on_demand")), rate)


def main(argv: list[str]) -> int:
    """``python -m sweep.trial key=value ...``: one trial, a summary, and its ledger."""
    from sweep.cli import parse_overrides
    from sweep.ledger import LedgerWriter, read_rows

    cfg, extra = config_from_overrides(parse_overrides(argv))
    device = resolve_device(cfg.device)
    price = resolve_price(extra, device)
    run_id = str(extra.get("run_id") or time.strftime("trial-%Y%m%d-%H%M%S"))
    out = Path(str(extra.get("out") or Path("reports") / run_id))
    try:
        out.mkdir(parents=True, exist_ok=True)
        ledger_path = out / "ledger.jsonl"
        writer = LedgerWriter(ledger_path)
    except OSError as exc:
        raise ConfigError(f"out: cannot write to '{out}' ({exc.strerror}); choose a writable folder") from exc
    print(
        f"trial: {cfg.num_envs} envs x {cfg.num_steps_per_env} steps, profile={cfg.profile}, mode={cfg.mode}, "
        f"device={device}, target {cfg.target:g} on {cfg.eval_episodes} held-out episodes, cap {cfg.cap_s:g} s",
        flush=True,
    )

    def sink(row: Row) -> str:
        writer.append(row)
        if row.state == "running":
            print(
                f"  it {row.iteration:5d}  {row.env_steps:>11,} steps  {row.billable_s:7.1f} s  "
                f"held-out success {row.success:.3f}  mean return {row.mean_return or float('nan'):.3f}",
                flush=True,
            )
        return CONTINUE

    with writer:
        run_trial(cfg, sink, run_id=run_id, price_usd_per_hour=price.usd_per_hour, price_label=price.label, out_dir=out)
    rows = read_rows(ledger_path)
    print(format_summary(rows[-1], cfg.target, ledger_path, len(rows)))
    return 0 if rows[-1]["state"] == "reached" else 1


if __name__ == "__main__":
    from sweep.cli import run_main

    run_main(main)
