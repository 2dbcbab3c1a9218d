"""What the CUDA driver's pointer attributes cost for each framework's memory: describing a source
reads them, and a JAX array's cost several times a PyTorch tensor's (6.1 against 0.8 µs on one H200
host, in the stage trace). The allocators differ (PyTorch's caching allocator cuts its blocks from
cuMemAlloc'd segments, XLA's BFC allocator from one large reservation, CuPy's pool from
cudaMalloc), and the driver answers per allocation. Needs CUDA.

    python3 -m tools.pointer_attributes
"""

from __future__ import annotations

import os
import sys
import time


def best_us(fn, n: int = 5000) -> float:
    """Best of five loops of ``n`` calls, in µs per call (after 500 warm-up calls)."""
    for _ in range(500):
        fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return min(runs)

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def main() -> int:
    import cupy
    import jax.numpy as jnp
    import torch

    from gpushare import _native

    arrays = {
        "torch": torch.ones(1 << 18, device="cuda:0"),
        "jax": jnp.ones(1 << 18),
        "cupy": cupy.ones(1 << 18, dtype=cupy.float32),
    }
    pointers = {
        "torch": arrays["torch"].data_ptr(),
        "jax": arrays["jax"].unsafe_buffer_pointer(),
        "cupy": arrays["cupy"].data.ptr,
    }
    for name, ptr in pointers.items():
        attrs = _native.cuda.pointer_attributes(ptr) or {}
        span = (attrs.get("range_start"), attrs.get("range_size"))
        print(f"{name:6} pointer attributes {best_us(lambda: _native.cuda.pointer_attributes(ptr)):6.2f} µs, "
              f"device of the pointer {best_us(lambda: _native.cuda.pointer_device(ptr)):5.2f} µs; "
              f"memory {attrs.get('memory_type')}, range {span}, mempool {attrs.get('mempool')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
