"""``python -m sweep.trial``: one trial from the command line or a ``recommended.yaml``."""

import functools

from sweep.cli import run_main
from sweep.trial.cli import main
from sweep.trial.runner import run_any

if __name__ == "__main__":
    run_main(functools.partial(main, run=run_any))
