"""Why Numba's `ipc` handoff took ~113 ms at every size in bench_advice's calibration worker and
~0.25 ms in its evaluation's (2x H200, 2026-11-27): the same bench before and after each of the
calibration's steps, in one process. A diagnostic, not a benchmark of record:
`python3 scripts/probe_numba_ipc.py`."""

import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gpushare  # noqa: E402


def ipc(tag: str) -> None:
    t0 = time.perf_counter()
    b = gpushare.bench("numba", "numba", ["64KiB", "1MiB"], device="cuda:0", across="processes", paths="ipc",
                       repeat=3, progress=False).to_dict()
    points = [(p["size"], p["path"], (p.get("timing") or {}).get("first_call"), (p.get("timing") or {}).get("median"), p.get("notes")) for p in b["points"]]
    print(f"{tag}: {points} ({time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":  # the workers start by spawn, which imports this module again
    ipc("fresh")
    import jax

    jax.devices()  # JAX starts its backends and makes the last GPU current, as in bench_advice
    ipc("after JAX started")
    gpushare.calibrate(["torch", "cupy"], device="cuda:0", to_device="cuda:1", shares=False, save=False,
                       sizes=("64KiB", "1MiB", "16MiB"), repeat=3)
    ipc("after a move calibration to cuda:1")
    m = gpushare.calibrate(["numba"], device="cuda:0", shares=False, processes=True, save=False, sizes=("64KiB", "1MiB", "16MiB"), repeat=3)
    print({k: [(p["bytes"], round(p["seconds"] * 1e6, 1)) for p in v] for k, v in m.to_dict()["observations"].items()}, flush=True)
