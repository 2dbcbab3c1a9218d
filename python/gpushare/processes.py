"""Across processes: hand an array to another Python process and see what that process holds.

A :class:`Worker` is a Python process gpushare starts (``multiprocessing`` spawn, so CUDA works in
it) and stops. Use it as a context manager::

    with gpushare.Worker() as w:                       # or Worker(device="cuda:1")
        r = w.share(x, path="ipc")                     # or gpushare.share(x, "torch", across=w)
        r.verdict, r.source["identity"], r.target["identity"]   # the same allocation?
        r.remote.read()                                # the worker's array, read back
        gpushare.compare(x, "torch", across=w)         # every path, one table

Each process has its own address space and, on a GPU, its own CUDA context: a raw pointer means
nothing in the other process. The verdict is judged on the *allocation identity* of both sides:

- host memory: the file behind the mapping (``/proc/self/maps``: device, inode, offset in the file).
  A POSIX shared-memory segment shows as ``/dev/shm/NAME`` + offset on both sides; anonymous
  private memory has no file, so it cannot be the same memory as anything in another process.
- device memory: the CUDA IPC handle of the allocation (``cuIpcGetMemHandle`` on the base
  ``cuMemGetAddressRange`` gives) + the offset in it. The worker maps that allocation at an address
  of its own, in a context of its own.

"shared" means both sides have the same identity; tests prove it with a write in one process read
in the other. Paths (each a row of the same table):

=============  ==============================================================================
``ipc``        CUDA IPC by the Rust core: allocation handle + offset, opened by the worker
``torch_mp``   ``torch.multiprocessing``'s own sharing (CPU: shared-memory file descriptor;
               CUDA: the caching allocator's block handle + offset)
``shm``        a POSIX shared-memory segment in /dev/shm; the worker maps it and views it with the
               source's strides, dtype and read-only flag (gpushare.process_rules)
``nccl``       NCCL send/recv through ``torch.distributed`` (a copy, over NVLink/PCIe/SHM)
``nccl_socket`` NCCL with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``: sockets on loopback, the
               stand-in for two hosts (run between two helper workers: NCCL reads these once per process)
``gloo``       gloo send/recv through ``torch.distributed`` (a copy over TCP loopback; CPU)
=============  ==============================================================================

Nothing is left behind: every wait has a timeout, Ctrl-C during a wait stops the worker, a worker
that died or was killed raises :class:`~gpushare.exceptions.WorkerError`, the worker exits when
its parent goes away, and shared-memory segments are unlinked when the handoff is released.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from typing import Any, Iterable, Sequence

from gpushare import _native, process_rules
from gpushare.exceptions import GpushareError, WorkerError
# Identity of memory and its judge (re-exported: part of this module's interface).
from gpushare.process_identity import _address, _identity_of, cuda_identity, host_identity, same_memory  # noqa: F401
from gpushare.process_segment import Segment
from gpushare.adapters import process_host
from gpushare.process_worker import _context_report, _serve, _synchronize

# The results are the core's typed reports (crates/core/src/report/process.rs), rendered by
# crates/core/src/render/process.rs; the verdict is the core's identity judge and the timing the
# core's timing loop (crates/python/src/binding/process.rs). This module keeps the transport.
ProcessShareResult = _native.ProcessShareResult
ProcessComparison = _native.ProcessComparison
ProcessBenchmark = _native.ProcessBenchmark

#: Process paths, in table order.
PROCESS_PATHS = ("ipc", "torch_mp", "shm", "nccl", "nccl_socket", "gloo")

MECHANISMS = {
    "ipc": "CUDA IPC (Rust core): cuIpcGetMemHandle of the allocation + offset",
    "torch_mp": "torch.multiprocessing reduce_tensor",
    "shm": "POSIX shared memory: a /dev/shm file made by gpushare, its pages reserved with posix_fallocate",
    "nccl": "NCCL send/recv (torch.distributed)",
    "nccl_socket": "NCCL NET/Socket on loopback (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): stand-in for two hosts",
    "gloo": "gloo send/recv (torch.distributed, TCP loopback)",
}

#: Environment a worker always gets: NVLink multicast off (NCCL NVLS, torch symmetric memory,
#: NVSHMEM), which the shared GPU machines do not allow.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

#: The worker's frameworks keep their warnings to themselves (ProcessGroupNCCL's notes on unbatched
#: send/recv reach the user's notebook through the worker's inherited stderr); errors still print.
QUIET_ENV = {"TORCH_CPP_LOG_LEVEL": "ERROR"}

#: What NCCL needs to go over sockets on one host.
SOCKET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}

DEFAULT_TIMEOUT = 60.0
START_TIMEOUT = 120.0



_LIVE: "weakref.WeakSet[Worker]" = weakref.WeakSet()


class Worker:
    """A Python process gpushare starts and stops, to hand arrays to.

    Parameters
    ----------
    device : ``"cuda:N"``: the device the worker works on (its own context there); default cuda:0
        when CUDA is usable. Give another device (``Worker(device="cuda:1")``) for two-GPU paths.
    env : extra environment for the worker (set before it imports any framework).
    timeout : seconds any one request may take before :class:`WorkerError` (default 60).
    start_timeout : seconds the worker may take to start (default 120).

    ``with Worker() as w:`` starts it and stops it (also on errors). Several threads may use one
    worker: replies are matched to requests, and handoffs run one at a time. ``w.stop()`` stops it by
    message, then by SIGTERM, then SIGKILL, each with a timeout. The worker exits by itself when the
    parent goes away.
    """

    def __init__(self, device: str | None = None, *, env: dict | None = None, timeout: float = DEFAULT_TIMEOUT,
                 start_timeout: float = START_TIMEOUT):
        self.device = device
        self.env = {**SAFE_ENV, **QUIET_ENV, **(env or {})}
        self.timeout = process_rules.check_timeout("timeout", timeout)
        self.start_timeout = process_rules.check_timeout("start_timeout", start_timeout)
        self._proc: Any = None
        self._conn: Any = None
        self._closed_reason: str | None = None
        self._groups: dict[str, Any] = {}
        self._segments: list[Any] = []
        self._preloaded: set[str] = set()
        self._helpers: dict = {}  # helper workers of the NCCL paths (stopped with this one)
        self._peer_groups: dict = {}  # NCCL groups this worker joined with a helper: their stores
        self._results: "weakref.WeakSet[ProcessShareResult]" = weakref.WeakSet()
        # Several threads may use one worker: each request has an id, its reply comes back with it,
        # and a reply read by another thread waits in _replies for its own.
        self._lock = threading.RLock()
        self._handoff_lock = threading.RLock()
        self._next_id = 0
        self._replies: dict[int, tuple] = {}
        self._pending: dict[tuple[int, str], collections.deque] = {}

    # -- life cycle --

    def start(self) -> "Worker":
        if self.alive:
            return self
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        # Only the child's copy of ``child`` should stay open, so the worker sees EOF when we go.
        self._proc = ctx.Process(target=_serve, args=(child, dict(self.env)), daemon=True,
                                 name="gpushare-worker")
        self._proc.start()
        child.close()
        self._conn = parent
        self._closed_reason = None
        self._preloaded = set()
        _LIVE.add(self)
        self.info = self._call("ping", timeout=self.start_timeout)
        return self

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop(timeout=1.0)
        except Exception:
            pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive() and self._closed_reason is None

    @property
    def exitcode(self) -> int | None:
        return self._proc.exitcode if self._proc is not None else None

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the worker and releases what the parent holds for it (segments, process groups).
        Idempotent; never hangs longer than about ``3 × timeout``."""
        proc, conn = self._proc, self._conn
        for r in list(self._results):
            r._release_local()
        if proc is not None and proc.is_alive() and conn is not None and self._closed_reason is None:
            with self._lock:
                try:
                    conn.send((0, "exit", {}))
                    deadline = time.monotonic() + timeout
                    while conn.poll(max(deadline - time.monotonic(), 0)):
                        if conn.recv()[0] == 0:  # replies to other requests may come first
                            break
                except (OSError, EOFError, ValueError):
                    pass
        if proc is not None:
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout)
        if conn is not None:
            conn.close()
        for key in list(self._groups):
            self._close_group(key)
        for helper in list(self._helpers.values()):
            helper.stop(timeout)
        self._helpers.clear()
        self._peer_groups.clear()
        self._release_segments()
        self._conn = None
        if self._closed_reason is None:
            self._closed_reason = "stopped"
        _LIVE.discard(self)

    def _release_segments(self) -> None:
        while self._segments:
            seg = self._segments.pop()
            seg.close()  # a view the user still holds keeps the memory; the name goes now
            seg.unlink()

    def _died(self) -> WorkerError:
        if self._proc is not None:
            self._proc.join(2.0)  # the pipe closes before the process is reaped: wait for its status
        code = self._proc.exitcode if self._proc is not None else None
        if code is None:
            how = "closed its pipe and is not answering"
        elif code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        self._closed_reason = f"worker pid {self.pid} {how}"
        pid = self.pid
        self.stop(timeout=1.0)
        self._closed_reason = f"worker pid {pid} {how}"
        return WorkerError(f"the gpushare worker (pid {pid}) {how}; start a new Worker")

    # -- requests --

    def _send(self, op: str, **kwargs: Any) -> int:
        """Sends a request; its id, which _recv(op) in the same thread waits for (oldest first)."""
        if self._closed_reason is not None and self._proc is not None:
            raise WorkerError(f"this worker cannot be used: {self._closed_reason}")
        if self._proc is None:
            raise WorkerError("this worker is not started: use `with Worker() as w:` or w.start()")
        if not self._proc.is_alive():
            raise self._died()
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            try:
                self._conn.send((rid, op, kwargs))
            except (OSError, EOFError, BrokenPipeError, AttributeError):
                raise self._died() from None
            self._pending.setdefault((threading.get_ident(), op), collections.deque()).append(rid)
        return rid

    def _take_reply(self, rid: int) -> tuple | None:
        """The reply to request ``rid`` if it has come (read from the pipe, or by another thread)."""
        with self._lock:
            if rid in self._replies:
                return self._replies.pop(rid)
            if self._conn is None:
                raise WorkerError(f"this worker cannot be used: {self._closed_reason or 'stopped'}")
            # Short polls: Ctrl-C lands between them, and a dead worker is noticed at once.
            while self._conn.poll(0.05):
                try:
                    reply = self._conn.recv()
                except (EOFError, OSError):
                    raise self._died() from None
                if reply[0] == rid:
                    return reply[1:]
                self._replies[reply[0]] = reply[1:]
        return None

    def _recv(self, op: str, timeout: float | None = None, rid: int | None = None) -> Any:
        """The reply to request ``rid`` (what _send returned), or to this thread's oldest ``op``."""
        with self._lock:
            pending = self._pending.get((threading.get_ident(), op))
            if rid is None:
                if not pending:
                    raise WorkerError(f"no {op!r} request of this thread is waiting for a reply")
                rid = pending.popleft()
            elif pending and rid in pending:
                pending.remove(rid)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while True:
                reply = self._take_reply(rid)
                if reply is not None:
                    break
                if not self._proc.is_alive():
                    raise self._died()
                if time.monotonic() > deadline:
                    self._closed_reason = f"request {op!r} timed out"
                    pid = self.pid
                    self.stop(timeout=1.0)
                    raise WorkerError(
                        f"the gpushare worker (pid {pid}) did not answer {op!r} within "
                        f"{self.timeout if timeout is None else timeout:g} s; it was stopped"
                    )
                time.sleep(0.001)  # another thread holds the pipe: let it read
        except KeyboardInterrupt:
            # The worker's answer would arrive out of order: stop it, so nothing is left running.
            self._closed_reason = "interrupted (Ctrl-C) during a request"
            self.stop(timeout=1.0)
            raise
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, tb = reply
        err = WorkerError(f"in the worker, {op} failed: {kind}: {message}")
        err.worker_traceback = tb
        raise err

    def _call(self, op: str, timeout: float | None = None, **kwargs: Any) -> Any:
        rid = self._send(op, **kwargs)
        return self._recv(op, timeout, rid)

    # -- public operations --

    def share(self, obj: Any, path: str = "auto", to: str | None = None, *, repeat: int = 1) -> "ProcessShareResult":
        """Hands ``obj`` to the worker by ``path`` and reports what the worker holds. ``to`` is the
        framework the worker views it in (default: the source's). ``repeat`` > 1 times that many
        handoffs after the first (whose cost is reported apart, as ``first_call``)."""
        return _share(self, obj, path, to, repeat=repeat)

    def compare(self, obj: Any, paths: str | Sequence[str] = "all", to: str | None = None, *,
                repeat: int = 5, peer: "Worker | None" = None) -> "ProcessComparison":
        """Every process path (or those named) for ``obj``, side by side. A path that does not
        apply is a row with the reason. ``peer``: a second worker for the NCCL socket stand-in."""
        return compare(obj, to, paths, across=self, repeat=repeat, peer=peer)

    def context(self, device: int = 0) -> dict | None:
        """The worker's CUDA context on ``device`` (its own: not the parent's)."""
        return self._call("context", device=device)

    def memory(self, device: int = 0) -> dict:
        return self._call("memory", device=device)

    def slots(self) -> list:
        return self._call("slots")

    def _open_group(self, backend: str, device_parent: int | None, device_worker: int | None) -> Any:
        """``(key, (group, store), fresh)``: the group with the worker, opened unless it already was."""
        key = f"{backend}:{device_parent}:{device_worker}"
        if key in self._groups:
            return key, self._groups[key], False
        if backend == "nccl":  # NVLink multicast off in this process too (the worker has SAFE_ENV)
            for k, v in SAFE_ENV.items():
                os.environ.setdefault(k, v)
        steps = _steps(backend)
        store = steps.store(0, 2, True, self.timeout)
        rid = self._send("pg_init", key=key, backend=backend, port=store.port, rank=1, world=2,
                   device=device_worker, timeout=self.timeout)
        group = steps.make_group(backend, store.port, 0, 2, device_parent, self.timeout, True, store=store)
        self._recv("pg_init", rid=rid)
        self._groups[key] = (group, store)
        return key, self._groups[key], True

    def _close_group(self, key: str) -> None:
        group, _store = self._groups.pop(key)
        if self.alive:
            try:
                self._call("pg_close", key=key, timeout=5.0)
            except WorkerError:
                pass
        if hasattr(group, "shutdown"):
            try:
                group.shutdown()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "alive" if self.alive else (self._closed_reason or "not started")
        return f"Worker(pid={self.pid}, device={self.device!r}, {state})"


