"""Where a share's time goes on a GPU: each step of the pipeline timed on its own (µs per call), next
to the raw framework call. A diagnostic for bench_core's GPU budgets, not a benchmark of record."""

import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import cupy  # noqa: E402
import jax  # noqa: E402
import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native, api  # noqa: E402
from gpushare.adapters import framework  # noqa: E402
from gpushare.ledger import allocator_memory  # noqa: E402


def us(fn, n=2000):
    for _ in range(50):
        fn()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


t = torch.ones(1 << 18, device="cuda")
j = jax.numpy.ones(1 << 18)
c = cupy.ones(1 << 18, dtype=cupy.float32)
jt = jax.dlpack.from_dlpack(t)
rows = {
    "raw torch->jax": lambda: jax.dlpack.from_dlpack(t),
    "raw torch->cupy": lambda: cupy.from_dlpack(t),
    "inspect_torch": lambda: _native.inspect_torch(t),
    "jax adapter inspect": lambda: framework("jax").inspect(jt),
    "cupy adapter inspect": lambda: framework("cupy").inspect(c),
    "cuda_pointer_attributes": lambda: _native.cuda_pointer_attributes(t.data_ptr()),
    "torch.cuda.current_device": lambda: torch.cuda.current_device(),
    "share torch->jax": lambda: gpushare.share(t, "jax"),
    "share torch->cupy": lambda: gpushare.share(t, "cupy"),
    "share torch->jax observe": lambda: gpushare.share(t, "jax", observe=True),
    "cuda_mem_info": lambda: _native.cuda_mem_info(0),
    "allocator_memory": lambda: allocator_memory(0),
    "torch sync": lambda: torch.cuda.synchronize(t.device),
    "jax block_until_ready": lambda: jt.block_until_ready(),
    "html of one row": lambda: api.ShareTable([gpushare.share(t, "jax")])._repr_html_(),
}
for name, fn in rows.items():
    print(f"{name:<28} {us(fn, 300 if 'observe' in name or 'html' in name else 2000):9.2f} µs", flush=True)
