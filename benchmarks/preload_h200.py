"""What a trial's env build compiles after the worker preloaded its shape (``sweep.execution.preload``), on the GPU.

In one process (its own persistent cache, emptied first, so a sweep that follows starts cold): shape A is built the
way a trial without preloading builds it; shape B is preloaded (``Backend.preload``), then built. For each: the
seconds of the build + warm-up and the functions it compiled (``jax_log_compiles``). One JSON line each.

    HOME=/tmp/preload_check python benchmarks/preload_h200.py --out $OUT/preload_check.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2048,1024", help="shape A (built cold), shape B (preloaded, then built)")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import jax

    from sweep import perf
    from sweep.backends import get_backend
    from sweep.backends.base import resolve_device

    perf.enable_compile_cache()
    backend, device = get_backend("mjx_locomotion"), resolve_device("auto")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("jax").addHandler(handler)
    logging.getLogger("jax").propagate = False  # read here, not printed
    jax.config.update("jax_log_compiles", True)
    a, b = (int(n) for n in args.sizes.split(","))
    lines = []
    for label, n in (("built", a), ("preloaded", b)):
        preload_s = 0.0
        if label == "preloaded":
            t0 = time.perf_counter()
            backend.preload(n, device, args.profile)
            preload_s = time.perf_counter() - t0
        seen.clear()
        t0 = time.perf_counter()
        env = backend.make_env(n, 1, device, args.profile)
        env.warm_up()
        build_s = time.perf_counter() - t0
        env.close()
        compiled = [m.split()[1] for m in seen if m.startswith("Compiling ")]
        line = {"num_envs": n, "how": label, "preload_s": preload_s, "build_s": build_s, "compiled": compiled}
        line["device"] = jax.devices()[0].device_kind
        lines.append(line)
        print(json.dumps(line), flush=True)
    with open(args.out, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)


if __name__ == "__main__":
    main()
