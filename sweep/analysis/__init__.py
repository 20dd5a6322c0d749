"""What the ledger says, for the outputs: per-config statistics over seeds, the recommendation and its ratio to the
baseline (:mod:`~sweep.analysis.evidence`), and the one summary behind every printout (:mod:`~sweep.analysis.summary`).
Reads ledger rows only."""

from sweep.analysis.evidence import ConfigStat, config_stats, recommend
from sweep.analysis.summary import Summary, summarize

__all__ = ["ConfigStat", "Summary", "config_stats", "recommend", "summarize"]
