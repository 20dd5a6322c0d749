"""sweep.analysis.evidence.ratio_interval: the verdict's interval, the two sides' spread pooled."""

from __future__ import annotations

import math
import random

import pytest

from sweep.analysis.evidence import ratio_interval, t975


def test_the_interval_pools_the_two_sides_spread_with_students_degrees_of_freedom() -> None:
    a, b = (10.0, 11.0), (28.0, 30.0)
    ratio, lo, hi = ratio_interval(a, b)
    cv2 = ((0.5**2 * 2) / 10.5**2 + (1.0**2 * 2) / 29.0**2) / 2  # pooled squared coefficient of variation, 2 dof
    half = t975(2) * math.sqrt(cv2 * (1 / 2 + 1 / 2))
    assert ratio == pytest.approx(10.5 / 29.0)
    assert (lo, hi) == (pytest.approx(ratio * math.exp(-half)), pytest.approx(ratio * math.exp(half)))
    assert (round(lo, 2), round(hi, 2)) == (0.28, 0.47)  # Welch's one degree of freedom gave 0.17-0.76


def test_no_interval_without_two_seeds_a_side() -> None:
    assert ratio_interval((10.0,), (20.0, 22.0)) == (pytest.approx(10.0 / 21.0), None, None)
    assert ratio_interval((), (20.0,)) == (None, None, None)
    assert ratio_interval((10.0, 10.0), (20.0, 20.0)) == (0.5, 0.5, 0.5)  # no spread: the ratio itself


@pytest.mark.parametrize("n", [2, 3])
def test_at_one_spread_the_interval_holds_the_true_ratio_95_percent_of_the_time(n: int) -> None:
    rng = random.Random(n)
    sd, draws, held = 0.16, 4000, 0
    for _ in range(draws):  # lognormal costs, means 0.6 and 1
        a = tuple(math.exp(rng.gauss(math.log(0.6) - sd**2 / 2, sd)) for _ in range(n))
        b = tuple(math.exp(rng.gauss(-(sd**2) / 2, sd)) for _ in range(n))
        _, lo, hi = ratio_interval(a, b)
        held += lo <= 0.6 <= hi
    assert 0.935 < held / draws < 0.965
