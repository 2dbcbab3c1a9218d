"""Numba's ipc after JAX started: a worker started before JAX against one started after, and what
JAX changed in os.environ (which a spawned worker inherits). Diagnostic: `python3 scripts/probe_numba_ipc_worker.py`."""
import os
import time

import gpushare


def ipc(tag, across):
    t0 = time.perf_counter()
    b = gpushare.bench("numba", "numba", ["64KiB", "1MiB"], device="cuda:0", across=across, paths="ipc",
                       repeat=3, progress=False).to_dict()
    print(tag, [(p["size"], (p.get("timing") or {}).get("median")) for p in b["points"]],
          f"({time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    early = gpushare.Worker()
    early.start()
    ipc("worker started before JAX, before JAX", early)
    before = dict(os.environ)
    import jax

    jax.devices()
    print("os.environ changed by JAX:", {k: (before.get(k), os.environ.get(k)) for k in set(before) | set(os.environ)
                                          if before.get(k) != os.environ.get(k)}, flush=True)
    ipc("worker started before JAX, after JAX", early)
    ipc("worker started after JAX", "processes")
    for k in set(os.environ) - set(before):
        del os.environ[k]
    for k, v in before.items():
        os.environ[k] = v
    ipc("worker started after JAX, environment restored", "processes")
