"""Cost-aware proposals (``sampler: cost``): which untried config to pay for next, learned from the ledger.

Every search trial that ended teaches the model, the pruned and capped ones too: a trial that reached the
target gives its cost to target on equal terms (``race_usd_to_target``); one that stopped short gives a
low-fidelity estimate from its partial curve, its equal-terms spend scaled by how far its best held-out success
was from the target (:func:`estimated_usd`). A Gaussian process over the knobs (ordinal knobs by their rank
among the choices, flags as categories; length scales chosen by marginal likelihood on a small grid) predicts
the log cost of every untried config, and the planner pays for the one with the highest expected improvement
over the best cost per expected dollar of the trial itself (:func:`choose`): a trial is capped near the best known
cost (``race_slack`` times it), so a config predicted to be cheap is also cheap to rule out.

With a throughput screen (``search.screen``, :mod:`sweep.planner.searchers.screen`) the model learns env steps to
target instead (each cost times its config's measured env steps per training second, :func:`throughputs`), with a
linear trend over the ordinal knobs (the steps grow with ``num_envs``), and each untried config's prediction is
divided by its own throughput: the steps follow the shape and the learning, the throughput is measured, not
predicted.

Numbers are USD on equal terms (one-time start-up and compilation left out), as the pruner and the ranking use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.contract import TrialState
from sweep.ledger import LedgerView, Row, metrics
from sweep.params import TrialParams

#: Ended search trials needed before the model proposes (before: the Optuna sampler's random proposals).
MIN_EVIDENCE = 3
#: Lowest best success an unreached trial's estimate divides by (a trial that learned nothing: ~20x its spend).
SUCCESS_FLOOR = 0.05
#: Length scales tried (in rank units of the ordinal knobs, 0-1 across a knob's choices; and per flag).
ORDINAL_SCALES = (0.25, 0.5, 1.0, 2.0)
FLAG_SCALES = (0.5, 1.0, 2.0, 8.0)
#: Noise variance of a standardized log cost: one seed's time to target varies widely at a fixed config.
NOISE = 0.1


def estimated_usd(rows: Sequence[Row], target: float) -> float | None:
    """A trial's cost to target on equal terms from its rows (oldest first, its end last): what it paid to reach
    the target, else its spend scaled by target / best held-out success (a straight line from no success at no
    cost through its best pass). None for a trial that spent nothing on training."""
    end = rows[-1]
    m = metrics(end)
    if end.state == TrialState.REACHED and m.race_usd_to_target is not None:
        return m.race_usd_to_target
    spent = m.race_usd
    if spent <= 0:
        return None
    seen = [value for r in rows for value in (r.success, r.success_max) if value is not None]
    best = max(seen, default=0.0)
    return spent * max(1.0, target / max(best, SUCCESS_FLOOR))


def evidence(rows: Iterable[Row], skip: set[int], target: float) -> list[tuple[dict[str, Any], float]]:
    """(params, USD estimate) of every search trial in the ledger ``rows`` that ended and trained, trials in ``skip``
    (running ones, proposals told without running) and stock runs (rsl-rl's own runner: a stock baseline, no point of
    the space) left out."""
    by_trial: dict[int, list[Row]] = {}
    for r in rows:
        by_trial.setdefault(r.trial, []).append(r)
    out = []
    for number, trial_rows in by_trial.items():
        end = trial_rows[-1]
        if number in skip or end.phase != "search" or end.params.get("mode", "sweep") != "sweep":
            continue
        usd = estimated_usd(trial_rows, target)
        if usd is not None:
            out.append((trial_rows[-1].params, usd))
    return out


def throughputs(rows: Iterable[Row]) -> dict[tuple, float]:
    """Config identity (:meth:`~sweep.params.TrialParams.identity`) -> mean env steps per training second over the
    ended screen trials (``phase='screen'``) of the ledger ``rows`` that measured any."""
    by_config: dict[tuple, list[float]] = {}
    for r in LedgerView.of(rows).last.values():
        sps = metrics(r).throughput_sps
        if r.phase == "screen" and r.ended and sps > 0:
            by_config.setdefault(TrialParams.identity(r.params), []).append(sps)
    return {key: sum(v) / len(v) for key, v in by_config.items()}


def _log_sps(
    evidence: list[tuple[dict[str, Any], float]], candidates: list[dict[str, Any]], sps: Mapping[tuple, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The log throughput of each evidence config and of each candidate; zeros (the model on cost itself) unless
    every one was screened."""
    none = np.zeros(len(evidence)), np.zeros(len(candidates))
    if not sps:
        return none
    keys = [TrialParams.identity(p) for p, _ in evidence], [TrialParams.identity(p) for p in candidates]
    if any(k not in sps for group in keys for k in group):
        return none
    return np.log([sps[k] for k in keys[0]]), np.log([sps[k] for k in keys[1]])


