"""What this machine's hardware can do: the ceiling of every resource a copy crosses.

A table's bandwidth (bytes copied / time) can never exceed the ceiling of the slowest resource its
copy crosses; a figure above it is a timing bug (a copy timed before it landed), and the tests check
every compare/bench table against these ceilings. The resources (``gpushare._native.advice.copy_resources``,
crates/core/src/advice/ceilings.rs, says which ones a path's copy crosses):

- ``host_memory``: a copy from host memory into host memory, measured here with NumPy;
- ``device_memory:N``: a copy within GPU N's memory;
- ``host_to_device:N`` / ``device_to_host:N``: the host link each way, from and into page-locked memory;
- ``peer:A->B``: the link from GPU A to GPU B (the driver's fastest way: direct where peer access
  can be enabled).

The GPU figures are measured by the Rust core with the CUDA driver (the best of a few copies, timed by
CUDA events). Each resource is measured at several sizes, because a copy that fits in a cache is
faster than one that streams through memory; the ceiling for ``n`` bytes is the fastest copy measured
at a size within 16× of ``n``. The figures are measured once per machine and cached in
``$XDG_CACHE_HOME/gpushare/ceilings.json`` (``~/.cache`` without it), keyed by what they were made
for (host name, CPU model, GPU names, driver version, gpushare version): a change of any of them
measures again.
"""

from __future__ import annotations

import html
import copy
import json
import math
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any

from gpushare import _native, arguments, cache_files
from gpushare.adapters.base import HOST_DEVICE_TYPES

#: Bumped when the cached figures change meaning.
CACHE_FORMAT = 1
#: Sizes host memory is measured at: from inside a core's cache to well past the last level.
HOST_SIZES = (64 << 10, 1 << 20, 16 << 20, 256 << 20)
#: Sizes the GPU resources are measured at.
DEVICE_SIZES = (1 << 20, 16 << 20, 256 << 20)
#: A ceiling for ``n`` bytes is the fastest copy measured at a size within this factor of ``n``.
NEAR = 16
#: The resolution of CUDA events (cudaEventElapsedTime's documentation: about half a microsecond).
EVENT_RESOLUTION_S = 0.5e-6
#: How much a measured bandwidth may exceed its ceiling before it is a bug: timing noise.
TOLERANCE = 1.10


def cache_path() -> Path:
    """Where the ceilings are cached: ``$XDG_CACHE_HOME/gpushare/ceilings.json`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "gpushare" / "ceilings.json"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver() -> tuple[dict, list[dict]]:
    """The CUDA driver's status and the devices it shows (none without a usable driver)."""
    status = dict(_native.cuda.driver_status())
    devices = list(_native.cuda.devices()) if status.get("available") else []
    return status, devices


def cuda_devices() -> list[dict]:
    """The CUDA devices the driver shows (none without a usable driver)."""
    return _driver()[1]


def machine_key() -> dict[str, Any]:
    """What the ceilings were measured for: a change of any of these measures them again."""
    status, devices = _driver()
    return {
        "format": CACHE_FORMAT,
        "hostname": socket.gethostname(),
        "cpu": _cpu_model(),
        "devices": [str(d.get("name")) for d in devices],
        "driver": status.get("version_string"),
        "gpushare": _native.__version__,
    }


def _host_copy_Bps(nbytes: int, repeats: int = 7) -> float:
    """The best of ``repeats`` NumPy copies of ``nbytes`` into a buffer made beforehand, each
    sample at least ~2 ms of copies so the clock's resolution does not count."""
    import numpy as np

    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # faults the destination's pages in: a ceiling is of copying, not of paging
    loops = max(1, int(2e-3 * 10e9 / nbytes))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            np.copyto(dst, src)
        best = min(best, (time.perf_counter() - t0) / loops)
    return nbytes / best if best > 0 else float("inf")


def _gpu_resources(devices: list[dict]) -> list[tuple[str, str]]:
    """``(key, words)`` of every GPU resource of this machine: each GPU's memory and host link each
    way, and each ordered pair's link."""
    ordinals = [int(d.get("ordinal", i)) for i, d in enumerate(devices)]
    keys: list[tuple[str, str]] = []
    for d in ordinals:
        keys += _native.advice.copy_resources("share", "copy", d, d)
        keys += _native.advice.copy_resources("move", "move", d, None)
        keys += _native.advice.copy_resources("move", "move", None, d)
    for a in ordinals:
        for b in ordinals:
            if a != b:
                keys += _native.advice.copy_resources("move", "p2p", a, b)
    return keys


