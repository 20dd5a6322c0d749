"""Velocity tracking on flat ground (manager-based), with the project's own reward weights."""