def _predict(
    evidence: list[tuple[dict[str, Any], float]],
    candidates: list[dict[str, Any]],
    choices: dict[str, list[Any]],
    sps: Mapping[tuple, float] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of each candidate's log USD to target: the model fitted on cost, or with every
    config's throughput on cost x throughput (env steps, up to the price) with a trend, divided back by the
    candidate's."""
    seen, unseen = _log_sps(evidence, candidates, sps)
    usd = [u * math.exp(k) for (_, u), k in zip(evidence, seen, strict=True)]
    model = CostModel([encode(p, choices) for p, _ in evidence], usd, trend=bool(unseen.any()))
    mu, sigma = model.predict([encode(p, choices) for p in candidates])
    return mu - unseen, sigma


def encode(params: dict[str, Any], choices: dict[str, list[Any]]) -> tuple[list[float], list[Any]]:
    """(ordinal features in [0, 1], categorical values) of a config: numeric knobs with several choices by their
    rank, every other varied knob (flags) as a category."""
    ordinal, categorical = [], []
    for name, values in choices.items():
        if len(values) < 2:
            continue
        value = params[name]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            ordered = sorted(values)
            ordinal.append(ordered.index(value) / (len(ordered) - 1))
        else:
            categorical.append(value)
    return ordinal, categorical


class CostModel:
    """A Gaussian process on standardized log cost with a product kernel: squared-exponential over the ordinal
    features, exp(-mismatches / scale) over the categories."""

    def __init__(self, xs: list[tuple[list[float], list[Any]]], usd: list[float], trend: bool = False) -> None:
        self.xs = xs
        z = np.log(np.asarray(usd, dtype=float))
        self.slopes = np.zeros(len(xs[0][0]) if xs else 0)
        if trend and self.slopes.size:
            self.slopes = _slopes(np.asarray([x[0] for x in xs], dtype=float), z)
            z = z - np.asarray([x[0] for x in xs], dtype=float) @ self.slopes
        self.mean, self.std = float(z.mean()), max(float(z.std()), 0.1)
        self.y = (z - self.mean) / self.std
        fits = [(self._log_likelihood(a, b), a, b) for a in ORDINAL_SCALES for b in FLAG_SCALES]
        _, self.ordinal_scale, self.flag_scale = max(fits, key=lambda f: f[0])
        self._factor = self._fit(self.ordinal_scale, self.flag_scale)

    def _kernel(self, a: list, b: list, ordinal_scale: float, flag_scale: float) -> np.ndarray:
        ao, ac = np.asarray([x[0] for x in a], dtype=float), [x[1] for x in a]
        bo, bc = np.asarray([x[0] for x in b], dtype=float), [x[1] for x in b]
        k = np.ones((len(a), len(b)))
        if ao.size and ao.shape[1]:
            d2 = ((ao[:, None, :] - bo[None, :, :]) ** 2).sum(-1)
            k *= np.exp(-0.5 * d2 / ordinal_scale**2)
        if ac and ac[0]:
            mismatch = np.asarray([[sum(u != v for u, v in zip(p, q, strict=True)) for q in bc] for p in ac])
            k *= np.exp(-mismatch / flag_scale)
        return k

    def _fit(self, ordinal_scale: float, flag_scale: float) -> tuple[np.ndarray, np.ndarray]:
        k = self._kernel(self.xs, self.xs, ordinal_scale, flag_scale) + NOISE * np.eye(len(self.xs))
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, self.y))
        return chol, alpha

    def _log_likelihood(self, ordinal_scale: float, flag_scale: float) -> float:
        chol, alpha = self._fit(ordinal_scale, flag_scale)
        return float(-0.5 * self.y @ alpha - np.log(np.diag(chol)).sum())

    def predict(self, xs: list[tuple[list[float], list[Any]]]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of log USD at each config."""
        chol, alpha = self._factor
        ks = self._kernel(xs, self.xs, self.ordinal_scale, self.flag_scale)
        mu = ks @ alpha
        v = np.linalg.solve(chol, ks.T)
        var = np.clip(1.0 - (v**2).sum(0), 1e-9, None)
        trend = np.asarray([x[0] for x in xs], dtype=float) @ self.slopes if self.slopes.size else 0.0
        return self.mean + trend + self.std * mu, self.std * np.sqrt(var)


#: Ridge on the trend's slopes (log cost per rank unit): with as few configs as knobs, a line through them all.
TREND_RIDGE = 0.1


def _slopes(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Least-squares slopes of ``z`` on the ordinal features ``x`` (rows), with an intercept and a ridge of
    :data:`TREND_RIDGE` on the slopes."""
    a = np.hstack([np.ones((len(x), 1)), x])
    penalty = TREND_RIDGE * np.eye(a.shape[1])
    penalty[0, 0] = 0.0
    coef = np.linalg.solve(a.T @ a + penalty, a.T @ z)
    return coef[1:]


def _cdf(u: np.ndarray) -> np.ndarray:
    """The standard normal distribution function, elementwise."""
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(u, dtype=float) / math.sqrt(2.0)))


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
    """Expected amount by which log cost falls below ``best`` (minimizing)."""
    u = (best - mu) / sigma
    pdf = np.exp(-0.5 * u**2) / math.sqrt(2.0 * math.pi)
    return (best - mu) * _cdf(u) + sigma * pdf


