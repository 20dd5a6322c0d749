"""Search efficiency on recorded trials, judged out of sample: this planner vs random search vs ASHA.

Every strategy draws trials from the same recorded table (``benchmarks/record_trials.py``); time and spend come from
the record. The planner (``planner-cost``: the cost-aware proposals of :mod:`sweep.planner.acquisition`; ``planner``:
TPE) runs the real :class:`sweep.planner.loop.Planner` (Optuna, cost pruning, confirmation, budget) with an
in-process pool; random search (:func:`run_random`: untried configs in a random order, so a shuffled grid search
too) and ASHA on mean training return (what Isaac Lab's Ray tuner optimizes; :func:`run_asha`) run each trial to the
target or the per-trial cap and spend their whole budget. The yardstick (docs/benchmarks.md, search efficiency):

- **Truth out of sample.** The table's ``held_out_trials`` (configs recorded again on held-out training seeds, and
  the baseline) are never replayed: no study can see them. A config's truth is its mean cost to the target over
  its held-out recordings, on equal terms (:func:`config_means`: one-time start-up and compilation left out, a
  recording that never reached adds what it spent and no success). A study's recommendation is *correct* when its
  config's held-out mean is within 10% (``--within``) of the best held-out mean; a config without held-out
  recordings, or no recommendation, is wrong.
- **One drawing rule.** A study's trial replays a random recording of its config, without replacement within the
  study while the table allows (:func:`sweep.backends.replay.draw_index`, seeded by the study's number): the
  planner, random search and ASHA alike. The baseline's trials replay the table's ``baseline_trials``
  (the stock baseline: rsl-rl's own runner).
- **One budget.** ``--budget-runs N``: the planner runs with ``budget.runs: N`` (it measures the baseline first and
  prices its cap from it, as ``sweep.run`` does); random search and ASHA get the same number of baseline runs in
  USD, priced at the mean of ``baseline_trials`` (what the planner's baseline measures once it has drawn them all),
  and spend all of it (their last trial stopped where it ends). Every strategy caps a trial at ``--trial-cap-runs``
  baseline runs. Neither the space's initial
  design nor a prior is used unless a line says so (``--initial-from``: a separate, labelled line).
- **One unit.** A study's cost in baseline runs is its billed spend (every trial, search and confirmation) over the
  baseline's mean cost to target on equal terms over ``baseline_trials`` (what the planner's payback divides by once
  it has drawn them all, and what every budget is priced at); recommended/baseline is the recommended config's
  held-out mean over the baseline's held-out mean (a recommendation without held-out recordings: its mean over the
  table's own recordings; no recommendation: 1, the user keeps the baseline), the median over studies.
- **Intervals count distinct outcomes.** Studies that drew the same trials and ended alike are one outcome: the
  95% intervals resample distinct outcomes (a cluster bootstrap), never copies of one.

Per strategy and budget one line, e.g. ``planner-cost budget 6 runs: correct 37/40, median study 5.8 runs,
recommended/baseline 0.71x``, then a table with the intervals, and how many studies trained a correct config at all
(search or confirmation) and how many of those recommended one: search breadth apart from the choice; and for the
planner how many studies ended with their own verdict against the baseline decided (``vs_baseline``'s 95% interval
wholly below 1, what ``sweep.run`` reports: proof, not only a choice).

    python benchmarks/search_efficiency.py benchmarks/data/h200_grid3.json --budget-runs 4,6,8,12 --reps 40
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep import config as config_mod
from sweep.analysis.summary import summarize
from sweep.backends.replay import BASELINE, HELD_OUT, draw_index, load_table
from sweep.config import validation
from sweep.contract import THROUGHPUT_PHASES, one_time_s
from sweep.execution.inline import InlinePool
from sweep.ledger import LedgerView, LedgerWriter, Row, metrics, read_rows
from sweep.params import TrialParams, flag_name, named_flags
from sweep.planner.loop import Planner
from sweep.prices import resolve

PRICE = resolve("custom", usd_per_hour=3600.0)  # 1 billable second = $1: figures read as seconds too
USD_PER_S = PRICE.usd_per_hour / 3600.0
#: The line of the planner with its stop rule alone (``budget.later_runs``, the GPU space's or ``--later-runs``): no
#: cap in runs and no budget in USD, as config overrides on top of the planner's settings; None: no such line.
STOP_RULE: dict[str, Any] | None = {"budget.runs": None}
STRATEGIES = ("planner-cost", "planner", "random", "asha")
#: The overrides that mark a line warm-started (``--prior``): each study starts from the run folder (``search.prior``)
#: of an earlier study of the same table, the planner's with its stop rule alone (a user's first study of a task, run
#: to its own end; with no stop rule, the same budget) drawn with seed ``PRIOR_SEED`` + its own.
PRIOR: dict[str, Any] = {"search.prior": "earlier study"}
PRIOR_SEED = 1000
#: The overrides of a line with the throughput screen (``--screen``): every shape's throughput first, the cost model on
#: env steps (``search.screen``); the table's first checkpoints prorated to the screen's iterations.
SCREEN: dict[str, Any] = {"search.screen": True}


def subset(table: dict[str, Any], num_envs: set[int]) -> dict[str, Any]:
    """The table's recordings of these env counts only (held-out ones too; the baseline's stay)."""

    def keep(records: list[dict]) -> list[dict]:
        return [t for t in records if t["params"]["num_envs"] in num_envs]

    out = {**table, "trials": keep(table["trials"])}
    if HELD_OUT in table:
        base = baseline_key(table)
        out[HELD_OUT] = [t for t in table[HELD_OUT] if TrialParams.identity(t["params"]) == base or keep([t])]
    return out


def env_counts(text: str) -> set[int]:
    """``--num-envs``: comma-separated positive integers."""
    counts = {int(n) for n in text.split(",")}
    if min(counts) < 1:
        raise ValueError(text)
    return counts


def budgets(text: str) -> list[float]:
    """``--budget-runs``: comma-separated positive numbers of baseline runs."""
    values = [float(n) for n in text.split(",")]
    if min(values) <= 0:
        raise ValueError(text)
    return values


def table_space(table: dict[str, Any]) -> dict[str, list]:
    """Knob choices of a full-grid table (every combination must be recorded)."""
    knobs: dict[str, set] = {}
    for t in table["trials"]:
        for k, v in TrialParams.of(t["params"]).as_dict().items():
            if k in ("num_envs", "num_steps_per_env", "num_mini_batches") or flag_name(k) is not None:
                knobs.setdefault(k, set()).add(v)
    return {k: sorted(v) for k, v in knobs.items()}


def record_cost(record: dict[str, Any], target: float) -> tuple[float, bool]:
    """A recorded trial's seconds on equal terms (less start-up and compilation) to the target, or to its end
    when it never reached it; and whether it reached it."""
    for point in record["curve"]:
        if point.get("success") is not None and point["success"] >= target:
            return equal_terms_s(point), True
    last = record["curve"][-1] if record["curve"] else {"billable_s": record["end"].get("billable_s", 0.0)}
    return equal_terms_s(last), False


def equal_terms_s(point: dict[str, Any]) -> float:
    """A recorded checkpoint's billable seconds less its one-time start-up and compilation."""
    return max(0.0, point["billable_s"] - one_time_s(point.get("phases_s", {})))