def _stop_all() -> None:
    for w in list(_LIVE):
        try:
            w.stop(timeout=1.0)
        except Exception:
            pass


import atexit  # noqa: E402

atexit.register(_stop_all)


# ---------------------------------------------------------------------------------------------
# Handoffs.


class RemoteArray:
    """The array a worker holds after a handoff: read it, write into it, ask what it is."""

    def __init__(self, worker: Worker, slot: int):
        self.worker, self.slot = worker, slot

    def read(self) -> Any:
        """A NumPy copy of the worker's array (sent back through the pipe)."""
        return self.worker._call("read", slot=self.slot)

    def write(self, index: Any, value: Any) -> None:
        """``array[index] = value`` in the worker (synchronised before it returns)."""
        self.worker._call("write", slot=self.slot, index=index, value=value)

    def info(self) -> dict:
        """``gpushare.inspect`` of the array, run in the worker."""
        return self.worker._call("info", slot=self.slot)

    def release(self) -> None:
        if self.worker.alive:
            self.worker._call("release", slot=self.slot)

    def __repr__(self) -> str:
        return f"RemoteArray(worker pid {self.worker.pid}, slot {self.slot})"


def _framework_of(obj: Any) -> str:
    from gpushare.adapters import adapter_of

    try:
        return adapter_of(obj).name
    except Exception:  # not an array of a known framework: its module's name
        return type(obj).__module__.split(".")[0]


