"""The embedded task: a quadruped velocity-tracking task on MuJoCo MJX (:mod:`~sweep.backends.mjx.locomotion`, its
physics in :mod:`~sweep.backends.mjx.task`), each env shape's functions compiled once per process
(:mod:`~sweep.backends.mjx.compiled`) and kept lowered on disk (:mod:`~sweep.backends.mjx.export`). Importing this
package imports no simulator."""

#: Nothing here is imported by name from outside: the backend is reached through ``sweep.backends.get_backend``.
__all__: list[str] = []
