"""The one error family of sweep: every message says what, where (file/key) and what to do."""

from __future__ import annotations


class SweepError(Exception):
    """Base class of every error sweep raises on purpose."""


class ConfigError(SweepError):
    """Bad input (a key, a value, a file): raised before any compute is spent. ``keys``: further dotted keys whose
    values the message is about besides the one it opens with (a limit that two keys set together)."""

    def __init__(self, message: str, *, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.keys = keys


class MissingExtraError(SweepError):
    """An optional dependency is absent; the message names the extra to install."""


class TrialFailed(SweepError):
    """A trial could not go on (divergence, out of memory, simulator error); the reason is kept."""


def require(module: str, extra: str | None = None):
    """Import ``module`` or raise an error naming what to install (the extra, or the package itself)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        how = f"pip install -e '.[{extra}]'" if extra else "pip install -e ."
        raise MissingExtraError(f"'{module}' is not installed ({exc}); install it with: {how}") from exc