def config_means(records: list[dict[str, Any]] | dict[str, Any], target: float) -> dict[tuple, float]:
    """Each config's cost to the target in USD (recorded seconds x PRICE), over its ``records`` (a table: its
    replayed ``trials``): the seconds all its recordings spent on equal terms over the number that reached (the mean
    when all did; inf when none)."""
    if isinstance(records, dict):
        records = records["trials"]
    spent: dict[tuple, float] = {}
    reached: dict[tuple, int] = {}
    for t in records:
        key = TrialParams.identity(t["params"])
        seconds, ok = record_cost(t, target)
        spent[key] = spent.get(key, 0.0) + seconds
        reached[key] = reached.get(key, 0) + ok
    return {k: spent[k] * USD_PER_S / reached[k] if reached[k] else float("inf") for k in spent}


def baseline_key(table: dict[str, Any]) -> tuple | None:
    """The identity of the table's baseline recordings (``baseline_trials``); None without any."""
    records = table.get(BASELINE) or []
    return TrialParams.identity(records[0]["params"]) if records else None


@dataclass(frozen=True)
class Truth:
    """What a table says out of sample: each config's held-out mean cost to target, the correct set, the baseline's
    held-out mean (the unit a study's cost is counted in) and its in-sample mean (what the budgets are priced at)."""

    held_out: dict[tuple, float]
    in_sample: dict[tuple, float]
    correct: frozenset
    best: float
    baseline: tuple
    held_out_baseline_usd: float
    """The baseline's held-out mean USD to target on equal terms: what recommended/baseline divides by."""
    unit_usd: float
    """One baseline run: the baseline's mean over ``baseline_trials``, the recordings its replayed trials draw. It is
    what the planner's own payback divides by once it has drawn them all, what its ``budget.runs`` is then priced at,
    and what the budgets of the strategies that measure no baseline are priced at: one unit for every strategy."""


