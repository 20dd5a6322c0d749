"""The confirmation phase: which configs are confirmed, which stay in the race, and what runs next, from ledger rows.

One trial is a noisy sample (seeds of one config differ widely in cost to target: docs/benchmarks.md), so after the
search the planner re-runs its finalists on further training seeds before it recommends one:

- finalists: the search's ``confirm.top`` best configs (:func:`sweep.analysis.evidence.rank_key` over their search
  seeds, among those that reached the target), and the baseline, which need not have run in the search;
- rounds: each round gives one new training seed to every finalist still in the race that has fewer than
  ``confirm.seeds`` trials (its search trials included); all trials of a round train with the same seed, the next
  one from the study's counter (``seeds.training`` + the round's first trial number), so no search trial ever used
  it; a round starts when the previous one has ended;
- the verdict first (:data:`VERDICT_RULE`): the verdict's two sides, the leader and the baseline, run first in a
  round, so a budget that ends the confirmation early has spent on the proof before the other finalists;
- racing (:data:`RACE_RULE`), judged again before every round: a candidate clearly worse than the leader gets no
  more seeds; the baseline always gets its seeds (it is the comparison);
- probes first (``search.probe``): the exact flags the search held (:func:`sweep.planner.space.probed_flags`) are
  decided by throughput probes on the leader's shape (:data:`PROBE_RULE`), and every finalist but the baseline
  carries the decision; a finalist whose flags change is a new config, with no seed yet.

Everything is derived from the trials' latest rows (running ones included), so a resumed study continues the round
it was in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweep.analysis.evidence import ConfigStat, config_stats, rank_key, ratio_interval
from sweep.config import Confirm
from sweep.contract import THROUGHPUT_PHASES, TrialState
from sweep.ledger import Row, metrics
from sweep.params import TrialParams, flag_key
from sweep.planner.phase import Done, Wait

#: Who stops getting seeds (written into recommended.yaml and docs/methodology.md).
RACE_RULE = (
    "after each round, a candidate gets no more seeds when the leader (the best finalist so far) has only seeds "
    "that reached and it has one that stopped before the target, or when it has at least 2 seeds and either its mean "
    "USD to target on equal terms exceeds race_factor x the leader's or the lower end of its 95% interval lies above "
    "the upper end of the leader's (2 seeds each); the baseline gets no more seeds once the verdict against it is "
    "decided (2 seeds each and the 95% interval of leader / baseline wholly below or wholly above 1), and the leader "
    "none once that verdict is decided and no other candidate is left in the race"
)


#: Who gets a round's seeds first (written into recommended.yaml and docs/methodology.md).
VERDICT_RULE = (
    "in each round the verdict's two sides, the leader (the best finalist so far) and the baseline, run first, the "
    "one with fewer seeds before the other (on a tie, the leader while the confirmation has not run it, else the one "
    "whose seeds cost more: what is left after it may still pay the cheaper one), then the other finalists in the "
    "search's order; a finalist the budget left cannot pay is passed over for the next one it can"
)


#: How a probe decides an exact flag (written into docs/methodology.md).
PROBE_RULE = (
    "an exact flag the search held leaves its held setting only when a probe of another setting, on the leader's "
    "config, trains faster over its round than the leader's own seeds did over their second (a round that pays no "
    "first-round costs), by more than PROBE_MARGIN; a round's throughput varies between seeds of one config by "
    "about that much"
)
#: How much more throughput (env steps per training second) a probe must measure to move a held flag.
PROBE_MARGIN = 1.10


@dataclass(frozen=True)
class Finalist:
    """A config confirmed on further seeds."""

    key: tuple
    """Its identity (:meth:`~sweep.params.TrialParams.identity`)."""
    params: dict[str, Any]
    """Its knobs as the planner proposes them (``TrialParams.as_dict``: flags as ``flags.<name>``)."""
    baseline: bool = False


@dataclass(frozen=True)
class Plan:
    """What the confirmation does next."""

    seed: int | None
    """The training seed of the round under way; None: the next trial opens a round (its seed from the counter)."""
    todo: tuple[Finalist, ...]
    """Finalists still to run in that round, in order (empty while its last trials run, or when done)."""
    done: str = ""
    """Why the confirmation is over ('' while it goes on)."""


@dataclass(frozen=True)
class Start:
    """The confirmation's next trial: which finalist (or probe), on which training seed."""

    finalist: Finalist
    seed: int
    probe: bool = False
    """A throughput probe (``phase='probe'``): one round of training, no held-out pass."""


