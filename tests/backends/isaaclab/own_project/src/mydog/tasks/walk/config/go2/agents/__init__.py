"""Agent configurations of the walk task."""
