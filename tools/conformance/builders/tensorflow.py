"""TensorFlow's sources: compact tensors only (slices copy), made under ``tf.device``."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import NotConstructible, compact_example_values


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    tf = adapter.load()
    if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
        raise NotConstructible(
            "layout not constructible in tf: its tensors are compact and row-major (slices copy)"
        )
    if layout == "read_only":
        raise NotConstructible("every tf tensor is immutable: the contiguous column is the read-only case")
    values = compact_example_values(dtype, layout)
    with tf.device("CPU:0" if on_host else f"GPU:{ordinal}"):
        t = tf.constant(values)
        return tf.cast(t, tf.bfloat16) if dtype == "bfloat16" else tf.identity(t)
