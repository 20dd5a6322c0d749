"""The task's functions per env shape: built once per process, also when threads ask for one at once."""

from __future__ import annotations

import threading
import time

from sweep.backends.mjx import compiled as mjx_compiled


def test_threads_that_need_one_shape_at_once_compute_it_once() -> None:
    calls: list[int] = []

    @mjx_compiled.once
    def slow(n: int) -> int:
        calls.append(n)
        time.sleep(0.2)
        return n * 2

    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(slow(3))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [6, 6, 6] and calls == [3]  # the others waited for the first's result
    slow.cache_clear()
    assert slow(3) == 6 and calls == [3, 3]


def test_without_the_persistent_cache_the_jitted_functions_are_used(monkeypatch, cpu) -> None:
    from sweep.backends.mjx import export as mjx_export
    from sweep.backends.mjx.locomotion import PROFILES

    monkeypatch.setattr(mjx_export, "cache_dir", lambda: None)
    mjx_compiled.shape_functions.cache_clear()
    fns = mjx_compiled.shape_functions(PROFILES["cpu"], False, cpu, 8)
    assert fns is mjx_compiled.task_functions(PROFILES["cpu"], False, str(cpu))
    mjx_compiled.shape_functions.cache_clear()