def truth(table: dict[str, Any], target: float, within: float) -> Truth:
    """The table's truth (:class:`Truth`); a table without held-out recordings of the baseline and of some config
    cannot judge a study out of sample (ValueError)."""
    base = baseline_key(table)
    if base is None:
        raise ValueError(f"no '{BASELINE}': the table has no recordings of the baseline to compare with")
    held = config_means(table.get(HELD_OUT) or [], target)
    if base not in held or not any(k != base for k in held):
        raise ValueError(f"'{HELD_OUT}' lacks the baseline or every config: no truth out of sample to judge by")
    best = min(v for k, v in held.items() if k != base)
    correct = frozenset(k for k, v in held.items() if k != base and v <= (1.0 + within) * best)
    in_sample = config_means(table["trials"], target)
    unit = config_means(table[BASELINE], target)[base]
    return Truth(held, in_sample, correct, best, base, held[base], unit)


def initial_design(space_file: str, space: dict[str, list]) -> list[dict[str, Any]]:
    """The top-level (GPU) initial design of ``space_file``, each entry reduced to the knobs the table
    varies (a knob recorded at one value takes that value)."""
    import yaml

    entries = (yaml.safe_load(Path(space_file).read_text()).get("search") or {}).get("initial", [])
    knobs = {k for k, choices in space.items() if len(choices) > 1}
    reduced = [{k: v for k, v in entry.items() if k in knobs} for entry in entries]
    return [dict(t) for t in dict.fromkeys(tuple(sorted(e.items())) for e in reduced)]


def run_planner(
    table_path: str,
    space: dict[str, list],
    strategy: str,
    seed: int,
    args: Any,
    initial: list[dict[str, Any]] | None = None,
) -> list[Row]:
    """One study with the real planner (``initial``: the design it starts on); returns its ledger rows. ``seed``
    seeds the sampler and the drawing of recordings. ``args``: ``target``, ``budget`` (USD), ``trial_cap`` (USD),
    ``max_trials``; optionally ``budget_runs`` (the planner's), ``confirm`` (seeds per finalist), ``confirm_top``,
    ``confirm_share``, ``baseline_params``, ``race_slack``, ``intensify``, ``probe``, ``later_runs`` (the stop rule,
    None: none), ``overrides`` (dotted keys) and ``draw``
    (``seed``: each trial replays its own seed's recording, for planner tests written per seed; never the yardstick's
    rule)."""
    flags = named_flags(space)
    ours = strategy.startswith("planner")  # random and grid search: each config once, no pruning
    runs = getattr(args, "budget_runs", None) if ours else None
    data = {
        "backend": "replay",
        "profile": "recorded",
        "backend_options": {
            "table": table_path,
            "time_scale": 0.0,
            "draw": getattr(args, "draw", "random"),
            "draw_seed": seed,
        },
        "knobs": {
            "num_envs": space["num_envs"],
            "num_steps_per_env": space["num_steps_per_env"],
            "num_mini_batches": space.get("num_mini_batches", [4]),
            "flags": flags,
        },
        "target": {"success": args.target},
        "price": {"gpu": "custom", "usd_per_hour": PRICE.usd_per_hour},
        "budget": {
            "usd": args.budget,
            "trial_usd": args.trial_cap,
            "max_trials": args.max_trials,
            "runs": runs,
            "later_runs": getattr(args, "later_runs", None) if ours else None,
        },
        "constraints": {"max_update_period_s": 10.0},
        "seeds": {"sampler": seed, "training": 1},
        "search": {
            "sampler": ("cost" if "cost" in strategy else "tpe") if ours else strategy,
            "prune": ours,
            "race_slack": getattr(args, "race_slack", None) or config_mod.Search.race_slack,
            "intensify": (getattr(args, "intensify", None) or config_mod.Search.intensify) if ours else 1,
            "probe": bool(getattr(args, "probe", False)) and ours,
            "initial": initial or [],
        },
        "run_id": f"{strategy}-{seed}",
    }
    if getattr(args, "confirm", 1) > 1 and ours:  # callers without the option: none
        data["confirm"] = {
            "seeds": args.confirm,
            "top": args.confirm_top,
            "budget_share": getattr(args, "confirm_share", config_mod.Confirm.budget_share),
            "baseline": args.baseline_params,
        }
    over = dict(getattr(args, "overrides", None) or {}) if ours else {}
    cfg = validation.validate(config_mod.compose(data, over, "search_efficiency", has_gpu=False))
    with tempfile.TemporaryDirectory() as tmp:
        Planner(cfg, Path(tmp), InlinePool(), PRICE, "recorded", 0.02, poll_s=0.001).run()
        return read_rows(Path(tmp) / "ledger.jsonl")


