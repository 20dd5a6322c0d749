"""The robots the walk task is registered for."""
