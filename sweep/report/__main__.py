"""``python -m sweep.report reports/<run_id>``: rebuild a run's HTML report from its ledger."""

from sweep.cli import run_main
from sweep.report.page import main

if __name__ == "__main__":
    run_main(main)
