"""``python -m sweep.perf``: the flag catalog as markdown, the source of ``docs/perf-flags.md``."""

from __future__ import annotations

from sweep.perf.catalog import markdown

if __name__ == "__main__":
    print(markdown(), end="")
