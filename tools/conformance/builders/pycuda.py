"""PyCUDA's sources (CUDA only): ``gpuarray.to_gpu`` of NumPy's values in the device's primary
context (``pycuda.autoprimaryctx``, the one PyTorch, JAX and CuPy use), views by slicing.
Not yet run on a GPU (docs/pycuda-on-gpu.md)."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    if on_host:
        raise NotConstructible("pycuda arrays live on a GPU")
    if dtype == "bfloat16":
        raise NotConstructible("pycuda has no bfloat16 (its dtypes are NumPy's)")
    if layout in ("negative_stride", "zero_stride", "read_only"):
        raise NotConstructible(f"pycuda cannot make a {layout.replace('_', ' ')} GPUArray")
    pycuda = adapter.load()
    import pycuda.autoprimaryctx  # noqa: F401  the primary context of the current device

    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    flat = pycuda.gpuarray.to_gpu(example_values(dtype, n + 1))
    if layout == "misaligned":
        return flat[1:]
    base = flat[:n].reshape(EXAMPLE_SHAPE)
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.T
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "zero_size":
        return base[:0]
    if layout == "zero_d":
        return pycuda.gpuarray.to_gpu(example_values(dtype, 1).reshape(()))
    raise AssertionError(layout)