def _library(path: str) -> Any:
    """The adapter of the framework whose own library implements ``path`` (torch_mp, nccl, gloo), or None."""
    from gpushare.adapters import ADAPTERS

    return next((a for a in ADAPTERS.values() if path in a.process_paths), None)


def _steps(path: str) -> Any:
    """The process steps (adapters: ``process_steps()``) of the framework whose library implements ``path``."""
    return _library(path).process_steps()


def _is_cuda(obj: Any) -> bool:
    return _address(obj)[1]


def _nbytes(obj: Any) -> int:
    return process_rules.nbytes_of(obj)


def _dtype_name(obj: Any) -> str:
    """The dtype's name without its module (``float32``, ``bfloat16``)."""
    return str(obj.dtype).rsplit(".", 1)[-1]


def _device_ordinal(obj: Any) -> int | None:
    if hasattr(obj, "device") and getattr(obj.device, "type", None) == "cuda":
        return obj.device.index or 0
    ptr, is_cuda = _address(obj)
    if is_cuda:
        attrs = _native.cuda_pointer_attributes(ptr) or {}
        return attrs.get("device_ordinal", 0)
    return None


def _worker_ordinal(worker: Worker, source_ordinal: int | None) -> int | None:
    if worker.device is None:
        return source_ordinal
    d = worker.device.lower()
    if d == "cpu":
        return None
    return int(d.split(":")[1]) if ":" in d else 0


