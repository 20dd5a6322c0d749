"""The ``slow`` marker kept honest: every run ends by listing the tests whose marker disagrees with their time, and
``--slow-check`` fails a run on any. A test's time is its own call plus the set-up of every fixture it uses: a
module's shared run is paid by whichever of its tests runs first, so each of them counts it (run alone, or with the
others deselected by ``-m "not slow"``, any of them pays it)."""

from __future__ import annotations

import time

import pytest

#: A test is slow when it takes more than this many seconds on 2 cores: ``pytest -m "not slow"`` is the inner loop.
SLOW_S = 10.0
_fixture_s: dict[str, float] = {}
_cost_s: dict[str, tuple[float, bool]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("slow markers")
    group.addoption(
        "--slow-check",
        action="store_true",
        help="fail the run when a test's slow marker disagrees with its time (see --slow-s)",
    )
    group.addoption(
        "--slow-s",
        type=float,
        default=SLOW_S,
        help=f"a test is slow over this many seconds (default {SLOW_S:g}); one marked slow under half of it is "
        "marked wrongly (between the two either is right: a loaded machine moves a test's time by a few seconds)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than 10 s on 2 cores (pytest -m 'not slow' leaves it out)")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    started = time.perf_counter()
    yield
    _fixture_s[fixturedef.argname] = time.perf_counter() - started


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and not report.skipped:
        _cost_s[report.nodeid] = (report.duration, False)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    if item.nodeid not in _cost_s:  # skipped: nothing to judge
        return
    call_s, _ = _cost_s[item.nodeid]
    fixtures_s = sum(_fixture_s.get(name, 0.0) for name in getattr(item, "fixturenames", ()))
    _cost_s[item.nodeid] = (call_s + fixtures_s, item.get_closest_marker("slow") is not None)


def slow_marker_mistakes(slow_s: float) -> tuple[list[str], list[str]]:
    """(tests over ``slow_s`` without the marker, tests under half of it with the marker), as 'nodeid (seconds)'."""
    unmarked = [f"{n} ({s:.1f} s)" for n, (s, slow) in _cost_s.items() if not slow and s > slow_s]
    marked = [f"{n} ({s:.1f} s)" for n, (s, slow) in _cost_s.items() if slow and s < slow_s / 2]
    return unmarked, marked


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    slow_s = config.getoption("--slow-s")
    unmarked, marked = slow_marker_mistakes(slow_s)
    if not unmarked and not marked:
        return
    terminalreporter.section("slow markers")
    for line in unmarked:
        terminalreporter.write_line(f"over {slow_s:g} s, not marked slow: {line}")
    for line in marked:
        terminalreporter.write_line(f"marked slow, under {slow_s / 2:g} s: {line}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("--slow-check") and any(slow_marker_mistakes(session.config.getoption("--slow-s"))):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
