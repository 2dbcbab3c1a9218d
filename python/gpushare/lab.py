"""The transfer-path laboratory: every way to move an array from one framework to another, side by
side, timed properly.

- :func:`compare` tries every transfer path for one array (``%share x ->jax --path all``) and
  returns a :class:`Comparison`: one row per path with its verdict (shared, copied, failed — a path
  that does not apply is a row with the reason, never hidden), bytes moved, median and minimum time,
  IQR, bandwidth and, on a GPU, device time; the fastest is highlighted.
- :func:`bench` sweeps sizes × paths (``%sharebench torch->jax``) and returns a :class:`Benchmark`
  with tables and an SVG plot of time and bandwidth against size.
- :class:`SharedBuffer` is memory owned by gpushare's Rust core, handed to any number of
  frameworks at once.

Tables, JSON and the plot are rendered by the Rust core; raw seconds and bytes stay in the data.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any, Iterable, Sequence

from gpushare import _native, verdicts
from gpushare.adapters import Adapter, adapter_for, framework
from gpushare.api import inspect
from gpushare.exceptions import GpushareError, GpushareWarning, PathNotApplicableError
from gpushare.paths import PATH_NAMES, _shared_buffer_importer, auto_choice, checks_source, route
from gpushare.progress import bar as progress_bar
from gpushare.records import Record, normalise_frame, records
from gpushare.warn_site import user_stacklevel

SharedBuffer = _native.SharedBuffer

#: Sizes ``bench`` and ``%sharebench`` sweep when none are given.
DEFAULT_SIZES = ("4KiB", "1MiB", "256MiB")

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "tb": 1000**4}


def parse_size(size: int | str) -> int:
    """``"4KiB"`` → 4096, ``"1.5 MB"`` → 1500000, ``65536`` → 65536 (bytes)."""
    if isinstance(size, int) and not isinstance(size, bool):
        if size < 0:
            raise ValueError(f"a size is at least 0 bytes, got {size}")
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(size))
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        raise ValueError(f"cannot read size {size!r}: write e.g. 4KiB, 1MiB, 256MiB, 1GiB or a number of bytes")
    return int(float(m.group(1)) * unit)


def parse_paths(paths: str | Sequence[str]) -> list[str]:
    """``"all"`` → every path; ``"dlpack,copy"`` or a list → those paths (checked)."""
    names = [p.strip() for p in paths.split(",")] if isinstance(paths, str) else [str(p).strip() for p in paths]
    names = [p for p in names if p]
    if names in (["all"], []):
        return list(PATH_NAMES)
    known = (*PATH_NAMES, "auto")
    for name in names:
        if name not in known:
            raise ValueError(f"unknown transfer path {name!r}; known paths: {', '.join(known)}, all")
    return list(dict.fromkeys(names))


def _buffer_to(buf: Any, to: Any) -> Any:
    """``SharedBuffer.to``: a view of the buffer in framework ``to``, by DLPack (TensorFlow: a legacy
    capsule; Numba: ``__cuda_array_interface__``)."""
    dst = to if isinstance(to, Adapter) else framework(to)
    dst.load()
    return _shared_buffer_importer(dst)(buf)


def empty_cache() -> None:
    """Frees the device buffers the ``copy`` and ``pinned`` paths keep for reuse."""
    _native.shared_pool_clear()


def _reason_of(exc: BaseException) -> tuple[str, str | None]:
    """Why a path failed, in the words of the error the core made (``reason``, ``fix``)."""
    reason = getattr(exc, "reason", None)
    if isinstance(exc, GpushareError):
        return str(reason or exc), getattr(exc, "fix", None)
    text = f"{type(exc).__name__}: {exc}"
    known = _native.explain_failure(text)
    return (known[0], known[1]) if known else (text, None)


def _empty_run(path: str) -> dict:
    return {"path": path, "verdict": "failed", "applicable": True, "reason": None, "fix": None,
            "samples": [], "loops": 1, "device_samples": None, "bytes_moved": 0, "target": None,
            "notes": [], "auto": False}


def _try_path(
    obj: Any, src: Adapter, dst: Adapter, path: str, *, repeat: int, number: int | None,
    warmup: int, min_sample_time: float, keep_value: bool, device: str | None = None,
    is_auto: bool = False, already_there: bool = False,
) -> tuple[dict, Any]:
    """Measures one path: the share pipeline, run with the lab's timing policy. A path that does
    not apply or fails is a row with its reason. With ``device``, the path is a move there
    (``already_there``: the array is on that device). ``is_auto``: the row of the path ``auto``
    took, predicted as ``auto`` (the predictor then says why auto took it)."""
    run = _empty_run(path)
    try:
        if device is None:
            _, convert = route(src, dst, path)
            predictor = verdicts.predictor(src, dst, "auto" if is_auto else path)
            check_source = checks_source(path)
        else:
            from gpushare.devices import check_device, dlpack_place, move_checks_source, move_route

            _, convert = move_route(src, dst, path, device, already_there)
            predictor = verdicts.move_predictor(src, dst, path, dlpack_place(*check_device(device)))
            check_source = move_checks_source(path)
        kind = "share" if device is None else "move"
        plan = _native.SharePlan(src, dst, path, convert, predictor, check_source=check_source, kind=kind)
        result = plan.run(obj, repeat, number, warmup=max(warmup, 1), min_sample_time=min_sample_time)
    except PathNotApplicableError as e:
        run["applicable"], (run["reason"], run["fix"]) = False, _reason_of(e)
        return run, None
    except Exception as e:  # the framework failed: a row, not an exception
        run["reason"], run["fix"] = _reason_of(e)
        return run, None
    t = result.timing
    run.update(
        verdict=result.verdict, reason=result.reason, samples=list(t.samples), loops=t.loops,
        device_samples=t.device_samples,
        bytes_moved=0 if result.verdict == "shared" else int(result.source.nbytes),
        target=result.target.to_dict(), notes=list(result.notes),
    )
    return run, (result if keep_value else None)


class _Report:
    """Shared behaviour of Comparison and Benchmark: rendering by the Rust core, cached."""

    _kind = ""

    def __init__(self, data: dict):
        self._input = json.dumps(data, allow_nan=False)
        self._rendered: dict[str, str] = {}

    def _render(self, fmt: str) -> str:
        if fmt not in self._rendered:
            self._rendered[fmt] = _native.render_lab(self._kind, self._input, fmt)
        return self._rendered[fmt]

    def to_json(self) -> str:
        """The ``application/vnd.gpushare+json`` payload: ``{"schema": "gpushare.<kind>/1", "data": …}``."""
        return self._render("json")

    def to_dict(self) -> dict:
        """The JSON form's ``data``, with its ``schema`` (``gpushare.<kind>/1``) kept as a key."""
        envelope = json.loads(self.to_json())
        return {"schema": envelope["schema"], **envelope["data"]}

    def __repr__(self) -> str:
        return self._render("text")

    def _repr_html_(self) -> str:
        return self._render("html")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return {
            "text/plain": self.__repr__(),
            "text/html": self._repr_html_(),
            "application/vnd.gpushare+json": json.loads(self.to_json()),
        }