def baseline_params(table: dict[str, Any], spec: str = "4096x24") -> dict[str, Any]:
    """The confirmation's baseline as the table records it: its ``baseline_trials``' config (knobs, flags and mode),
    else the first of its ``trials`` of shape ``ENVSxSTEPS`` (``spec``; the table's first trial when it has none)."""
    records = table.get(BASELINE) or []
    if records:
        found = records[0]
    else:
        envs, steps = (int(x) for x in spec.lower().split("x"))
        shape = (envs, steps)
        trials = table["trials"]
        found = next((t for t in trials if (t["params"]["num_envs"], t["params"]["num_steps_per_env"]) == shape), None)
        found = found or trials[0]
    p = TrialParams.of(found["params"])
    return {
        "num_envs": p.num_envs,
        "num_steps_per_env": p.num_steps_per_env,
        "num_mini_batches": p.num_mini_batches,
        "flags": dict(p.flags),
        "mode": p.mode,
    }


@dataclass
class Stretch:
    """What one ASHA stretch paid for: a config run from where it stopped to its rung's limit (or the target)."""

    key: tuple
    usd: float
    race_usd_to_target: float | None
    """Its cost to the target on equal terms, when the stretch reached it."""


def _configs(table: dict[str, Any]) -> dict[tuple, list[dict]]:
    """The table's replayed recordings by config, in table order."""
    configs: dict[tuple, list[dict]] = {}
    for t in table["trials"]:
        configs.setdefault(TrialParams.identity(t["params"]), []).append(t)
    return configs


def _run_to(
    record: dict, from_s: float, milestone_s: float, stop_s: float, target: float
) -> tuple[list[dict], dict | None, float]:
    """A recording replayed on from ``from_s`` billed seconds (where an earlier stretch stopped): its checkpoints up to
    the first at or past ``milestone_s`` (where ASHA reads a rung's result), the one that reached the target (which
    ends the trial: the trial runner's rule) or the recording's end, whichever comes first; never past ``stop_s`` (the
    per-trial cap or the budget's end: a trial stopped between checkpoints is billed up to its stop). Returns those
    checkpoints, the one that reached (None when none did) and the seconds billed."""
    seen: list[dict] = []
    for point in record["curve"]:
        at = point["billable_s"]
        if at <= from_s:
            continue
        if at > stop_s:
            return seen, None, max(0.0, stop_s - from_s)
        seen.append(point)
        if (point.get("success") or 0.0) >= target:
            return seen, point, at - from_s
        if at >= milestone_s:
            return seen, None, at - from_s
    end = record["curve"][-1]["billable_s"] if record["curve"] else from_s
    return seen, None, max(0.0, min(end, stop_s) - from_s)


def run_random(table: dict[str, Any], seed: int, budget_usd: float, cap_usd: float, target: float) -> list[Stretch]:
    """Random search as a user runs it with a budget: untried configs in a random order, each run once to the target
    or the per-trial cap, until the budget is spent; the last trial is stopped where the budget ends (billed up to
    there). Each trial replays a recording drawn as every strategy draws (:func:`sweep.backends.replay.draw_index`).
    A shuffled grid search is the same loop."""
    configs = _configs(table)
    order = list(configs)
    random.Random(seed).shuffle(order)
    stretches: list[Stretch] = []
    total = 0.0
    for key in order:
        left_s = (budget_usd - total) / USD_PER_S
        if left_s <= 0:
            break
        record = configs[key][draw_index(len(configs[key]), seed, key, 0)]
        stop_s = min(cap_usd / USD_PER_S, left_s)
        _, hit, paid_s = _run_to(record, 0.0, stop_s, stop_s, target)
        total += paid_s * USD_PER_S
        stretches.append(Stretch(key, paid_s * USD_PER_S, equal_terms_s(hit) * USD_PER_S if hit else None))
    return stretches


