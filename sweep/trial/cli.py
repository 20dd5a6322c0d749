"""``python -m sweep.trial key=value ...``: one trial, its summary (from the ledger) and its ledger file."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from sweep.analysis.summary import Summary, ci_text, summarize
from sweep.backends import get_backend
from sweep.contract import CONTINUE, TrialConfig, TrialState, success_rule
from sweep.errors import ConfigError
from sweep.ledger import Row

#: Keys of ``python -m sweep.trial`` that are not the trial's: the price, where to write, a config file to start from.
EXTRA_KEYS = ("price", "price.gpu", "price.kind", "price.usd_per_hour", "out", "run_id", "config")


def config_from_overrides(overrides: dict[str, Any]) -> tuple[TrialConfig, dict[str, Any]]:
    """Split ``key=value`` overrides into a validated TrialConfig (over the ``config=`` file's trial section, if
    given) and the other keys (price, out, run_id, config)."""
    from sweep.config import nested, structured

    names = [f.name for f in fields(TrialConfig)]
    extra = {k: v for k, v in overrides.items() if k in EXTRA_KEYS}
    trial = {k: v for k, v in overrides.items() if k not in extra}
    for key in trial:
        if key.split(".")[0] not in names:
            valid = sorted({*names, *EXTRA_KEYS, "flags.<name>", "backend_options.<key>"})
            raise ConfigError(f"unknown key {key!r}; valid keys: {', '.join(valid)}")
    layers = [(_from_file(extra["config"]), f"config={extra['config']}")] if "config" in extra else []
    return checked(structured(TrialConfig, [*layers, (nested(trial), "command line")])), extra


def checked(cfg: TrialConfig) -> TrialConfig:
    """``cfg`` with every value checked: its own fields (:meth:`TrialConfig.validate`), then the names that the
    backend (its profile), the flag catalog and the checkpoint policy know."""
    from sweep import checkpoints, perf

    cfg.validate()
    checkpoints.check_keep(cfg.checkpoints)
    backend = get_backend(cfg.backend)
    backend.check_profile(cfg.profile)
    for key in success_rule(cfg):
        if key not in backend.success_keys:
            raise ConfigError(f"{key}: backend {cfg.backend} judges success by its own rule ({backend.success_rule})")
    perf.resolve(cfg.flags)
    return cfg


def _from_file(path: Any) -> dict[str, Any]:
    """The ``trial`` section of a recommended.yaml (or any YAML holding TrialConfig keys at the top)."""
    from sweep.config import read_yaml

    data = read_yaml(Path(str(path)))
    section = data.get("trial", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config={path}: expected a 'trial' mapping")
    return section


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


def main(argv: list[str], run: Callable[..., Row]) -> int:
    """``python -m sweep.trial key=value ...``: one trial, run by ``run`` (:func:`sweep.trial.runner.run_trial`), a
    summary and its ledger. The runner is passed in so that this module needs nothing from the trial's."""
    from sweep.cli import parse_overrides
    from sweep.config.validation import check_run_id
    from sweep.ledger import LedgerWriter, read_rows

    overrides = parse_overrides(argv)
    run_id = str(overrides.get("run_id") or time.strftime("trial-%Y%m%d-%H%M%S"))
    check_run_id(run_id, "command line")  # before the backend is built (torch): a bad name costs no import
    cfg, extra = config_from_overrides(overrides)
    get_backend(cfg.backend).preflight(cfg.profile, cfg.backend_options, success_rule(cfg))
    from sweep.backends.base import resolve_device  # imports torch: once the config has passed its checks

    device = resolve_device(cfg.device)
    price = resolve_price(extra, device)
    out = Path(str(extra.get("out") or Path("reports") / run_id))
    try:
        out.mkdir(parents=True, exist_ok=True)
        ledger_path = out / "ledger.jsonl"
        writer = LedgerWriter(ledger_path)
    except OSError as exc:
        raise ConfigError(f"out: cannot write to {str(out)!r} ({exc.strerror}); choose a writable folder") from exc
    print(
        f"trial: {cfg.num_envs} envs x {cfg.num_steps_per_env} steps, profile={cfg.profile}, mode={cfg.mode}, "
        f"device={device}, target {cfg.target:g} on {cfg.eval_episodes} held-out episodes, cap {cfg.cap_s:g} s",
        flush=True,
    )

    def held_out(row: Row) -> str:
        return pass_text(row.success, row.success_max, getattr(row, cfg.eval_gate_signal), cfg.eval_gate_signal)

    def sink(row: Row) -> str:
        writer.append(row)
        if row.state == TrialState.RUNNING:
            print(
                f"  it {row.iteration:5d}  {row.env_steps:>11,} steps  {row.billable_s:7.1f} s  "
                f"held-out success {held_out(row)}  "
                f"mean return {row.mean_return or float('nan'):.3f}",
                flush=True,
            )
        return CONTINUE

    with writer:
        run(cfg, sink, run_id=run_id, price_usd_per_hour=price.usd_per_hour, price_label=price.label, out_dir=out)
    rows = read_rows(ledger_path)
    print(format_summary(summarize(rows), rows[-1].trial, cfg.target, ledger_path))
    return 0 if rows[-1].state == TrialState.REACHED else 1


def pass_text(
    success: float | None, success_max: float | None, signal: float | None = None, name: str = "train_success"
) -> str:
    """A held-out pass in a few characters: its rate, or for a pass stopped below the target the most a full
    pass could have measured; with neither, the pass was skipped (``signal``: the value of the gate's signal
    ``name`` that skipped it, :data:`sweep.trial.evaluation.GATE_SIGNALS`)."""
    if success is not None:
        return f"{success:.3f}"
    if success_max is not None:
        return f"< {success_max:.3f} (stopped once below the target was certain)"
    if signal is not None:
        from sweep.contract import GATE_SIGNALS

        return f"skipped ({GATE_SIGNALS[name]} {signal:.3f}, below target.eval_gate)"
    return "not evaluated"


def format_summary(s: Summary, trial: int, target: float, ledger_path: Path) -> str:
    """The summary ``python -m sweep.trial`` prints for one trial of the ledger ``s`` was built from."""
    t = s.trials[trial]
    lines = [f"trial {t.trial}: {t.state} ({t.reason})"]
    if t.success is not None:
        lines.append(
            f"  held-out success   {t.success:.3f} ({ci_text(t.success_lo, t.success_hi)}, "
            f"{t.eval_episodes} episodes; target {target:g})"
        )
    elif t.success_max is not None:
        lines.append(f"  held-out success   {pass_text(None, t.success_max)} (target {target:g})")
    lines += [
        f"  env steps          {t.env_steps:,}",
        f"  throughput         {t.throughput_sps:,.0f} env steps/s (over {t.training_s:.1f} training s)",
    ]
    if t.wall_to_target_s is not None:
        lines.append(f"  wall to target     {t.wall_to_target_s:.1f} s (all billable phases)")
        lines.append(f"  USD to target      ${t.usd_to_target:.4f} at {t.price_label} (${t.price_usd_per_hour:g}/h)")
    else:
        lines.append(f"  spent              {t.wall_s:.1f} s, ${t.usd:.4f} at {t.price_label}")
    lines += [f"  bottleneck         {t.bottleneck}", f"  ledger             {ledger_path} ({s.n_rows} rows)"]
    return "\n".join(lines)
