"""PaddlePaddle's sources: ``paddle.to_tensor`` of NumPy's values, views by slicing and ``as_strided``."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values, plain_view, widen_bfloat16


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    paddle = adapter.load()
    if layout == "read_only":
        raise NotConstructible("paddle has no read-only tensors")
    if dtype in ("uint16", "uint32", "uint64"):
        # paddle.to_tensor reads a NumPy uint16 array as bfloat16 and refuses uint32/uint64.
        raise NotConstructible(f"paddle has no {dtype} tensors")
    place = paddle.CPUPlace() if on_host else paddle.CUDAPlace(ordinal)
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if dtype == "bfloat16":
        flat = paddle.to_tensor(example_values("float32", n + 1), place=place).astype("bfloat16")
    else:
        flat = paddle.to_tensor(example_values(dtype, n + 1), dtype=dtype, place=place)
    if layout == "misaligned":
        return flat[1:]  # Paddle's allocations are 64-byte aligned; slices are views (stride kernels)
    base = flat[:n].reshape(list(EXAMPLE_SHAPE))
    view = plain_view(base, layout)  # transposes, slices and reversals are views in Paddle 3
    if view is not None:
        return view
    if layout == "zero_stride":
        return paddle.as_strided(base[0], list(EXAMPLE_SHAPE), [0, 1])  # expand copies; this views
    if layout == "zero_d":
        return base[0, 0].clone()
    raise AssertionError(layout)


def readback(adapter: Adapter, obj: Any) -> Any:
    if "bfloat16" in str(obj.dtype):
        obj = obj.astype("float32")  # NumPy has no bfloat16 (without ml_dtypes)
    return widen_bfloat16(obj.numpy())