def run_asha(
    table: dict[str, Any], seed: int, budget_usd: float, cap_usd: float, target: float, eta: int = 3, rungs: int = 3
) -> list[Stretch]:
    """Asynchronous successive halving on mean training return (Li et al., 2020), one worker, until the budget is
    spent (its last stretch stopped where the budget ends): promote a config in the top 1/``eta`` of its rung when
    there is one (the highest rung first), else start a new config (in a random order, each once) on the lowest rung.
    Rung ``r`` runs a config to its first checkpoint at or past ``cap_usd x eta ** (r - rungs + 1)`` billed (where it
    reports), never past ``cap_usd``; a config stops for good when it reaches the target (the trial runner's rule) or
    its recording ends. Each config replays one recording, drawn as every
    strategy draws (:func:`sweep.backends.replay.draw_index`)."""
    configs = _configs(table)
    order = list(configs)
    random.Random(seed).shuffle(order)
    fresh = iter(order)
    limits = [cap_usd / USD_PER_S * eta ** (r - rungs + 1) for r in range(rungs)]
    scores: list[dict[tuple, float]] = [{} for _ in range(rungs)]
    promoted: list[set[tuple]] = [set() for _ in range(rungs)]
    at_s: dict[tuple, float] = {}
    done: set[tuple] = set()
    stretches: list[Stretch] = []
    total = 0.0
    while total < budget_usd:
        job = _promotable(scores, promoted, done, eta)
        if job is None:
            key = next(fresh, None)
            if key is None:
                break
            job = (key, 0)
        key, rung = job
        if rung > 0:
            promoted[rung - 1].add(key)
        record = configs[key][draw_index(len(configs[key]), seed, key, 0)]
        start = at_s.get(key, 0.0)  # a promoted config goes on where it stopped
        stop_s = min(limits[-1], start + (budget_usd - total) / USD_PER_S)
        upto, hit, paid_s = _run_to(record, start, limits[rung], stop_s, target)
        at_s[key] = start + paid_s
        total += paid_s * USD_PER_S
        stretches.append(Stretch(key, paid_s * USD_PER_S, equal_terms_s(hit) * USD_PER_S if hit else None))
        returns = [p.get("mean_return") for p in upto if p.get("mean_return") is not None]
        scores[rung][key] = returns[-1] if returns else float("-inf")
        if hit is not None or not record["curve"] or at_s[key] >= record["curve"][-1]["billable_s"]:
            done.add(key)  # reached the target, or its recording (a real trial's cap) ended: it runs no further
    return stretches


