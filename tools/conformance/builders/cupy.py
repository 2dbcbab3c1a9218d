"""CuPy's sources: NumPy's values copied to the GPU, viewed as NumPy views them."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, aligned_numpy, numpy_example, plain_view


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    if on_host:
        raise NotConstructible("cupy arrays live on the GPU")
    if layout == "read_only":
        raise NotConstructible("cupy has no read-only arrays")
    if dtype == "bfloat16":
        raise NotConstructible("cupy builds no bfloat16 arrays (ml_dtypes arrays stay on the host)")
    cupy = adapter.load()
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    with cupy.cuda.Device(ordinal):
        if layout == "misaligned":
            return cupy.asarray(aligned_numpy((n,), dtype, extra=1))[1:]
        base = cupy.asarray(numpy_example(dtype, "contiguous"))
        view = plain_view(base, layout)
        if view is not None:
            return view
        if layout == "zero_stride":
            return cupy.broadcast_to(base[0], EXAMPLE_SHAPE)
        if layout == "zero_d":
            return base[0, 0].copy()
    raise AssertionError(layout)
