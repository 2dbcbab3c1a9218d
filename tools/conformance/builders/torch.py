"""PyTorch's sources: its own allocator's tensors (64-byte aligned), views by slicing and ``expand``."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values, plain_view, widen_bfloat16


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    torch = adapter.load()
    dev = "cpu" if on_host else f"cuda:{ordinal}"
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if layout == "negative_stride":
        raise NotConstructible("torch cannot make negative strides (torch.flip copies)")
    if layout == "read_only":
        raise NotConstructible("torch has no read-only tensors")
    if dtype == "bfloat16":
        flat = torch.tensor(example_values("float32", n + 1), device=dev).to(torch.bfloat16)
    else:
        # clone(): from_numpy would alias NumPy's malloc'd (often only 16-byte aligned) memory;
        # torch's own allocator aligns to 64 bytes, which is what a torch user gets.
        flat = torch.from_numpy(example_values(dtype, n + 1)).to(dev).clone()
    if layout == "misaligned":
        return flat[1:]  # torch allocations are 64-byte aligned, so one element in is not
    base = flat[:n].reshape(EXAMPLE_SHAPE)
    view = plain_view(base, layout)  # negative strides were refused above
    if view is not None:
        return view
    if layout == "zero_stride":
        return base[0].expand(*EXAMPLE_SHAPE)
    if layout == "zero_d":
        return base[0, 0].clone()
    raise AssertionError(layout)


def readback(adapter: Adapter, obj: Any) -> Any:
    obj = obj.detach().cpu()
    if obj.dtype == adapter.load().bfloat16:
        obj = obj.float()  # NumPy has no bfloat16
    return widen_bfloat16(obj.numpy())