class Confirmation:
    """One study's confirmation as the planner drives it: its finalists (fixed once it begins: the search's rows no
    longer change) and the next trial to start. Whether it runs is the study's phase
    (:class:`sweep.planner.phase.StudyPhase`)."""

    def __init__(
        self,
        cfg: Confirm,
        baseline_params: Mapping[str, Any] | None,
        first_seed: int,
        probed: Mapping[str, tuple[Any, tuple[Any, ...]]] | None = None,
    ) -> None:
        self.cfg, self.baseline_params, self.first_seed = cfg, baseline_params, first_seed
        self.probed = dict(probed or {})
        """Flag name -> (the setting the search held it at, the other settings a probe tries)."""
        self._candidates: list[Finalist] | None = None
        self._finalists: list[Finalist] | None = None
        self.decisions: list[str] = []
        """What the probes decided, one sentence per probed flag (once they have ended)."""

    def candidates(self, rows: Iterable[Row]) -> list[Finalist]:
        """:func:`finalists` of the search's rows, computed once: the finalists before the probes."""
        if self._candidates is None:
            assert self.baseline_params is not None
            self._candidates = finalists(rows, self.baseline_params, self.cfg.top)
        return self._candidates

    def finalists(self, rows: Iterable[Row]) -> list[Finalist]:
        """The candidates with the probes' decisions (:func:`decide`), computed once every probe has ended."""
        if self._finalists is None:
            rows = list(rows)
            flags, self.decisions = decide(rows, self.candidates(rows), self.probe_trials(rows), self.probed)
            self._finalists = [_with_flags(f, flags) for f in self.candidates(rows)]
        return self._finalists

    def probe_trials(self, rows: Iterable[Row]) -> list[Finalist]:
        """The probes to run: the leader (the first candidate) with one probed flag at one other setting each."""
        found = self.candidates(rows)
        if not found or found[0].baseline:
            return []
        lead = found[0]
        out = []
        for name, (_, others) in self.probed.items():
            for value in others:
                params = {**lead.params, flag_key(name): value}
                out.append(Finalist(TrialParams.identity(params), params))
        return out

    def begin(self, rows: Iterable[Row]) -> Done | None:
        """The search is over: None when there are finalists to confirm, else why there is nothing to confirm."""
        if self.candidates(rows):
            return None
        return Done("no searched config other than the baseline reached the target: nothing to confirm")

    def next(
        self,
        ends: Mapping[int, Row],
        rows: Iterable[Row],
        number: int,
        payable: Callable[[tuple], bool] = lambda key: True,
    ) -> Start | Wait | Done:
        """The trial to start as the study's trial ``number``: a probe not yet run, then (:func:`plan` over every
        dispatched trial's latest row, ``ends``) the rounds: the round's first finalist still to run for which
        ``payable(key)`` holds (the budget left can pay its trial), or its first when none does; else :class:`Wait`
        while the probes or the round's last trials run, :class:`Done` once the confirmation is over."""
        rows = list(rows)
        probes = {t: r for t, r in ends.items() if r.phase == "probe" and not r.by_study}
        probed = {TrialParams.identity(r.params) for r in probes.values()}
        pending = [p for p in self.probe_trials(rows) if p.key not in probed]
        if pending:
            return Start(pending[0], self.first_seed + number, probe=True)
        if any(r.state == TrialState.RUNNING for r in probes.values()):
            return Wait("the probes run")
        step = plan(ends, self.finalists(rows), self.cfg.seeds, self.cfg.race_factor)
        if step.done:
            return Done("; ".join([step.done, *self.decisions]))
        if not step.todo:
            return Wait("the round's last trials run")
        pick = next((f for f in step.todo if payable(f.key)), step.todo[0])
        return Start(pick, step.seed if step.seed is not None else self.first_seed + number)


def throughput(rows: Iterable[Row], key: tuple, phase: str, steady: bool = False) -> float | None:
    """The mean env steps per training second of config ``key``'s trials of ``phase``: over each trial's first round
    (its first row), or with ``steady`` over its second round where it has one (what the rows after the first add),
    which pays no first-round costs (the first rollouts and updates of a shape new to the worker; the CUDA-graph
    capture and its wait, once 1.1 s of a 4 s round on one H100, are billed to compilation); None when no trial has a
    round."""
    by_trial: dict[int, list[Row]] = {}
    for r in rows:
        if r.phase == phase and TrialParams.identity(r.params) == key and r.env_steps > 0:
            by_trial.setdefault(r.trial, []).append(r)
    sps = []
    for trial_rows in by_trial.values():
        first = metrics(trial_rows[0])
        later = [r for r in trial_rows[1:] if r.env_steps > trial_rows[0].env_steps]
        second = metrics(later[0]) if steady and later else None
        if second is not None and second.training_s > first.training_s:
            sps.append((later[0].env_steps - trial_rows[0].env_steps) / (second.training_s - first.training_s))
        else:
            sps.append(first.throughput_sps)
    return sum(sps) / len(sps) if sps else None


