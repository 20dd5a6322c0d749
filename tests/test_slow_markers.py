"""The slow-marker check (tests/slow_markers.py) flags a test whose marker disagrees with its time, both ways, and
counts a shared fixture's set-up in the time of every test that uses it."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT

pytest_plugins = ["pytester"]

SUITE = """
import time

import pytest


@pytest.fixture(scope="module")
def shared_run():
    time.sleep(0.3)  # a module's shared run: paid by the first test that uses it


def test_quick_unmarked():
    pass


def test_long_unmarked():
    time.sleep(0.3)


@pytest.mark.slow
def test_quick_marked():
    pass


@pytest.mark.slow
def test_long_marked():
    time.sleep(0.3)


@pytest.mark.slow
def test_first_of_the_run(shared_run):
    pass


def test_second_of_the_run_unmarked(shared_run):
    pass


@pytest.mark.slow
def test_skipped_marked():
    pytest.skip("skipped before anything ran: not judged")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A test suite in a folder of its own, run in a subprocess that can import the checkout's plugin."""
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return pytester


def test_the_check_flags_a_marker_that_disagrees_with_the_time_both_ways(suite: pytest.Pytester) -> None:
    pytester = suite
    result = pytester.runpytest_subprocess("-p", "tests.slow_markers", "--slow-s", "0.2", "--slow-check")
    result.assert_outcomes(passed=6, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "not marked slow: test_suite.py::test_long_unmarked" in out
    assert "not marked slow: test_suite.py::test_second_of_the_run_unmarked" in out  # the shared run counts
    assert "marked slow, under 0.1 s: test_suite.py::test_quick_marked" in out
    for honest in ("test_quick_unmarked", "test_long_marked", "test_first_of_the_run", "test_skipped_marked"):
        assert f"::{honest} " not in out


def test_an_honest_suite_passes_the_check(suite: pytest.Pytester) -> None:
    pytester = suite
    deselect = ["--deselect", "test_suite.py::test_long_unmarked", "--deselect", "test_suite.py::test_quick_marked"]
    result = pytester.runpytest_subprocess(
        "-p", "tests.slow_markers", "--slow-s", "0.2", "--slow-check", *deselect,
        "--deselect", "test_suite.py::test_second_of_the_run_unmarked",
    )  # fmt: skip
    result.assert_outcomes(passed=3, skipped=1)
    assert result.ret == pytest.ExitCode.OK and "slow markers" not in result.stdout.str()