def resolve_auto(obj: Any) -> str:
    return "ipc" if _is_cuda(obj) else "shm"


#: The frameworks the worker can hold the result in, per path.
def _targets() -> dict[str, tuple[str, ...]]:
    from gpushare.adapters import ADAPTERS

    paths = ("ipc", "shm", "torch_mp", "nccl", "nccl_socket", "gloo")
    return {p: tuple(sorted(a.name for a in ADAPTERS.values() if p in a.worker_receives)) for p in paths}


TARGETS = _targets()


def applicability(obj: Any, path: str, worker: Worker, peer: Worker | None = None, to: str | None = None) -> str | None:
    """Why ``path`` does not apply to ``obj`` with this worker (predicted, before anything runs), or None."""
    cuda = _is_cuda(obj)
    fw = _framework_of(obj)
    if to is not None and to not in TARGETS[path]:
        return f"{path} gives the worker {' or '.join(TARGETS[path])} arrays, not {to}"
    library = _library(path)
    if library is not None and fw != library.name:
        return f"{path} hands {library.name} tensors; this is a {fw} array"
    if library is not None:
        unavailable = library.process_steps().unavailable()
        if unavailable:
            return unavailable
    if path == "shm" and cuda:
        return "shm shares host memory; this array lives on the GPU (use ipc, torch_mp or nccl)"
    if path == "gloo" and cuda:
        return "gloo send/recv is measured here for CPU tensors; on the GPU use nccl"
    if path == "ipc":
        if not cuda:
            return "CUDA IPC shares device memory; this array is in host memory (use shm or torch_mp)"
        refusal = _native.cuda_ipc_refusal(_address(obj)[0])
        if refusal:
            return refusal
    if path in ("nccl", "nccl_socket"):
        if not cuda:
            return "NCCL sends device memory; this tensor is in host memory (use gloo)"
        unavailable = _steps(path).nccl_unavailable()
        if unavailable:
            return unavailable
        src = _device_ordinal(obj)
        dst = _worker_ordinal(worker, src)
        if src == dst:
            return (f"NCCL refuses two ranks on one GPU (ncclInvalidUsage 'Duplicate GPU detected', NCCL ≥ 2.5, "
                    f"NVIDIA/nccl#418): both processes are on cuda:{src}; give the worker another GPU, "
                    f"Worker(device='cuda:1')")
    if to is None and fw not in TARGETS[path]:
        # The worker holds the source's framework unless told otherwise: one this path cannot give.
        return f"{path} gives the worker {' or '.join(TARGETS[path])} arrays, not {fw}: pass to={TARGETS[path][0]!r}"
    return None