def decide(
    rows: list[Row],
    candidates: list[Finalist],
    probes: list[Finalist],
    probed: Mapping[str, tuple[Any, tuple[Any, ...]]],
) -> tuple[dict[str, Any], list[str]]:
    """Each probed flag's setting by :data:`PROBE_RULE` (name -> value), and a sentence per flag saying why."""
    if not probes:
        return {}, []
    held = throughput(rows, candidates[0].key, "search", steady=True)
    out: dict[str, Any] = {}
    said = []
    for name, (value, others) in probed.items():
        tried = {}
        for p in probes:
            setting = p.params[flag_key(name)]
            if setting in others:
                sps = throughput(rows, p.key, "probe")
                if sps is not None:
                    tried[setting] = sps
        best = max(tried, key=lambda s: tried[s], default=None)
        moved = held is not None and best is not None and tried[best] > PROBE_MARGIN * held
        out[name] = best if moved else value
        shown = ", ".join(f"{_text(s)} {sps:.4g}" for s, sps in tried.items())
        said.append(
            f"probe: {name} {_text(out[name])} (env steps/s over the first round: held {_text(value)} "
            f"{held or 0.0:.4g}, {shown or 'no probe ended'})"
        )
    return out, said


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _with_flags(f: Finalist, flags: Mapping[str, Any]) -> Finalist:
    """A finalist with the probes' flag settings (the baseline keeps its own)."""
    if f.baseline or not flags:
        return f
    params = {**f.params, **{flag_key(name): value for name, value in flags.items()}}
    return Finalist(TrialParams.identity(params), params)


def finalists(rows: Iterable[Row], baseline_params: Mapping[str, Any], top: int) -> list[Finalist]:
    """The ``top`` best configs of the search that reached the target (the baseline aside), then the baseline;
    none when no config reached (there is nothing to confirm)."""
    base_key = TrialParams.identity(baseline_params)
    ranked = [c for c in config_stats(rows, "search") if c.n_reached > 0 and c.key != base_key][:top]
    if not ranked:
        return []
    picked = [Finalist(c.key, TrialParams.of(c.params).as_dict()) for c in ranked]
    return [*picked, Finalist(base_key, TrialParams.of(baseline_params).as_dict(), baseline=True)]


def out_of_race(stats: Mapping[tuple, ConfigStat], finals: list[Finalist], factor: float) -> dict[tuple, str]:
    """The candidates that get no more seeds (:data:`RACE_RULE`), each with why."""
    judged = [stats[f.key] for f in finals if f.key in stats and stats[f.key].race_mean is not None]
    if not judged:
        return {}
    leader = min(judged, key=rank_key)
    out: dict[tuple, str] = {}
    for f in finals:
        c = stats.get(f.key)
        if f.baseline or c is None or c.key == leader.key or c.race_mean is None:
            continue
        lead = leader.race_mean or 0.0
        if c.censored and not leader.censored:
            out[f.key] = "a seed stopped before the target while every seed of the leader reached"
        elif len(c.race_usd) >= 2 and c.race_mean > factor * lead:
            out[f.key] = f"mean ${c.race_mean:.4f} > {factor:g} x the leader's ${lead:.4f}"
        elif len(c.race_usd) >= 2 and len(leader.race_usd) >= 2 and (c.race_lo or 0.0) > (leader.race_hi or 0.0):
            out[f.key] = f"95% interval from ${c.race_lo:.4f} lies above the leader's, to ${leader.race_hi:.4f}"
    return out | decided(stats, finals, out)


def _racing(stats: Mapping[tuple, ConfigStat], finals: list[Finalist], out: Mapping[tuple, str]) -> list[ConfigStat]:
    """The candidates still in the race (the baseline aside, none of ``out``) with a mean to rank them by."""
    racing = [stats[f.key] for f in finals if not f.baseline and f.key in stats and f.key not in out]
    return [c for c in racing if c.race_mean is not None]


