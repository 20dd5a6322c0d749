"""Isaac Lab 3.0 velocity tasks, kit-less (Newton physics): the backend (:mod:`~sweep.backends.isaaclab.backend`) and
the task configs, overrides and asset checks it shares with Isaac Lab's own trainer
(:mod:`~sweep.backends.isaaclab.cfg`). Importing this package imports no Isaac Lab."""

#: Nothing here is imported by name from outside: the backend is reached through ``sweep.backends.get_backend``.
__all__: list[str] = []
