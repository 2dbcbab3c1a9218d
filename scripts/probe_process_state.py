"""Why torch's process handoffs (`ipc`, `torch_mp`) measured 1.4–1.8× their fits in
bench_advice's evaluation, minutes after its calibration, at every size, while CuPy's and Numba's
`ipc` through the same route did not (docs/gpu-results.md, sixth session). Runs bench_advice's
sequence in one process and measures torch's and CuPy's handoffs (a fresh worker each, as the
benchmark does) after each step, with what might differ between them: the allocation the array
lies in, the parent's threads, GPU memory the parent holds, a worker's plain round trip.

A diagnostic, not a benchmark of record: `python3 scripts/probe_process_state.py [--device cuda:0]`.
"""

import argparse
import gc
import os
import statistics
import sys
import threading
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gpushare  # noqa: E402

SIZES = [16 << 10, 4 << 20]


def threads() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def ping_us(worker: gpushare.Worker, n: int = 31) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        worker._call("ping")
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def measure(tag: str, device: str, frameworks: list[str]) -> None:
    import torch

    reserved = torch.cuda.memory_reserved(0) >> 20 if torch.cuda.is_available() else 0
    for name in frameworks:
        paths = ["ipc", "torch_mp"] if name == "torch" else ["ipc"]
        t0 = time.perf_counter()
        d = gpushare.bench(name, name, SIZES, device=device, across="processes", repeat=15, paths=paths).to_dict()
        cells = []
        for p in d["points"]:
            if not p.get("timing"):
                continue
            alloc = ((p.get("source") or {}).get("identity") or {}).get("size") or 0
            cells.append(f"{p['path']}@{p['size'] >> 10}K {p['timing']['median'] * 1e6:6.0f}µs (min {p['timing']['min'] * 1e6:4.0f}, alloc {alloc >> 20} MiB)")
        with gpushare.Worker() as w:
            ping = ping_us(w)
        print(f"[{tag:28s}] {name:5s} {' | '.join(cells)} | ping {ping:4.0f}µs | threads {threads()} "
              f"py-threads {threading.active_count()} | torch reserved {reserved} MiB | {time.perf_counter() - t0:.1f}s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    import torch

    frameworks = ["torch", "cupy"] if args.device.startswith("cuda") else ["torch"]
    measure("fresh (torch, cupy only)", args.device, frameworks)
    measure("fresh, again", args.device, frameworks)
    import jax

    jax.devices()
    measure("after jax.devices()", args.device, frameworks)
    from gpushare import advice

    names = ["torch", "jax", "cupy", "numba"] if args.device.startswith("cuda") else ["torch", "jax", "numpy"]
    t0 = time.perf_counter()
    gpushare.calibrate(names, sizes=advice.DEFAULT_SIZES, device=args.device, repeat=3)
    print(f"share calibration {time.perf_counter() - t0:.1f}s", flush=True)
    measure("after the share calibration", args.device, frameworks)
    gpushare.calibrate(frameworks, sizes=advice.DEFAULT_SIZES, device=args.device, repeat=3,
                       processes=True, shares=False)
    measure("after the process calibration", args.device, frameworks)
    for src in names:
        for dst in names:
            if src != dst:
                gpushare.bench(src, dst, ("16KiB", "256KiB", "4MiB", "32MiB"), device=args.device, repeat=3)
    measure("after the share evaluation", args.device, frameworks)
    time.sleep(5)
    measure("5 s later", args.device, frameworks)
    gc.collect()
    torch.cuda.empty_cache()
    measure("after gc + torch empty_cache", args.device, frameworks)
    if torch.cuda.is_available():
        held = torch.empty(8 << 30, dtype=torch.uint8, device=args.device)
        measure("holding 8 GiB in torch", args.device, frameworks)
        del held
        torch.cuda.empty_cache()
        measure("8 GiB freed", args.device, frameworks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
