"""Device memory around a conversion: each framework allocator's figures, the memory ledger's
Python half. The core reads the driver's figure and takes the difference (``MemoryLedger`` in
crates/core/src/report.rs, a share's ``.memory`` with ``observe=True``): a shared handoff moves
nothing, a copy shows up in the target framework's allocator (and in the driver's figure when the
allocator had to grow).

Only frameworks that are already imported are asked, and never in a way that initialises their GPU
runtime: asking JAX or TensorFlow for memory before they have touched the GPU would make them
claim most of it. No CUDA, or no context on the device yet, reads as ``None``, never as an error.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, Iterable, Optional

from gpushare import _native
from gpushare.adapters import ADAPTERS

#: Frameworks whose allocators can be asked (by module name), in report order: the adapters that
#: say so (``Adapter.tracks_allocator``); each adapter's ``allocator_memory`` answers for its own.
TRACKED_FRAMEWORKS = tuple(a.module for a in ADAPTERS.values() if a.tracks_allocator)


def driver_mem_info(ordinal: int = 0) -> Optional[tuple[int, int]]:
    """``(free, total)`` bytes of the device as the driver sees it (every process, every
    allocator), or None without CUDA or before any context exists on the device."""
    fn = getattr(_native.cuda, "mem_info", None)
    if fn is None:
        return None
    try:
        return fn(ordinal)
    except Exception:  # the ledger is advisory: a failed query must not fail a conversion
        return None


@functools.lru_cache(maxsize=1)
def _probes() -> dict[str, Callable[[int], Optional[dict[str, int]]]]:
    """Each framework's allocator probe, keyed by its module name: the adapters' own (built once:
    the adapters are fixed at import)."""
    from gpushare.adapters import ADAPTERS

    return {a.module: a.allocator_memory for a in ADAPTERS.values()}


def framework_memory(name: str, ordinal: int = 0) -> Optional[dict[str, int]]:
    """What framework ``name``'s allocator holds on CUDA device ``ordinal``, in its own terms
    (torch: allocated/reserved; CuPy: used/total of the default pool; JAX: bytes_in_use/peak;
    TF: current/peak; Paddle: allocated/reserved). None when the framework is not imported, has
    not initialised CUDA, or cannot say."""
    probe = _probes().get(name)
    if probe is None:
        return None
    try:
        return probe(ordinal)
    except Exception:  # a framework's internals changed, or its CUDA state is broken: no figure
        return None


def allocator_memory(ordinal: int = 0, frameworks: Optional[Iterable[str]] = None) -> dict[str, dict[str, int]]:
    """The imported framework allocators' figures on CUDA device ``ordinal`` (the memory
    ledger's per-framework half; the core reads the driver's figure itself): of every imported
    framework, or of those named in ``frameworks`` (module names), asked in that order. A caller
    that asks again and again (an observed share, twice each) works its names out once."""
    figures = {}
    for name in TRACKED_FRAMEWORKS if frameworks is None else frameworks:
        if name in sys.modules:
            found = framework_memory(name, ordinal)
            if found is not None:
                figures[name] = found
    return figures
