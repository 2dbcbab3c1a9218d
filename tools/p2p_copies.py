"""Which peer copy reaches NVLink's limit, for the `p2p` path: a diagnostic, not a benchmark of
record (benchmarks/bench_devices.py is). Times, with CUDA events, cuda:0 → cuda:1 copies of 256 MiB
and 1 GiB by: torch's own `copy_`; one copy-engine memcpy (gpushare's `p2p`); the same split
into k chunks on k streams (several copy engines); and an SM copy kernel launched on the source
device writing into the peer (write) or on the target reading from it (read). Prints GB/s medians.
Run on a machine with two GPUs joined by NVLink: `python3 -m tools.p2p_copies [--json F]`.
"""

import argparse
import json
import statistics

import cupy as cp
import torch

KERNEL = r"""
extern "C" __global__ void copy16(const int4* __restrict__ src, int4* __restrict__ dst, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    // Four 16-byte loads in flight per thread before the stores: NVLink needs many requests in flight.
    for (; i + 3 * stride < n; i += 4 * stride) {
        int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}
"""

REPS, WARM = 20, 3


def timed(launch, stream):
    """Median ms of `launch()` between two events on `stream` (launch joins its own side streams)."""
    times = []
    for i in range(WARM + REPS):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        launch()
        stop.record(stream)
        stop.synchronize()
        if i >= WARM:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    assert cp.cuda.runtime.getDeviceCount() >= 2, "needs two GPUs"
    for a, b in ((0, 1), (1, 0)):
        with cp.cuda.Device(a):
            try:
                cp.cuda.runtime.deviceEnablePeerAccess(b)
            except cp.cuda.runtime.CUDARuntimeError:
                pass
    mods = {}
    for d in (0, 1):
        with cp.cuda.Device(d):
            mods[d] = cp.RawKernel(KERNEL, "copy16")
    sm_count = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    results = []
    for size in (256 << 20, 1 << 30):
        with cp.cuda.Device(0):
            src = cp.ones(size // 4, dtype=cp.float32)
            s0 = cp.cuda.Stream(non_blocking=True)
            side = [cp.cuda.Stream(non_blocking=True) for _ in range(8)]
        with cp.cuda.Device(1):
            dst = cp.zeros(size // 4, dtype=cp.float32)
            s1 = cp.cuda.Stream(non_blocking=True)
        row = {"bytes": size}

        def gbps(ms):
            return size / (ms * 1e-3) / 1e9

        ta = torch.ones(size // 4, device="cuda:0")
        tb = torch.empty(size // 4, device="cuda:1")
        ts = torch.cuda.Stream(device="cuda:0")
        with torch.cuda.stream(ts):
            tstream = cp.cuda.ExternalStream(ts.cuda_stream, 0)
            with cp.cuda.Device(0):
                row["torch copy_"] = gbps(timed(lambda: tb.copy_(ta, non_blocking=True), tstream))
        del ta, tb
        with cp.cuda.Device(0):
            row["ce 1 stream"] = gbps(timed(lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, size, 3, s0.ptr), s0))
            for k in (2, 4, 8):
                chunk = -(-size // k)

                def split(k=k, chunk=chunk):
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(s0)
                    ends = []
                    for j in range(k):
                        s = side[j]
                        s.wait_event(ev)
                        n = min(chunk, size - j * chunk)
                        cp.cuda.runtime.memcpyAsync(dst.data.ptr + j * chunk, src.data.ptr + j * chunk, n, 3, s.ptr)
                        e = cp.cuda.Event(disable_timing=True)
                        e.record(s)
                        ends.append(e)
                    for e in ends:
                        s0.wait_event(e)

                row[f"ce {k} streams"] = gbps(timed(split, s0))
        n16 = size // 16
        for where, dev, stream in (("write", 0, s0), ("read", 1, s1)):
            with cp.cuda.Device(dev):
                for blocks_per_sm in (1, 2, 4, 8):
                    for threads in (256, 512, 1024):
                        grid = sm_count * blocks_per_sm
                        k = mods[dev]
                        ms = timed(lambda: k((grid,), (threads,), (src, dst, cp.uint64(n16)), stream=stream), stream)
                        row[f"sm {where} {blocks_per_sm}x{threads}"] = gbps(ms)
        assert bool((dst == 1).all()), "the copy did not arrive"
        results.append(row)
        best = sorted(((v, k) for k, v in row.items() if k != "bytes"), reverse=True)[:6]
        print(f"{size >> 20} MiB: torch {row['torch copy_']:.1f} GB/s, ce1 {row['ce 1 stream']:.1f}; best: "
              + ", ".join(f"{k} {v:.1f}" for v, k in best), flush=True)
        for k, v in row.items():
            if k != "bytes":
                print(f"  {k:<22} {v:8.1f} GB/s")
        del src, dst
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
