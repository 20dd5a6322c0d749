"""The evidence behind a recommendation, from the ledger only: each config over its seeds (mean USD to target with a
95% Student t interval, on equal terms and billed), how configs rank, the recommended config and its ratio to the
baseline with an interval, whether the study paid for itself (:class:`Payback`); the rules, in words, that
recommended.yaml and the README quote.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sweep.analysis.figures import TrialFigures
from sweep.contract import END_STATES, THROUGHPUT_PHASES, TrialState
from sweep.ledger import LedgerView, Row, metrics
from sweep.params import TrialParams

#: Student t 0.975 quantiles for 1-30 degrees of freedom (scipy.stats.t.ppf, to 6 decimals); above 30 an expansion.
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip
_Z975 = 1.959963985


def t975(df: int) -> float:
    """The two-sided 95% Student t quantile for ``df`` >= 1 degrees of freedom (scipy is not a dependency)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    if df <= len(_T975):
        return _T975[df - 1]
    z, n = _Z975, float(df)  # Cornish-Fisher expansion around the normal quantile: within 1e-6 from 31 on
    return (
        z
        + (z**3 + z) / (4 * n)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3)
    )


#: How the recommendation is chosen (written into recommended.yaml and the README).
RANKING_RULE = (
    "the config with the lowest mean USD to target on equal terms (billable seconds less one-time start-up and "
    "compilation, x price) over its seeds; a seed that stopped on cost before the target (pruned, or at its cap) "
    "counts at what it had spent, a lower bound, and a config with such a seed ranks after every config whose seeds "
    "all reached; when a confirmation ran, the configs it confirmed rank before every config it did not (a single "
    "search seed cannot outrank a mean over confirmed seeds); failed trials and trials stopped by the study's end "
    "are no seeds of the mean"
)
#: How the recommendation is compared with the baseline.
VS_BASELINE_RULE = (
    "ratio of the mean USD to target on equal terms, recommended / baseline (one-time start-up and compilation left "
    "out of both); 95% interval by the delta method on the log of each mean, the two sides' coefficient of variation "
    "pooled (Student's degrees of freedom, the seeds of both less 2), each config's seeds taken as independent "
    "samples (confirmation gives both the same seeds, their search seeds differ); no interval with fewer than 2 seeds "
    "on either side"
)


@dataclass(frozen=True)
class ConfigStat:
    """One config (:meth:`~sweep.params.TrialParams.identity`) over the trials that ran it, each with its own seed:
    the mean USD to target of the seeds that reached it (billed), with a 95% Student t interval over those seeds, and
    the same on equal terms over every seed that counts (:data:`RANKING_RULE`), which ranks configs."""

    key: tuple
    params: dict[str, Any]
    """The params of the config's first trial (as the ledger records them)."""
    trials: tuple[int, ...]
    """Trials that ran this config to an end (configs told without running and trials still running left out)."""
    seeds: tuple[int, ...]
    """Their training seeds, in the same order."""
    reached_trials: tuple[int, ...]
    usd_to_target: tuple[float, ...]
    """USD to target of each reached trial, in the order of ``reached_trials``."""
    mean_usd: float | None
    """Mean USD to target over the reached seeds (None when none reached)."""
    lo: float | None
    """Lower end of the 95% t interval of that mean (equal to the mean with one reached seed)."""
    hi: float | None
    counted_trials: tuple[int, ...] = ()
    """Trials whose cost is a seed of the ranking mean: the reached ones and the censored ones (stopped on cost)."""
    race_usd: tuple[float, ...] = ()
    """USD on equal terms of each counted trial (to the target, or until it stopped), in that order."""
    censored_trials: tuple[int, ...] = ()
    """Counted trials that stopped on cost before the target: their cost to target is more than they spent."""
    race_mean: float | None = None
    """Mean USD on equal terms over the counted seeds (a lower bound when one is censored); None when none counts."""
    race_lo: float | None = None
    race_hi: float | None = None
    baseline: bool = False
    """The config is the study's baseline (a trial of it says so)."""
    confirmed: bool = False
    """The confirmation phase ran this config (a trial of it says so)."""

    @property
    def n_seeds(self) -> int:
        return len(self.trials)

    @property
    def n_reached(self) -> int:
        return len(self.reached_trials)

    @property
    def censored(self) -> bool:
        return bool(self.censored_trials)

    @property
    def reached_seeds(self) -> tuple[int, ...]:
        return tuple(seed for t, seed in zip(self.trials, self.seeds, strict=True) if t in self.reached_trials)

    @property
    def counted_seeds(self) -> tuple[int, ...]:
        """The seeds of the mean on equal terms (:attr:`counted_trials`), in trial order."""
        return tuple(seed for t, seed in zip(self.trials, self.seeds, strict=True) if t in self.counted_trials)


