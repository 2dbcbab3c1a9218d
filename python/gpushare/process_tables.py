"""The process tables: every process path for one array, side by side
(``gpushare.compare(x, to, across=…)``), and sizes × process paths (``gpushare.bench(…, across=…)``).
A path that does not apply, or fails, is the core's failed row saying why; the tables are the core's
typed reports (``ProcessComparison``, ``ProcessBenchmark``), made of each handoff's own report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from gpushare import _native, arguments
from gpushare import paths as gpushare_paths
from gpushare.exceptions import WorkerError
from gpushare.process_routes import (
    _device_ordinal, _dtype_name, _framework_of, _is_cuda, _library, _nbytes, resolve_auto,
)

if TYPE_CHECKING:
    from gpushare.processes import Worker

ProcessShareResult = _native.processes.ProcessShareResult
ProcessComparison = _native.processes.ProcessComparison
ProcessBenchmark = _native.processes.ProcessBenchmark


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
            path = _auto(worker, obj) if name == "auto" else name
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
    return _native.processes.comparison(*_source_of(obj, to), rows, results if keep else {})


#: Untimed handoffs by each path before a sweep times any. One was not enough: on 2x H200
#: (tools/process_sizes.py) the first sweep through a new worker after one
#: warm-up still ran torch's `ipc` at 158-170 µs, the next two at 127-142 µs; a first handoff
#: opens the worker's context, and the next few still run the interpreter's unspecialised code.
WARM_UP_HANDOFFS = 5


def _warm_up(worker: Worker, obj: Any, names: Sequence[str], to: str, peer: Any) -> dict[str, str]:
    """:data:`WARM_UP_HANDOFFS` handoffs of ``obj`` by each path before a sweep times any, and what the
    first took, as a note for that path's first point.

    Why: a worker's first handoffs by a path pay what later ones do not (its CUDA context and first
    mapping, NCCL's communicator, imports), and the first call of a timed point holds only part of
    it: on the 2x H200 runs the samples of the first size swept in each new worker ran
    1.2-1.5x those of the later sizes (ipc, torch_mp), in calibration and evaluation alike, so the
    smallest size's time was partly the worker's warm-up and the cost model fitted it as the size's.
    The one-off cost is not dropped: the note says what the warm-up handoff took."""
    notes: dict[str, str] = {}
    for name in names:
        path = _auto(worker, obj) if name == "auto" else name
        if path in notes:
            continue
        results: dict = {}
        r = _try(worker, obj, path, to, WARM_UP_HANDOFFS - 1, peer, results, False)  # a first call, then samples
        for kept in results.values():
            kept.release()
        first = (r.to_dict().get("timing") or {}).get("first_call")
        if first is not None:
            notes[path] = (f"timed after {WARM_UP_HANDOFFS} warm-up handoffs by {path} to this worker; the first took "
                           f"{first * 1e3:.3g} ms (its first use in the worker, not in these times)")
    return notes


def _auto(worker: Any, obj: Any) -> str:
    """``auto`` for this worker: the one path to a worker on another host, else THE ``auto``."""
    return "remote" if getattr(worker, "host", None) is not None else resolve_auto(obj)


def _source_of(obj: Any, to: str | None) -> tuple:
    """What identifies a process comparison: the array's framework, the framework asked for (None:
    each path's worker keeps its own), its dtype, shape and device."""
    from gpushare.adapters import framework

    ordinal = _device_ordinal(obj) if _is_cuda(obj) else None
    return (_framework_of(obj), framework(to).name if to else None, _dtype_name(obj),
            [int(d) for d in getattr(obj, "shape", ())], "cpu" if ordinal is None else f"cuda:{ordinal}")


def _try(worker: Worker, obj: Any, path: str, to: str | None, repeat: int, peer: Any, results: dict,
         keep: bool) -> ProcessShareResult:
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
    # What the table keeps: the report, not the arrays (released with the handoff unless kept).
    return r if keep else r._report_only()


def _failed(path: str, obj: Any, reason: str, applicable: bool = True) -> ProcessShareResult:
    return _native.processes.failure(path, _framework_of(obj), _nbytes(obj), reason, applicable)


def parse_process_paths(paths: str | Sequence[str]) -> list[str]:
    """The process paths ``paths`` names (``"shm,ipc"``, a list, ``"all"``), checked by the core."""
    return gpushare_paths.parse_list("process", paths)


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
    size_list = list(dict.fromkeys(arguments.sizes("sizes", sizes)))  # the one reader of size lists
    if not size_list:
        raise ValueError("no sizes to sweep")
    s.load()
    device = device or lab._default_device(s)
    itemsize = lab.SharedBuffer((0,), dtype).itemsize
    worker, owned = _transport()._worker_for(across)
    points, interrupted = [], False
    warmed: dict[str, str] | None = None
    try:
        for size in size_list:
            n = max(size // itemsize, 1)
            try:
                obj = lab.make_array(s, n, dtype, device)
            except Exception as e:
                why = f"could not make the source array: {e}"
                points += [(size, _native.processes.failure(name if name != "auto" else "ipc", s.name, size, why))
                           for name in names]
                continue
            if warmed is None:
                warmed = _warm_up(worker, obj, names, d.name, peer)
            for name in names:
                path = _auto(worker, obj) if name == "auto" else name
                results: dict = {}
                point = _try(worker, obj, path, d.name, repeat, peer, results, False)
                if path in warmed:
                    point.add_note(warmed.pop(path))
                points.append((size, point))
                for r in results.values():
                    r.release()
            del obj
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if owned:
            worker.stop()
    return _native.processes.bench(s.name, d.name, dtype, device, size_list, points, interrupted, repeat)