# Counts are integers in to_pandas() frames; "Int64" (nullable) where a failed row has none.
_INTEGER_COLUMNS = {"size": "int64", "nbytes": "int64", "bytes_moved": "int64", "repeats": "Int64", "loops": "Int64"}
# Measurements are floats, NaN where a failed row has none (gpushare.records: one convention).
_FLOAT_COLUMNS = ("median_s", "min_s", "iqr_s", "device_median_s", "bandwidth_Bps")


def _frame(rows: list[dict]) -> Any:
    """A tidy frame: one row per measured path, the identifying columns first, integer counts."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame = frame.astype({c: t for c, t in _INTEGER_COLUMNS.items() if c in frame.columns})
    return normalise_frame(frame, floats=_FLOAT_COLUMNS)


def _flat(row: dict) -> dict:
    timing = row.get("timing") or {}
    device = row.get("device_timing") or {}
    return {
        "path": row["path"], "verdict": row["verdict"], "applicable": row["applicable"], "auto": row["auto"],
        "fastest": row["fastest"], "bytes_moved": row["bytes_moved"], "median_s": timing.get("median"),
        "min_s": timing.get("min"), "iqr_s": timing.get("iqr"), "repeats": len(timing.get("samples") or []) or None,
        "loops": timing.get("loops"), "device_median_s": device.get("median"),
        "bandwidth_Bps": row.get("bandwidth"), "reason": row.get("reason"), "warning": row.get("warning"),
    }


class Comparison(_Report):
    """Every transfer path for one array. ``rows`` (one :class:`~gpushare.records.Record` per path:
    ``row.verdict``, ``row.timing.median``), ``paths`` (path → row: ``c.paths["host"].timing.median``),
    ``results`` (path → ShareResult of the paths that worked, with ``.value``), ``fastest``,
    ``to_dict()``, ``to_json()``, ``to_pandas()``."""

    _kind = "comparison"

    def __init__(self, data: dict, results: dict[str, Any]):
        super().__init__(data)
        self.results = results

    @property
    def rows(self) -> list[Record]:
        return records(self.to_dict()["rows"])

    @property
    def paths(self) -> dict[str, Record]:
        """Path → its row, in the order measured."""
        return {row.path: row for row in self.rows}

    @property
    def fastest(self) -> str | None:
        return self.to_dict()["fastest"]

    @property
    def values(self) -> dict[str, Any]:
        """Path → the converted array, for the paths that worked."""
        return {path: r.value for path, r in self.results.items()}

    def __getitem__(self, path: str) -> Record:
        for row in self.rows:
            if row["path"] == path:
                return row
        raise KeyError(path)

    def to_pandas(self) -> Any:
        """One row per path; the source (frameworks, dtype, shape, device, bytes) on every row."""
        data = self.to_dict()
        source = data["source"]
        ids = {
            "source_framework": source["framework"], "target_framework": data["target_framework"],
            "dtype": source["dtype"], "shape": tuple(source["shape"]), "device": source["device"],
            "nbytes": source["nbytes"],
        }
        return _frame([{**ids, **_flat(r)} for r in data["rows"]])


class Benchmark(_Report):
    """A sweep over sizes × paths. ``points`` (one :class:`~gpushare.records.Record` per size × path:
    ``p.size``, ``p.path``, ``p.timing.median``), ``interrupted``, ``svg``, ``plot()`` (matplotlib),
    ``to_dict()``, ``to_json()``, ``to_pandas()``; shown as tables plus an SVG plot."""

    _kind = "benchmark"

    def __init__(self, data: dict):
        super().__init__(data)
        self.interrupted = bool(data.get("interrupted"))

    @property
    def points(self) -> list[Record]:
        return records(self.to_dict()["points"])

    def plot(self, ax: Any = None) -> Any:
        """Time per handoff against size, one line per path that worked, drawn with matplotlib
        (imported only here) on ``ax`` or a new figure's axes, for restyling; returns the axes.
        The notebook's built-in plot is :attr:`svg`."""
        from gpushare.bench_plot import plot_benchmark

        return plot_benchmark(self, ax)

    @property
    def svg(self) -> str:
        """The plot: time and bandwidth against size, one line per path."""
        return self._render("svg")

    def to_pandas(self) -> Any:
        """One row per size × path, with the frameworks, dtype and device of the sweep on every row."""
        data = self.to_dict()
        ids = {k: data[k] for k in ("source_framework", "target_framework", "dtype", "device")}
        return _frame([{**ids, "size": p["size"], **_flat(p)} for p in data["points"]])


