"""JAX's sources: compact arrays only (its arrays are compact, row-major and immutable)."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter

from ..examples import SIXTY_FOUR_BIT, NotConstructible, compact_example_values


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    jax = adapter.load()
    import jax.numpy as jnp

    if dtype in SIXTY_FOUR_BIT and not jax.config.jax_enable_x64:
        raise NotConstructible(f"jax holds no {dtype} with jax_enable_x64 off")
    if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
        raise NotConstructible(
            "layout not constructible in jax: its arrays are compact, row-major and aligned on export"
        )
    if layout == "read_only":
        raise NotConstructible("every jax array is immutable: the contiguous column is the read-only case")
    target = jax.devices("cpu" if on_host else "gpu")[0 if on_host else ordinal]
    values = compact_example_values(dtype, layout)
    return jax.device_put(jnp.asarray(values, dtype=dtype), target)
