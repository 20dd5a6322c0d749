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


class BrokenDependency(SweepError, ImportError):
    """A declared dependency is missing, outside its declared range, or raises on import (:mod:`sweep.deps`); an
    ``ImportError`` too, so that code which imports a package optionally still falls back."""


class TrialFailed(SweepError):
    """A trial could not go on (divergence, out of memory, simulator error); the reason is kept."""


#: Import name -> the PyPI distribution that provides it, where the two differ.
DISTRIBUTIONS = {"rsl_rl": "rsl-rl-lib", "yaml": "pyyaml", "mujoco.mjx": "mujoco-mjx"}


def install_spec(module: str) -> tuple[str, str]:
    """(distribution, pip requirement) that provide ``module``: the requirement is this package's own declared
    range where it declares one (``flatbuffers>=25.1,<26``), else the bare name."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    dist = DISTRIBUTIONS.get(module) or DISTRIBUTIONS.get(module.split(".")[0]) or module.split(".")[0]
    try:
        declared = requires("sweep") or []
    except PackageNotFoundError:  # run from a checkout that was never installed
        declared = []
    norm = re.sub(r"[-_.]+", "-", dist).lower()
    for req in declared:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        if name and re.sub(r"[-_.]+", "-", name.group(0)).lower() == norm and "extra ==" not in req:
            return dist, req.split(";")[0].replace(" ", "")
    return dist, dist


def import_quietly(module: str, noise: tuple[str, ...] = ()):
    """Import ``module`` with the lines it prints on import that start with one of ``noise`` kept off the screen
    (a dependency's notice that says nothing to a user of sweep); every other line it prints is printed."""
    import contextlib
    import importlib
    import io
    import sys

    if not noise or module in sys.modules:
        return importlib.import_module(module)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return importlib.import_module(module)
    finally:
        kept = [line for line in printed.getvalue().splitlines(keepends=True) if not line.startswith(noise)]
        sys.stdout.write("".join(kept))


def check_imports(
    modules: tuple[str, ...] | list[str], who: str = "the trials", noise: dict[str, tuple[str, ...]] | None = None
) -> None:
    """Import each module now, in the driver, so that an environment lacking what every trial needs fails in one
    line naming the package and its install command before any worker starts, not once per trial. ``noise``: per
    module, the opening words of lines it prints on import that stay off the screen (:func:`import_quietly`)."""
    for module in modules:
        try:
            import_quietly(module, (noise or {}).get(module, ()))
        except BrokenDependency:  # already its one line, naming the package and its range
            raise
        except ImportError as exc:
            missing = getattr(exc, "name", None) or module
            if not isinstance(exc, ModuleNotFoundError) or missing.split(".")[0] == "sweep":
                missing = module  # a package that is there but breaks on import: name the one asked for
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
            dist, spec = install_spec(missing)
            raise MissingExtraError(
                f"{who} need the Python package '{dist}', which cannot be imported (import {missing}: "
                f"{type(exc).__name__}: {why}); install it with: pip install '{spec}' (pip install -e . installs "
                "every dependency of sweep)"
            ) from None


def require(module: str, extra: str | None = None):
    """Import ``module`` or raise an error naming what to install (the extra, or the package itself)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        how = f"pip install -e '.[{extra}]'" if extra else "pip install -e ."
        raise MissingExtraError(f"'{module}' is not installed ({exc}); install it with: {how}") from exc