def compare(
    obj: Any,
    to: str,
    paths: str | Sequence[str] = "all",
    *,
    repeat: int = 7,
    number: int | None = None,
    source: str | None = None,
    warmup: int = 1,
    min_sample_time: float = 0.005,
    device: str | None = None,
    across: Any = None,
) -> Comparison:
    """Tries every transfer path (or those named) from ``obj`` to framework ``to`` and times each.

    Parameters
    ----------
    obj : an array of PyTorch, TensorFlow, JAX, NumPy, CuPy or Numba.
    to : the target framework.
    paths : ``"all"`` (every path in the table order of DESIGN.md), a comma-separated string or a list.
    repeat, number : samples and handoffs per sample (``%timeit``'s -r/-n); ``number=None`` picks
        it so a sample lasts ``min_sample_time`` seconds.
    source : the framework ``obj`` must belong to (checked); inferred when None.
    warmup : untimed handoffs before timing (at least one: it also finds paths that do not apply).
    device : ``"cuda:1"``/``"cpu"``: compare the moves there instead (``p2p``, ``pinned``, ``dlpack``
        with ``dl_device``/``copy=True``, and ``move``, the framework's own, as the baseline); each
        copied row notes its bandwidth against the link's limit where gpushare knows it.
    across : a :class:`gpushare.Worker` or ``"process"``: compare the process paths instead
        (:func:`gpushare.processes.compare`; ``paths`` then names process paths).

    Returns
    -------
    Comparison: one row per path, failures and paths that do not apply included with their reason.

    Examples
    --------
    >>> gpushare.compare(torch.ones(1024), "jax")          # doctest: +SKIP
    """
    if repeat < 1 or (number is not None and number < 1):
        raise ValueError("repeat and number must be at least 1")
    if across is not None and device is not None:
        raise ValueError("device= and across= do not combine: a worker's arrays live on its own device (Worker(device=...))")
    if across is not None:
        from gpushare import processes

        return processes.compare(obj, to, paths, across=across, repeat=repeat)
    if device is not None:
        from gpushare import devices

        devices.check_device(device)
        names = list(devices.MOVE_PATHS) if paths in ("all", ["all"]) else parse_move_paths(paths)
    else:
        names = parse_paths(paths)
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    src_info = inspect(obj)
    # Each path checks the source itself where its route needs it (not the host route): a torch
    # tensor that requires grad or has its conjugate bit set gets a failed row with the fix for
    # DLPack and a working one for the host.
    auto, here = _auto_for(src, dst, src_info.dlpack_device, device)
    runs: list[dict] = []
    results: dict[str, Any] = {}
    try:
        for name in names:
            path = auto if name == "auto" else name
            run, result = _try_path(
                obj, src, dst, path, repeat=repeat, number=number, warmup=warmup,
                min_sample_time=min_sample_time, keep_value=True, device=device,
                is_auto=path == auto, already_there=here,
            )
            if device is not None:
                _note_link(run, src_info, device)
            run["auto"] = path == auto
            runs.append(run)
            if result is not None:
                results[path] = result
    finally:
        empty_cache()
    data = {"source": src_info.to_dict(), "target_framework": dst.name, "runs": runs,
            "repeat": repeat, "warmup": max(warmup, 1)}
    return Comparison(data, results)


