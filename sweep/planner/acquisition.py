"""Cost-aware proposals (``sampler: cost``): which untried config to pay for next, learned from the ledger.

Every search trial that ended teaches the model, the pruned and capped ones too: a trial that reached the
target gives its cost to target on equal terms (``race_usd_to_target``); one that stopped short gives a
low-fidelity estimate from its partial curve, its equal-terms spend scaled by how far its best held-out success
was from the target (:func:`estimated_usd`). A Gaussian process over the knobs (ordinal knobs by their rank
among the choices, flags as categories; length scales chosen by marginal likelihood on a small grid) predicts
the log cost of every untried config, and the planner pays for the one with the highest expected improvement
over the best cost per expected dollar of the trial itself (:func:`choose`): a trial is capped near the best known
cost (``race_slack`` times it), so a config predicted to be cheap is also cheap to rule out.

Numbers are USD on equal terms (one-time start-up and compilation left out), as the pruner and the ranking use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sweep.contract import TrialState
from sweep.ledger import Row, metrics

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
    (running ones, proposals told without running) left out."""
    by_trial: dict[int, list[Row]] = {}
    for r in rows:
        by_trial.setdefault(r.trial, []).append(r)
    out = []
    for number, trial_rows in by_trial.items():
        if number in skip or trial_rows[-1].phase != "search":
            continue
        usd = estimated_usd(trial_rows, target)
        if usd is not None:
            out.append((trial_rows[-1].params, usd))
    return out


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

    def __init__(self, xs: list[tuple[list[float], list[Any]]], usd: list[float]) -> None:
        self.xs = xs
        z = np.log(np.asarray(usd, dtype=float))
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
        return self.mean + self.std * mu, self.std * np.sqrt(var)


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
    """Expected amount by which log cost falls below ``best`` (minimizing)."""
    u = (best - mu) / sigma
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(u / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * u**2) / math.sqrt(2.0 * math.pi)
    return (best - mu) * cdf + sigma * pdf


def choose(
    evidence: list[tuple[dict[str, Any], float]],
    candidates: list[dict[str, Any]],
    choices: dict[str, list[Any]],
    best_usd: float | None,
    one_time_usd: float,
) -> dict[str, Any] | None:
    """The candidate to pay for next (expected improvement of log cost per expected trial USD), or None while
    the evidence is too thin (:data:`MIN_EVIDENCE`) or there is no candidate."""
    if len(evidence) < MIN_EVIDENCE or not candidates:
        return None
    model = CostModel([encode(p, choices) for p, _ in evidence], [usd for _, usd in evidence])
    mu, sigma = model.predict([encode(p, choices) for p in candidates])
    best = math.log(best_usd) if best_usd else min(math.log(usd) for _, usd in evidence)
    # what the trial itself costs: its predicted cost to target, at most the best (the race cap, within its slack),
    # plus one-time
    price = np.minimum(np.exp(mu), math.exp(best)) + one_time_usd
    score = expected_improvement(mu, sigma, best) / price
    return candidates[int(np.argmax(score))]


__all__ = ["CostModel", "choose", "encode", "estimated_usd", "evidence"]
