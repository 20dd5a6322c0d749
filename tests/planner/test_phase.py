"""The study's phase: every change through one method, logged; the first stop's reason stands, Ctrl-C's replaces it."""

from __future__ import annotations

from sweep.planner.phase import Phase, StudyPhase


def test_a_study_searches_drains_confirms_drains_and_ends() -> None:
    phase = StudyPhase()
    assert phase.now is Phase.SEARCH and phase.starts and phase.why == ""
    phase.close("trial limit (4) reached")
    assert phase.now is Phase.DRAINING and not phase.starts and phase.work is Phase.SEARCH
    phase.confirm()
    assert phase.now is Phase.CONFIRMATION and phase.starts and phase.why == ""  # the progress view shows no reason
    phase.close("confirmation complete: every finalist in the race has 3 seeds")
    phase.finish()
    assert phase.now is Phase.OVER and phase.work is Phase.CONFIRMATION
    assert phase.why == "confirmation complete: every finalist in the race has 3 seeds"
    assert [p for p, _ in phase.log] == [Phase.DRAINING, Phase.CONFIRMATION, Phase.DRAINING, Phase.OVER]
    phase.finish()  # the loop's own end after a stop or a drain adds nothing
    assert len(phase.log) == 4


def test_the_first_stop_stands_and_ctrl_c_says_what_the_user_did() -> None:
    phase = StudyPhase()
    phase.stop("study budget $5 spent")
    phase.stop("3 trials in a row failed the same way (out of memory)")
    assert phase.now is Phase.OVER and phase.why == "study budget $5 spent" and phase.work is Phase.SEARCH
    phase.stop("interrupted (Ctrl-C)", override=True)
    assert phase.why == "interrupted (Ctrl-C)"
    phase.finish()
    assert phase.why == "interrupted (Ctrl-C)"


def test_a_drained_search_with_nothing_to_confirm_ends_with_why() -> None:
    phase = StudyPhase()
    phase.close("every feasible config tried (8)")
    why = "no searched config other than the baseline reached the target: nothing to confirm"
    phase.finish(why)
    assert phase.log[-1] == (Phase.OVER, why)