def _auto_for(src: Adapter, dst: Adapter, source_device: Any, device: str | None) -> tuple[str, bool]:
    """``(path, already_there)``: the path THE ``auto`` (crates/core/src/paths.rs) takes for an array of
    ``src`` on DLPack device ``source_device``, handed to ``dst`` where it lies or moved to
    ``device``, and whether the array is on ``device`` already: what ``share`` takes."""
    source_device = (int(source_device[0]), int(source_device[1] or 0))
    if device is None:
        return auto_choice(src, dst, source_device)[0], False
    from gpushare.devices import already_on, check_device, dlpack_place

    destination = dlpack_place(*check_device(device))
    return auto_choice(src, dst, source_device, destination)[0], already_on(source_device, destination)


def parse_move_paths(paths: str | Sequence[str]) -> list[str]:
    """The paths of a move (``p2p,pinned,dlpack,move``), checked."""
    from gpushare.devices import MOVE_PATHS

    names = [p.strip() for p in paths.split(",")] if isinstance(paths, str) else [str(p).strip() for p in paths]
    for name in names:
        if name not in MOVE_PATHS:
            raise ValueError(f"unknown path {name!r} for a move between devices; known: {', '.join(MOVE_PATHS)}, all")
    return list(dict.fromkeys(n for n in names if n))