def expected_saving_usd(mu: np.ndarray, sigma: np.ndarray, best_usd: float) -> np.ndarray:
    """What one later training run is expected to save, in USD, when a config whose cost is lognormal (log mean
    ``mu``, log standard deviation ``sigma``) replaces one that costs ``best_usd``: E[max(0, best - cost)]."""
    u = (math.log(best_usd) - mu) / sigma
    return best_usd * _cdf(u) - np.exp(mu + 0.5 * sigma**2) * _cdf(u - sigma)


def expected_trial_usd(mu: np.ndarray, sigma: np.ndarray, bar_usd: float) -> np.ndarray:
    """What a trial of such a config is expected to spend on equal terms when it stops at the target or at
    ``bar_usd`` (its race cap), whichever comes first: E[min(cost, bar)]."""
    u = (math.log(bar_usd) - mu) / sigma
    return np.exp(mu + 0.5 * sigma**2) * _cdf(u - sigma) + bar_usd * (1.0 - _cdf(u))


@dataclass(frozen=True)
class Prospect:
    """The untried config whose trial is expected to pay most over the later training runs, and the figures."""

    params: dict[str, Any]
    saving_usd: float
    """Its expected saving per later training run (:func:`expected_saving_usd`) against the best mean so far."""
    trial_usd: float
    """What its trial is expected to cost: :func:`expected_trial_usd` plus the one-time costs seen."""
    later_runs: float

    @property
    def pays(self) -> bool:
        """Whether the expected saving over the later runs exceeds the trial's expected cost."""
        return self.saving_usd * self.later_runs > self.trial_usd


def prospect(
    evidence: list[tuple[dict[str, Any], float]],
    candidates: list[dict[str, Any]],
    choices: dict[str, list[Any]],
    best_usd: float,
    bar_usd: float,
    one_time_usd: float,
    later_runs: float,
    sps: Mapping[tuple, float] | None = None,
) -> Prospect | None:
    """The candidate with the highest expected saving over ``later_runs`` later training runs less its trial's
    expected cost (cost-aware stopping: the study goes on while some trial is expected to pay for itself); None while
    the evidence is too thin to say (:data:`MIN_EVIDENCE`) or there is no candidate. ``sps``: the screen's
    throughput by config (:func:`throughputs`)."""
    evidence = _placeable(evidence, choices)
    if len(evidence) < MIN_EVIDENCE or not candidates:
        return None
    mu, sigma = _predict(evidence, candidates, choices, sps)
    saving = expected_saving_usd(mu, sigma, best_usd)
    cost = expected_trial_usd(mu, sigma, bar_usd) + one_time_usd
    i = int(np.argmax(saving * later_runs - cost))
    return Prospect(candidates[i], float(saving[i]), float(cost[i]), later_runs)


def _placeable(
    evidence: list[tuple[dict[str, Any], float]], choices: dict[str, list[Any]]
) -> list[tuple[dict[str, Any], float]]:
    """The evidence whose configs lie in the space's choices: a baseline outside them (it need not lie in the space)
    teaches the model nothing it can place."""
    return [(p, usd) for p, usd in evidence if all(p.get(k) in v for k, v in choices.items() if len(v) > 1)]


def choose(
    evidence: list[tuple[dict[str, Any], float]],
    candidates: list[dict[str, Any]],
    choices: dict[str, list[Any]],
    best_usd: float | None,
    one_time_usd: float,
    sps: Mapping[tuple, float] | None = None,
) -> dict[str, Any] | None:
    """The candidate to pay for next (expected improvement of log cost per expected trial USD), or None while
    the evidence is too thin (:data:`MIN_EVIDENCE`) or there is no candidate. ``sps``: the screen's throughput by
    config (:func:`throughputs`)."""
    evidence = _placeable(evidence, choices)
    if len(evidence) < MIN_EVIDENCE or not candidates:
        return None
    mu, sigma = _predict(evidence, candidates, choices, sps)
    best = math.log(best_usd) if best_usd else min(math.log(usd) for _, usd in evidence)
    # what the trial itself costs: its predicted cost to target, at most the best (the race cap, within its slack),
    # plus one-time
    price = np.minimum(np.exp(mu), math.exp(best)) + one_time_usd
    score = expected_improvement(mu, sigma, best) / price
    return candidates[int(np.argmax(score))]


__all__ = [
    "CostModel",
    "Prospect",
    "choose",
    "encode",
    "estimated_usd",
    "evidence",
    "expected_saving_usd",
    "expected_trial_usd",
    "prospect",
    "throughputs",
]
