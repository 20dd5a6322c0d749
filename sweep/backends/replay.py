"""Replayed trials: trials recorded on a real GPU served again, so the real planner runs on them in seconds.

A table (JSON, written by ``benchmarks/record_trials.py``) holds, per recorded trial, its params and
its ledger curve: billable seconds, phase seconds, env steps and held-out success at every
checkpoint. :func:`replay_trial` is a trial runner (beside :func:`sweep.trial.runner.run_trial`): it emits those
rows through the same sink a real trial uses, ends by the same rule (:func:`sweep.contract.end_state`, the
per-trial cap) and takes time and spend from the record, never from the clock. Used for search-efficiency
benchmarks and planner tests, never by the main command unless asked (``backend=replay``).

A table's ``trials`` serve the search and the confirmation; its ``baseline_trials`` (when it has them) serve the
baseline's trials (a stock baseline is recorded apart, with rsl-rl's own runner); its ``held_out_trials`` are never
served: they are the benchmark's truth, which no replayed study may see. Which recording a trial replays
(``backend_options.draw``): ``random`` (the default), a random one of its config's recordings, without replacement
within the study while the table allows (:func:`draw_index`, seeded by ``backend_options.draw_seed``), the same rule
for every strategy a benchmark compares; ``seed``, the one recorded with the trial's training seed (planner tests
whose scenario is written per seed).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from sweep.backends.base import Backend, Profile, TaskEnv
from sweep.contract import (
    ONE_TIME_PHASES,
    EndCause,
    Ending,
    Sink,
    TrialConfig,
    TrialRunner,
    TrialState,
    cap_reached,
    end_state,
    one_time_s,
    throughput_end,
)
from sweep.errors import ConfigError
from sweep.ledger import Progress, Row, TrialRows, read_rows
from sweep.params import TrialParams, trial_params
from sweep.record import PhaseSeconds, recorded_cause

#: Seconds a recorded checkpoint may lie past a cap and still be the cap's own pass (float rounding of the cap,
#: which the planner derives from a recorded cost: a repeat of the best config is capped at exactly its cost).
CAP_ROUNDING_S = 1e-6


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


@dataclass(frozen=True)
class Recording:
    """One recorded trial of a table: its config, its training seed, its progress at every checkpoint (the ledger
    rows' figures, read by :meth:`~sweep.record.Progress.of`) and how it ended."""

    params: dict[str, Any]
    """The config as recorded (either spelling of the flags)."""
    key: tuple
    """Its identity (:meth:`~sweep.params.TrialParams.identity`)."""
    seed: int | None
    """The training seed it was recorded with (None in tables that did not say)."""
    curve: tuple[Progress, ...]
    """Its figures at each checkpoint, oldest first."""
    state: TrialState
    """How it ended (capped where the recording says nothing)."""
    reason: str
    cause: EndCause | None
    """Why it ended: the recording's own, else what its state and reason say (:func:`~sweep.record.recorded_cause`)."""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Recording:
        """A table's trial record (``benchmarks/record_trials.py``'s format)."""
        curve = tuple(Progress.of(point) for point in data["curve"])
        end = {**(data["curve"][-1] if data["curve"] else {}), **data.get("end", {})}
        state = TrialState(end.get("state", TrialState.CAPPED))
        reason = str(end.get("reason", "recording ended"))
        given = end.get("cause") or None
        cause = EndCause(given) if given else recorded_cause(state, reason, end.get("billable_s", 0.0))
        params = data["params"]
        return cls(params, TrialParams.identity(params), data.get("seed"), curve, state, reason, cause)


@cache
def recordings(path: str, section: str = "trials") -> tuple[Recording, ...]:
    """The recorded trials under ``section`` of the table at ``path`` (:func:`load_table`), typed (cached)."""
    return tuple(Recording.of(t) for t in load_table(path).get(section, ()))


class ReplayBackend(Backend):
    """Registry entry ``replay``: describes recorded trials to the config checks (profile, control period).
    It builds nothing: the workers run these trials with :func:`replay_trial` (``backend_options.table``)."""

    name = "replay"
    success_rule = "as recorded (the recording's backend and profile)"
    knobs = ()

    def profiles(self) -> dict[str, Profile]:
        return {"recorded": Profile("recorded", 0, 0.0, "trials recorded on a GPU, replayed")}

    def make_env(self, num_envs: int, seed: int, device: str, profile: str, **knobs: object) -> TaskEnv:
        raise ConfigError("backend=replay serves recorded trials; it builds no environment")

    def control_dt_s(self, profile: str) -> float:
        return 0.02

    def trial_runner(self) -> TrialRunner:
        """Recorded trials are served, not simulated: :func:`replay_trial`."""
        return replay_trial


#: ``backend_options.draw``: how a trial picks among its config's recordings (module docstring).
DRAWS = ("random", "seed")
#: The table's key that the replay never serves: recordings on held-out training seeds, the benchmark's truth.
HELD_OUT = "held_out_trials"
#: The table's key of the baseline's own recordings (served to the study's baseline trials when present).
BASELINE = "baseline_trials"


def draw_index(n: int, draw_seed: int, key: tuple, k: int) -> int:
    """Which of a config's ``n`` recordings its ``k``-th trial in a study replays (0-based, in trial order): position
    ``k % n`` of a random order of the recordings, a new order for each pass through them, seeded by the study's
    ``draw_seed``, the config (``key``) and the pass. At random per trial, without replacement within a config while
    the table allows; the same for every strategy that draws through it."""
    cycle, at = divmod(k, n)
    order = list(range(n))
    random.Random(f"{draw_seed}|{key!r}|{cycle}").shuffle(order)
    return order[at]


def pick_record(matches: Sequence[Recording], seed: int, earlier: Sequence[int] = ()) -> Recording:
    """The recording a trial with training ``seed`` replays among a config's repeats: the one recorded with that
    seed if there is one, else repeat ``seed % len(matches)`` (a table holds a few seeds; a study may ask for more).
    ``earlier``: the other seeds the study already ran this config on, in order; a new seed replays a recording
    none of them replayed while there is one (the next after its own), so a config's seeds are distinct draws
    as far as the table allows, whatever the step between the seeds the study hands out."""
    used: list[int] = []
    for s in [*dict.fromkeys(x for x in earlier if x != seed), seed]:
        exact = [i for i, t in enumerate(matches) if t.seed == s and i not in used]
        start = s % len(matches)
        free = [i for i in ((start + k) % len(matches) for k in range(len(matches))) if i not in used]
        used.append(exact[0] if exact else free[0] if free else start)
    return matches[used[-1]]


def probe_point(point: Progress, iterations: int | None = None) -> Progress:
    """What a throughput probe of a recorded trial measured and is billed: the recording's first round of training
    with its one-time seconds, less the held-out pass that a probe does not run (no success, no bounds). With
    ``iterations`` fewer than the round's (a screen trial, :data:`sweep.contract.SCREEN_ITERATIONS`): that share of
    the round's training seconds and env steps, the one-time seconds whole, a prorated stand-in for a shorter round
    that the table did not record (its first iterations' rate taken as the round's)."""
    share = 1.0 if iterations is None or point.iteration <= 0 else min(1.0, iterations / point.iteration)
    one_time = one_time_s(point.phases_s)
    phases = {
        name: (value if name in ONE_TIME_PHASES else value * share)
        for name, value in {**point.phases_s.as_dict(), "eval": 0.0}.items()
    }
    training_s = max(0.0, point.billable_s - point.phases_s.get("eval", 0.0) - one_time)
    return replace(
        point,
        iteration=round(point.iteration * share),
        env_steps=round(point.env_steps * share),
        billable_s=one_time + training_s * share,
        phases_s=PhaseSeconds.of(phases),
        success=None,
        success_lo=None,
        success_hi=None,
        success_max=None,
        eval_episodes=0,
    )


def runs_before(out_dir: str | Path | None, key: tuple, trial: int) -> dict[int, int]:
    """The trials of the config ``key`` that the study in ``out_dir`` ran before trial ``trial``: trial -> training
    seed, in trial order (from its ledger; none without one)."""
    path = Path(out_dir) / "ledger.jsonl" if out_dir is not None else None
    if path is None or not path.is_file():
        return {}
    rows = read_rows(path)
    ran = [r for r in rows if r.trial < trial and r.ran]
    return {r.trial: r.seed for r in sorted(ran, key=lambda r: r.trial) if TrialParams.identity(r.params) == key}


def seeds_before(out_dir: str | Path | None, key: tuple, trial: int) -> list[int]:
    """The training seeds the study in ``out_dir`` ran the config ``key`` on before trial ``trial``, in order (from
    its ledger; none without one)."""
    return list(dict.fromkeys(runs_before(out_dir, key, trial).values()))


def replay_trial(
    cfg: TrialConfig,
    sink: Sink,
    *,
    run_id: str = "trial",
    trial: int = 0,
    price_usd_per_hour: float = 0.0,
    price_label: str = "",
    out_dir: str | Path | None = None,
) -> Row:
    """The trial runner for recorded trials: emit the rows of the matching config, ending as a real trial would
    (:func:`sweep.contract.end_state`, the per-trial cap). The seed, and the seeds the study in ``out_dir`` ran
    the config on before, pick among repeats (:func:`pick_record`)."""
    options = dict(cfg.backend_options)
    if "table" not in options:
        raise ConfigError("backend_options.table: give the recorded table (a JSON file) to replay")
    table = load_table(str(options["table"]))
    time_scale = float(options.get("time_scale", 0.0))
    params = trial_params(cfg)
    rows = TrialRows(run_id, trial, params, cfg.seed, price_usd_per_hour, price_label, cfg.phase, cfg.baseline)
    device = table.get("device", "recorded")

    def served(point: Progress) -> Progress:
        return replace(point, device=device, checkpoint="")  # a replayed trial saves no model

    def end(point: Progress, ending: Ending) -> Row:
        state, cause, reason = ending
        final = rows.row(state, served(point), reason, cause)
        sink(final)
        return final

    draw = str(options.get("draw", "random"))
    if draw not in DRAWS:
        raise ConfigError(f"backend_options.draw: must be one of {list(DRAWS)} (got {draw!r})")
    key = TrialParams.identity(params)
    served_from = BASELINE if cfg.baseline and BASELINE in table else "trials"
    matches = [t for t in recordings(str(options["table"]), served_from) if t.key == key]
    if not matches:
        return end(Progress(), (TrialState.FAILED, EndCause.FAILED, f"no recorded trial for {TrialParams.of(params)}"))
    earlier = runs_before(out_dir, key, trial)
    if draw == "seed":
        record = pick_record(matches, cfg.seed, list(dict.fromkeys(earlier.values())))
    else:
        record = matches[draw_index(len(matches), int(options.get("draw_seed", 0)), key, len(earlier))]
    measured = throughput_end(cfg.phase)
    if measured is not None and record.curve:
        return end(probe_point(record.curve[0], cfg.eval_every if cfg.phase == "screen" else None), measured)
    previous_s = 0.0
    for point in record.curve:
        if time_scale > 0:
            time.sleep(time_scale * max(0.0, point.billable_s - previous_s))
        previous_s = point.billable_s
        # A checkpoint recorded at the cap itself (to float rounding) is the cap's pass, which a real trial runs.
        capped = cap_reached(cfg, point.billable_s - CAP_ROUNDING_S, point.phases_s)
        if capped:  # the trial would have stopped at its cap: bill up to there, not the whole recorded stretch
            one_time = one_time_s(point.phases_s)
            limit = min(cfg.cap_s, one_time + cfg.race_cap_s if cfg.race_cap_s is not None else cfg.cap_s)
            return end(replace(point, billable_s=limit), capped)
        ending = end_state(point.success, cfg.target, sink(rows.row(TrialState.RUNNING, served(point))))
        if ending is not None:
            return end(point, ending)
    final = record.curve[-1] if record.curve else Progress()
    return end(final, (record.state, record.cause, record.reason))
