"""The sizes a sweep makes arrays of (``gpushare.bench``, ``%sharebench --sizes``), checked against
the devices before any array is made.

The sizes are read by ``gpushare.arguments.sizes`` (the core's one parser: a size past any memory,
such as a 400-digit number, is refused there). A size no device could hold (``1TiB`` on a laptop) is
refused here in one message before the sweep starts: making the first array would otherwise fail
deep inside a framework, or page the machine to a halt, after the smaller sizes had already run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from gpushare import _native
from gpushare.devices import parse_device


def whole_elements(sizes: Iterable[int], itemsize: int) -> list[int]:
    """Each size as the bytes of the array a sweep makes for it: whole elements of ``itemsize``
    bytes, at least one (0 stays 0), in order, each once. A point is labelled by the bytes its
    array holds: ``sizes=[1]`` of float64 sweeps an 8-byte array, and says 8 B."""
    return list(dict.fromkeys(max(size // itemsize, 1) * itemsize if size else 0 for size in sizes))


def device_capacity(device: str) -> int | None:
    """The bytes one array on ``device`` can at most take: the host's physical memory for
    ``cpu``, the GPU's total memory for ``cuda:N``; None when it cannot be told."""
    on_host, ordinal = parse_device(device)
    if on_host:
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # not a POSIX system that reports it
            return None
    try:
        devices = _native.cuda.devices()
    except Exception:  # no driver: the sweep's own device check says so
        return None
    for d in devices:
        if d.get("ordinal") == ordinal and d.get("total_memory"):
            return int(d["total_memory"])
    return None


def check_fits(sizes: Iterable[int], devices: Iterable[str]) -> None:
    """ValueError when a size exceeds the memory of a device the sweep puts it on."""
    sizes = list(sizes)
    for device in dict.fromkeys(devices):
        capacity = device_capacity(device)
        if capacity is None:
            continue
        too_big = [s for s in sizes if s > capacity]
        if too_big:
            where = "host memory" if parse_device(device)[0] else f"memory of {device}"
            raise ValueError(
                f"size {_native.text.format_bytes(max(too_big))} ({max(too_big):,} bytes) does not fit in the {where} "
                f"({_native.text.format_bytes(capacity)}); sweep sizes below it"
            )


__all__ = ["check_fits", "device_capacity", "whole_elements"]
