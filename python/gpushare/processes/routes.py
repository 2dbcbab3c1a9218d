"""Each process path's transport: how it hands one array to the worker and releases it, and what
each side's memory identity is. The core's pipeline drives it (``_native.processes.handoff``;
crates/core/src/share/process.rs): it refuses a path that does not apply (the rule of
crates/core/src/explain/process.rs, over ``facts()``), times ``hand_over``/``release`` with the one
timing loop, judges the two identities and builds the typed row (``ShareResult``). The
framework's own steps (torch.multiprocessing, torch.distributed) are its adapter's
``process_steps()``. gpushare.processes runs these.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpushare import _native, auto, paths
from gpushare.processes import rules as process_rules
from gpushare.adapters import process_host
from gpushare.exceptions import GpushareError, gpushare_error
from gpushare.processes.identity import _address, _identity_of, cuda_identity, described, host_identity
from gpushare.processes.segment import Segment
from gpushare.processes.worker import _context_report, _synchronize

if TYPE_CHECKING:
    from gpushare.processes import Worker

ShareResult = _native.share.ShareResult

#: Process paths, in table order, and how each hands the memory over: THE path table's
#: (crates/core/src/paths.rs), as every path is declared there once.
PROCESS_PATHS = paths.names_of("process")
MECHANISMS = {name: text for name, text in paths.describe("process").items() if name in PROCESS_PATHS}

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


def _dense(obj: Any) -> bool:
    """Whether ``obj``'s elements fill its extent once each, in some order (torch's "non-overlapping
    and dense", which torch.distributed's send takes only); True where it has no strides to read."""
    shape, stride = getattr(obj, "shape", None), getattr(obj, "stride", None)
    if shape is None or not callable(stride):
        return True
    dims = sorted((int(st), int(n)) for n, st in zip(shape, stride()) if int(n) != 1)
    if any(n == 0 for _, n in dims):
        return True
    expected = 1
    for st, n in dims:
        if st != expected:
            return False
        expected *= n
    return True


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
        attrs = _native.cuda.pointer_attributes(ptr) or {}
        return attrs.get("device_ordinal", 0)
    return None


def _worker_ordinal(worker: Worker, source_ordinal: int | None) -> int | None:
    if worker.device is None:
        return source_ordinal
    on_host, ordinal = _native.text.parse_device(worker.device)  # the core's one parser of device names
    return None if on_host else ordinal


def resolve_auto(obj: Any) -> tuple[str, str | None]:
    """THE ``auto`` across processes and its reason: the core's (``gpushare.auto.process_choice``,
    crates/core/src/auto.rs, over the path table), asked with where the array's memory lies."""
    from gpushare.exceptions import NotAnArrayError

    try:
        return auto.process_choice(obj)
    except NotAnArrayError:  # no adapter knows the object: the core's rule, asked with its address's place
        where = (2, 0) if _is_cuda(obj) else (1, 0)
        path, _kind, why = _native.paths.Pair(exports_dlpack=False, accepts_objects=False, accepts_capsules=False,
                                             addresses_device=False).auto(_native.paths.HandoffFacts(where, across=True))
        return path, why


#: The frameworks the worker can hold the result in, per path.
def _targets() -> dict[str, tuple[str, ...]]:
    from gpushare.adapters import ADAPTERS

    return {p: tuple(sorted(a.name for a in ADAPTERS.values() if p in a.worker_receives)) for p in PROCESS_PATHS}


TARGETS = _targets()


def applicability(obj: Any, path: str, worker: Worker, peer: Worker | None = None, to: str | None = None) -> str | None:
    """Why ``path`` does not apply to ``obj`` with this worker (predicted, before anything runs), or
    None: the core's rule (crates/core/src/explain/process.rs) over the path's transport, the one a
    handoff is refused by."""
    return remote_refusal(worker, path) or _native.processes.route_refusal(TRANSPORTS[path](worker, obj, path, to, peer))


def remote_refusal(worker: Worker, path: str) -> str | None:
    """Why ``path``, a path between processes of one host, cannot reach a worker on another host."""
    host = getattr(worker, "host", None)
    if host is not None and path != "remote":
        return f"{path} needs a worker on this host; the worker at {host} is on another (use remote)"
    return None


def in_live_segment(src_id: dict | None) -> bool:
    """Whether host memory of this identity already lies in a live /dev/shm segment, which ``shm``
    hands over as it is (the worker maps the source); any other array is copied into a new one."""
    return bool(src_id and (src_id.get("file") or "").startswith("/dev/shm/") and src_id["mapping"] == "shared"
                and not src_id["unlinked"] and os.path.exists(src_id["file"]))


def shm_copies(obj: Any) -> bool:
    """Whether ``shm`` copies ``obj`` into a segment (what ``advise`` predicts): unless it is in one."""
    host = process_rules.shm_host_view(obj)
    return not (host.nbytes and in_live_segment(host_identity(host.__array_interface__["data"][0])))


def _preload(worker: Worker, obj: Any, path: str, to: str) -> None:
    """The worker imports the frameworks before anything is timed: the first-call cost is the
    path's own set-up, not ``import torch``."""
    from gpushare.adapters import ADAPTERS

    wanted = [ADAPTERS[m].module for m in {to, _framework_of(obj)} if m in ADAPTERS and ADAPTERS[m].worker_receives]
    library = _library(path)
    if library is not None:
        wanted += list(library.process_modules)
    missing = [m for m in wanted if m not in worker._preloaded]
    if missing:
        # An import may take as long as a start (start_timeout); a worker that stops working
        # meanwhile is noticed within the request timeout.
        worker._call("preload", modules=missing, timeout=worker.start_timeout, idle=worker.timeout)
        worker._preloaded.update(missing)


class Transport:
    """A process path's side of one handoff of ``obj`` to ``worker``, driven by the core's pipeline
    (its interface: crates/python/src/binding/process_route.rs). ``asked``: the framework asked for
    (None: the source's), which the refusal rule reads; ``to``: the one the worker views it in."""

    #: How this handoff went, beyond the path table's description (the core appends it).
    detail: str | None = None

    def __init__(self, worker: Worker, obj: Any, path: str, asked: str | None, peer: Worker | None = None):
        self.worker, self.obj, self.path, self.asked, self.peer = worker, obj, path, asked, peer
        self.to = asked or _framework_of(obj)
        self.receiver = worker  # the process that holds the result
        self.noted: list[str] = []

    def facts(self) -> tuple:
        """What the refusal rule reads, known without asking anything costly."""
        cuda, library = _is_cuda(self.obj), _library(self.path)
        source_device = _device_ordinal(self.obj) if cuda else None
        return (_framework_of(self.obj), self.asked, list(TARGETS[self.path]),
                library.name if library is not None else None, cuda,
                source_device, _worker_ordinal(self.worker, source_device) if cuda else None,
                not _dense(self.obj))

    # The costly facts, asked only when the rule reaches them.
    def library_unavailable(self) -> str | None:
        library = _library(self.path)
        return library.process_steps().unavailable() if library is not None else None

    def nccl_unavailable(self) -> str | None:
        library = _library(self.path)
        return library.process_steps().nccl_unavailable() if library is not None else None

    def ipc_refusal(self) -> str | None:
        return _native.cuda.ipc_refusal(_address(self.obj)[0])

    def set_up(self) -> float:
        process_rules.check_source(self.obj)  # the one-process share's refusals of lazy views
        _preload(self.worker, self.obj, self.path, self.to)
        return self._set_up()

    def _set_up(self) -> float:
        """The path's one-off work; the seconds of it the first call reports."""
        return 0.0

    def release(self, reply: dict) -> None:
        self.worker._call("release", slot=reply["slot"])

    def identities(self, reply: dict) -> tuple[dict | None, dict | None]:
        """Each side's memory identity after the handoffs, the source's asked here."""
        return _identity_of(self.obj, _nbytes(self.obj), export=False), reply.get("identity")

    def sides(self, reply: dict) -> tuple[tuple, tuple]:
        source, target = self.identities(reply)
        return ((_framework_of(self.obj), _nbytes(self.obj), source, _context_report(self.obj)),
                (self.receiver.pid, reply.get("framework"), target, reply.get("context")))

    def staged(self) -> tuple[str, int, int] | None:
        return None

    def described(self, reply: dict) -> tuple[dict, dict]:
        """Both arrays as gpushare describes each in its own process (identity.described): the
        source here, the array the worker holds there."""
        return described(self.obj), self.receiver._call("info", slot=reply["slot"])

    def notes(self, reply: dict) -> list[str]:
        return self.noted

    def result(self, reply: dict) -> tuple[Any, Any, list]:
        """The worker's array, the parent's array over the shared memory, what releases the latter."""
        return RemoteArray(self.worker, reply["slot"]), self.obj, []