def _promotable(
    scores: list[dict[tuple, float]], promoted: list[set[tuple]], done: set[tuple], eta: int
) -> tuple[tuple, int] | None:
    """ASHA's promotion: the best config in the top 1/``eta`` of a rung not yet promoted from it, highest rung first
    (as (config, the rung it goes to)); None when there is none."""
    for rung in range(len(scores) - 2, -1, -1):
        ranked = sorted(scores[rung], key=lambda k: -scores[rung][k])
        top = [k for k in ranked[: len(ranked) // eta] if k not in promoted[rung] and k not in done]
        if top:
            return top[0], rung + 1
    return None


def cheapest_reached(stretches: list[Stretch]) -> tuple | None:
    """The recommendation of random search and ASHA: the config whose trial reached the target cheapest on equal
    terms (one seed each, as ``sweep.run`` ranks a search without confirmation)."""
    reached = [s for s in stretches if s.race_usd_to_target is not None]
    return min(reached, key=lambda s: s.race_usd_to_target).key if reached else None


@dataclass(frozen=True)
class Study:
    """One replayed study, as the yardstick judges it."""

    recommended: tuple | None
    spent_usd: float
    """Billed spend, every trial (search and confirmation; ASHA: every stretch)."""
    outcome: tuple
    """What it drew and paid, in order, and what it recommended: equal for studies that ran alike."""
    ran: frozenset[tuple] = frozenset()
    """The configs it trained (search and confirmation; not a throughput probe or screen): whether it ever ran a
    correct one tells search breadth from the choice among what it ran."""
    decided: bool | None = None
    """Whether its own verdict against the baseline is decided (``vs_baseline``'s 95% interval wholly below 1, as
    ``sweep.run`` reports it); None for a strategy that measures no baseline."""


def planner_study(rows: list[Row]) -> Study:
    """A study from its ledger: what ``sweep.run`` recommends from it and what it spent."""
    ends = [r for _, r in sorted(LedgerView.of(rows).last.items()) if r.ran]
    rec = summarize(rows).recommendation
    key = TrialParams.identity(rec.config.params) if rec is not None else None
    paid = tuple((TrialParams.identity(r.params), round(float(r.billable_s), 6)) for r in ends)
    ran = frozenset(TrialParams.identity(r.params) for r in ends if r.phase not in THROUGHPUT_PHASES)
    vs = rec.vs_baseline if rec is not None else None
    decided = vs is not None and vs.hi is not None and vs.hi < 1.0
    return Study(key, sum(metrics(r).usd for r in ends), (paid, key), ran, decided)


def stretches_study(stretches: list[Stretch]) -> Study:
    """A study of random search or ASHA from what it paid for."""
    key = cheapest_reached(stretches)
    paid = tuple((s.key, round(s.usd, 6)) for s in stretches)
    return Study(key, sum(s.usd for s in stretches), (paid, key), frozenset(s.key for s in stretches))


@dataclass(frozen=True)
class Verdict:
    """A strategy's studies at one budget, judged by :class:`Truth`."""

    label: str
    studies: tuple[Study, ...]
    correct: tuple[bool, ...]
    runs: tuple[float, ...]
    """Each study's spend in baseline runs (:attr:`Truth.unit_usd`)."""
    ratios: tuple[float, ...]
    """Each study's recommended / baseline, held-out means (see the module docstring for the fallbacks)."""
    unjudged: int
    """Recommendations without held-out recordings (their ratio from the table's own recordings)."""
    none: int
    """Studies that recommended nothing."""
    ran_correct: tuple[bool, ...]
    """Each study trained a correct config (:attr:`Study.ran`), whatever it recommended."""

    def line(self) -> str:
        """The one line of the yardstick, e.g. 'planner-cost budget 6 runs: correct 37/40, median study 5.8 runs,
        recommended/baseline 0.71x'."""
        return (
            f"{self.label}: correct {sum(self.correct)}/{len(self.correct)}, median study "
            f"{statistics.median(self.runs):.1f} runs, recommended/baseline {statistics.median(self.ratios):.2f}x"
        )

    @property
    def distinct(self) -> int:
        return len({s.outcome for s in self.studies})


def judge(label: str, studies: list[Study], t: Truth) -> Verdict:
    """Each study's recommendation against the held-out truth, its spend in baseline runs and its ratio."""
    correct, ran, ratios, unjudged, none = [], [], [], 0, 0
    for s in studies:
        correct.append(s.recommended in t.correct)
        ran.append(bool(s.ran & t.correct))
        if s.recommended is None:
            none += 1
            ratios.append(1.0)  # nothing recommended: the user keeps the baseline
        elif s.recommended in t.held_out:
            ratios.append(t.held_out[s.recommended] / t.held_out_baseline_usd)
        else:
            unjudged += 1
            ratios.append(t.in_sample.get(s.recommended, float("inf")) / t.held_out_baseline_usd)
    runs = tuple(s.spent_usd / t.unit_usd for s in studies)
    return Verdict(label, tuple(studies), tuple(correct), runs, tuple(ratios), unjudged, none, tuple(ran))


def per_correct(to_correct: list[float], total: list[float]) -> float:
    """Spend per correct recommendation: what every study spent, to its correct recommendation or (ended wrong) to
    its end, over the studies that ended correct (inf: none did). The expected running time of black-box optimizer
    benchmarks (COCO's ERT), which stays finite where a median of 'never' does not; a study that ended wrong counts
    all it spent and delivers nothing."""
    paid = sum(c if c != float("inf") else t for c, t in zip(to_correct, total, strict=True))
    wins = sum(c != float("inf") for c in to_correct)
    return paid / wins if wins else float("inf")


def cluster_interval(
    v: Verdict, statistic: Callable[[list[int]], float], draws: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of ``statistic`` (of a list of study indices) resampling distinct outcomes:
    the studies that ran alike are drawn together, as one, so copies of one outcome do not narrow the interval."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(v.studies):
        groups.setdefault(s.outcome, []).append(i)
    clusters = list(groups.values())
    rng = random.Random(seed)
    values = sorted(
        statistic([i for _ in clusters for i in clusters[rng.randrange(len(clusters))]]) for _ in range(draws)
    )
    return values[int(0.025 * (draws - 1))], values[int(0.975 * (draws - 1))]


def details(v: Verdict) -> str:
    """One row of the intervals table: correct share, runs per correct recommendation and the median study, each
    with its interval over distinct outcomes."""

    def share(ix: list[int]) -> float:
        return sum(v.correct[i] for i in ix) / len(ix)

    def per(ix: list[int]) -> float:
        return per_correct([v.runs[i] if v.correct[i] else float("inf") for i in ix], [v.runs[i] for i in ix])

    def median(ix: list[int]) -> float:
        return statistics.median(v.runs[i] for i in ix)

    n = len(v.studies)
    every = list(range(n))
    lo, hi = cluster_interval(v, share)
    plo, phi = cluster_interval(v, per)
    mlo, mhi = cluster_interval(v, median)
    return (
        f"| {v.label} | {sum(v.correct)}/{n} ({100 * lo:.0f}-{100 * hi:.0f}%) | {v.distinct} | "
        f"{median(every):.1f} ({mlo:.1f}-{mhi:.1f}) | {per(every):.1f} ({plo:.1f}-{phi:.1f}) | "
        f"{statistics.median(v.ratios):.2f} | {v.unjudged} | {v.none} | {sum(v.ran_correct)}/{n}, "
        f"{sum(c for c, r in zip(v.correct, v.ran_correct, strict=True) if r)} of them correct | {decided(v)} |"
    )


def decided(v: Verdict) -> str:
    """How many studies ended with their verdict against the baseline decided, '-' for a strategy with none."""
    flags = [s.decided for s in v.studies]
    return "-" if any(f is None for f in flags) else f"{sum(flags)}/{len(flags)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("--budget-runs", type=budgets, required=True, help="study budgets in baseline runs, e.g. 4,6")
    parser.add_argument("--reps", type=int, default=40, help="studies per strategy and budget")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--trial-cap-runs", type=float, default=2.5, help="per-trial cap, in baseline runs")
    parser.add_argument("--within", type=float, default=0.10, help="correct: held-out mean <= (1 + this) x the best")
    parser.add_argument("--strategies", default="planner-cost,random,asha", help=f"comma-separated: {STRATEGIES}")
    parser.add_argument("--initial-from", default="", help="a space file: also the planner on its initial design")
    parser.add_argument("--race-slack", type=float, default=None, help="the planner's (default: the GPU space's)")
    parser.add_argument("--intensify", type=int, default=None, help="the planner's (default: the GPU space's)")
    parser.add_argument(
        "--later-runs", type=float, default=None, help="its stop rule's (default: the GPU space's; 0: no stop rule)"
    )
    parser.add_argument("--no-probe", action="store_true", help="the planner searches the exact flags as knobs")
    parser.add_argument("--confirm", type=int, default=None, help="seeds per finalist (default: the GPU space's)")
    parser.add_argument("--confirm-top", type=int, default=None, help="finalists (default: the GPU space's)")
    parser.add_argument(
        "--confirm-share", type=float, default=None, help="budget kept for the confirmation (default: the GPU space's)"
    )
    parser.add_argument("--num-envs", type=env_counts, default=None, help="replay only these env counts")
    parser.add_argument("--prior", action="store_true", help="also the planner warm-started from an earlier study")
    parser.add_argument("--screen", action="store_true", help="also the planner with the throughput screen first")
    args = parser.parse_args()
    if args.confirm_share is not None and not 0 <= args.confirm_share < 1:
        parser.error(f"--confirm-share: a share of the budget in [0, 1) (got {args.confirm_share:g})")
    if args.confirm_top is not None and args.confirm_top < 1:
        parser.error(f"--confirm-top: at least 1 finalist (got {args.confirm_top})")
    table = load_table(args.table)
    scratch = tempfile.TemporaryDirectory()
    if args.num_envs:  # the replay backend reads the table from a file: the subset gets one for this run
        table = subset(table, args.num_envs)
        args.table = str(Path(scratch.name) / Path(args.table).name)
        Path(args.table).write_text(json.dumps(table))
    try:
        t = truth(table, args.target, args.within)
    except ValueError as exc:
        sys.exit(f"error: {args.table}: {exc}")
    gpu = config_mod.load("locomotion", {}, has_gpu=True)  # the planner as sweep.run runs it on a GPU
    args.race_slack = args.race_slack or gpu.search.race_slack
    args.intensify = args.intensify or gpu.search.intensify
    args.later_runs = gpu.budget.later_runs if args.later_runs is None else (args.later_runs or None)
    args.probe = gpu.search.probe and not args.no_probe
    args.confirm = args.confirm or gpu.confirm.seeds
    args.confirm_top = args.confirm_top or gpu.confirm.top
    args.confirm_share = gpu.confirm.budget_share if args.confirm_share is None else args.confirm_share
    args.baseline_params = baseline_params(table)
    args.max_trials = len(t.in_sample)
    args.trial_cap = args.trial_cap_runs * t.unit_usd
    space = table_space(table)
    held = sorted(t.held_out.items(), key=lambda kv: kv[1])
    print(
        f"table {args.table}: {len(t.in_sample)} configs, {len(table['trials'])} recordings replayed, "
        f"{len(table[BASELINE])} of the baseline ({args.baseline_params}); held out, never replayed: "
        f"{len(table[HELD_OUT])} recordings of {len(t.held_out) - 1} configs and the baseline"
    )
    print(
        f"truth: best held-out mean {held[0][1]:.1f} recorded s to target on equal terms; {len(t.correct)} configs "
        f"within {args.within:.0%} of it; the baseline's held-out mean {t.held_out_baseline_usd:.1f} s "
        f"(recommended/baseline divides by it); one baseline run = its replayed mean, {t.unit_usd:.1f} s (every "
        f"budget and study is counted in it); per-trial cap {args.trial_cap_runs:g} runs ({args.trial_cap:.1f} s)"
    )
    print(
        f"planner: sampler cost, race_slack {args.race_slack:g}, intensify {args.intensify}, exact flags "
        f"{'probed' if args.probe else 'searched'}, stop rule "
        f"{'off' if args.later_runs is None else f'at {args.later_runs:g} later runs'}, confirmation on "
        f"{args.confirm} seeds of {args.confirm_top} finalists and the baseline (budget_share {args.confirm_share:g}); "
        "no initial design, no prior"
    )
    chosen = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown:
        sys.exit(f"error: --strategies: unknown {unknown}; choose among {list(STRATEGIES)}")
    lines: list[tuple[str, str, float | None, dict[str, Any] | None, list | None]] = []
    for budget in args.budget_runs:
        for s in chosen:
            lines.append((s, f"{s} budget {budget:g} runs", budget, None, None))
    if args.initial_from:
        design = initial_design(args.initial_from, space)
        print(f"planner-cost+initial starts on {args.initial_from}'s initial design, reduced to the table: {design}")
        for budget in args.budget_runs:
            lines.append(("planner-cost", f"planner-cost+initial budget {budget:g} runs", budget, None, design))
    if args.prior:
        print(
            "planner-cost+prior starts warm from an earlier study of the same table (search.prior): the planner's "
            f"study with its stop rule alone, drawn with seed {PRIOR_SEED} + its own"
        )
        for budget in args.budget_runs:
            lines.append(("planner-cost", f"planner-cost+prior budget {budget:g} runs", budget, PRIOR, None))
    if args.screen:
        print(
            "planner-cost+screen trains every config for a few iterations first and models env steps over their "
            "throughput (search.screen); its screen trials replay the first checkpoint's training seconds and env "
            "steps prorated to those iterations, the one-time seconds whole"
        )
        for budget in args.budget_runs:
            lines.append(("planner-cost", f"planner-cost+screen budget {budget:g} runs", budget, SCREEN, None))
    if STOP_RULE is not None and args.later_runs is not None and "planner-cost" in chosen:
        lines.append(("planner-cost", "planner-cost stop rule", None, STOP_RULE, None))
        if args.screen:
            lines.append(("planner-cost", "planner-cost+screen stop rule", None, {**STOP_RULE, **SCREEN}, None))
    verdicts = []
    for strategy, label, budget, overrides, design in lines:
        studies = [study(table, args, space, strategy, budget, overrides, design, rep) for rep in range(args.reps)]
        verdict = judge(label, studies, t)
        verdicts.append(verdict)
        print(verdict.line(), flush=True)
    print(
        "\n| line | correct (95% interval) | distinct outcomes | median study, runs (95% interval) | runs per correct "
        "recommendation (95% interval) | recommended/baseline, median | recommended without held-out recordings | "
        "no recommendation | trained a correct config | verdict decided |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for v in verdicts:
        print(details(v))


def study(
    table: dict[str, Any],
    args: Any,
    space: dict[str, list],
    strategy: str,
    budget_runs: float | None,
    overrides: dict[str, Any] | None,
    design: list | None,
    rep: int,
) -> Study:
    """One study of ``strategy`` at ``budget_runs`` baseline runs (None: the stop rule's, ``overrides``)."""
    budget_usd = (budget_runs or 0.0) * args.trial_cap / args.trial_cap_runs  # at the baseline's replayed mean
    if strategy in ("random", "asha"):
        run = run_random if strategy == "random" else run_asha
        return stretches_study(run(table, rep, budget_usd, args.trial_cap, args.target))

    if overrides is PRIOR:  # a warm start: the earlier study's ledger in a run folder of its own
        first = (None, STOP_RULE) if STOP_RULE is not None and args.later_runs is not None else (budget_runs, None)
        earlier = study_rows(table, args, space, strategy, *first, design, PRIOR_SEED + rep)
        with tempfile.TemporaryDirectory() as folder:
            with LedgerWriter(Path(folder) / "ledger.jsonl") as ledger:
                for row in earlier:
                    ledger.append(row)
            return planner_study(
                study_rows(table, args, space, strategy, budget_runs, {"search.prior": folder}, design, rep)
            )
    return planner_study(study_rows(table, args, space, strategy, budget_runs, overrides, design, rep))


def study_rows(
    table: dict[str, Any],
    args: Any,
    space: dict[str, list],
    strategy: str,
    budget_runs: float | None,
    overrides: dict[str, Any] | None,
    design: list | None,
    rep: int,
) -> list[Row]:
    """The ledger rows of one planner study (:func:`study`'s arguments)."""

    class Run:  # the planner prices budget.runs itself, from the baseline it runs first
        target, trial_cap, max_trials, budget = args.target, args.trial_cap, args.max_trials, 1e9
        confirm, confirm_top, confirm_share = args.confirm, args.confirm_top, args.confirm_share
        baseline_params, race_slack, intensify = args.baseline_params, args.race_slack, args.intensify
        later_runs, probe = args.later_runs, args.probe

    Run.budget_runs = budget_runs
    Run.overrides = overrides
    return run_planner(args.table, space, strategy, rep, Run(), design)


if __name__ == "__main__":
    main()
