"""What the ledger says, for the outputs: per-config statistics over seeds, the recommendation, its ratio to the
baseline and the study's payback (:mod:`~sweep.analysis.evidence`), and the one summary behind every printout, which
leads with the decision (:mod:`~sweep.analysis.summary`). Reads ledger rows only."""

from sweep.analysis.evidence import ConfigStat, Payback, config_stats, payback, recommend
from sweep.analysis.summary import Summary, decision_lines, summarize

__all__ = ["ConfigStat", "Payback", "Summary", "config_stats", "decision_lines", "payback", "recommend", "summarize"]
