"""Replay backend: serves trials recorded on a real GPU, so the real planner runs on them in seconds.

A table (JSON, written by ``benchmarks/record_trials.py``) holds, per recorded trial, its params and
its ledger curve: billable seconds, phase seconds, env steps and held-out success at every
checkpoint. Serving a trial emits those rows through the same sink a real trial uses, honours the
planner's answers (prune / stop) and the per-trial cap, and takes time and spend from the record,
never from the clock. Used for search-efficiency benchmarks and planner tests, never by the main
command unless asked (``backend=replay``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.contract import Decision, TrialParams, config_key
from sweep.errors import ConfigError
from sweep.ledger import Row


@cache
def load_table(path: str) -> dict[str, Any]:
    """Read and check a recorded table (cached per path)."""
    p = Path(path)
    try:
        table = json.loads(p.read_text())
    except OSError as exc:
        raise ConfigError(f"backend_options.table: cannot read {path} ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"backend_options.table: {path} is not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    for key in ("trials", "profile", "control_dt_s"):
        if key not in table:
            raise ConfigError(f"backend_options.table: {path} lacks '{key}'")
    return table


class ReplayBackend(Backend):
    """Registry entry ``replay``: trials come from a recorded table (``backend_options.table``)."""

    name = "replay"
    success_rule = "as recorded (the recording's backend and profile)"
    knobs = ()

    def profiles(self) -> dict[str, Profile]:
        return {"recorded": Profile("recorded", 0, 0.0, "trials recorded on a GPU, replayed")}

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> TaskEnv:
        raise ConfigError("backend=replay serves recorded trials; it builds no environment")

    def control_dt_s(self, profile: str) -> float:
        return 0.02

    def serve_trial(
        self,
        cfg: Any,
        sink: Callable[[Row], str],
        *,
        run_id: str,
        trial: int,
        price_usd_per_hour: float,
        price_label: str,
        params: dict[str, Any],
    ) -> Row:
        """Emit the recorded rows of the matching config (the seed picks among repeats)."""
        options = dict(cfg.backend_options)
        if "table" not in options:
            raise ConfigError("backend_options.table: give the recorded table (a JSON file) to replay")
        table = load_table(str(options["table"]))
        time_scale = float(options.get("time_scale", 0.0))
        key = config_key(params)
        matches = [t for t in table["trials"] if config_key(t["params"]) == key]

        def make(rec: dict, state: str, reason: str = "") -> Row:
            return Row(
                run_id=run_id,
                trial=trial,
                state=state,
                params=params,
                iteration=rec["iteration"],
                env_steps=rec["env_steps"],
                billable_s=rec["billable_s"],
                phases_s=dict(rec["phases_s"]),
                price_usd_per_hour=price_usd_per_hour,
                price_label=price_label,
                success=rec.get("success"),
                success_lo=rec.get("success_lo"),
                success_hi=rec.get("success_hi"),
                eval_episodes=rec.get("eval_episodes", 0),
                mean_return=rec.get("mean_return"),
                reason=reason,
                device=table.get("device", "recorded"),
                seed=cfg.seed,
            )

        if not matches:
            final = make(
                {"iteration": 0, "env_steps": 0, "billable_s": 0.0, "phases_s": {}},
                "failed",
                f"no recorded trial for {TrialParams.of(params)}",
            )
            sink(final)
            return final
        record = matches[cfg.seed % len(matches)]
        previous_s = 0.0
        for rec in record["curve"]:
            if time_scale > 0:
                time.sleep(time_scale * max(0.0, rec["billable_s"] - previous_s))
            previous_s = rec["billable_s"]
            if rec["billable_s"] >= cfg.cap_s:
                capped = dict(rec, billable_s=cfg.cap_s)
                final = make(capped, "capped", f"per-trial cap of {cfg.cap_s:g} billable seconds reached")
                sink(final)
                return final
            answer = sink(make(rec, "running"))
            success = rec.get("success")
            if success is not None and success >= cfg.target:
                final = make(rec, "reached", f"held-out success {success:.3f} >= target {cfg.target:g}")
            elif answer == Decision.PRUNE:
                final = make(rec, "pruned", "stopped by the planner: cannot beat the best cost to target")
            elif answer == Decision.STOP:
                final = make(rec, "capped", "stopped by the planner: study budget spent")
            else:
                continue
            sink(final)
            return final
        end = record.get("end", {})
        final = make(
            record["curve"][-1]
            if record["curve"]
            else {"iteration": 0, "env_steps": 0, "billable_s": 0.0, "phases_s": {}},
            end.get("state", "capped"),
            end.get("reason", "recording ended"),
        )
        sink(final)
        return final