def _share(worker: Worker, obj: Any, path: str, to: str | None, *, repeat: int = 1, peer: Worker | None = None) -> ProcessShareResult:
    if path not in (*PROCESS_PATHS, "auto"):
        raise ValueError(f"unknown process path {path!r}; known: {', '.join(PROCESS_PATHS)}, auto")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if not worker.alive:
        worker._send("ping")  # raises the WorkerError that says why
    path = resolve_auto(obj) if path == "auto" else path
    if to is not None:
        from gpushare.adapters import framework

        to = framework(to).name  # aliases (np, pt) and typos, with a suggestion
    why = applicability(obj, path, worker, peer, to)
    if why is not None:
        from gpushare.exceptions import PathNotApplicableError

        err = PathNotApplicableError(f"{path}: {why}")
        err.reason = why
        raise err
    process_rules.check_source(obj)  # the one-process share's refusals of lazy views
    to = to or _framework_of(obj)
    # The worker imports the frameworks before anything is timed: the first-call cost is the
    # path's own set-up, not ``import torch``.
    from gpushare.adapters import ADAPTERS

    wanted = [ADAPTERS[m].module for m in {to, _framework_of(obj)} if m in ADAPTERS and ADAPTERS[m].worker_receives]
    library = _library(path)
    if library is not None:
        wanted += list(library.process_modules)
    missing = [m for m in wanted if m not in worker._preloaded]
    if missing:
        worker._call("preload", modules=missing, timeout=worker.start_timeout)
        worker._preloaded.update(missing)
    runner = {"shm": _run_shm, "torch_mp": _run_torch_mp, "ipc": _run_ipc, "gloo": _run_pg,
              "nccl": _run_nccl, "nccl_socket": _run_nccl}[path]
    # One handoff at a time per worker: two threads' gloo sends to one group would be received
    # into each other's buffers (send/recv match by peer and tag, not by request).
    with worker._handoff_lock:
        result = runner(worker, obj, path, to, repeat, peer)
    worker._results.add(result)
    return result


def share_across(obj: Any, to: str | None, across: Any, *, path: str = "auto", repeat: int = 1) -> ProcessShareResult:
    """``gpushare.share(x, to, across=worker)``: the handoff to a worker process."""
    worker, owned = _worker_for(across, obj)
    try:
        result = _share(worker, obj, path, to, repeat=repeat)
    finally:
        if owned:
            worker.stop()
    if owned:
        result.add_note(
            "the worker was started for this call and stopped after it (its array is gone); keep one with "
            "`with gpushare.Worker() as w: gpushare.share(x, to, across=w)`")
        result.remote = None
    return result


def _release(worker: Worker) -> Any:
    """What releases a handoff's array in the worker before the next one is timed."""
    return lambda info: worker._call("release", slot=info["slot"])


def _row(path: str, obj: Any, verdict: str, reason: str | None, src_id: dict | None, dst: dict | None,
         timing: dict, bytes_moved: int, notes: list[str], worker: Worker) -> dict:
    """The row of a handoff; ``timing`` is the core's (measure_handoffs, handoff_timing)."""
    return {
        "path": path, "mechanism": MECHANISMS[path], "verdict": verdict, "reason": reason,
        "applicable": True, "nbytes": _nbytes(obj), "bytes_moved": bytes_moved,
        # What each timed handoff after the first moves (shm copies once, in the first call).
        "bytes_per_handoff": bytes_moved if path in ("gloo", "nccl", "nccl_socket") else 0,
        "timing": timing,
        "source": {"pid": os.getpid(), "framework": _framework_of(obj), "identity": src_id,
                   "context": _context_report(obj)},
        "target": {"pid": worker.pid, "framework": dst.get("framework") if dst else None,
                   "identity": dst.get("identity") if dst else None, "context": dst.get("context") if dst else None},
        "notes": notes,
    }


