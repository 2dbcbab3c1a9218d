"""Numba's sources: device arrays from NumPy's values, views made with ``DeviceNDArray``."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, aligned_numpy, numpy_example


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    if on_host:
        raise NotConstructible("numba device arrays live on the GPU")
    if layout == "read_only":
        raise NotConstructible("numba device arrays cannot be read-only")
    if layout == "zero_stride":
        # DeviceNDArray would take strides (0, itemsize), but Numba's __cuda_array_interface__ then
        # says C-contiguous (is_contiguous ignores zero strides): no consumer could read it right.
        raise NotConstructible("numba device arrays export a zero stride view as C-contiguous, so it is not built")
    if layout == "negative_stride":
        raise NotConstructible(f"numba device arrays cannot take a {layout.replace('_', ' ')} view")
    if dtype == "bfloat16":
        raise NotConstructible("numba has no bfloat16")
    cuda = adapter.load().cuda
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if layout == "misaligned":
        return cuda.to_device(aligned_numpy((n,), dtype, extra=1))[1:]
    if layout in ("zero_d", "zero_size"):
        return cuda.to_device(numpy_example(dtype, layout))
    base = cuda.to_device(numpy_example(dtype, "contiguous"))
    if layout == "contiguous":
        return base
    if layout == "transposed":
        # Numba's `.T` is not a view: it runs a transpose kernel into a new compact array (and that
        # kernel fails to compile with NumPy 2.5). A transposed view is the same memory with swapped
        # strides, which DeviceNDArray takes as it is.
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        isz = base.dtype.itemsize
        rows, cols = EXAMPLE_SHAPE
        return DeviceNDArray(shape=(cols, rows), strides=(isz, cols * isz), dtype=base.dtype,
                             gpu_data=base.gpu_data)
    if layout == "sliced":
        return base[1:3, 2:]
    raise AssertionError(layout)


def readback(adapter: Adapter, obj: Any) -> Any:
    try:
        return adapter.to_numpy(obj)
    except Exception:  # e.g. negative strides ("D->H copy not implemented for negative strides")
        return _numba_through_cai(obj)


def _numba_through_cai(x: Any) -> Any:
    """A Numba view that copy_to_host cannot read, read through another framework's
    ``__cuda_array_interface__`` import: CuPy takes any strides; torch only non-negative ones
    (negative strides are what gpushare refuses to hand to torch)."""
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        return cupy.asarray(x).get()
    if any(s < 0 for s in x.strides):
        raise NotImplementedError("reading a Numba view with negative strides needs CuPy")
    import torch

    return torch.as_tensor(x, device="cuda").cpu().numpy()
