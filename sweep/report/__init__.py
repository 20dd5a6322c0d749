"""The run's outputs, read from the ledger and the study, never from a trial: the HTML report (tables first, then
:mod:`~sweep.report.charts`; :mod:`~sweep.report.page`), ``recommended.yaml`` and the winner's policy export
(:mod:`~sweep.report.export`), and while the run goes on its progress on stderr (:mod:`~sweep.report.live`).
``python -m sweep.report <run folder>`` rebuilds the report."""

from sweep.report.page import render, write

__all__ = ["render", "write"]
