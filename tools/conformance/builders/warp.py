"""Warp's sources: ``wp.array`` of NumPy's values (Warp's own allocation), views by slicing and
``transpose``, a broadcast made with ``strides=(0, itemsize)`` over the same memory. Warp has no
complex dtypes, no negative strides, no 0-d and no read-only arrays."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    wp = adapter.load()
    if dtype.startswith("complex"):
        raise NotConstructible("warp has no complex dtypes")
    if layout == "negative_stride":
        raise NotConstructible("warp cannot make negative strides (slicing with a negative step raises)")
    if layout == "zero_d":
        raise NotConstructible("warp has no 0-d arrays")
    if layout == "read_only":
        raise NotConstructible("warp has no read-only arrays")
    if not on_host and not wp.is_cuda_available():
        raise NotConstructible("warp sees no CUDA device here")
    device = "cpu" if on_host else f"cuda:{ordinal}"
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if dtype == "bfloat16":
        flat = wp.array(example_values("float32", n + 1), dtype=wp.bfloat16, device=device)
    else:
        flat = wp.array(example_values(dtype, n + 1), device=device)
    if layout == "misaligned":
        return flat[1:]  # Warp's allocations are aligned; one element in is not
    if layout == "zero_size":
        return wp.zeros((0, EXAMPLE_SHAPE[1]), dtype=flat.dtype, device=device)
    base = wp.array(ptr=flat.ptr, dtype=flat.dtype, shape=EXAMPLE_SHAPE, device=device)
    base._ref = flat  # the view keeps its allocation alive, as Warp's own views do
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.transpose()
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "zero_stride":
        itemsize = wp.types.type_size_in_bytes(flat.dtype)
        view = wp.array(ptr=flat.ptr, dtype=flat.dtype, shape=EXAMPLE_SHAPE, strides=(0, itemsize), device=device)
        view._ref = flat
        return view
    raise AssertionError(layout)
