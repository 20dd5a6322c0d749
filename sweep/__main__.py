"""``sweep <verb> key=value ...`` (the console script) and ``python -m sweep <verb> ...``: the same verbs as the
modules, ``run``, ``trial``, ``report``, ``export`` and ``init``."""

from __future__ import annotations

import runpy
import sys

#: verb -> the module whose ``__main__`` it runs.
VERBS = {
    "run": "sweep.run",
    "trial": "sweep.trial",
    "report": "sweep.report",
    "export": "sweep.export",
    "init": "sweep.init",
}


def main(argv: list[str] | None = None) -> None:
    from sweep import deps

    deps.at_entry()  # the console script: before the verb's module imports anything
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in VERBS:
        print(f"usage: sweep {{{','.join(VERBS)}}} key=value ... (for example: sweep run space=locomotion)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    sys.argv = [f"sweep {args[0]}", *args[1:]]
    runpy.run_module(VERBS[args[0]], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
