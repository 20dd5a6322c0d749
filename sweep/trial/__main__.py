"""``python -m sweep.trial``: one trial from the command line or a ``recommended.yaml``."""

from typing import Any

from sweep.cli import run_main
from sweep.ledger import Row
from sweep.trial.cli import main


def run_any(*args: Any, **kwargs: Any) -> Row:
    """:func:`sweep.trial.runner.run_any`, imported once the command line has passed its checks."""
    from sweep.trial.runner import run_any as run

    return run(*args, **kwargs)


if __name__ == "__main__":
    run_main(lambda argv: main(argv, run=run_any))