def measure(*, gpu: bool = True, repeats: int = 5) -> dict[str, Any]:
    """Measures every ceiling now (no cache): the dict :class:`Ceilings` holds."""
    status, devices = _driver()
    resources: dict[str, Any] = {
        "host_memory": {
            "description": "host memory copy (NumPy)",
            "points": [[n, _host_copy_Bps(n, max(repeats, 3))] for n in HOST_SIZES],
            "note": None,
        }
    }
    if not status.get("available"):
        note = f"not measured: {status.get('reason') or 'the CUDA driver is unavailable'}"
        resources["gpu"] = {"description": "every GPU resource", "points": [], "note": note}
    elif not gpu:
        resources["gpu"] = {"description": "every GPU resource", "points": [], "note": "not measured: gpu=False"}
    else:
        for key, words in _gpu_resources(devices):
            points, note = [], None
            for n in DEVICE_SIZES:
                try:
                    points.append([n, float(_native.advice.measure_ceiling(key, n, repeats))])
                except Exception as e:  # out of memory on a busy GPU: say so, keep the others
                    note = f"not measured at {n} bytes: {e}"
            resources[key] = {"description": words, "points": points, "note": note}
    return {"key": machine_key(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "resources": resources}


class Ceilings:
    """The ceilings of this machine's resources, as :func:`ceilings` returns them."""

    def __init__(self, data: dict[str, Any], cached: bool = False):
        self._data = data
        self.cached = cached

    @property
    def key(self) -> dict[str, Any]:
        return dict(self._data.get("key") or {})

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        # Empty where the figures name none (a hand-made dict): nothing measured, not an error.
        resources = self._data.get("resources")
        return resources if isinstance(resources, dict) else {}

    def ceiling(self, resource: str, nbytes: int) -> float | None:
        """Bytes per second that resource ``resource`` can copy ``nbytes`` at: the fastest copy
        measured at a size within :data:`NEAR` × of ``nbytes`` (the nearest size when none is);
        None when it was not measured."""
        nbytes = arguments.size("nbytes", nbytes)
        points = _points(self.resources.get(resource))
        if not points:
            return None
        n = max(int(nbytes), 1)
        near = [bps for size, bps in points if n / NEAR <= size <= n * NEAR]
        if near:
            return max(near)
        return min(points, key=lambda p: abs(p[0] - n))[1]

    def bound(self, kind: str, path: str, source: tuple[int, int], target: tuple[int, int], nbytes: int) -> tuple[float | None, list[str]]:
        """``(ceiling, resources)`` of a copy of ``nbytes`` by ``path`` of ``kind`` from DLPack
        device ``source`` to ``target``: the slowest resource it crosses sets the ceiling (None when
        one of them was not measured)."""
        def ordinal(device: tuple[int, int]) -> int | None:
            return None if int(device[0]) in HOST_DEVICE_TYPES else int(device[1] or 0)

        nbytes = arguments.size("nbytes", nbytes)
        crossed = _native.advice.copy_resources(kind, path, ordinal(source), ordinal(target))
        limits = [self.ceiling(key, nbytes) for key, _ in crossed]
        if not crossed or any(x is None for x in limits):
            return None, [key for key, _ in crossed]
        return min(limits), [key for key, _ in crossed]  # type: ignore[type-var]

    def bound_of_row(self, source: tuple[int, int], row: dict[str, Any], nbytes: int | None = None) -> tuple[float | None, list[str]]:
        """:meth:`bound` of the copy a table's row (or a sweep's point) made from DLPack device
        ``source``: into its target's memory, a share where that is the source's device and a move
        where it is another, of ``nbytes`` (the bytes it moved by default)."""
        target = _memory_place(row.get("target"), source)
        kind = "share" if target == source else "move"
        return self.bound(kind, row["path"], source, target, int(nbytes if nbytes is not None else row["bytes_moved"]))

    def to_dict(self) -> dict[str, Any]:
        # A copy the caller may change without changing the cache this object holds.
        return copy.deepcopy(self._data)

    def _rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for key, r in self.resources.items():
            points = _points(r)
            r = r if isinstance(r, dict) else {}
            if points:
                figures = ", ".join(f"{_native.text.size_label(n)}: {bps / 1e9:.1f} GB/s" for n, bps in points)
            else:
                figures = str(r.get("note") or "not measured")
            rows.append((str(key), str(r.get("description", "")), figures))
        return rows

    def _caption(self) -> str:
        k = self.key
        where = f"{k.get('hostname')} ({k.get('cpu')}"
        where += f"; {', '.join(map(str, k['devices'])) if isinstance(k['devices'], list) else k['devices']}, driver {k.get('driver')})" if k.get("devices") else ")"
        how = "cached" if self.cached else "measured"
        return f"gpushare ceilings of {where}, {how} {self._data.get('measured_at')}: best copy at each size"

    def text(self) -> str:
        rows = self._rows()
        width = max((len(key) for key, _, _ in rows), default=0)
        lines = [self._caption() + ("" if rows else ": no resource measured")]
        lines += [f"  {key:<{width}}  {figures}   ({words})" for key, words, figures in rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><td style='text-align:left'>{html.escape(key)}</td><td style='text-align:left'>{html.escape(words)}</td>"
            f"<td style='text-align:left'>{html.escape(figures)}</td></tr>"
            for key, words, figures in self._rows()
        )
        return (f"<table class='gpushare-ceilings'><caption>{html.escape(self._caption())}</caption>"
                "<tr><th>resource</th><th>what</th><th>ceiling by copy size</th></tr>" + cells + "</table>")


def ceilings(refresh: bool = False, *, gpu: bool = True) -> Ceilings:
    """This machine's ceilings: read from the cache when it was made for this machine, its devices,
    driver and gpushare version (see the module's doc), else measured (about a second per GPU
    resource) and cached. ``refresh=True`` measures again; ``gpu=False`` measures host memory only."""
    path = cache_path()
    if not refresh:
        data = _read_cache(path)
        if data is not None:
            skipped_gpu = gpu and "gpu=False" in str((data["resources"].get("gpu") or {}).get("note"))
            if data.get("key") == machine_key() and not skipped_gpu:
                return Ceilings(data, cached=True)
    data = measure(gpu=gpu)
    # A read-only home: the figures are still right for this process (the warning says so).
    cache_files.write_text(path, json.dumps(data, indent=1), "machine's ceilings",
                           "they serve this process only, and are measured again in the next")
    return Ceilings(data)


def _read_cache(path: Path) -> dict[str, Any] | None:
    """The cached ceilings, where ``path`` holds figures of the form :func:`measure` makes; None
    otherwise (no file, one from an older gpushare, or one that cannot be a cache: that is named in a
    warning), and the ceilings are measured again."""
    try:
        text = cache_files.read_text(path)
        if text is None:
            return None
        data = json.loads(text)
    except (cache_files.Unusable, ValueError, RecursionError) as e:
        why = str(e) if isinstance(e, cache_files.Unusable) else f"it is not JSON ({type(e).__name__})"
        cache_files.warn_unusable(path, "machine's ceilings", why, "they are measured again")
        return None
    why = _data_problem(data)
    if why is not None:
        cache_files.warn_unusable(path, "machine's ceilings", why, "they are measured again")
        return None
    return data


def _point_ok(p: Any) -> bool:
    """Whether ``p`` is a ceiling's point: ``[bytes, bytes per second]``, both positive, finite."""
    return (isinstance(p, (list, tuple)) and len(p) == 2 and type(p[0]) is int and 0 < p[0] < 1 << 63
            and isinstance(p[1], (int, float)) and not isinstance(p[1], bool) and math.isfinite(p[1]) and p[1] > 0)


def _points(resource: Any) -> list[tuple[int, float]]:
    """A resource's measured points, ``(bytes, bytes per second)``; any that is not one is left out
    (a :class:`Ceilings` made by hand from other figures)."""
    points = resource.get("points") if isinstance(resource, dict) else None
    return [(p[0], float(p[1])) for p in points if _point_ok(p)] if isinstance(points, list) else []


def _data_problem(data: Any) -> str | None:
    """Why ``data`` is not ceilings as :func:`measure` makes them, or None: a key, and resources
    each with a description and points of a size in bytes and a positive, finite rate."""
    if not isinstance(data, dict) or not isinstance(data.get("key"), dict):
        return "it holds no machine key"
    resources = data.get("resources")
    if not isinstance(resources, dict) or not resources:
        return "it holds no resources"
    for key, r in resources.items():
        if not isinstance(r, dict):
            return f"resource {key!r} is not a table"
        if not isinstance(r.get("description", ""), str) or not isinstance(r.get("note") or "", str):
            return f"resource {key!r} has a description or note that is not text"
        points = r.get("points") or []
        if not isinstance(points, list):
            return f"resource {key!r} has no list of points"
        for p in points:
            if not _point_ok(p):
                return f"resource {key!r} has a point {p!r} that is not [bytes, bytes per second]"
    return None


def dlpack_place(device: str) -> tuple[int, int]:
    """``"cpu"`` → ``(1, 0)``, ``"cuda:1"`` → ``(2, 1)``: a bench's device as DLPack names it."""
    on_host, ordinal = _native.text.parse_device(str(device))  # the core's one parser of device names
    return (1, 0) if on_host else (2, ordinal)


def _memory_place(info: dict[str, Any] | None, default: tuple[int, int]) -> tuple[int, int]:
    """Where an array's bytes are, for the resources its copy crosses: the driver's device ordinal
    where it has one (a framework's label may name the current device instead: Numba's interface has
    no ordinal, so a cuda:0 array reads as cuda:1 while JAX made cuda:1 current, which once charged a
    copy within cuda:0 to the link to cuda:1), else the DLPack device."""
    if not info:
        return default
    place = tuple(info.get("dlpack_device") or default)
    ordinal = (info.get("cuda") or {}).get("device_ordinal")
    if place[0] == 2 and ordinal is not None:
        return (2, int(ordinal))
    return place


def table_problems(table: Any, limits: Ceilings | None = None) -> list[str]:
    """What is untrue in a :class:`~gpushare.Comparison` or :class:`~gpushare.Benchmark`, in words
    (empty when nothing is): a row whose bandwidth exceeds :data:`TOLERANCE` × the ceiling of the
    slowest resource its copy crosses, a row that shared memory yet shows a bandwidth, and a row
    whose time is below its own device time (each sample's host time waits for the device, so its
    median cannot be below the device's)."""
    limits = limits if limits is not None else ceilings()
    data = table.to_dict()
    if "points" in data:
        source, rows = dlpack_place(data.get("device", "cpu")), data["points"]
    else:
        source, rows = _memory_place(data["source"], (1, 0)), data["rows"]
    problems = []
    for row in rows:
        where = f"{row['path']}" + (f" at {_native.text.size_label(row['size'])}" if "size" in row else "")
        timing = row.get("timing") or {}
        host, device = timing.get("median"), timing.get("device_median")
        # CUDA events resolve about 0.5 µs (cudaEventElapsedTime): a host time within that of the
        # device time is the two clocks agreeing (2x H200: 20.7 against 20.7 µs), not a timing bug.
        if host is not None and device is not None and host < device - EVENT_RESOLUTION_S:
            problems.append(f"{where}: time {host * 1e6:.1f} µs is below its own device time {device * 1e6:.1f} µs")
        bandwidth = row.get("bandwidth")
        if not bandwidth:
            continue
        if row.get("verdict") == "shared" or not row.get("bytes_moved"):
            problems.append(f"{where}: shared memory moves no bytes, yet shows {bandwidth / 1e9:.1f} GB/s")
            continue
        limit, crossed = limits.bound_of_row(source, row)
        if limit is None:
            problems.append(f"{where}: no ceiling measured for {', '.join(crossed) or 'its copy'}")
        elif bandwidth > TOLERANCE * limit:
            problems.append(f"{where}: {bandwidth / 1e9:.1f} GB/s is above the {limit / 1e9:.1f} GB/s ceiling of {', '.join(crossed)}")
    return problems