def _note_link(run: dict, src_info: Any, device: str) -> None:
    """Adds to a move's row which link it crossed and its bandwidth against that link's limit."""
    from gpushare import topology

    samples, moved = run.get("samples") or [], run.get("bytes_moved") or 0
    if not samples or not moved:
        return
    kind, ordinal = src_info.dlpack_device
    link = topology.link_for(None if kind in (1, 3) else int(ordinal), device, run["path"])
    if link is None:
        return
    # The samples are seconds per call already: the row's own median (the one of crates/core/src/stats.rs,
    # which the table's bandwidth column divides by), not divided by the loop count again.
    per = _native.Timing(samples, max(run.get("loops") or 1, 1)).median
    rate = moved / per if per > 0 else 0.0
    limit = link.get("limit_Bps")
    text = f"link: {link['name']}"
    if limit:
        text += f"; {rate / 1e9:.1f} GB/s is {rate / limit:.0%} of its {limit / 1e9:.0f} GB/s per direction ({link['limit_source']})"
    run["notes"] = [*run.get("notes", []), text]


def _default_device(src: Adapter) -> str:
    """``cuda:0`` when the CUDA driver is usable and the source framework can place arrays there."""
    status = getattr(_native, "cuda_driver_status", None)
    if status is None or not status().get("available"):
        return "cpu"
    try:
        return "cuda:0" if src.has_gpu() else "cpu"
    except Exception:
        return "cpu"


def _ordinal(device: str) -> tuple[bool, int]:
    from gpushare.devices import parse_device

    return parse_device(device)


def make_array(src: Adapter, n: int, dtype: str, device: str) -> Any:
    """A 1-d array of ``n`` ones of ``dtype`` made by framework ``src`` on ``device``."""
    on_host, ordinal = _ordinal(device)
    return src.ones(n, dtype, on_host, ordinal)