class _Shm(Transport):
    def _set_up(self) -> float:
        host = process_rules.shm_host_view(self.obj)
        src_id = host_identity(host.__array_interface__["data"][0]) if host.nbytes else None
        self.segment, self.staged_bytes = None, 0
        if in_live_segment(src_id):
            # Already in a segment (e.g. the ``local`` view of an earlier shm handoff): hand it as it is,
            # with its layout and read-only flag.
            self.layout = process_rules.shm_layout(host, self.to, _framework_of(self.obj))
            self.name, self.offset, self.local = src_id["file"][len("/dev/shm/"):], src_id["offset"], host
            return 0.0
        process_rules.check_shm_space(self.path, host.nbytes, "the copy of the array into a segment")

        def stage() -> tuple[Segment, Any]:
            seg = Segment(max(host.nbytes, 1), self.path)
            return seg, process_host.copy_into(seg.mm, host)

        (self.segment, self.local), seconds = _native.processes.timed_call(stage)
        self.staged_bytes, self.name, self.offset = host.nbytes, self.segment.name, 0
        try:
            self.layout = process_rules.shm_layout(self.local, self.to, _framework_of(self.obj))
        except Exception:
            self.segment.unlink()
            raise
        self.worker._segments.append(self.segment)
        self.noted.append(f"the source was in private memory: copied once into segment {self.name} "
                          f"({seconds * 1e3:.3g} ms); `result.local` is the parent's view of the segment")
        return seconds

    def hand_over(self) -> dict:
        return self.worker._call("recv_shm", name=self.name, offset=self.offset, layout=self.layout, to=self.to)

    def identities(self, reply: dict) -> tuple[dict | None, dict | None]:
        local = host_identity(self.local.__array_interface__["data"][0]) if self.local.nbytes else None
        return local, reply.get("identity")

    def staged(self) -> tuple[str, int, int]:
        return self.name, self.offset, self.staged_bytes

    def notes(self, reply: dict) -> list[str]:
        warning = process_rules.readonly_warning(self.layout["readonly"], reply.get("writable", True))
        if warning is not None:
            self.noted.append(warning)
            import warnings

            from gpushare.exceptions import GpushareWarning
            from gpushare.warn_site import user_stacklevel

            warnings.warn(f"{_native.text.route_label(_framework_of(self.obj), self.to)} in worker pid {self.worker.pid} (shm): {warning}",
                          GpushareWarning, stacklevel=user_stacklevel())
        return self.noted

    def result(self, reply: dict) -> tuple[Any, Any, list]:
        cleanup = []
        if self.segment is not None:
            def free(seg: Any = self.segment, worker: Worker = self.worker) -> None:
                if seg in worker._segments:
                    worker._segments.remove(seg)
                seg.close()
                seg.unlink()
            cleanup.append(free)
        return RemoteArray(self.worker, reply["slot"]), self.local, cleanup


class _TorchMp(Transport):
    def _set_up(self) -> float:
        self.steps = _steps(self.path)
        strategy = self.steps.sharing_strategy()  # and torch's reductions registered with ForkingPickler
        self.cuda = _is_cuda(self.obj)
        process_rules.check_shm_space(self.path, self.steps.shared_memory_needed(self.obj),
                                      "torch.multiprocessing's move of the tensor's storage into shared memory")
        self.before = _address(self.obj)[0]
        self.handle: str | None = None  # torch's IPC handle of the block, read from the first send
        if not self.cuda:
            self.noted.append(f"sharing strategy {strategy!r}")
        self.detail = "CUDA IPC of the allocator block + offset" if self.cuda else f"{strategy} strategy (shared-memory file)"
        return 0.0

    def hand_over(self) -> dict:
        # A CUDA tensor goes as an alias of its own (TorchProcessSteps.sendable), dropped once sent:
        # torch keeps the memory until the worker lets go, and the caller's tensor is never marked.
        sent = self.steps.sendable(self.obj)
        reply = self.worker._call("recv_object", obj=sent)
        if self.cuda and self.handle is None:
            self.handle = self.steps.ipc_handle(sent)
        return reply

    def identities(self, reply: dict) -> tuple[dict | None, dict | None]:
        if not self.cuda and _address(self.obj)[0] != self.before:
            # torch swaps the storage's memory for a shared copy and frees the old memory.
            self.noted.append("torch moved the tensor's storage into shared memory on the first handoff (one copy; "
                              "the tensor's data_ptr changed) and freed the memory it lay in")
        src_id, dst_id = _identity_of(self.obj, _nbytes(self.obj)), reply.get("identity")
        if self.cuda and src_id is not None:
            # torch exported the caching allocator's block; the worker's mapping is judged by the block
            # it sees (size and offset) and by torch's own handle, which is the allocation's IPC handle.
            # The handle torch sent (cudaIpcGetMemHandle of the allocator's segment) is what the worker
            # opened; the driver's handle of the same allocation is kept beside it.
            torch_handle = self.handle or self.steps.ipc_handle(self.steps.sendable(self.obj))
            if src_id.get("handle") not in (None, torch_handle):
                self.noted.append("torch's IPC handle bytes differ from the driver's for the same allocation; "
                                  "judged by torch's")
            src_id["driver_handle"], src_id["handle"] = src_id.get("handle"), torch_handle
            if dst_id is not None:  # else judged "copied": the worker's side is unknown
                dst_id["opened_handle"] = torch_handle
            self.noted.append("torch's IPC handle names the caching allocator's block; the worker maps the whole block")
        return src_id, dst_id


