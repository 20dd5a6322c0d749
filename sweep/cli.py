"""Command-line plumbing shared by the entry points: ``key=value`` overrides and clean exits."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from sweep.errors import SweepError

#: Exit status for bad input (nothing was run).
EXIT_BAD_INPUT = 2


def parse_overrides(argv: Sequence[str], text_keys: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``["a.b=3", "c=[1,2]"]`` -> ``{"a.b": 3, "c": [1, 2]}``; values are read as YAML scalars/lists, except those
    of ``text_keys`` (paths and names: ``out=00`` is the folder ``00``, not the number 0), kept as typed."""
    out: dict[str, Any] = {}
    for arg in argv:
        if "=" not in arg or arg.startswith("="):
            raise SweepError(f"argument {arg!r}: expected key=value (for example num_envs=256)")
        key, raw = arg.split("=", 1)
        if key.strip() in out:
            raise SweepError(f"command line: {key.strip()} is given twice; keep one {key.strip()}=... argument")
        if key.strip() in text_keys:
            out[key.strip()] = raw
            continue
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out


def run_main(main: Callable[[list[str]], int | None], argv: Sequence[str] | None = None) -> None:
    """Run ``main``; a :class:`SweepError` becomes one line on stderr and exit status 2, no traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = main(args)
    except SweepError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:  # a stop signal before the study began (after, sweep.run returns its status)
        from sweep import stops

        safe_print("interrupted", file=sys.stderr)
        sys.exit(stops.exit_status())
    except BrokenPipeError:  # the reader of our output went away (`| head`, a closed `| tee`)
        quiet_stdout()
        sys.exit(1)
    sys.exit(code or 0)


#: Characters that end a line for ``str.splitlines`` (a value quoted in a message may hold them).
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def printable(message: str) -> str:
    """``message`` with every line break escaped, so an error is one line whatever it quotes."""
    return message.translate({ord(c): repr(c)[1:-1] for c in _BREAKS})


def quiet_stdout() -> None:
    """Point stdout and stderr at /dev/null once their reader is gone, so later prints (and the interpreter's
    flush at exit) cannot raise; what the run writes to its folder is unaffected."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())


def safe_print(*args: Any, **kwargs: Any) -> None:
    """``print`` that survives a closed pipe (``| tee`` killed by the same Ctrl-C): the text is dropped."""
    try:
        print(*args, **kwargs)
    except (BrokenPipeError, OSError):
        quiet_stdout()
