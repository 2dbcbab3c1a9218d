"""What gpushare reads of a user's arrays on the host, through the adapters' ``to_numpy``: whether a
copy that changed the dtype kept the values. NumPy is imported only when such a copy happened."""

from __future__ import annotations

from typing import Any

from gpushare.adapters.base import Adapter


def values_lost(src: Adapter, source: Any, dst: Adapter, value: Any) -> str | None:
    """When a copy changed the dtype (JAX without x64 narrows 64-bit types), whether the values
    survived: None if every value is equal (floats: up to the target's rounding), else what was
    lost, in words, with the fix (the target's ``keep_64_bit_fix`` where it has one). Compared on
    the host; never fails the share."""
    import numpy as np

    try:
        a = np.asarray(src.to_numpy(source))
        b = np.asarray(dst.to_numpy(value))
        if a.shape != b.shape or a.size == 0:
            return None
        back = b.astype(a.dtype)  # exact: the target's dtype is the narrower one
        if b.dtype.kind in "fc":
            eps = float(np.finfo(b.dtype).eps)
            with np.errstate(all="ignore"):
                same = np.isclose(back, a, rtol=eps, atol=0.0, equal_nan=True) | (back == a)
                # A non-zero value that became zero (underflow) is lost, whatever the tolerance.
                same &= ~((a != 0) & (back == 0))
        else:
            same = back == a
        changed = int(a.size - np.count_nonzero(same))
    except Exception:  # a comparison gpushare cannot make says nothing
        return None
    if changed == 0:
        return None
    at = np.unravel_index(int(np.argmin(same.reshape(-1))), a.shape) if a.ndim else ()
    example = f"{a[at].item()!r} became {b[at].item()!r}"
    wider = f", or {dst.keep_64_bit_fix}" if dst.keep_64_bit_fix else ""
    return (
        f"{changed} of {a.size} values changed ({example}): the narrowing lost data. Fix: cast the source "
        f"to a dtype the target keeps first{wider}"
    )
