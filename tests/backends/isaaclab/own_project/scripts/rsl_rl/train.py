"""Train one of this project's tasks with rsl-rl, as Isaac Lab's own trainer does, after registering the project's
tasks: ``python scripts/rsl_rl/train.py --task <id> [--max_iterations N] [--device cpu] [env.<path>=value ...]
[agent.<path>=value ...]`` (the line sweep's recommended.yaml gives)."""

import sys

import mydog.tasks  # noqa: F401  (registers the project's task ids)
from isaaclab_rl.entrypoints import run_train_cli

if __name__ == "__main__":
    sys.exit(run_train_cli(["--rl_library", "rsl_rl", *sys.argv[1:]]))
