"""Where `share()`'s own time goes, stage by stage inside the Rust pipeline (for bench_core.py's
contract and `share(device=)`'s cost over the peer copy): a profiler does not see into the
extension, so its stage trace (crates/core/src/trace.rs, switched on here) reports the seconds
between the stages of each share and whose work each was. Prints the median of each stage per
pair, and what the Python side spends before and after the pipeline (the API's checks, the plan's
lookup).

A diagnostic, not a benchmark of record (benchmarks/bench_core.py is that):
`python3 -m tools.stage_trace [--device cuda:0]`.
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402


def traced(label: str, share, raw=None, rounds: int = 300, warmup: int = 50) -> None:
    for _ in range(warmup):
        share()
    stages: dict[str, list[float]] = defaultdict(list)
    kinds: dict[str, str] = {}
    order: list[str] = []
    outside, totals = [], []
    for _ in range(rounds):
        _native.share._stage_trace()
        t0 = time.perf_counter()
        result = share()
        total = time.perf_counter() - t0
        del result
        marks = _native.share._stage_trace()
        for stage, kind, seconds in marks:
            if stage not in order:
                order.append(stage)
            kinds[stage] = kind
            stages[stage].append(seconds)
        totals.append(total)
        outside.append(total - sum(s for _, _, s in marks) - (len(marks) + 1) * _native.share._stage_trace_cost())
    raw_us = None
    if raw is not None:
        for _ in range(warmup):
            raw()
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            raw()
            samples.append(time.perf_counter() - t0)
        raw_us = statistics.median(samples) * 1e6
    head = f"--- {label}: share {statistics.median(totals) * 1e6:.1f} µs"
    print(head + (f", raw call {raw_us:.1f} µs" if raw_us is not None else ""))
    print(f"  {'Python before and after the pipeline':44s} {statistics.median(outside) * 1e6:8.2f} µs")
    for stage in order:
        values = stages[stage]
        print(f"  {stage:44s} {statistics.median(values) * 1e6:8.2f} µs  {kinds[stage]:<10} ({len(values) / rounds:.0f}× a share)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    _native.share._stage_trace(True)
    import torch

    n = (1 << 20) // 4 if args.device != "cpu" else 1 << 16
    if args.device == "cpu":  # bench_core's CPU pairs, at its size (64 Ki float32)
        import jax
        import numpy as np
        import tensorflow as tf

        t, a = torch.ones(n), np.ones(n, dtype=np.float32)
        traced("torch->numpy 256 KiB", lambda: gpushare.share(t, "numpy"), lambda: t.numpy())
        traced("numpy->torch 256 KiB", lambda: gpushare.share(a, "torch"), lambda: torch.from_numpy(a))
        traced("torch->jax 256 KiB", lambda: gpushare.share(t, "jax"), lambda: jax.dlpack.from_dlpack(t))
        traced("torch->tf 256 KiB", lambda: gpushare.share(t, "tf"), lambda: tf.experimental.dlpack.from_dlpack(t.__dlpack__()))
        return 0
    import cupy
    import jax
    import jax.numpy as jnp
    import numba.cuda

    t = torch.ones(n, device=args.device)
    c = cupy.ones(n, dtype=cupy.float32)
    j = jnp.ones(n, dtype=jnp.float32)
    j.block_until_ready()
    traced("torch->cupy 1 MiB", lambda: gpushare.share(t, "cupy"), lambda: cupy.from_dlpack(t))
    traced("cupy->torch 1 MiB", lambda: gpushare.share(c, "torch"), lambda: torch.from_dlpack(c))
    traced("torch->jax 1 MiB", lambda: gpushare.share(t, "jax"), lambda: jax.dlpack.from_dlpack(t))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced("jax->torch 1 MiB", lambda: gpushare.share(j, "torch"), lambda: torch.from_dlpack(j))
    traced("torch->numba 1 MiB", lambda: gpushare.share(t, "numba"), lambda: numba.cuda.as_cuda_array(t))
    if torch.cuda.device_count() >= 2:
        big = torch.ones((256 << 20) // 4, device="cuda:0")

        def move():
            r = gpushare.share(big, "torch", device="cuda:1", path="p2p")
            torch.cuda.synchronize(1)
            return r

        traced("torch->torch p2p to cuda:1, 256 MiB (with a final synchronise)", move, rounds=30, warmup=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
