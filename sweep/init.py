"""``python -m sweep.init profile=<task id> [tasks_module=<module>] [out=<file>]`` (or ``sweep init ...``): a starter
search space for a task, written from its registered configs, ready to edit and run (``python -m sweep.run
space=<file>``).

Keys: ``profile`` (the task id), ``backend`` (``isaaclab``), ``out`` (the file to write; default
``<task id, lower case>.yaml`` here; an existing file is kept unless ``force=true``), and the options that find and
judge the task: ``tasks_module`` (the module that registers it), ``physics_preset``, ``asset_root``, and
``success_term`` or ``success_fn`` (its own success rule).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sweep.cli import parse_overrides, run_main
from sweep.errors import ConfigError

#: The keys ``sweep init`` takes, and the ``backend_options`` among them.
KEYS = (
    "profile",
    "backend",
    "out",
    "force",
    "tasks_module",
    "physics_preset",
    "asset_root",
    "success_term",
    "success_fn",
)
OPTIONS = ("tasks_module", "physics_preset", "asset_root")


def main(argv: list[str]) -> int:
    from sweep.backends import get_backend
    from sweep.contract import check_success_rule, success_rule

    given = parse_overrides(argv)
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise ConfigError(f"command line: unknown key '{unknown[0]}'; sweep init takes {', '.join(KEYS)}")
    profile = given.get("profile")
    if not isinstance(profile, str) or not profile:
        raise ConfigError("command line: profile: the task id to write a space for, e.g. profile=Template-Stand-v0")
    backend = get_backend(str(given.get("backend", "isaaclab")), key="command line: backend")
    backend.check_profile(profile, key="command line: profile")
    rule = success_rule(type("Rule", (), {k: given.get(k) for k in ("success_term", "success_fn")}))
    check_success_rule(rule, where="command line: ")
    out = Path(str(given.get("out") or f"{re.sub(r'[^a-z0-9]+', '_', profile.lower()).strip('_')}.yaml"))
    if out.exists() and given.get("force") is not True:
        raise ConfigError(f"command line: out={out}: the file exists; choose another out= or add force=true")
    text = backend.starter_space(profile, {k: given[k] for k in OPTIONS if k in given}, rule)
    try:
        out.write_text(text)
    except OSError as exc:
        raise ConfigError(f"command line: out={out}: cannot write it ({exc.strerror})") from None
    print(f"wrote {out}: the space of {profile}; check it, then run: python -m sweep.run space={out}")
    return 0


if __name__ == "__main__":
    run_main(main, sys.argv[1:])
