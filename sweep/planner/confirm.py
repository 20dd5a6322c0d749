"""The confirmation phase: which configs are confirmed, which stay in the race, and what runs next, from ledger rows.

One trial is a noisy sample (seeds of one config differ widely in cost to target: docs/benchmarks.md), so after the
search the planner re-runs its finalists on further training seeds before it recommends one:

- finalists: the search's ``confirm.top`` best configs (:func:`sweep.analysis.evidence.rank_key` over their search
  seeds, among those that reached the target), and the baseline, which need not have run in the search;
- rounds: each round gives one new training seed to every finalist still in the race that has fewer than
  ``confirm.seeds`` trials (its search trials included); all trials of a round train with the same seed, the next
  one from the study's counter (``seeds.training`` + the round's first trial number), so no search trial ever used
  it; a round starts when the previous one has ended;
- racing (:data:`RACE_RULE`), judged again before every round: a candidate clearly worse than the leader gets no
  more seeds; the baseline always gets its seeds (it is the comparison).

Everything is derived from the trials' latest rows (running ones included), so a resumed study continues the round
it was in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweep.analysis.evidence import ConfigStat, config_stats, rank_key
from sweep.config import Confirm
from sweep.contract import TrialState
from sweep.ledger import Row
from sweep.params import TrialParams
from sweep.planner.phase import Done, Wait

#: Who stops getting seeds (written into recommended.yaml and docs/methodology.md).
RACE_RULE = (
    "after each round, a candidate gets no more seeds when the leader (the best finalist so far) has only seeds "
    "that reached and it has one that stopped before the target, or when it has at least 2 seeds and either its mean "
    "USD to target on equal terms exceeds race_factor x the leader's or the lower end of its 95% interval lies above "
    "the upper end of the leader's (2 seeds each); the leader and the baseline always get their seeds"
)


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
    """The confirmation's next trial: which finalist, on which training seed."""

    finalist: Finalist
    seed: int


class Confirmation:
    """One study's confirmation as the planner drives it: its finalists (fixed once it begins: the search's rows no
    longer change) and the next trial to start. Whether it runs is the study's phase
    (:class:`sweep.planner.phase.StudyPhase`)."""

    def __init__(self, cfg: Confirm, baseline_params: Mapping[str, Any] | None, first_seed: int) -> None:
        self.cfg, self.baseline_params, self.first_seed = cfg, baseline_params, first_seed
        self._finalists: list[Finalist] | None = None

    def finalists(self, rows: Iterable[Row]) -> list[Finalist]:
        """:func:`finalists` of the search's rows, computed once."""
        if self._finalists is None:
            assert self.baseline_params is not None
            self._finalists = finalists(rows, self.baseline_params, self.cfg.top)
        return self._finalists

    def begin(self, rows: Iterable[Row]) -> Done | None:
        """The search is over: None when there are finalists to confirm, else why there is nothing to confirm."""
        if self.finalists(rows):
            return None
        return Done("no config reached the target in the search: nothing to confirm")

    def next(self, ends: Mapping[int, Row], rows: Iterable[Row], number: int) -> Start | Wait | Done:
        """The trial to start as the study's trial ``number`` (:func:`plan` over every dispatched trial's latest row,
        ``ends``); else :class:`Wait` while the round's last trials run, :class:`Done` once the confirmation is over."""
        step = plan(ends, self.finalists(rows), self.cfg.seeds, self.cfg.race_factor)
        if step.done:
            return Done(step.done)
        if not step.todo:
            return Wait("the round's last trials run")
        return Start(step.todo[0], step.seed if step.seed is not None else self.first_seed + number)


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
    return out


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
        return Plan(None, (), f"confirmation complete: every finalist in the race has {seeds} seeds")
    return Plan(None, members)


def _members(ends: Mapping[int, Row], finals: list[Finalist], seeds: int, factor: float) -> tuple[Finalist, ...]:
    """The finalists a round opened after the trials of ``ends`` gives a seed: in the race, fewer than ``seeds``
    trials (those the study's end stopped left out)."""
    ran: dict[tuple, int] = {}
    for r in ends.values():
        if r.ran and not r.by_study:
            key = TrialParams.identity(r.params)
            ran[key] = ran.get(key, 0) + 1
    stats = {c.key: c for c in config_stats(list(ends.values()))}
    out = out_of_race(stats, finals, factor)
    return tuple(f for f in finals if f.key not in out and ran.get(f.key, 0) < seeds)


__all__ = ["RACE_RULE", "Confirmation", "Finalist", "Plan", "Start", "finalists", "out_of_race", "plan"]