def _run_shm(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    host = process_rules.shm_host_view(obj)
    src_id = host_identity(host.__array_interface__["data"][0]) if host.nbytes else None
    notes: list[str] = []
    segment = None
    if (src_id and (src_id.get("file") or "").startswith("/dev/shm/") and src_id["mapping"] == "shared"
            and not src_id["unlinked"] and os.path.exists(src_id["file"])):
        # Already in a segment (e.g. the ``local`` view of an earlier shm handoff): hand it as it is,
        # with its layout and read-only flag.
        layout = process_rules.shm_layout(host, to)
        name, offset, local = src_id["file"][len("/dev/shm/"):], src_id["offset"], host
        copy_seconds, bytes_moved = 0.0, 0
    else:
        process_rules.check_shm_space(path, host.nbytes, "the copy of the array into a segment")

        def stage() -> tuple[Segment, Any]:
            seg = Segment(max(host.nbytes, 1), path)
            return seg, process_host.copy_into(seg.mm, host)

        (segment, local), copy_seconds = _native.timed_call(stage)
        bytes_moved = host.nbytes
        name, offset = segment.name, 0
        try:
            layout = process_rules.shm_layout(local, to)
        except Exception:
            segment.unlink()
            raise
        worker._segments.append(segment)
        notes.append(f"the source was in private memory: copied once into segment {name} "
                     f"({copy_seconds * 1e3:.3g} ms); `result.local` is the parent's view of the segment")
    local_id = host_identity(local.__array_interface__["data"][0]) if local.nbytes else None
    info, timing = _native.measure_handoffs(
        lambda: worker._call("recv_shm", name=name, offset=offset, layout=layout, to=to), _release(worker), repeat,
        first_extra=copy_seconds)
    staged = {"name": name, "offset": offset} if bytes_moved else None
    verdict, reason = _native.judge_handoff(path, local_id, info.get("identity"), staged)
    warning = process_rules.readonly_warning(layout["readonly"], info.get("writable", True))
    if warning is not None:
        notes.append(warning)
        import warnings

        from gpushare.exceptions import GpushareWarning
        from gpushare.warn_site import user_stacklevel

        warnings.warn(f"{_framework_of(obj)} → {to} in worker pid {worker.pid} (shm): {warning}",
                      GpushareWarning, stacklevel=user_stacklevel())
    row = _row(path, obj, verdict, reason, local_id, info, timing, bytes_moved, notes, worker)
    row["segment"] = {"name": name, "offset": offset}
    if local_id is not None:
        row["source"]["identity"] = local_id
    cleanup = []
    if segment is not None:
        def free(seg: Any = segment) -> None:
            if seg in worker._segments:
                worker._segments.remove(seg)
            seg.close()
            seg.unlink()
        cleanup.append(free)
    return ProcessShareResult(row, RemoteArray(worker, info["slot"]), local, cleanup)


def _run_torch_mp(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    steps = _steps(path)
    strategy = steps.sharing_strategy()  # and torch's reductions registered with ForkingPickler
    notes = []
    cuda = _is_cuda(obj)
    process_rules.check_shm_space(path, steps.shared_memory_needed(obj),
                                  "torch.multiprocessing's move of the tensor's storage into shared memory")
    before = _address(obj)[0]
    if not cuda:
        notes.append(f"sharing strategy {strategy!r}")
    info, timing = _native.measure_handoffs(lambda: worker._call("recv_object", obj=obj), _release(worker), repeat)
    if not cuda and _address(obj)[0] != before:
        notes.append("torch moved the tensor's storage into shared memory on the first handoff "
                     "(one copy; the tensor's data_ptr changed)")
    src_id = _identity_of(obj, _nbytes(obj))
    if cuda and src_id is not None:
        # torch exported the caching allocator's block; the worker's mapping is judged by the block
        # it sees (size and offset) and by torch's own handle, which is the allocation's IPC handle.
        # The handle torch sent (cudaIpcGetMemHandle of the allocator's segment) is what the worker
        # opened; the driver's handle of the same allocation is kept beside it.
        torch_handle = steps.ipc_handle(obj)
        if src_id.get("handle") not in (None, torch_handle):
            notes.append("torch's IPC handle bytes differ from the driver's for the same allocation; judged by torch's")
        src_id["driver_handle"], src_id["handle"] = src_id.get("handle"), torch_handle
        dst_id = info.get("identity")
        if dst_id is not None:  # else judged "copied": the worker's side is unknown
            dst_id["opened_handle"] = torch_handle
        notes.append("torch's IPC handle names the caching allocator's block; the worker maps the whole block")
    verdict, reason = _native.judge_handoff(path, src_id, info.get("identity"))
    row = _row(path, obj, verdict, reason, src_id, info, timing, 0 if verdict == "shared" else _nbytes(obj), notes, worker)
    row["mechanism"] += (": CUDA IPC of the allocator block + offset" if cuda
                         else f": {strategy} strategy (shared-memory file)")
    return ProcessShareResult(row, RemoteArray(worker, info["slot"]), obj)


def _run_ipc(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    _synchronize(obj)
    nbytes = _nbytes(obj)
    ptr, _ = _address(obj)
    ordinal = _device_ordinal(obj)
    target_ordinal = _worker_ordinal(worker, ordinal)
    dtype = _np_dtype(obj)
    # The view's strides and span, not its shape alone: the mapping covers what the view reaches.
    layout = process_rules.ipc_layout(obj, process_host.itemsize(dtype))
    span = layout["span"]

    def once() -> dict:
        export = _native.cuda_ipc_export(ptr, span)
        # Opened on the device the memory lives on (the worker holds its own context there), so the
        # framework's view is on that device and nothing is copied.
        return worker._call("ipc_open", handle=export["handle"], ordinal=export["ordinal"], offset=export["offset"],
                            nbytes=span, shape=layout["shape"], dtype=dtype, to=to, strides=layout["strides"])

    info, timing = _native.measure_handoffs(once, _release(worker), repeat)
    src_id = cuda_identity(ptr, span)
    verdict, reason = _native.judge_handoff(path, src_id, info.get("identity"))
    notes = []
    if target_ordinal != ordinal:
        notes.append(f"the worker works on cuda:{target_ordinal}; it maps the allocation on cuda:{ordinal}, where it "
                     f"lives, in its own context there")
    row = _row(path, obj, verdict, reason, src_id, info, timing, 0 if verdict == "shared" else nbytes, notes, worker)
    return ProcessShareResult(row, RemoteArray(worker, info["slot"]), obj)


def _np_dtype(obj: Any) -> str:
    name = _dtype_name(obj)
    if name == "bfloat16":
        raise GpushareError("bfloat16 has no NumPy type string for __cuda_array_interface__; use torch_mp or nccl")
    return process_host.typestr(name)


def _run_pg(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    """gloo send/recv with the parent as rank 0 (gloo raises on a timeout; it does not abort the
    process as NCCL's watchdog does, so the parent can be a rank here)."""
    backend = "gloo" if path == "gloo" else "nccl"
    src_ord = _device_ordinal(obj)
    dst_ord = _worker_ordinal(worker, src_ord) if backend == "nccl" else None
    steps = _steps(path)
    _synchronize(obj)
    (key, (group, _store), fresh), setup = _native.timed_call(
        lambda: worker._open_group(backend, src_ord if backend == "nccl" else None, dst_ord))

    def once() -> dict:
        rid = worker._send("pg_recv", key=key, shape=tuple(obj.shape), dtype=_dtype_name(obj), device=dst_ord, src=0)
        steps.send(group, obj, 1)
        return worker._recv("pg_recv", rid=rid)

    info, timing = _native.measure_handoffs(once, _release(worker), repeat, first_extra=setup)
    src_id = _identity_of(obj, _nbytes(obj), export=False)
    verdict, reason = _native.judge_handoff(path, src_id, info.get("identity"))
    setup = setup if fresh else 0.0
    notes = [f"first call includes the process group and communicator set-up ({setup * 1e3:.3g} ms for the group)"]
    row = _row(path, obj, verdict, reason, src_id, info, timing, _nbytes(obj), notes, worker)
    return ProcessShareResult(row, RemoteArray(worker, info["slot"]), obj)


def _helper(worker: Worker, ordinal: int, env: dict) -> Worker:
    """A helper worker on ``ordinal`` with ``env``, kept by ``worker`` (stopped with it) so that a
    sweep starts it once."""
    key = (ordinal, tuple(sorted(env.items())))
    helper = worker._helpers.get(key)
    if helper is None or not helper.alive:
        helper = Worker(f"cuda:{ordinal}", env=env, timeout=worker.timeout, start_timeout=worker.start_timeout).start()
        library = _library("nccl")
        helper._call("preload", modules=[library.module, *library.process_modules], timeout=worker.start_timeout)
        worker._helpers[key] = helper
    return helper


def _run_nccl(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    """NCCL send/recv between two worker processes: a sender helper on the source's GPU, which gets
    the tensor from the parent by torch.multiprocessing (zero-copy), and the receiver.

    The parent is never a rank: a rank whose peer dies blocks inside NCCL until the watchdog aborts
    the whole process, which would be the user's kernel. The parent only waits on pipes, with
    timeouts. Each handoff is acknowledged by the receiver (a one-element send back), as in the raw
    torch.distributed baseline of benchmarks/bench_processes.py.

    ``nccl_socket``: both ranks run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (NCCL reads them once
    per process), so the receiver is a helper too and no worker-side array is kept."""
    steps = _steps(path)
    steps.register_reductions()  # for the pipe: the tensor goes as a handle, not as its bytes
    src_ord = _device_ordinal(obj)
    dst_ord = _worker_ordinal(worker, src_ord)
    socket = path == "nccl_socket"
    env = {**SOCKET_ENV} if socket else {}
    sender = _helper(worker, src_ord, env)
    receiver = _helper(worker, dst_ord, env) if socket else worker
    _synchronize(obj)
    # torch.multiprocessing: the sender maps the tensor
    sent, handoff_to_sender = _native.timed_call(lambda: sender._call("recv_object", obj=obj))
    key = f"{path}:{src_ord}:{dst_ord}:{sender.pid}"
    setup = 0.0

    def open_group() -> None:
        store = steps.store(0, 2, True, worker.timeout)
        s_rid = sender._send("pg_init", key=key, backend="nccl", port=store.port, rank=0, world=2, device=src_ord,
                     timeout=worker.timeout)
        r_rid = receiver._send("pg_init", key=key, backend="nccl", port=store.port, rank=1, world=2, device=dst_ord,
                       timeout=worker.timeout)
        sender._recv("pg_init", rid=s_rid)
        receiver._recv("pg_init", rid=r_rid)
        receiver._peer_groups[key] = store  # the store lives as long as the group

    if key not in receiver._peer_groups:
        _, setup = _native.timed_call(open_group)
    shape, dtype = tuple(obj.shape), _dtype_name(obj)
    try:
        r_rid = receiver._send("pg_pingpong", key=key, role="recv", slot=None, shape=shape, dtype=dtype, device=dst_ord,
                       peer=0, repeat=repeat + 1)
        s_rid = sender._send("pg_pingpong", key=key, role="send", slot=sent["slot"], shape=shape, dtype=dtype,
                     device=src_ord, peer=1, repeat=repeat + 1)
        s_info = sender._recv("pg_pingpong", rid=s_rid)
        info = receiver._recv("pg_pingpong", rid=r_rid)
    finally:
        if sender.alive:
            sender._call("release", slot=sent["slot"])
    times = s_info["seconds"]  # on the sender: send, and the receiver's acknowledgement back
    timing = _native.handoff_timing(setup + times[0], times[1:])
    notes = [
        f"between a sender worker on cuda:{src_ord} (given the tensor by torch.multiprocessing, zero-copy, "
        f"{handoff_to_sender * 1e3:.3g} ms) and the receiver on cuda:{dst_ord}; each handoff acknowledged",
    ]
    if setup:
        notes.append(f"first call includes the group and NCCL communicator set-up ({setup * 1e3:.3g} ms for the group)")
    if socket:
        notes.insert(0, "stand-in for two hosts: NCCL NET/Socket over loopback (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "
                        "NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo) in both ranks")
    src_id = _identity_of(obj, _nbytes(obj), export=False)
    verdict, reason = _native.judge_handoff(path, src_id, info.get("identity"))
    row = _row(path, obj, verdict, reason, src_id, info, timing, _nbytes(obj), notes, receiver)
    if socket:
        receiver._call("release", slot=info["slot"])
        return ProcessShareResult(row, None, obj)
    return ProcessShareResult(row, RemoteArray(worker, info["slot"]), obj)


# ---------------------------------------------------------------------------------------------
# Tables.


def compare(obj: Any, to: str | None = None, paths: str | Sequence[str] = "all", *, across: Any = "process",
            repeat: int = 5, peer: Worker | None = None, keep: bool = False) -> "ProcessComparison":
    """Every process path for ``obj``, side by side (``gpushare.compare(x, to, across=…)``).
    ``across`` is a :class:`Worker` or ``"process"`` (a worker is started and stopped for the call)."""
    names = parse_process_paths(paths)
    worker, owned = _worker_for(across, obj)
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
        r = _share(worker, obj, path, to, repeat=repeat, peer=peer)
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


def _worker_for(across: Any, obj: Any = None) -> tuple[Worker, bool]:
    if isinstance(across, Worker):
        return across, False
    if across in ("process", "processes", True):
        return Worker().start(), True
    raise ValueError(f"across is a gpushare.Worker or 'process', got {across!r}")


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
    worker, owned = _worker_for(across)
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


__all__ = [
    "MECHANISMS", "PROCESS_PATHS", "ProcessBenchmark", "ProcessComparison", "ProcessShareResult", "RemoteArray",
    "Worker", "bench", "compare", "cuda_identity", "host_identity", "same_memory",
]
