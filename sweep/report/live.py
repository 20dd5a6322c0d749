"""The run's progress while the planner works, on stderr: on a terminal a live view redrawn in place (rich: the
budget as a bar, the best so far, each running trial with its config, iteration, held-out success so far and spend
against its cap); in a pipe or a log, one plain line every few seconds. It renders
:class:`sweep.planner.status.Status`, which the planner computes from its ledger rows; the planner knows nothing of
rich.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

from sweep.cli import safe_print

if TYPE_CHECKING:
    from sweep.planner.status import Status

#: Seconds between plain progress lines in a pipe or a log (a line is also written when the study starts to stop).
PLAIN_EVERY_S = 10.0
#: Seconds between redraws of the live view on a terminal.
LIVE_EVERY_S = 0.25


def plain_line(status: Status) -> str:
    """The study in one line: USD spent / budget, trials by state, the best USD to target so far, the phase, and why
    it stops."""
    states = ", ".join(f"{n} {s}" for s, n in sorted(status.states.items())) or "no trials yet"
    best = f"${status.best.usd:.4f}" if status.best is not None else "none yet"
    doing = {"confirm": " | confirming the finalists on more seeds", "screen": " | screening each config's throughput"}
    return (
        f"spent ${status.spent_usd:.4f} / ${status.budget_usd:g} | {states} | best USD-to-target {best}"
        + doing.get(status.phase, "")
        + (f" | stopping: {status.stopping}" if status.stopping else "")
    )


def live_view(status: Status) -> Any:
    """The live view of a study (a rich renderable): the budget as a bar, the best so far, and each running trial with
    its config, iteration, held-out success so far and spend against its cap."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    share = status.spent_usd / status.budget_usd if status.budget_usd > 0 else 0.0
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=max(status.budget_usd, 1e-12), completed=min(status.spent_usd, status.budget_usd), width=40),
        Text(f"${status.spent_usd:.4f} of ${status.budget_usd:g} spent ({100 * share:.1f}%)"),
    )
    states = ", ".join(f"{n} {s}" for s, n in sorted(status.states.items())) or "no trials yet"
    phase = {
        "confirm": "confirmation (the finalists on more seeds)",
        "screen": "throughput screen (each config a few iterations)",
    }.get(status.phase, "search")
    best = status.best
    head = Table.grid(padding=(0, 1))
    head.add_row(Text("budget", style="bold"), bar)
    head.add_row(Text("trials", style="bold"), Text(f"{states}; {phase}"))
    head.add_row(
        Text("best", style="bold"),
        Text(
            f"trial {best.trial}: ${best.usd:.4f} to target on equal terms ({best.config})"
            if best is not None
            else "no trial has reached the target yet"
        ),
    )
    parts: list[Any] = [head]
    if status.running:
        columns = (
            "trial",
            "phase",
            "config",
            "seed",
            "iteration",
            "held-out success",
            "spent / cap",
            "race / race cap",
        )
        table = Table(title="running trials (USD; race: on equal terms, without start-up and compilation)")
        for column in columns:
            table.add_column(column, justify="right" if column in ("trial", "seed", "iteration") else "left")
        for t in status.running:
            race = f"${t.race_usd:.4f} / ${t.race_cap_usd:.4f}" if t.race_cap_usd is not None else "not raced"
            table.add_row(
                str(t.trial),
                t.phase + (" (baseline)" if t.baseline else ""),
                t.config,
                str(t.seed),
                str(t.iteration),
                _success(t.success, t.success_max),
                Text(f"${t.usd:.4f} / ${t.cap_usd:.4f}", style=_near(t.usd, t.cap_usd)),
                Text(race, style=_near(t.race_usd, t.race_cap_usd)),
            )
        parts.append(table)
    if status.stopping:
        parts.append(Text(f"stopping: {status.stopping}", style="bold red"))
    return Group(*parts)


def _success(success: float | None, success_max: float | None) -> str:
    """A running trial's latest held-out pass in a table cell: its rate, '< max' for a pass stopped once below the
    target was certain, '-' before its first pass."""
    if success is not None:
        return f"{success:.3f}"
    return f"< {success_max:.3f}" if success_max is not None else "-"


def _near(spent: float, cap: float | None) -> str:
    """Yellow once a trial has spent 80% of a cap (it may stop there), else no style."""
    return "yellow" if cap is not None and cap > 0 and spent >= 0.8 * cap else ""


class Progress:
    """The study's progress on stderr while the planner runs it: on a terminal, a live view redrawn in place
    (:func:`live_view`, rich); in a pipe or a log, the plain line (:func:`plain_line`) at most every
    :data:`PLAIN_EVERY_S` seconds, and when the study starts to stop."""

    def __init__(self, stream: Any = None, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.live = live if live is not None else bool(isatty and isatty())
        """Draw the live view (a terminal) instead of plain lines."""
        self.last = ""
        self.last_print = 0.0
        self._live: Any = None
        self._drawn = 0.0
        self._stopping = ""

    def __call__(self, status: Status) -> None:
        if self.live:
            self._draw(status)
            return
        line = plain_line(status)
        if line == self.last:
            return
        if time.time() - self.last_print > PLAIN_EVERY_S or status.stopping:
            safe_print(line, file=self.stream, flush=True)
            self.last_print = time.time()
        self.last = line

    def _draw(self, status: Status) -> None:
        """Redraw the live view, at most every :data:`LIVE_EVERY_S` seconds (at once when the study starts to
        stop). No thread of rich's: the planner's loop redraws, so Ctrl-C meets no other thread."""
        now = time.time()
        if now - self._drawn < LIVE_EVERY_S and status.stopping == self._stopping:
            return
        self._drawn, self._stopping = now, status.stopping
        try:
            if self._live is None:
                from rich.console import Console
                from rich.live import Live

                console = Console(file=self.stream)
                self._live = Live(
                    console=console,
                    auto_refresh=False,
                    redirect_stdout=sys.stdout.isatty(),  # a print to the same terminal goes above the view
                    redirect_stderr=False,  # what sweep writes to stderr meanwhile is the view's own stream
                )
                self._live.start()
            self._live.update(live_view(status), refresh=True)
        except OSError:  # the terminal went away: the run goes on without a view
            self.live, self._live = False, None

    def close(self) -> None:
        """Leave the last view (or line) on screen and the cursor below it."""
        if self._live is not None:
            with contextlib.suppress(OSError):
                self._live.stop()
            self._live = None


__all__ = ["Progress", "live_view", "plain_line"]
