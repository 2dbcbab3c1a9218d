"""The process tables: every process path for one array, side by side
(``gpushare.compare(x, to, across=…)``), and sizes × process paths (``gpushare.bench(…, across=…)``).
A path that does not apply, or fails, is a row that says why; the results are the core's typed
reports (``ProcessComparison``, ``ProcessBenchmark``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from gpushare import _native
from gpushare.exceptions import WorkerError
from gpushare.process_routes import (
    MECHANISMS, PROCESS_PATHS, _device_ordinal, _dtype_name, _framework_of, _is_cuda, _library, _nbytes, resolve_auto,
)

if TYPE_CHECKING:
    from gpushare.processes import Worker

ProcessComparison = _native.ProcessComparison
ProcessBenchmark = _native.ProcessBenchmark


def _transport() -> Any:
    """gpushare.processes (the worker and its handoffs), which imports this module."""
    from gpushare import processes

    return processes


def compare(obj: Any, to: str | None = None, paths: str | Sequence[str] = "all", *, across: Any = "process",
            repeat: int = 5, peer: Worker | None = None, keep: bool = False) -> "ProcessComparison":
    """Every process path for ``obj``, side by side (``gpushare.compare(x, to, across=…)``).
    ``across`` is a :class:`Worker` or ``"process"`` (a worker is started and stopped for the call)."""
    names = parse_process_paths(paths)
    worker, owned = _transport()._worker_for(across, obj)
    rows, results = [], {}
    try:
        for name in names:
            path = resolve_auto(obj) if name == "auto" else name
            rows.append(_try(worker, obj, path, to, repeat, peer, results, keep))
            if not keep and path in results:
                # Released before the next path: CUDA maps one allocation once per context, so an
                # open ipc mapping would make torch_mp's open of the same block fail.
                results.pop(path).release()
    finally:
        if not keep:
            for r in results.values():
                r.release()
        if owned:
            worker.stop()
    return ProcessComparison({**_source_of(obj, to), "rows": rows}, results if keep else {})


def _source_of(obj: Any, to: str | None) -> dict:
    """What identifies a process comparison: the array's framework, dtype, shape and device, and
    the framework asked for (None: each path's worker keeps its own)."""
    from gpushare.adapters import framework

    ordinal = _device_ordinal(obj) if _is_cuda(obj) else None
    return {"source_framework": _framework_of(obj), "target_framework": framework(to).name if to else None,
            "dtype": _dtype_name(obj), "shape": [int(d) for d in getattr(obj, "shape", ())],
            "device": "cpu" if ordinal is None else f"cuda:{ordinal}"}


def _try(worker: Worker, obj: Any, path: str, to: str | None, repeat: int, peer: Any, results: dict, keep: bool) -> dict:
    from gpushare.exceptions import PathNotApplicableError

    note = None
    library = _library(path)
    if library is not None and _framework_of(obj) == library.name:
        # A path that would change the caller's array as it hands it over (torch.multiprocessing
        # moves a CPU tensor's storage into shared memory) runs on what the library says leaves it be.
        obj, note = library.process_steps().unmoved_source(obj, path)
    try:
        r = _transport()._share(worker, obj, path, to, repeat=repeat, peer=peer)
        if note:
            r.add_note(note)
    except PathNotApplicableError as e:
        return _failed(path, obj, getattr(e, "reason", str(e)), applicable=False)
    except WorkerError as e:
        if not worker.alive:
            raise
        return _failed(path, obj, str(e))
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return _failed(path, obj, f"{type(e).__name__}: {e}")
    results[path] = r
    return r.row


def _failed(path: str, obj: Any, reason: str, applicable: bool = True) -> dict:
    return {"path": path, "mechanism": MECHANISMS[path], "verdict": "failed", "reason": reason,
            "applicable": applicable, "nbytes": _nbytes(obj), "bytes_moved": 0, "bytes_per_handoff": 0, "timing": None,
            "source": {"pid": os.getpid(), "framework": _framework_of(obj), "identity": None, "context": None},
            "target": None, "notes": []}


def parse_process_paths(paths: str | Sequence[str]) -> list[str]:
    names = [p.strip() for p in paths.split(",")] if isinstance(paths, str) else [str(p).strip() for p in paths]
    names = [p for p in names if p]
    if names in (["all"], []):
        return list(PROCESS_PATHS)
    for name in names:
        if name not in (*PROCESS_PATHS, "auto"):
            raise ValueError(f"unknown process path {name!r}; known: {', '.join(PROCESS_PATHS)}, auto, all")
    return list(dict.fromkeys(names))


def bench(src: str, dst: str, sizes: Iterable[int | str] = ("4KiB", "1MiB", "64MiB"), dtype: str = "float32",
          device: str | None = None, paths: str | Sequence[str] = "all", *, repeat: int = 5,
          across: Any = "process", peer: Worker | None = None, progress: bool = False) -> ProcessBenchmark:
    """Sizes × process paths (``gpushare.bench(src, dst, across="processes")``,
    ``%sharebench torch->torch --across processes``). For each size ``src`` makes a 1-d array of
    ones on ``device``; every path hands it to a worker that views it in ``dst``."""
    from gpushare import lab
    from gpushare.adapters import framework

    s, d = framework(src), framework(dst)
    names = parse_process_paths(paths)
    size_list = list(dict.fromkeys(lab.parse_size(x) for x in (sizes.split(",") if isinstance(sizes, str) else sizes)))
    if not size_list:
        raise ValueError("no sizes to sweep")
    s.load()
    device = device or lab._default_device(s)
    itemsize = lab.SharedBuffer((0,), dtype).itemsize
    worker, owned = _transport()._worker_for(across)
    points, interrupted = [], False
    try:
        for size in size_list:
            n = max(size // itemsize, 1)
            try:
                obj = lab.make_array(s, n, dtype, device)
            except Exception as e:
                for name in names:
                    p = _failed(name if name != "auto" else "ipc", _Dummy(size), f"could not make the source array: {e}")
                    p["size"] = size
                    points.append(p)
                continue
            for name in names:
                path = resolve_auto(obj) if name == "auto" else name
                results: dict = {}
                row = _try(worker, obj, path, d.name, repeat, peer, results, False)
                for r in results.values():
                    r.release()
                row = dict(row)
                row["size"] = size
                points.append(row)
            del obj
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if owned:
            worker.stop()
    return ProcessBenchmark({"source_framework": s.name, "target_framework": d.name, "dtype": dtype,
                             "device": device, "sizes": size_list, "points": points, "interrupted": interrupted,
                             "repeat": repeat})


class _Dummy:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes
