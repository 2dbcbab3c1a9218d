"""The conformance matrix's sources: one array per framework × dtype × layout, made the way that
framework's users make it.

Each framework's builders live in ``builders/<module>.py``, named as its adapter's module in
``gpushare/adapters/`` (``builders/tensorflow.py`` for ``gpushare.adapters.tensorflow``): an
``example(adapter, dtype, layout, on_host, ordinal)`` and, where reading its arrays back as NumPy
needs more than the adapter's ``to_numpy``, a ``readback(adapter, obj)``. They are test fixtures,
not product code, so they are not in the wheel; the product's adapter is all gpushare needs of a
framework, and a framework without builders is in the matrix with every cell skipped, by reason.
The NumPy values and views every strided library makes alike live here, once."""

from __future__ import annotations

import contextlib
import importlib
from types import ModuleType
from typing import Any, Callable, ContextManager

#: The layouts a framework's ``example`` knows, each a view of a (4, 6) array.
EXAMPLE_LAYOUTS = (
    "contiguous", "transposed", "sliced", "negative_stride", "zero_stride", "zero_d", "zero_size",
    "misaligned", "read_only",
)
EXAMPLE_SHAPE = (4, 6)
SIXTY_FOUR_BIT = ("int64", "uint64", "float64", "complex128")


class NotConstructible(Exception):
    """The layout or dtype cannot be made in the framework asked: the reason says why."""


def example_dtype(dtype: str) -> Any:
    """The NumPy dtype of a dtype name (bfloat16 through ml_dtypes, when it is installed)."""
    import numpy as np

    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise NotConstructible("numpy has no bfloat16 without ml_dtypes") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def example_values(dtype: str, n: int) -> Any:
    """Distinct small values in ``dtype`` (so a transposed or reversed read is told apart)."""
    import numpy as np

    if dtype == "bool":
        return np.arange(n) % 3 == 0
    return (np.arange(n) % 7 + 1).astype(example_dtype(dtype))


def compact_example_values(dtype: str, layout: str) -> Any:
    """The NumPy values of a compact example (contiguous, 0-d or zero-size; bfloat16 as float32,
    which the framework then casts), for frameworks that build from values."""
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    values = example_values("float32" if dtype == "bfloat16" else dtype, n).reshape(EXAMPLE_SHAPE)
    if layout == "zero_d":
        return values[0, 0]
    if layout == "zero_size":
        return values[:0]
    return values


def aligned_numpy(shape: tuple[int, ...], dtype: str, extra: int = 0) -> Any:
    """A NumPy array whose data starts on a 64-byte boundary (np.zeros is often only 16-aligned),
    with ``extra`` spare elements behind it."""
    import numpy as np

    dt = example_dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    raw = np.zeros((n + extra) * dt.itemsize + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    flat = raw[off : off + (n + extra) * dt.itemsize].view(dt)
    flat[:] = example_values(dtype, n + extra)
    return flat


def plain_view(base: Any, layout: str) -> Any:
    """The views every strided array library makes the same way (NumPy, CuPy, PyTorch) of a
    compact 2-d ``base``; None for the layouts each builds its own way."""
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.T
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "negative_stride":
        return base[:, ::-1]
    if layout == "zero_size":
        return base[:0]
    return None


def numpy_example(dtype: str, layout: str) -> Any:
    """NumPy's example, 64-byte aligned (also the host values CuPy and Numba copy to the GPU)."""
    import numpy as np

    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if layout == "misaligned":
        return aligned_numpy((n,), dtype, extra=1)[1:]
    flat = aligned_numpy(EXAMPLE_SHAPE, dtype)
    base = flat.reshape(EXAMPLE_SHAPE)
    view = plain_view(base, layout)
    if view is not None:
        return view
    if layout == "zero_stride":
        # as_strided, not broadcast_to: broadcast_to returns a read-only view, which would test the
        # read-only rule instead of the stride rule.
        return np.lib.stride_tricks.as_strided(base[0], shape=EXAMPLE_SHAPE, strides=(0, base.itemsize), writeable=True)
    if layout == "zero_d":
        return flat[:1].reshape(())
    if layout == "read_only":
        base.flags.writeable = False
        return base
    raise AssertionError(layout)


def widen_bfloat16(array: Any) -> Any:
    """``array`` as a NumPy array, bfloat16 (ml_dtypes) widened to float32 for comparisons."""
    import numpy as np

    out = np.asarray(array)
    return out.astype(np.float32) if out.dtype.name == "bfloat16" else out


def builders_of(adapter: Any) -> ModuleType | None:
    """The module of ``adapter``'s builders (``builders/<its adapter module>.py``), or None."""
    name = type(adapter).__module__.rpartition(".")[2]
    try:
        return importlib.import_module(f"{__package__}.builders.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__package__}.builders.{name}":
            raise  # a builder that imports something missing: say so, not "no builders"
        return None


def example(adapter: Any, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    """A ``(4, 6)``-based array of ``dtype`` in ``layout`` (one of ``EXAMPLE_LAYOUTS``), made the
    way ``adapter``'s framework's users make it, on the host or CUDA device ``ordinal``. Raises
    :class:`NotConstructible`, with the reason, where the framework cannot make it."""
    builders = builders_of(adapter)
    if builders is None:
        raise NotConstructible(f"{adapter.name} builds no examples")
    return builders.example(adapter, dtype, layout, on_host, ordinal)


def target_states(adapter: Any) -> list[tuple[str | None, Callable[[], ContextManager[Any]]]]:
    """The states ``adapter``'s framework is run in as a target, each ``(label, make)`` where
    ``make()`` is a context manager that puts the framework in that state: its builders'
    ``target_states`` where a fact the rules read can be either way in one process (PyCUDA's
    current context), else one state, as it is (label None)."""
    builders = builders_of(adapter)
    own = getattr(builders, "target_states", None)
    return own(adapter) if own is not None else [(None, contextlib.nullcontext)]


def readback(adapter: Any, obj: Any) -> Any:
    """The values of one of ``adapter``'s arrays as NumPy, to compare a target with its source
    (bfloat16 widened to float32, any strides)."""
    builders = builders_of(adapter)
    own = getattr(builders, "readback", None)
    return own(adapter, obj) if own is not None else widen_bfloat16(adapter.to_numpy(obj))