def bench(
    src: str,
    dst: str,
    sizes: Iterable[int | str] = DEFAULT_SIZES,
    dtype: str = "float32",
    device: str | None = None,
    paths: str | Sequence[str] = "all",
    *,
    repeat: int = 5,
    number: int | None = None,
    warmup: int = 1,
    min_sample_time: float = 0.005,
    progress: bool = True,
    to_device: str | None = None,
    across: Any = None,
) -> Benchmark:
    """Sweeps sizes × paths for handoffs from framework ``src`` to ``dst``.

    For each size a 1-d array of ones is made by ``src`` on ``device`` (default ``cuda:0`` when
    CUDA is usable, else ``cpu``) and every path is measured as :func:`compare` does (the ``shared``
    path starts from a SharedBuffer viewed by ``src``). A progress bar shows the sweep where someone
    watches (a notebook, emptied when the sweep ends; a terminal, tqdm when installed; never in a
    script whose stderr is not a terminal, see :mod:`gpushare.progress`). Ctrl-C between
    measurements stops the sweep: the points measured so far come back
    with ``interrupted=True`` and a warning.

    ``across="processes"`` (or a :class:`gpushare.Worker`) sweeps the process paths instead
    (:func:`gpushare.processes.bench`): a worker process views each array in ``dst``.

    Examples
    --------
    >>> b = gpushare.bench("torch", "jax", sizes=["4KiB", "1MiB"])   # doctest: +SKIP
    >>> b.to_pandas()                                                # doctest: +SKIP
    """
    if repeat < 1 or (number is not None and number < 1):
        raise ValueError("repeat and number must be at least 1")
    if across is not None and to_device is not None:
        raise ValueError("to_device= and across= do not combine: a worker's arrays live on its own device (Worker(device=...))")
    if across is not None:
        from gpushare import processes

        return processes.bench(src, dst, sizes, dtype, device, paths, repeat=repeat, across=across)
    s, d = framework(src), framework(dst)
    if to_device is not None:  # moves: p2p, pinned, dlpack(dl_device), the framework's own
        from gpushare import devices

        devices.check_device(to_device)
        names = list(devices.MOVE_PATHS) if paths in ("all", ["all"]) else parse_move_paths(paths)
    else:
        names = parse_paths(paths)
    size_list = [parse_size(x) for x in (sizes.split(",") if isinstance(sizes, str) else sizes)]
    if not size_list:
        raise ValueError("no sizes to sweep")
    size_list = list(dict.fromkeys(size_list))
    itemsize = SharedBuffer((0,), dtype).itemsize  # checks the dtype name, bfloat16 included
    s.load()
    d.load()
    device = device or _default_device(s)
    from gpushare.devices import dlpack_place

    auto, here = _auto_for(s, d, dlpack_place(*_ordinal(device)), to_device)
    points: list[dict] = []
    interrupted = False
    bar = progress_bar(len(size_list) * len(names), f"sharebench {s.name}→{d.name}", progress)
    try:
        for size in size_list:
            n = max(size // itemsize, 1) if size else 0
            arrays: dict[str, Any] = {}
            for name in names:
                path = auto if name == "auto" else name
                bar.set_postfix_str(f"{_native_size(size)} {path}")
                key = "shared" if path == "shared" else "plain"
                try:
                    if key not in arrays:
                        if key == "shared":
                            arrays[key] = SharedBuffer((n,), dtype, device).to(s.name)
                        else:
                            arrays[key] = make_array(s, n, dtype, device)
                    obj = arrays[key]
                except KeyboardInterrupt:
                    raise
                except Exception as e:
                    run = _empty_run(path)
                    run["reason"], run["fix"] = _reason_of(e)
                    run["reason"] = f"could not make the source array: {run['reason']}"
                else:
                    run, _ = _try_path(
                        obj, s, d, path, repeat=repeat, number=number, warmup=warmup,
                        min_sample_time=min_sample_time, keep_value=False, device=to_device,
                        is_auto=path == auto, already_there=here,
                    )
                    if to_device is not None:
                        _note_link(run, inspect(obj), to_device)
                run["auto"] = path == auto
                # The shared path starts from a SharedBuffer, not from the array the others start
                # from: shown, never ranked against them.
                run["comparable"] = path != "shared"
                run["size"] = size
                points.append(run)
                bar.update(1)
            arrays.clear()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
        empty_cache()
    data = {
        "source_framework": s.name, "target_framework": d.name, "dtype": dtype, "device": device,
        **({} if to_device is None else {"to_device": to_device}),
        "sizes": size_list, "paths": [auto if p == "auto" else p for p in names], "points": points,
        "interrupted": interrupted, "repeat": repeat, "warmup": max(warmup, 1),
    }
    result = Benchmark(data)
    if interrupted:
        warnings.warn(
            f"sharebench interrupted: {len(points)} of {len(size_list) * len(names)} points measured",
            GpushareWarning, stacklevel=user_stacklevel(),
        )
    return result


def _native_size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} B"


__all__ = [
    "DEFAULT_SIZES", "Benchmark", "Comparison", "SharedBuffer", "bench", "compare", "empty_cache",
    "make_array", "parse_paths", "parse_size",
]