def rank_key(c: ConfigStat) -> tuple:
    """How configs rank (:data:`RANKING_RULE`): those with a counted seed first, confirmed before unconfirmed,
    uncensored before censored, then by mean USD to target on equal terms, then by first trial."""
    return (c.race_mean is None, not c.confirmed, c.censored, c.race_mean or 0.0, c.trials[0])


def config_stats(rows: Iterable[Row], phase: str | None = None) -> list[ConfigStat]:
    """Every config that ran (of the study ``phase``, or of both), with its seeds and mean costs, best first
    (:func:`rank_key`); kept by the rows' view until its next row."""
    return LedgerView.of(rows).derived(_config_stats, phase)


def _config_stats(view: LedgerView, phase: str | None) -> list[ConfigStat]:
    groups: dict[tuple, list[Row]] = {}
    ends = view.last
    for r in (ends[t] for t in sorted(ends)):
        # a throughput probe or screen measured no cost to target: no seed of its config
        in_phase = r.phase == phase if phase is not None else r.phase not in THROUGHPUT_PHASES
        if r.state in END_STATES and r.ran and in_phase:
            groups.setdefault(TrialParams.identity(r.params), []).append(r)
    stats = []
    for key, members in groups.items():
        reached = [r for r in members if r.state == TrialState.REACHED]
        counted = [r for r in members if r.state == TrialState.REACHED or r.censored]
        usd = tuple(float(metrics(r).usd_to_target or 0.0) for r in reached)
        race = tuple(float(metrics(r).race_usd) for r in counted)
        mean, lo, hi = _t_interval(usd)
        race_mean, race_lo, race_hi = _t_interval(race)
        stats.append(
            ConfigStat(
                key=key,
                params=members[0].params,
                trials=tuple(r.trial for r in members),
                seeds=tuple(int(r.seed) for r in members),
                reached_trials=tuple(r.trial for r in reached),
                usd_to_target=usd,
                mean_usd=mean,
                lo=lo,
                hi=hi,
                counted_trials=tuple(r.trial for r in counted),
                race_usd=race,
                censored_trials=tuple(r.trial for r in counted if r.state != TrialState.REACHED),
                race_mean=race_mean,
                race_lo=race_lo,
                race_hi=race_hi,
                baseline=any(r.baseline for r in members),
                confirmed=any(r.phase == "confirm" for r in members),
            )
        )
    return sorted(stats, key=rank_key)


@dataclass(frozen=True)
class VsBaseline:
    """The recommended config against the baseline (:data:`VS_BASELINE_RULE`)."""

    ratio: float | None
    """Mean USD to target on equal terms, recommended / baseline (None when the baseline has no counted seed)."""
    lo: float | None
    """95% interval of the ratio (None with fewer than 2 seeds on either side)."""
    hi: float | None
    baseline: ConfigStat
    shared_seeds: tuple[int, ...]
    """Training seeds both configs ran."""


@dataclass(frozen=True)
class Recommendation:
    """The recommended config over its seeds (:data:`RANKING_RULE`) and how it compares with the baseline."""

    config: ConfigStat
    trial: TrialFigures
    """Its cheapest seed to the target on equal terms: the trial whose checkpoint is the deliverable."""
    vs_baseline: VsBaseline | None
    """None when no trial ran the baseline."""

    @property
    def is_baseline(self) -> bool:
        return self.config.baseline


def recommend(stats: list[ConfigStat], trials: dict[int, TrialFigures]) -> Recommendation | None:
    """The best config (``stats`` ranked by :func:`rank_key`) that reached the target at least once, or None."""
    best = next((c for c in stats if c.n_reached > 0 and c.race_mean is not None), None)
    if best is None:
        return None
    trial = min((trials[t] for t in best.reached_trials), key=lambda t: (t.race_usd_to_target or 0.0, t.trial))
    base = next((c for c in stats if c.baseline), None)
    vs = None
    if base is not None:
        ratio, lo, hi = ratio_interval(best.race_usd, base.race_usd)
        vs = VsBaseline(ratio, lo, hi, base, tuple(sorted(set(best.seeds) & set(base.seeds))))
    return Recommendation(best, trial, vs)


