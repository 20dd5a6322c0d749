"""The one error family of sweep: every message says what, where (file/key) and what to do."""

from __future__ import annotations


class SweepError(Exception):
    """Base class of every error sweep raises on purpose."""


class ConfigError(SweepError):
    """Bad input (a key, a value, a file): raised before any compute is spent."""


class MissingExtraError(SweepError):
    """An optional dependency is absent; the message names the extra to install."""


class TrialFailed(SweepError):
    """A trial could not go on (divergence, out of memory, simulator error); the reason is kept."""


def require(module: str, extra: str):
    """Import ``module`` or raise an error naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"'{module}' is not installed ({exc}); install it with: pip install -e '.[{extra}]'"
        ) from exc
