"""How money is said: a figure too small for 4 decimals keeps 2 significant digits."""

from __future__ import annotations

from sweep.analysis import texts


def test_a_saving_too_small_for_4_decimals_keeps_2_significant_digits() -> None:
    assert texts.usd_text(0.0123) == "$0.0123" and texts.usd_text(0.0) == "$0.0000"
    assert texts.usd_text(1.87e-5) == "$0.000019"  # not "$0.0000" beside "pays for itself after 368.6 runs"
    assert texts.usd_text(2.3e-7) == "$0.00000023"
