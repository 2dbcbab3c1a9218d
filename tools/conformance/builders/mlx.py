"""MLX's sources: ``mx.array`` of NumPy's values (the dtype given: ``mx.array`` alone narrows
float64), views by slicing and ``broadcast_to``. Every MLX array is immutable."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values, plain_view


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    mx = adapter.load()
    if layout == "read_only":
        raise NotConstructible("every mlx array is immutable: the contiguous column is the read-only case")
    if dtype == "complex128":
        raise NotConstructible("mlx has no complex128")
    if not on_host and not adapter.has_gpu():
        raise NotConstructible("this mlx build has no GPU backend")
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    with mx.stream(mx.cpu if on_host else mx.gpu):
        if dtype == "bfloat16":
            flat = mx.array(example_values("float32", n + 1)).astype(mx.bfloat16)
        else:
            flat = mx.array(example_values(dtype, n + 1), dtype=getattr(mx, dtype if dtype != "bool" else "bool_"))
        if layout == "misaligned":
            return flat[1:]  # a view one element into the allocation (exported with a byte_offset)
        base = flat[:n].reshape(EXAMPLE_SHAPE)
        view = plain_view(base, layout)  # slices, transposes and reversals are views in MLX
        if view is not None:
            return view
        if layout == "zero_stride":
            return mx.broadcast_to(base[0], EXAMPLE_SHAPE)
        if layout == "zero_d":
            return flat[:1].reshape(())  # a 0-d view of the allocation's first element
    raise AssertionError(layout)