def decided(stats: Mapping[tuple, ConfigStat], finals: list[Finalist], out: Mapping[tuple, str]) -> dict[tuple, str]:
    """The baseline and the leader once the verdict between them is decided (:data:`RACE_RULE`), each with why: more
    seeds of either would not change it, and the leader's would not change the order either when no other candidate
    is left in the race."""
    base = next((stats.get(f.key) for f in finals if f.baseline), None)
    racing = _racing(stats, finals, out)
    if base is None or not racing:
        return {}
    lead = min(racing, key=rank_key)
    if lead.censored or base.censored or len(lead.race_usd) < 2 or len(base.race_usd) < 2:
        return {}
    ratio, lo, hi = ratio_interval(lead.race_usd, base.race_usd)
    if lo is None or hi is None or lo <= 1.0 <= hi:
        return {}
    side = "below" if hi < 1 else "above"
    why = f"verdict decided: leader / baseline {ratio:.2f} (95% interval {lo:.2f}-{hi:.2f}) lies {side} 1"
    done = {base.key: why}
    if len(racing) == 1:
        done[lead.key] = why
    return done


def plan(ends: Mapping[int, Row], finals: list[Finalist], seeds: int, factor: float) -> Plan:
    """The next step of the confirmation, from every dispatched trial's latest row (``ends``: trial -> row, running
    trials as 'running' rows with their params, seed and phase)."""
    confirm = {t: r for t, r in ends.items() if r.phase == "confirm"}
    if confirm:
        seed = max(int(r.seed) for r in confirm.values())
        before = {t: r for t, r in ends.items() if t not in confirm or int(r.seed) < seed}
        ran = {
            TrialParams.identity(r.params)
            for r in confirm.values()
            if int(r.seed) == seed and not r.by_study  # one stopped by the study's end runs again
        }
        todo = tuple(f for f in _members(before, finals, seeds, factor) if f.key not in ran)
        if todo:
            return Plan(seed, todo)
        if any(r.state == TrialState.RUNNING for r in confirm.values()):
            return Plan(seed, ())
    members = _members(ends, finals, seeds, factor)
    if not members:
        return Plan(
            None,
            (),
            f"confirmation complete: every finalist has {seeds} seeds, has left the race or has its verdict decided",
        )
    return Plan(None, members)


def _mean(stats: Mapping[tuple, ConfigStat], key: tuple) -> float:
    """A config's mean cost on equal terms over its counted seeds (0 without one)."""
    stat = stats.get(key)
    return (stat.race_mean or 0.0) if stat is not None else 0.0


def _unconfirmed_leader(stats: Mapping[tuple, ConfigStat], f: Finalist, lead: ConfigStat | None) -> bool:
    """Whether ``f`` is the leader and the confirmation has not run it yet: the ranking puts confirmed configs first
    (:func:`sweep.analysis.evidence.rank_key`), so a baseline confirmed before it would outrank it."""
    return lead is not None and f.key == lead.key and not stats[f.key].confirmed


def _members(ends: Mapping[int, Row], finals: list[Finalist], seeds: int, factor: float) -> tuple[Finalist, ...]:
    """The finalists a round opened after the trials of ``ends`` gives a seed: in the race, fewer than ``seeds``
    trials (those the study's end stopped left out), in :data:`VERDICT_RULE`'s order."""
    ran: dict[tuple, int] = {}
    for r in ends.values():
        if r.ran and not r.by_study and r.phase not in THROUGHPUT_PHASES:
            key = TrialParams.identity(r.params)
            ran[key] = ran.get(key, 0) + 1
    stats = {c.key: c for c in config_stats(list(ends.values()))}
    out = out_of_race(stats, finals, factor)
    lead = min(_racing(stats, finals, out), key=rank_key, default=None)
    members = [f for f in finals if f.key not in out and ran.get(f.key, 0) < seeds]
    sides = sorted(
        (f for f in members if f.baseline or (lead is not None and f.key == lead.key)),
        key=lambda f: (ran.get(f.key, 0), not _unconfirmed_leader(stats, f, lead), -_mean(stats, f.key), f.baseline),
    )
    return (*sides, *(f for f in members if f not in sides))


__all__ = [
    "PROBE_MARGIN",
    "PROBE_RULE",
    "RACE_RULE",
    "VERDICT_RULE",
    "Confirmation",
    "Finalist",
    "Plan",
    "Start",
    "decide",
    "finalists",
    "out_of_race",
    "plan",
    "throughput",
]
