"""NumPy's sources: the host arrays everything else is compared with."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import NotConstructible, numpy_example


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    if not on_host:
        raise NotConstructible("numpy arrays live on the host")
    return numpy_example(dtype, layout)
