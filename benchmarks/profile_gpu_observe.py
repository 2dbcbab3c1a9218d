"""Why the observed handoff's steps cost more in sequence than alone: the memory
snapshot's three calls and the device wait, timed one by one right after an import into JAX, into
CuPy, after no import at all, and after a JAX import followed by a pause (busy or sleeping) that
lets whatever the import left running finish. A diagnostic, not a benchmark of record:
`python3 benchmarks/profile_gpu_observe.py` on the GPU machine."""

import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import cupy  # noqa: E402
import jax  # noqa: E402
import torch  # noqa: E402

from gpushare import _native, ledger  # noqa: E402

t = torch.ones(1 << 18, device="cuda")
cupy.ones(1)
jax.numpy.ones(1).block_until_ready()


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


variants = {
    "no import": (lambda: None, None),
    "cupy import": (lambda: cupy.from_dlpack(t), None),
    "jax import": (lambda: jax.dlpack.from_dlpack(t), None),
    "jax import, block_until_ready": (lambda: jax.dlpack.from_dlpack(t).block_until_ready(), None),
    "jax import, then 300 µs busy": (lambda: jax.dlpack.from_dlpack(t), lambda: busy(300e-6)),
    "jax import, then 300 µs asleep": (lambda: jax.dlpack.from_dlpack(t), lambda: time.sleep(300e-6)),
}
steps = {
    "cuMemGetInfo": lambda: _native.cuda.mem_info(0),
    "torch allocator": lambda: ledger.framework_memory("torch", 0),
    "jax allocator": lambda: ledger.framework_memory("jax", 0),
    "torch.cuda.synchronize": torch.cuda.synchronize,
    "cuMemGetInfo again": lambda: _native.cuda.mem_info(0),
}
print(f"{'after':<32}" + "".join(f"{name:>24}" for name in steps) + "   (median µs, 300 rounds)")
for label, (make, pause) in variants.items():
    spent = {name: [] for name in steps}
    for i in range(330):
        value = make()
        if pause is not None:
            pause()
        for name, step in steps.items():
            t0 = time.perf_counter_ns()
            step()
            if i >= 30:
                spent[name].append(time.perf_counter_ns() - t0)
        del value
    print(f"{label:<32}" + "".join(f"{statistics.median(xs) / 1e3:24.1f}" for xs in spent.values()), flush=True)
