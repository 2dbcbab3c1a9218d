"""Whether a fresh worker's CPU placement sets its level: the process paths' errors in bench_advice
keep one ratio to the fit across every size of one worker (1.49, 1.51, 1.52, 1.65), and another ratio
for the next worker, so the error is the worker's, not the size's. Measures torch's `ipc` handoff
(16 KiB and 4 MiB, 15 samples) and the worker's plain round trip for fresh workers left where the
scheduler puts them, pinned to the CPUs local to the GPU (sysfs `local_cpulist`), and pinned to
the CPUs of the parent's own NUMA node; and one worker measured again over time. Prints the CPU
each process ran on.

A diagnostic, not a benchmark of record: `python3 -m tools.worker_placement`.
"""

import os
import subprocess
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import statistics  # noqa: E402

import gpushare  # noqa: E402


def ping_us(worker: gpushare.Worker, n: int = 31) -> float:
    """The worker's plain round trip (a request that does nothing), median in µs."""
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        worker._call("ping")
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6

SIZES = [16 << 10, 4 << 20]


def cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def nodes() -> dict[int, set[int]]:
    out = {}
    base = "/sys/devices/system/node"
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if name.startswith("node") and name[4:].isdigit():
            with open(f"{base}/{name}/cpulist") as f:
                out[int(name[4:])] = cpulist(f.read())
    return out


def gpu_local_cpus(index: int = 0) -> set[int]:
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", f"-i={index}"],
                             capture_output=True, text=True, timeout=20).stdout.strip().lower()
        # nvidia-smi says 00000000:1B:00.0; sysfs names it 0000:1b:00.0
        bus = bus[-12:] if len(bus) > 12 else bus
        with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as f:
            return cpulist(f.read())
    except Exception as e:  # noqa: BLE001
        print("gpu local cpus unknown:", e)
        return set()


def cpu_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def measure(worker) -> str:
    d = gpushare.bench("torch", "torch", SIZES, device="cuda:0", across=worker, repeat=15, paths=["ipc"]).to_dict()
    cells = [f"{p['size'] >> 10}K {p['timing']['median'] * 1e6:5.0f}" for p in d["points"] if p.get("timing")]
    return " ".join(cells) + f" | ping {ping_us(worker):4.0f} | worker cpu {cpu_of(worker.pid)} parent cpu {cpu_of(os.getpid())}"


def main() -> int:
    import torch

    torch.ones(1, device="cuda:0")
    allowed = os.sched_getaffinity(0)
    numa = nodes()
    local = gpu_local_cpus(0) & allowed
    parent_node = next((n for n, cpus in numa.items() if cpu_of(os.getpid()) in cpus), None)
    print(f"allowed cpus {sorted(allowed)}")
    print(f"numa nodes { {n: (min(c), max(c), len(c & allowed)) for n, c in numa.items()} }; gpu0 local {len(local)} allowed cpus; parent node {parent_node}")
    placements = {"unpinned": None, "gpu-local": local or None,
                  "parent node": (numa.get(parent_node, set()) & allowed) or None}
    for round_ in range(4):
        for label, cpus in placements.items():
            if label != "unpinned" and cpus is None:
                continue
            w = gpushare.Worker().start()
            try:
                if cpus:
                    os.sched_setaffinity(w.pid, cpus)
                print(f"[{label:11s} round {round_}] {measure(w)}", flush=True)
            finally:
                w.stop()
    w = gpushare.Worker().start()
    try:
        for i in range(5):
            print(f"[one worker, {i}] {measure(w)}", flush=True)
            time.sleep(1.0)
    finally:
        w.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