#: How the payback is counted (written into recommended.yaml).
PAYBACK_RULE = (
    "study_in_baseline_runs = study spend (every trial billed: search, confirmation, pruned and failed) / the "
    "baseline's mean USD to target on equal terms; saving_per_run_usd = the baseline's mean minus the recommended "
    "config's mean, both on equal terms; runs_to_pay_back = study spend / that saving (null when the saving is not "
    "positive): the training runs of the recommended config after which the study has paid for itself"
)


@dataclass(frozen=True)
class Payback:
    """Whether the study was worth it (:data:`PAYBACK_RULE`): its spend against the baseline's cost to target and the
    saving per training run of the recommended config. The figures are None where there is no baseline comparison,
    and ``note`` says why."""

    study_usd: float
    """What the study cost: every trial's billed spend (USD)."""
    recommended_mean_usd: float
    """The recommended config's mean USD to target on equal terms over its counted seeds."""
    baseline_mean_usd: float | None = None
    """The baseline's mean USD to target on equal terms over its counted seeds; None without a comparison."""
    study_in_baseline_runs: float | None = None
    """Study spend / the baseline's mean USD to target: how many baseline training runs the study cost."""
    saving_per_run_usd: float | None = None
    """Baseline mean minus recommended mean, both on equal terms (USD per training run; 0 when the recommended config
    is the baseline, negative when it costs more)."""
    runs_to_pay_back: float | None = None
    """Study spend / the saving per run: training runs of the recommended config until the study has paid for itself;
    None when the saving is not positive."""
    baseline_is_lower_bound: bool = False
    """A baseline seed stopped on cost before the target, so the baseline's mean is a lower bound: the saving is then
    at least ``saving_per_run_usd`` and the runs to pay back at most ``runs_to_pay_back``."""
    note: str = ""
    """Why there is no comparison (no baseline run, the baseline did not reach, ...), or '' when there is one."""

    @property
    def compared(self) -> bool:
        """Whether the study was compared with the baseline (the figures are there)."""
        return self.baseline_mean_usd is not None


def payback(rec: Recommendation, study_usd: float) -> Payback:
    """The payback of a study that spent ``study_usd`` (USD, every trial billed) and recommends ``rec``."""
    c = rec.config
    mean = float(c.race_mean or 0.0)
    if c.censored:
        note = "no payback: the recommended config's mean is a lower bound (one of its seeds stopped before the target)"
        return Payback(study_usd, mean, note=note)
    vs = rec.vs_baseline
    if vs is None:
        return Payback(
            study_usd, mean, note="no baseline comparison: the baseline was not run (confirm.seeds > 1 runs it)"
        )
    base = vs.baseline
    if base.n_reached == 0 or not base.race_mean:
        n = len(base.trials)
        note = f"no baseline comparison: the baseline ran {n} trial{'s' if n != 1 else ''} and none reached the target"
        return Payback(study_usd, mean, note=note)
    saving = base.race_mean - mean
    return Payback(
        study_usd=study_usd,
        recommended_mean_usd=mean,
        baseline_mean_usd=base.race_mean,
        study_in_baseline_runs=study_usd / base.race_mean,
        saving_per_run_usd=saving,
        runs_to_pay_back=study_usd / saving if saving > 0 else None,
        baseline_is_lower_bound=base.censored,
    )


def ratio_interval(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float | None, float | None, float | None]:
    """(ratio, lo, hi): mean(a) / mean(b) with its 95% interval by the delta method on log means, the two sides'
    coefficient of variation pooled (Student's degrees of freedom, ``len(a) + len(b) - 2``; samples independent); no
    interval with fewer than 2 values on either side. Pooling assumes one spread of log cost for both sides, which
    the recorded seeds bear out (docs/decisions/0025-pooled-verdict.md); Welch's unpooled interval is the wider one
    at 2-3 seeds a side, more than 95% of the time around the true ratio."""
    if not a or not b:
        return None, None, None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    if ma <= 0 or mb <= 0:
        return (ma / mb if mb > 0 else None), None, None
    ratio = ma / mb
    if len(a) < 2 or len(b) < 2:
        return ratio, None, None
    dof = len(a) + len(b) - 2
    cv2 = (sum((x - ma) ** 2 for x in a) / ma**2 + sum((x - mb) ** 2 for x in b) / mb**2) / dof
    half = t975(dof) * math.sqrt(cv2 * (1 / len(a) + 1 / len(b)))  # the sd of log(mean a / mean b), to first order
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def _t_interval(values: tuple[float, ...]) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi): the 95% Student t interval of the mean of costs (its low end clipped at 0: with 2 seeds the
    t interval can reach below zero); a single value is its own interval."""
    n = len(values)
    if n == 0:
        return None, None, None
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), mean + half  # a cost: the interval's low end is clipped at zero
