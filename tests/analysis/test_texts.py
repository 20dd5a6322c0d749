"""How money is said: a figure too small for 4 decimals keeps 2 significant digits; the study's spend by phase."""

from __future__ import annotations

from sweep.analysis import texts
from sweep.analysis.summary import summarize
from tests.planner.test_loop import ledger_row


def test_a_saving_too_small_for_4_decimals_keeps_2_significant_digits() -> None:
    assert texts.usd_text(0.0123) == "$0.0123" and texts.usd_text(0.0) == "$0.0000"
    assert texts.usd_text(1.87e-5) == "$0.000019"  # not "$0.0000" beside "pays for itself after 368.6 runs"
    assert texts.usd_text(2.3e-7) == "$0.00000023"


def test_the_study_cost_names_every_phase_that_spent_in_the_studys_order() -> None:
    a = {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
    rows = [  # $1 a billable second
        ledger_row(0, "capped", a, 5, 2560, 1.0, phase="screen"),
        ledger_row(1, "reached", a, 50, 25600, 10.0),
        ledger_row(2, "capped", a, 10, 5120, 2.0, phase="probe"),
        ledger_row(3, "reached", a, 50, 25600, 12.0, phase="confirm"),
    ]
    text = texts.phase_text(summarize(rows))
    assert text == "screen $1.0000, search $10.0000, probes $2.0000, confirmation $12.0000"
    assert texts.phase_text(summarize(rows[1:2])) == ""  # a search alone
