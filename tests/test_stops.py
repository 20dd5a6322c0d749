"""Stop signals: the first raises KeyboardInterrupt once and is remembered; later ones and held sections wait."""

from __future__ import annotations

import os
import signal

import pytest

from sweep import stops


@pytest.fixture
def installed():
    stops.reset()
    previous = stops.install()
    yield
    stops.restore(previous)
    stops.reset()


def test_the_first_stop_signal_interrupts_once_and_later_ones_do_not_cut_the_stop_short(installed) -> None:
    assert stops.requested() == "" and stops.exit_status() == 130
    with pytest.raises(KeyboardInterrupt):  # the handler runs as os.kill returns
        os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)  # a second one, while the study stops: no exception
    os.kill(os.getpid(), signal.SIGHUP)
    assert stops.requested() == "SIGTERM" and stops.exit_status() == 128 + signal.SIGTERM


def test_a_stop_signal_in_a_held_section_waits_for_its_end(installed) -> None:
    with stops.held():
        os.kill(os.getpid(), signal.SIGHUP)  # no KeyboardInterrupt inside: the section finishes
        finished = True
    assert finished and stops.requested() == "SIGHUP" and stops.exit_status() == 129
