"""sweep: find the cheapest way to train a locomotion policy to a held-out success target."""

from __future__ import annotations

import sys

__version__ = "0.1.0"

if any(arg.startswith("-m") for arg in getattr(sys, "orig_argv", [])[1:]):  # python -m ...: an entry point?
    from sweep import deps

    if deps.is_entry(sys.orig_argv):  # then what it depends on is checked before it imports anything else
        deps.at_entry()
