"""Success functions that are wrong in the ways a user's can be, for the tests of ``target.success_fn``."""

from __future__ import annotations

from typing import Any

NOT_A_FUNCTION = 3


def one_argument(env: Any) -> Any:
    """Takes the env only: not a success function."""
    return env


def breaks(env: Any, ended: Any) -> Any:
    """Raises inside a trial, as a success function with a bug does."""
    raise ValueError("held_at_end is not recorded by this task")


def counts(env: Any, ended: Any) -> Any:
    """Returns a count, not a bool per env."""
    return ended.sum()
