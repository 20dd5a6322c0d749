"""The packages sweep declares, checked where an entry point starts: a broken or mismatched one is one line.

Every entry point (``sweep run|trial|report|export|init``, ``python -m sweep.run|trial|report|export|init``) calls
:func:`at_entry` before it imports anything else of its own (``sweep/__init__.py`` for ``python -m``,
``sweep/__main__.py`` for the console script), which

- reads each dependency's declared range from the installed ``sweep`` distribution's metadata
  (``importlib.metadata.requires``: pyproject.toml's ``dependencies`` as installed) and its installed version from its
  own metadata, importing nothing: a package that is missing or outside its range ends the command with one
  ``error:`` line naming it and the range, exit status 2, before any config is read;
- then watches the import of each declared package wherever it happens first (most are imported late: the
  simulators only where a trial or the driver's preflight needs them, Isaac Lab's in the order it needs): a package
  that is installed but raises on import becomes :class:`~sweep.errors.BrokenDependency`, one line naming it, its
  version and its range, instead of a traceback from inside it.

A checkout that was never installed (no ``sweep`` metadata) skips the version check; the import watch still names
the package.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import importlib.util
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from sweep.errors import DISTRIBUTIONS, BrokenDependency

#: Exit status of a broken or mismatched dependency (as for bad input: nothing ran).
EXIT_BROKEN = 2
#: The modules run as entry points (``python -m <module>``).
ENTRY_MODULES = ("sweep", "sweep.run", "sweep.trial", "sweep.report", "sweep.export", "sweep.init")

_checked = False


def torch_sees_gpu() -> bool:
    """``torch.cuda.is_available()``, without importing torch (about a second) where its build has no GPU support: a
    CPU wheel's ``torch/version.py`` names neither a CUDA nor a HIP version, so no GPU can be seen. A bad-input run
    on such a machine says its one line without paying for torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False  # no torch: the trials' import check names it
    version = Path(spec.origin).parent / "version.py"
    if version.is_file():
        build = runpy.run_path(str(version))
        if build.get("cuda") is None and build.get("hip") is None:
            return False
    import torch

    return torch.cuda.is_available()


def declared() -> list[tuple[str, str]]:
    """(distribution, requirement as declared, e.g. ``torch>=2.11,<2.14``) of each dependency that applies here (no
    extra's, markers evaluated); [] for a checkout that was never installed."""
    try:
        lines = importlib.metadata.requires("sweep") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    try:
        from packaging.requirements import Requirement
    except Exception as exc:  # packaging is declared too: say so in the same way
        why = f"{type(exc).__name__}: {_first_line(exc)}"
        raise BrokenDependency(f"packaging cannot be imported ({why}); sweep needs it: pip install packaging") from None
    out = []
    for line in lines:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        out.append((req.name, f"{req.name}{req.specifier}"))
    return out


def check_versions() -> None:
    """Raise :class:`BrokenDependency` for the first declared dependency that is missing or outside its range."""
    from packaging.requirements import Requirement

    for dist, requirement in declared():
        try:
            installed = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            raise BrokenDependency(
                f"the package '{dist}' is not installed; sweep declares {requirement}: pip install '{requirement}' "
                "(pip install -e . installs every dependency of sweep)"
            ) from None
        if not Requirement(requirement).specifier.contains(installed, prereleases=True):
            raise BrokenDependency(
                f"the installed package '{dist}' is {installed}, outside the range sweep declares for it "
                f"({requirement}): pip install '{requirement}'"
            )


def import_name(dist: str) -> str:
    """The module a distribution provides, as sweep imports it (``pyyaml`` -> ``yaml``)."""
    inverse = {d: m for m, d in DISTRIBUTIONS.items()}
    return inverse.get(dist, dist.replace("-", "_"))


class _Watched(importlib.abc.Loader):
    """A declared package's loader, which turns an exception from its import into :class:`BrokenDependency`."""

    def __init__(self, loader: Any, dist: str, requirement: str) -> None:
        self.loader, self.dist, self.requirement = loader, dist, requirement

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self.loader.exec_module(module)
        except BrokenDependency:  # a package it imports is the broken one: that one is named
            raise
        except Exception as exc:
            try:
                version = f" ({importlib.metadata.version(self.dist)})"
            except importlib.metadata.PackageNotFoundError:
                version = ""
            raise BrokenDependency(
                f"the installed package '{self.dist}'{version} raises on import (import {module.__name__}: "
                f"{type(exc).__name__}: {_first_line(exc)}); sweep declares {self.requirement}: "
                f"pip install --force-reinstall '{self.requirement}'"
            ) from exc
        module.__loader__ = self.loader  # imported: the package's own loader from now on
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader

    def __getattr__(self, name: str) -> Any:  # resources, source, is_package, ...: the package's own loader's
        return getattr(self.loader, name)


class _Watch(importlib.abc.MetaPathFinder):
    """Finds a declared package with the finders after it, and gives it a :class:`_Watched` loader."""

    def __init__(self, watched: dict[str, tuple[str, str]]) -> None:
        self.watched = watched

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.watched:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Watched(spec.loader, *self.watched[fullname])
                return spec
        return None


def watch(requirements: list[tuple[str, str]]) -> None:
    """Watch the import of each declared package not imported yet (:class:`_Watch`)."""
    watched = {import_name(d): (d, r) for d, r in requirements}
    watched = {m: v for m, v in watched.items() if m not in sys.modules}
    if watched and not any(isinstance(f, _Watch) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watch(watched))


def _excepthook(kind: type[BaseException], exc: BaseException, tb: Any, previous: Any = sys.excepthook) -> None:
    """A broken dependency met outside the entry point's own error handling (an import at the top of the module
    it runs) is its one line and exit status 2 as well."""
    if isinstance(exc, BrokenDependency):
        _say(exc)
        os._exit(EXIT_BROKEN)  # the interpreter would exit 1 after a hook; nothing has started that needs a cleanup
    previous(kind, exc, tb)


def _say(exc: BaseException) -> None:
    print(f"error: {_first_line(exc)}", file=sys.stderr, flush=True)
    sys.stdout.flush()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def at_entry() -> None:
    """Check every declared dependency's version (one line and exit 2 on the first that does not fit), then watch
    their imports. Once per process."""
    global _checked
    if _checked:
        return
    _checked = True
    try:
        requirements = declared()
        check_versions()
    except BrokenDependency as exc:
        _say(exc)
        sys.exit(EXIT_BROKEN)
    sys.excepthook = _excepthook
    watch(requirements)


def is_entry(argv: list[str]) -> bool:
    """Whether the interpreter was started as ``python [options] -m <one of ENTRY_MODULES>`` (``sys.orig_argv``)."""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) in ENTRY_MODULES
        if arg.startswith("-m"):
            return arg[2:] in ENTRY_MODULES
        if arg in ("-X", "-W", "--check-hash-based-pycs"):  # an option and its value
            next(args, None)
        elif not arg.startswith("-") or arg == "-c":  # a script or a command: not an entry point
            return False
    return False
