"""sweep: find the cheapest way to train a locomotion policy to a held-out success target."""

from __future__ import annotations

__version__ = "0.1.0"
