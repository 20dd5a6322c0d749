"""Agent configurations of the stand task."""
