"""PyCUDA's sources (CUDA only): ``gpuarray.to_gpu`` of NumPy's values in the device's primary
context (``pycuda.autoprimaryctx``, the one PyTorch, JAX and CuPy use), views by slicing.

As a target PyCUDA runs in two states (``target_states``): without a context of its own, which is
how a notebook starts (every import then fails, as the rules predict from the adapter's
``has_current_context`` fact), and with the device's primary context current, as users of
``pycuda.autoprimaryctx`` have it (the shares)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterator

from gpushare.adapters import Adapter
from gpushare.adapters.cuda_core import strided_copy_to_host

from ..examples import EXAMPLE_SHAPE, NotConstructible, example_values, widen_bfloat16


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    if on_host:
        raise NotConstructible("pycuda arrays live on a GPU")
    if dtype == "bfloat16":
        raise NotConstructible("pycuda has no bfloat16 (its dtypes are NumPy's)")
    if layout in ("negative_stride", "zero_stride", "read_only"):
        raise NotConstructible(f"pycuda cannot make a {layout.replace('_', ' ')} GPUArray")
    pycuda = adapter.load()
    import pycuda.autoprimaryctx  # noqa: F401  the primary context of the current device

    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    flat = pycuda.gpuarray.to_gpu(example_values(dtype, n + 1))
    if layout == "misaligned":
        return flat[1:]
    base = flat[:n].reshape(EXAMPLE_SHAPE)
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.T
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "zero_size":
        return base[:0]
    if layout == "zero_d":
        return pycuda.gpuarray.to_gpu(example_values(dtype, 1).reshape(()))
    raise AssertionError(layout)


@contextlib.contextmanager
def _without_context(adapter: Adapter) -> Iterator[None]:
    """No context on PyCUDA's stack for this thread (those there are popped, and pushed back after)."""
    driver = adapter.load().driver
    popped = []
    while adapter.has_current_context():
        popped.append(driver.Context.get_current())
        driver.Context.pop()
    try:
        yield
    finally:
        for context in reversed(popped):
            context.push()


@contextlib.contextmanager
def _primary_context(adapter: Adapter, ordinal: int = 0) -> Iterator[None]:
    """The device's primary context pushed on PyCUDA's stack, as ``import pycuda.autoprimaryctx`` does."""
    driver = adapter.load().driver
    driver.init()
    context = driver.Device(ordinal).retain_primary_context()
    context.push()
    try:
        yield
    finally:
        driver.Context.pop()


def target_states(adapter: Adapter) -> list[tuple[str | None, Callable[[], ContextManager[Any]]]]:
    return [
        ("no PyCUDA context", lambda: _without_context(adapter)),
        ("PyCUDA in the primary context", lambda: _primary_context(adapter)),
    ]


def readback(adapter: Adapter, obj: Any) -> Any:
    """A GPUArray's values through the driver, whatever its strides (``GPUArray.get`` copies at most
    two non-contiguous axes, and not reversed or broadcast ones, which gpushare's views may have)."""
    driver = adapter.load().driver
    cai = obj.__cuda_array_interface__
    itemsize = obj.dtype.itemsize
    strides = None if cai.get("strides") is None else tuple(int(s) // itemsize for s in cai["strides"])
    return widen_bfloat16(strided_copy_to_host(int(cai["data"][0] or 0), tuple(cai["shape"]), strides, obj.dtype,
                                               lambda ptr, host: driver.memcpy_dtoh(host, ptr)))