class _Ipc(Transport):
    def _set_up(self) -> float:
        _synchronize(self.obj)
        self.ptr, _ = _address(self.obj)
        ordinal = _device_ordinal(self.obj)
        target_ordinal = _worker_ordinal(self.worker, ordinal)
        self.dtype = _np_dtype(self.obj)
        # The view's strides and span, not its shape alone: the mapping covers what the view reaches.
        self.layout = process_rules.ipc_layout(self.obj, process_host.itemsize(self.dtype))
        if target_ordinal != ordinal:
            self.noted.append(f"the worker works on cuda:{target_ordinal}; it maps the allocation on cuda:{ordinal}, "
                              f"where it lives, in its own context there")
        return 0.0

    def hand_over(self) -> dict:
        span = self.layout["span"]
        export = _native.cuda.ipc_export(self.ptr, span)
        # Opened on the device the memory lives on (the worker holds its own context there), so the
        # framework's view is on that device and nothing is copied.
        return self.worker._call("ipc_open", handle=export["handle"], ordinal=export["ordinal"], offset=export["offset"],
                                 nbytes=span, shape=self.layout["shape"], dtype=self.dtype, to=self.to,
                                 strides=self.layout["strides"])

    def identities(self, reply: dict) -> tuple[dict | None, dict | None]:
        return cuda_identity(self.ptr, self.layout["span"]), reply.get("identity")


def _np_dtype(obj: Any) -> str:
    name = _dtype_name(obj)
    if name == "bfloat16":
        raise gpushare_error("gpushare", "bfloat16 has no NumPy type string for __cuda_array_interface__; use torch_mp or nccl")
    return process_host.typestr(name)


# The paths over torch.distributed (gpushare.processes.collectives, and gpushare.processes.remote to
# another host), which build on Transport.
from gpushare.processes.collectives import SOCKET_ENV, Gloo, Nccl  # noqa: E402,F401
from gpushare.processes.remote import remote_transport  # noqa: E402

#: Each path's transport.
TRANSPORTS = {"shm": _Shm, "torch_mp": _TorchMp, "ipc": _Ipc, "gloo": Gloo, "nccl": Nccl, "nccl_socket": Nccl,
              "remote": remote_transport}


def hand_over(worker: Worker, obj: Any, path: str, asked: str | None, repeat: int, peer: Worker | None = None,
              *, auto: bool = False) -> ShareResult:
    """One handoff by ``path`` (the one ``auto`` took, where ``auto``), run by the core's pipeline over
    the path's transport, with the cost model's prediction for it (where this machine is calibrated)
    asked before it runs."""
    from gpushare import advice

    refused = remote_refusal(worker, path)
    if refused is not None:
        raise gpushare_error("path_not_applicable", f"{path}: {refused}", reason=refused)
    transport = TRANSPORTS[path](worker, obj, path, asked, peer)
    predicted = advice.process_prediction(obj, path, asked, worker.device, worker.host)
    result = _native.processes.handoff(transport, repeat, predicted, auto)
    if path == "remote":
        _set_against_link(worker, result)
    return result


def _set_against_link(worker: Worker, result: ShareResult) -> None:
    """A remote handoff's bandwidth against its link's ceiling (measured at the first handoff to
    that peer, then cached), as a note of its row."""
    from gpushare.processes import remote as process_remote

    row = result.row
    median = (row.get("timing") or {}).get("median")
    bandwidth = row["bytes_moved"] / median if median and row.get("bytes_moved") else None
    try:
        process_remote.link_ceiling(worker)
    except GpushareError as e:  # the handoff itself worked: its row stands, without the ceiling
        result.add_note(f"the link's ceiling could not be measured: {e}")
        return
    note = process_remote.against_ceiling(worker, bandwidth)
    if note is not None:
        result.add_note(note)
