"""Each process path as a route of the one pipeline: whether it applies to an array (predicted,
before anything runs), and the handoff itself, the worker's side described by memory identity.
The verdict is the core's identity judge (``_native.judge_handoff``), the timing the core's timing
loop over the path's "do one handoff" (``_native.measure_handoffs``), the row the core's typed
report (``_native.ProcessShareResult``). The framework's own steps (torch.multiprocessing,
torch.distributed) are its adapter's ``process_steps()``. gpushare.processes runs these.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpushare import _native, paths, process_rules
from gpushare.adapters import process_host
from gpushare.exceptions import gpushare_error
from gpushare.process_identity import _address, _identity_of, cuda_identity, host_identity
from gpushare.process_segment import Segment
from gpushare.process_worker import _context_report, _synchronize

if TYPE_CHECKING:
    from gpushare.processes import Worker

ProcessShareResult = _native.ProcessShareResult

#: Process paths, in table order, and how each hands the memory over: THE path table's
#: (crates/core/src/paths.rs), as every path is declared there once.
PROCESS_PATHS = paths.names_of("process")
MECHANISMS = {name: text for name, text in paths.describe("process").items() if name in PROCESS_PATHS}

#: What NCCL needs to go over sockets on one host.
SOCKET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}


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
    """THE ``auto`` across processes: the core's (``gpushare.paths.process_auto``, from the path
    table in crates/core/src/paths.rs), asked with where the array's memory lies."""
    from gpushare.exceptions import NotAnArrayError

    try:
        return paths.process_auto(obj)
    except NotAnArrayError:  # no adapter knows the object: the core's rule, asked with its address's place
        where = (2, 0) if _is_cuda(obj) else (1, 0)
        return _native.resolve_auto((False, False, False, False), where, None, "", None, True)[0]


#: The frameworks the worker can hold the result in, per path.
def _targets() -> dict[str, tuple[str, ...]]:
    from gpushare.adapters import ADAPTERS

    return {p: tuple(sorted(a.name for a in ADAPTERS.values() if p in a.worker_receives)) for p in PROCESS_PATHS}


TARGETS = _targets()


def applicability(obj: Any, path: str, worker: Worker, peer: Worker | None = None, to: str | None = None) -> str | None:
    """Why ``path`` does not apply to ``obj`` with this worker (predicted, before anything runs), or
    None: the core's rule (crates/core/src/explain/process.rs) over the facts gathered here."""
    cuda = _is_cuda(obj)
    library = _library(path)
    steps = library.process_steps() if library is not None else None
    source_device = _device_ordinal(obj) if cuda else None
    return _native.process_refusal(
        path, _framework_of(obj), to, list(TARGETS[path]), library.name if library is not None else None, cuda,
        source_device, _worker_ordinal(worker, source_device) if cuda else None,
        lambda: steps.unavailable() if steps is not None else None,
        lambda: steps.nccl_unavailable() if steps is not None else None,
        lambda: _native.cuda_ipc_refusal(_address(obj)[0]),
    )


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


def in_live_segment(src_id: dict | None) -> bool:
    """Whether host memory of this identity already lies in a live /dev/shm segment, which ``shm``
    hands over as it is (the worker maps the source); any other array is copied into a new one."""
    return bool(src_id and (src_id.get("file") or "").startswith("/dev/shm/") and src_id["mapping"] == "shared"
                and not src_id["unlinked"] and os.path.exists(src_id["file"]))


def shm_copies(obj: Any) -> bool:
    """Whether ``shm`` copies ``obj`` into a segment (what ``advise`` predicts): unless it is in one."""
    host = process_rules.shm_host_view(obj)
    return not (host.nbytes and in_live_segment(host_identity(host.__array_interface__["data"][0])))


def _run_shm(worker: Worker, obj: Any, path: str, to: str, repeat: int, peer: Any) -> ProcessShareResult:
    host = process_rules.shm_host_view(obj)
    src_id = host_identity(host.__array_interface__["data"][0]) if host.nbytes else None
    notes: list[str] = []
    segment = None
    if in_live_segment(src_id):
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
        raise gpushare_error("gpushare", "bfloat16 has no NumPy type string for __cuda_array_interface__; use torch_mp or nccl")
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
        from gpushare.processes import Worker

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


#: The handoff of each path.
RUNNERS = {"shm": _run_shm, "torch_mp": _run_torch_mp, "ipc": _run_ipc, "gloo": _run_pg, "nccl": _run_nccl,
           "nccl_socket": _run_nccl}
