"""The robots the stand task is registered for."""
