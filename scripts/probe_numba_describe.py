"""Numba's description by the array's own attributes against the one by its
``__cuda_array_interface__`` (the adapter's fallback): the same TensorInfo for every layout, and
what each costs. Needs CUDA and Numba.

    python scripts/probe_numba_describe.py
"""

from __future__ import annotations

import sys
import time


def best_us(fn, n: int = 5000) -> float:
    for _ in range(500):
        fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return min(runs)


def main() -> int:
    import numpy as np
    from numba import cuda

    from gpushare.adapters import framework

    numba = framework("numba")
    base = cuda.to_device(np.arange(24 * 6, dtype=np.float32).reshape(24, 6))
    arrays = {
        "compact 2-D": base,
        "row slice": base[3:9],
        "column slice": base[:, 1:4],
        "every other row": base[::2],
        "reversed rows": base[::-1],
        # (base.T would launch Numba's transpose kernel, which NumPy 2.5 cannot compile: np.row_stack is gone.)
        "strided 2-D": base[1::3, ::2],
        "zero-size": cuda.device_array((0, 6), dtype=np.float32),
        "0-d": cuda.to_device(np.float64(3.0)),
        "int8": cuda.to_device(np.arange(100, dtype=np.int8)),
        "complex128": cuda.to_device(np.ones(7, dtype=np.complex128)),
        "bool": cuda.to_device(np.ones(5, dtype=np.bool_)),
    }
    fields = ("framework", "dtype", "shape", "strides", "device", "dlpack_device", "data_ptr", "nbytes",
              "contiguous", "alignment", "readonly")
    wrong = 0
    for name, array in arrays.items():
        fast, slow = numba.inspect(array), numba._inspect_interface(array)
        differ = [f for f in fields if getattr(fast, f) != getattr(slow, f)]
        wrong += bool(differ)
        print(f"{name:16} {'same' if not differ else 'DIFFERENT ' + str({f: (getattr(fast, f), getattr(slow, f)) for f in differ})}")
    big = cuda.device_array(1 << 18, dtype=np.float32)
    print(f"describe a Numba array: attributes {best_us(lambda: numba.inspect(big)):.2f} µs, "
          f"interface {best_us(lambda: numba._inspect_interface(big)):.2f} µs, "
          f"the interface's dict alone {best_us(lambda: big.__cuda_array_interface__):.2f} µs")
    # A share's target is a fresh array each time (torch→numba: cuda.as_cuda_array of the tensor):
    # what describing one costs beside making it.
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        t = torch.ones(1 << 18, device="cuda:0")
        make = best_us(lambda: cuda.as_cuda_array(t))
        fresh = best_us(lambda: numba.inspect(cuda.as_cuda_array(t))) - make
        fresh_interface = best_us(lambda: numba._inspect_interface(cuda.as_cuda_array(t))) - make
        print(f"a fresh torch→numba target: making it {make:.2f} µs; describing it by attributes {fresh:.2f} µs, "
              f"by the interface {fresh_interface:.2f} µs")
    print("every layout described alike" if not wrong else f"{wrong} layouts described differently")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
