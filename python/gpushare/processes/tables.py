"""The process tables: every process path for one array, side by side
(``gpushare.compare(x, to, across=…)``), and sizes × process paths (``gpushare.bench(…, across=…)``).
A path that does not apply, or fails, is the core's failed row saying why; the tables are the core's
typed reports (``Comparison``, ``Benchmark``), made of each handoff's own report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from gpushare import _native, arguments
from gpushare.sweep_sizes import check_fits, whole_elements
from gpushare import paths as gpushare_paths
from gpushare.exceptions import WorkerError
from gpushare.processes.routes import _framework_of, _library, _nbytes, resolve_auto

if TYPE_CHECKING:
    from gpushare.processes import Worker

ShareResult = _native.share.ShareResult
Comparison = _native.lab.Comparison
Benchmark = _native.lab.Benchmark


def _transport() -> Any:
    """gpushare.processes (the worker and its handoffs), which imports this module."""
    from gpushare import processes

    return processes


class _Lab:
    """What the core's loops over the process paths ask of this side (crates/core/src/share/
    process_lab.rs): ``auto`` for an array to this worker, one path's handoff, and a sweep's arrays."""

    def __init__(self, worker: Worker, to: str | None, peer: Any, make: Any = None):
        self.worker, self.to, self.peer, self.make = worker, to, peer, make

    def auto(self, obj: Any) -> str:
        return _auto(self.worker, obj)

    def try_path(self, obj: Any, path: str, repeat: int) -> ShareResult | tuple:
        return _try(self.worker, obj, path, self.to, repeat, self.peer)

    def make_source(self, size: int) -> Any:
        return self.make(size)


def compare(obj: Any, to: str | None = None, paths: str | Sequence[str] = "all", *, across: Any = "process",
            repeat: int = 5, peer: Worker | None = None, keep: bool = False) -> "Comparison":
    """Every process path for ``obj``, side by side (``gpushare.compare(x, to, across=…)``).
    ``across`` is a :class:`Worker` or ``"process"`` (a worker is started and stopped for the call)."""
    names = parse_process_paths(paths)
    worker, owned = _transport()._worker_for(across, obj)
    try:
        return _native.processes.compare_paths(_Lab(worker, to, peer), obj, names, repeat, keep, _source_of(obj, to))
    finally:
        if owned:
            worker.stop()


#: Untimed handoffs by each path before a sweep times any (the core's; its reasons are there).
WARM_UP_HANDOFFS = _native.processes.WARM_UP_HANDOFFS


def _auto(worker: Any, obj: Any) -> str:
    """``auto`` for this worker: the one path to a worker on another host, else THE ``auto``."""
    return "remote" if getattr(worker, "host", None) is not None else resolve_auto(obj)[0]


def _source_of(obj: Any, to: str | None) -> tuple:
    """What a comparison of process paths is of: the array as gpushare describes it, and the
    framework the worker holds it in (the one asked for, else the array's own)."""
    from gpushare.adapters import framework
    from gpushare.api import inspect

    return inspect(obj), framework(to).name if to else _framework_of(obj)


def _try(worker: Worker, obj: Any, path: str, to: str | None, repeat: int, peer: Any) -> ShareResult | tuple:
    """One path's handoff of ``obj`` to ``worker``; ``(reason, applicable, nbytes)`` where the path
    does not apply or failed (Ctrl-C and a worker that died stop the table instead)."""
    from gpushare.exceptions import PathNotApplicableError

    note = None
    library = _library(path)
    if library is not None and _framework_of(obj) == library.name:
        # A path that would change the caller's array as it hands it over (torch.multiprocessing
        # moves a CPU tensor's storage into shared memory) runs on what the library says leaves it be.
        obj, note = library.process_steps().unmoved_source(obj, path)
    try:
        # A clone the comparison made has no views of its own to warn of.
        r = _transport()._share(worker, obj, path, to, repeat=repeat, peer=peer, caller_array=note is None)
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
    return r


def _failed(path: str, obj: Any, reason: str, applicable: bool = True) -> tuple[str, bool, int]:
    """A path that does not apply or failed, as the core's loop reads it: its row says why."""
    return reason, applicable, _nbytes(obj)


def parse_process_paths(paths: str | Sequence[str]) -> list[str]:
    """The process paths ``paths`` names (``"shm,ipc"``, a list, ``"all"``), checked by the core."""
    return gpushare_paths.parse_list("process", paths)


def bench(src: str, dst: str, sizes: Iterable[int | str] = ("4KiB", "1MiB", "64MiB"), dtype: str = "float32",
          device: str | None = None, paths: str | Sequence[str] = "all", *, repeat: int = 5,
          across: Any = "process", peer: Worker | None = None, progress: bool = False) -> Benchmark:
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
    from gpushare.devices import parse_device

    parse_device(device)  # a device name gpushare does not know is named, as within a process
    itemsize = lab.SharedBuffer((0,), dtype).itemsize
    # Each point labelled by its array's bytes; a handoff to a worker hands one element at least.
    size_list = whole_elements([max(size, 1) for size in size_list], itemsize)
    check_fits(size_list, [device])  # refused in one message before the first array is made
    worker, owned = _transport()._worker_for(across)
    lab_here = _Lab(worker, d.name, peer, make=lambda size: lab.make_array(s, size // itemsize, dtype, device))
    try:
        return _native.processes.bench_paths(lab_here, size_list, names, repeat, s.name, d.name, dtype, device)
    finally:
        if owned:
            worker.stop()

