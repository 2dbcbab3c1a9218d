"""Numba's calls after JAX made cuda:1 current (diagnostic for scripts/probe_numba_ipc.py's finding)."""
import time

import numba.cuda
import torch


def ms(fn, n=5):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


a = numba.cuda.to_device(torch.ones(16).numpy())
print("before JAX: synchronize", ms(numba.cuda.synchronize), "ms; current_context", ms(numba.cuda.current_context), "ms")
import jax  # noqa: E402

jax.devices()
print("after JAX, current device per torch:", torch.cuda.current_device())
print("after JAX: synchronize", ms(numba.cuda.synchronize), "ms; current_context", ms(numba.cuda.current_context), "ms")
print("after JAX: get_ipc_handle", ms(a.get_ipc_handle), "ms")
with numba.cuda.gpus[0]:
    print("inside gpus[0]: synchronize", ms(numba.cuda.synchronize), "ms")
import gpushare  # noqa: E402
from gpushare.adapters import framework  # noqa: E402

N = framework("numba")
print("adapter synchronize", ms(lambda: N.synchronize(a)), "ms; inspect", ms(lambda: N.inspect(a)), "ms")
