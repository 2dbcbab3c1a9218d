"""Device memory around a conversion: the driver's figure and each framework allocator's.

``MemoryLedger.snapshot(ordinal)`` takes both in a few microseconds; ``MemoryLedger.diff(before,
after)`` says what a conversion cost: a shared handoff moves nothing, a copy shows up in the target
framework's allocator (and in the driver's figure when the allocator had to grow).

Only frameworks that are already imported are asked, and never in a way that initialises their GPU
runtime: asking JAX or TensorFlow for memory before they have touched the GPU would make them
claim most of it. No CUDA, or no context on the device yet, reads as ``None``, never as an error.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from gpushare import _native
from gpushare.adapters import ADAPTERS

#: Frameworks whose allocators can be asked (by module name), in report order: the adapters that
#: say so (``Adapter.tracks_allocator``); each adapter's ``allocator_memory`` answers for its own.
TRACKED_FRAMEWORKS = tuple(a.module for a in ADAPTERS.values() if a.tracks_allocator)


def driver_mem_info(ordinal: int = 0) -> Optional[tuple[int, int]]:
    """``(free, total)`` bytes of the device as the driver sees it (every process, every
    allocator), or None without CUDA or before any context exists on the device."""
    fn = getattr(_native, "cuda_mem_info", None)
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


@dataclass(frozen=True)
class MemorySnapshot:
    """Device memory at one moment: the driver's free/total and each allocator's figures."""

    ordinal: int
    driver_free: Optional[int]
    driver_total: Optional[int]
    frameworks: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    timestamp: float = 0.0

    @property
    def driver_used(self) -> Optional[int]:
        if self.driver_free is None or self.driver_total is None:
            return None
        return self.driver_total - self.driver_free

    def to_dict(self) -> dict[str, Any]:
        return {
            "ordinal": self.ordinal,
            "driver_free": self.driver_free,
            "driver_total": self.driver_total,
            "driver_used": self.driver_used,
            "frameworks": {name: dict(figures) for name, figures in self.frameworks.items()},
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class MemoryDiff:
    """``after - before``, in bytes: the driver's used memory and every allocator figure present
    in both snapshots. Positive = more memory held afterwards."""

    ordinal: int
    driver_used: Optional[int]
    frameworks: Mapping[str, Mapping[str, int]]
    seconds: float

    def is_zero(self) -> bool:
        """Nothing moved (as far as the figures can tell)."""
        return not self.driver_used and all(v == 0 for figs in self.frameworks.values() for v in figs.values())

    def summary(self) -> str:
        """One line, e.g. ``driver +64.0 MiB; torch reserved +64.0 MiB, allocated +64.0 MiB``."""
        parts = []
        if self.driver_used is not None:
            parts.append(f"driver {_signed_bytes(self.driver_used)}")
        for name, figures in self.frameworks.items():
            changed = [f"{key} {_signed_bytes(value)}" for key, value in figures.items() if value]
            if changed:
                parts.append(f"{name} " + ", ".join(changed))
        return "; ".join(parts) if parts else "no change"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ordinal": self.ordinal,
            "driver_used": self.driver_used,
            "frameworks": {name: dict(figures) for name, figures in self.frameworks.items()},
            "seconds": self.seconds,
        }

    def __repr__(self) -> str:
        return f"MemoryDiff(cuda:{self.ordinal}: {self.summary()})"


def _signed_bytes(n: int) -> str:
    sign = "+" if n > 0 else "-" if n < 0 else "±"
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{n} B"


class MemoryLedger:
    """Snapshots and differences of device memory (see the module docstring)."""

    @staticmethod
    def snapshot(ordinal: int = 0, frameworks: Optional[Iterable[str]] = None) -> MemorySnapshot:
        """The driver's free/total for ``ordinal`` and the allocator figures of ``frameworks``
        (default: every tracked framework that is imported). Never imports or initialises one."""
        figures = allocator_memory(ordinal, frameworks)
        info = driver_mem_info(ordinal)
        free, total = info if info is not None else (None, None)
        return MemorySnapshot(ordinal, free, total, figures, time.perf_counter())

    @staticmethod
    def diff(before: MemorySnapshot, after: MemorySnapshot) -> MemoryDiff:
        """``after - before``; figures missing on either side are left out."""
        if before.ordinal != after.ordinal:
            raise ValueError(f"snapshots of different devices: cuda:{before.ordinal} and cuda:{after.ordinal}")
        used_before, used_after = before.driver_used, after.driver_used
        driver = None if used_before is None or used_after is None else used_after - used_before
        frameworks = {}
        for name, figures in after.frameworks.items():
            earlier = before.frameworks.get(name)
            if earlier is None:
                continue
            frameworks[name] = {key: value - earlier[key] for key, value in figures.items() if key in earlier}
        return MemoryDiff(after.ordinal, driver, frameworks, after.timestamp - before.timestamp)
