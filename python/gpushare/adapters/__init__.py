"""One adapter per framework, behind one small interface (:class:`Adapter`, in ``base.py``), each
in a module of its own (``numpy.py``, ``torch.py``, ``jax.py``, ``tensorflow.py``, ``cupy.py``,
``numba.py``, ``paddle.py``, ``mlx.py``, ``warp.py``, ``cuda_core.py``, ``pycuda.py``): everything
framework-specific lives there. Arrays of no known framework are taken by protocol
(``dlpack_producer.py``: any DLPack producer, and a bare capsule), as sources only.

This module is the registry: :data:`ADAPTERS`, and finding an adapter by name (:func:`framework`),
by array (:func:`adapter_of`, :func:`adapter_for`) or by module (:func:`by_module`). Nothing here
imports a framework until an array of it, or a conversion into it, is at hand.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable

from gpushare.adapters._cai import _CudaArrayView, _dtype_code_bits, info_from_cai
from gpushare.adapters.base import (
    _LEGACY_EXPORTERS,
    HOST_DEVICE_TYPES,
    Adapter,
    TensorInfo,
    explained,
    exports_versioned,
    major_version,
    probe_export,
    versioned_capsule,
)
from gpushare.adapters.cuda_core import CudaCoreAdapter
from gpushare.adapters.cupy import CupyAdapter
from gpushare.adapters.dlpack_producer import CapsuleAdapter, DLPackProducerAdapter, consumed_capsule
from gpushare.adapters.jax import JaxAdapter
from gpushare.adapters.mlx import MlxAdapter
from gpushare.adapters.numba import NumbaAdapter
from gpushare.adapters.numpy import NumpyAdapter, _numpy_dtype_refusal, numpy_unit
from gpushare.adapters.paddle import PaddleAdapter
from gpushare.adapters.pycuda import PycudaAdapter
from gpushare.adapters.tensorflow import TensorFlowAdapter, _StreamFreeExport
from gpushare.adapters.torch import TorchAdapter
from gpushare.adapters.warp import WarpAdapter
from gpushare.exceptions import NotAnArrayError, gpushare_error


def by_module(module: str) -> Adapter | None:
    """The adapter of the framework imported as ``module`` ("tensorflow"), or None."""
    return next((a for a in ADAPTERS.values() if a.module == module), None)


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        TorchAdapter(), TensorFlowAdapter(), JaxAdapter(), NumpyAdapter(), CupyAdapter(), NumbaAdapter(),
        PaddleAdapter(), MlxAdapter(), WarpAdapter(), CudaCoreAdapter(), PycudaAdapter(),
    )
}
#: Sources of no known framework, found by protocol (adapters/dlpack_producer.py): never targets,
#: so not in ADAPTERS.
PRODUCER = DLPackProducerAdapter()
CAPSULE = CapsuleAdapter()
_NAMES: dict[str, Adapter] = {}
for _a in ADAPTERS.values():
    _NAMES[_a.name] = _a
    for _alias in _a.aliases:
        _NAMES[_alias] = _a

_BY_TYPE: dict[type, Adapter] = {}


def framework(name: str) -> Adapter:
    """The adapter for a framework name or alias; suggests the closest name when unknown."""
    if isinstance(name, str):
        adapter = _NAMES.get(name)  # the common case, exact, first: this is on every share's path
        if adapter is not None:
            return adapter
    adapter = _NAMES.get(name.strip().lower()) if isinstance(name, str) else None
    if adapter is None:
        close = difflib.get_close_matches(str(name).lower(), list(_NAMES), n=1, cutoff=0.4)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise gpushare_error(
            "unknown_framework",
            f"unknown framework {name!r}{hint} Known: {', '.join(ADAPTERS)}"
        )
    return adapter


def adapter_of(obj: Any) -> Adapter:
    """The adapter of an array, found from its type without importing any framework."""
    tp = type(obj)
    adapter = _BY_TYPE.get(tp)
    if adapter is not None:
        return adapter
    # A subclass (a user's ``class Image(np.ndarray)``, ``torch.Tensor.as_subclass(Tagged)``,
    # ``np.memmap``, astropy's Quantity) is defined in another module: the framework is found from
    # the first class of its MRO that a framework's module defines, and is_array confirms it.
    for cls in tp.__mro__:
        for candidate in ADAPTERS.values():
            if candidate.owns_type(cls) and candidate.is_array(obj):
                _BY_TYPE[tp] = candidate
                return candidate
    # Last, by protocol: any DLPack producer, and a bare capsule, of no known framework.
    consumed = consumed_capsule(obj)
    if consumed is not None:
        raise gpushare_error("not_an_array", consumed)
    if CAPSULE.is_array(obj):
        return CAPSULE  # not remembered by type: a capsule of this type may be consumed next time
    if PRODUCER.is_array(obj):
        _BY_TYPE[tp] = PRODUCER
        return PRODUCER
    raise gpushare_error(
        "not_an_array",
        f"a {tp.__module__}.{tp.__qualname__} is not an array of a known framework "
        f"({', '.join(ADAPTERS)}), nor a DLPack producer (__dlpack__ and __dlpack_device__) or capsule"
    )


def adapter_for(obj: Any, expected: Adapter | None) -> Adapter:
    """The adapter of ``obj``, checked against the framework the user named."""
    try:
        adapter = adapter_of(obj)
    except NotAnArrayError:
        if expected is None:
            raise
        raise gpushare_error(
            "not_an_array",
            f"expected a {expected.name} array, got {type(obj).__module__}.{type(obj).__qualname__}"
        ) from None
    if expected is not None and adapter is not expected:
        raise gpushare_error("not_an_array", f"expected a {expected.name} array, got a {adapter.name} array")
    return adapter


Route = Callable[[Any], Any]
