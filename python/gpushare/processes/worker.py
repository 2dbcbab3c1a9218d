"""The worker process of :mod:`gpushare.processes`: its request loop and what it holds.

It runs in a process ``multiprocessing`` spawned; it answers one request at a time, each with the
id of its request, and keeps the arrays handed to it by slot until they are released.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

from gpushare import _native
from gpushare.adapters import process_host
from gpushare.exceptions import gpushare_error
from gpushare.processes.identity import _address, _identity_of, cuda_identity, described


def _receivers(path: str) -> list[str]:
    """The frameworks a worker can hold an array handed by ``path`` in."""
    from gpushare.adapters import ADAPTERS

    return sorted(a.name for a in ADAPTERS.values() if path in a.worker_receives)




def _serve(conn: Any, env: dict) -> None:
    """The worker's main loop: one request at a time, each answered (id, "ok", value) or (id, "error", …)
    with the id of its request, so that the parent matches replies to requests across threads."""
    os.environ.update(env)
    if os.environ.get("NCCL_DEBUG") and not os.environ.get("NCCL_DEBUG_FILE"):
        # NCCL's INFO lines (which transport each channel took) go to a file the parent reads,
        # not into the user's notebook.
        os.environ["NCCL_DEBUG_FILE"] = nccl_log_path(os.getpid())
    import warnings

    # The worker's stderr is the user's (a notebook cell): torch.distributed's notes about its own
    # set-up and tear-down, turned into Python warnings here, are not the user's to read.
    warnings.filterwarnings("ignore", message=r".*(ProcessGroupNCCL|unbatched P2P|destroy_process_group).*")
    # Ctrl-C belongs to the parent: it stops the worker by message or by terminate().
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    state = _WorkerState()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent went away: nothing is left behind
            break
        rid, op, kwargs = request
        if op == "exit":
            state.release_all()
            conn.send((rid, "ok", None))
            break
        try:
            value = getattr(state, "op_" + op)(**kwargs)
            conn.send((rid, "ok", value))
        except BaseException as e:  # reported to the parent, the worker keeps serving
            try:
                conn.send((rid, "error", type(e).__name__, str(e), traceback.format_exc()))
            except Exception:
                break
    state.release_all()
    remove_nccl_log(os.getpid())


def nccl_log_path(pid: int) -> str:
    """Where a worker of pid ``pid`` has NCCL write its INFO lines."""
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"gpushare-nccl-{pid}.log")


def remove_nccl_log(pid: int | None) -> None:
    if pid is not None:
        try:
            os.unlink(nccl_log_path(pid))
        except OSError:
            pass


class _WorkerState:
    """What the worker holds: received arrays by slot, mappings, process groups."""

    def __init__(self) -> None:
        self.slots: dict[int, dict] = {}
        self.next_slot = 1
        self.groups: dict[str, Any] = {}
        self.group_steps: dict[str, Any] = {}  # each group's library steps (its backend's adapter)
        # The last released receive buffer, by (shape, dtype, device): the next receive of the same
        # kind lands in it, as a raw send/recv loop reuses its buffer, instead of in fresh pages
        # whose first touch (zeroing, a fault per page: dear in a VM) would be timed as the link's.
        self.spare: tuple[tuple, Any] | None = None

    def _keep(self, value: Any, keep: list, identity: dict | None, extra: dict | None = None) -> dict:
        slot = self.next_slot
        self.next_slot += 1
        self.slots[slot] = {"value": value, "keep": keep}
        info = {"slot": slot, "identity": identity, "pid": os.getpid(), "framework": type(value).__module__.split(".")[0]}
        info["context"] = _context_report(value)
        if extra:
            info.update(extra)
        return info

    def release_all(self) -> None:
        for slot in list(self.slots):
            self.op_release(slot)
        self.spare = None
        # Shut down, not dropped: a group destroyed without shutdown() makes ProcessGroupNCCL print
        # "destroy_process_group() was not called" into the user's notebook as the worker exits.
        for key in list(self.groups):
            self.op_pg_close(key)

    # -- requests --

    def op_preload(self, modules: list) -> None:
        process_host.preload(modules)

    def op_ping(self) -> dict:
        return {"pid": os.getpid(), "python": sys.version.split()[0], "executable": sys.executable}

    def op_context(self, device: int) -> dict | None:
        """This process's context on ``device`` (created by the process library's framework if needed)."""
        _worker_steps().make_context(device)
        return _native.cuda.current_context()

    def op_recv_shm(self, name: str, offset: int, layout: dict, to: str) -> dict:
        import mmap

        # The segment is opened by name, not through SharedMemory: that would register it with the
        # resource tracker the worker shares with its parent, which then unlinks it twice.
        fd = os.open(f"/dev/shm/{name.lstrip('/')}", os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        # The source's own view: its strides (a transpose, a column, a step) and its dtype itself.
        arr = process_host.segment_view(mm, layout, offset)
        value = _to_framework(arr, to)
        if layout["readonly"] and hasattr(value, "flags"):
            value.flags.writeable = False  # NumPy keeps the source's read-only flag; torch has none
        writable = bool(getattr(getattr(value, "flags", None), "writeable", True))
        return self._keep(value, [mm, arr], _identity_of(value, arr.nbytes), {"segment": name, "writable": writable})

    def op_recv_object(self, obj: Any) -> dict:
        # torch.multiprocessing's reductions rebuilt ``obj`` while the message was unpickled.
        adapter = _adapter_of(obj)
        steps = adapter.process_steps() if adapter is not None else None
        nbytes = steps.storage_nbytes(obj) if steps is not None else 0
        ident = _identity_of(obj, nbytes, export=False)
        if ident and ident["kind"] == "cuda":
            # torch opened the sender's handle; the identity names the allocation it mapped.
            ident["opened_handle"] = None
        return self._keep(obj, [], ident)

    def op_ipc_open(self, handle: bytes, ordinal: int, offset: int, nbytes: int, shape: tuple, dtype: str,
                    to: str, strides: tuple | None = None) -> dict:
        mapping = _native.cuda.IpcMapping(handle, ordinal, offset, nbytes)
        holder = _CudaView(mapping, shape, dtype, strides)
        value = _cuda_to_framework(holder, to, ordinal)
        # The identity of what the framework holds, not of the mapping: a framework that copied
        # (another device asked for, say) would show an allocation of its own here.
        ptr, _ = _address(value)
        ident = cuda_identity(ptr, nbytes, export=False)
        if ident is not None and ptr == mapping.ptr:
            ident["opened_handle"] = handle.hex()
            ident["mapped_base"] = mapping.base
        return self._keep(value, [holder, mapping], ident)

    def op_pg_init(self, key: str, backend: str, port: int, rank: int, world: int, device: int | None,
                   timeout: float, host: str | None = None) -> dict:
        """Joins a group whose store listens at ``host`` (None: this host's loopback) and ``port``;
        a worker serving a remote peer has its engines' interface variables set already."""
        steps = self.group_steps[key] = _library(backend).process_steps()
        self.groups[key], seconds = _native.processes.timed_call(
            lambda: steps.make_group(backend, port, rank, world, device, timeout, False,
                                     **({"host": host} if host else {})))
        return {"seconds": seconds}

    def op_link(self) -> dict:
        """This side of a link to a remote peer: host, interface, address, and the device it works on."""
        import socket

        device = os.environ.get("GPUSHARE_WORKER_DEVICE")
        return {"host": socket.gethostname(), "interface": os.environ.get("GLOO_SOCKET_IFNAME"),
                "address": os.environ.get("GPUSHARE_LINK_ADDRESS"), "device": int(device) if device else None,
                "hostid": os.environ.get("NCCL_HOSTID")}

    def op_nccl_log(self) -> list:
        """NCCL's INFO lines of this process so far."""
        path = os.environ.get("NCCL_DEBUG_FILE")
        if not path or not os.path.exists(path):
            return []
        with open(path, errors="replace") as f:
            return f.read().splitlines()

    def op_pg_recv(self, key: str, shape: tuple, dtype: str, device: int | None, src: int = 0,
                   chunk: int | None = None) -> dict:
        steps = self.group_steps[key]
        kind = (tuple(shape), dtype, device)
        spare, self.spare = self.spare, None
        t = spare[1] if spare is not None and spare[0] == kind else steps.empty(shape, dtype, device)
        group = self.groups[key]

        def receive() -> None:
            if chunk:  # the sender's pieces, in order, into views of the one buffer
                flat = t.view(-1)
                for start in range(0, flat.numel(), chunk):
                    steps.recv(group, flat[start:start + chunk], src)
            else:
                steps.recv(group, t, src)
            steps.synchronize_device(device)

        _, seconds = _native.processes.timed_call(receive)
        info = self._keep(t, [], _identity_of(t, t.nbytes, export=False), {"seconds": seconds})
        self.slots[info["slot"]]["spare"] = kind
        return info

    def op_pg_pingpong(self, key: str, role: str, slot: int | None, shape: tuple, dtype: str, device: int | None,
                       peer: int, repeat: int) -> dict:
        """``repeat`` handoffs, each acknowledged: the sender sends its slot's tensor and waits for a
        one-element reply; the receiver receives into a buffer of its own, then replies."""
        steps = self.group_steps[key]
        group = self.groups[key]
        t = self.slots[slot]["value"] if role == "send" else steps.empty(shape, dtype, device)
        ack = steps.ack(device)

        def handoff() -> None:
            if role == "send":
                group.send([t], peer, 0).wait()
                steps.recv(group, ack, peer, 1)
            else:
                steps.recv(group, t, peer, 0)
                steps.synchronize_device(device)
                group.send([ack], peer, 1).wait()
            steps.synchronize_device(device)

        # Timed by the core's loop: each sample one acknowledged handoff, nothing to release between.
        _, timing = _native.processes.measure_handoffs(handoff, lambda _: None, repeat - 1)
        times = [timing["first_call"], *timing["samples"]] if repeat > 1 else [timing["first_call"]]
        if role == "send":
            return {"seconds": times}
        info = self._keep(t, [], _identity_of(t, t.nbytes, export=False))
        info["seconds"] = times
        return info

    def op_pg_close(self, key: str) -> None:
        group = self.groups.pop(key, None)
        self.group_steps.pop(key, None)
        if group is not None and hasattr(group, "shutdown"):
            try:
                group.shutdown()
            except Exception:
                pass

    def _held(self, slot: int) -> Any:
        """The array in ``slot``; a released one is said in words, not as a bare KeyError."""
        entry = self.slots.get(slot)
        if entry is None:
            raise LookupError(f"this worker no longer holds the array of slot {slot}: the handoff was released "
                              "(r.release()); hand the array over again")
        return entry["value"]

    def op_read(self, slot: int) -> Any:
        value = self._held(slot)
        return process_host.read_back(_adapter_of(value), value)

    def op_write(self, slot: int, index: Any, value: Any) -> None:
        arr = self._held(slot)
        arr[index] = value
        _synchronize(arr)

    def op_info(self, slot: int) -> dict:
        return described(self._held(slot))

    def op_release(self, slot: int) -> None:
        entry = self.slots.pop(slot, None)
        if entry is None:
            return
        value = entry.pop("value")
        if "spare" in entry:  # a receive buffer of the worker's own: kept for the next receive
            self.spare = (entry["spare"], value)
            return
        _synchronize(value)
        del value
        # Views go before the memory they view; an mmap with exported views cannot close.
        keep = entry.pop("keep")
        while keep:
            obj = keep.pop()
            close = getattr(obj, "close", None)
            if close is not None:
                try:
                    close()
                except (BufferError, ValueError):
                    pass

    def op_slots(self) -> list:
        return sorted(self.slots)

    def op_memory(self, device: int) -> dict:
        return _worker_steps().memory(device)


def _adapter_of(value: Any) -> Any:
    from gpushare.adapters import adapter_of

    try:
        return adapter_of(value)
    except Exception:  # not an array of a known framework
        return None


def _library(path: str) -> Any:
    """The adapter of the framework whose own library implements process path ``path``."""
    from gpushare.adapters import ADAPTERS

    return next(a for a in ADAPTERS.values() if path in a.process_paths)


def _worker_steps() -> Any:
    """The process steps of the framework the worker's own device work goes through (its context,
    its allocator's figures): the first that implements process paths."""
    from gpushare.adapters import ADAPTERS

    return next(a.process_steps() for a in ADAPTERS.values() if a.process_steps() is not None)


def _synchronize(value: Any) -> None:
    """Waits for the device work queued on ``value`` (its adapter's synchronize)."""
    adapter = _adapter_of(value)
    if adapter is not None:
        adapter.synchronize(value)


def _context_report(value: Any) -> dict | None:
    ptr, is_cuda = _address(value)
    if not is_cuda or ptr is None:
        return None
    attrs = _native.cuda.pointer_attributes(ptr) or {}
    return {"context": attrs.get("context"), "primary": attrs.get("context_is_primary"),
            "device": attrs.get("device_ordinal"), "pid": os.getpid()}


class _CudaView:
    """``__cuda_array_interface__`` over a mapped IPC allocation, so torch or CuPy can view it.
    Frameworks keep this object alive as long as their view, and it keeps the mapping."""

    def __init__(self, mapping: Any, shape: tuple, dtype: str, strides: tuple | None = None):
        self.mapping = mapping
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": process_host.typestr(dtype), "data": (mapping.ptr, False),
            "version": 3, "strides": None if strides is None else tuple(strides), "stream": None,
        }

    def close(self) -> None:
        pass  # the mapping (kept beside it) is closed by the slot's release


def _to_framework(arr: Any, to: str) -> Any:
    from gpushare.adapters import framework

    adapter = framework(to)
    if "shm" not in adapter.worker_receives:
        raise gpushare_error("gpushare", f"the worker can hand host memory to {' or '.join(_receivers('shm'))}, not {to!r}")
    return adapter.from_numpy(arr, True, 0)  # a view of the mapping, not a copy


def _cuda_to_framework(holder: Any, to: str, ordinal: int) -> Any:
    from gpushare.adapters import framework

    adapter = framework(to)
    if "ipc" in adapter.worker_receives:
        return adapter.from_cai_on(holder, ordinal)
    raise gpushare_error("gpushare", f"the worker can view CUDA IPC memory in {' or '.join(_receivers('ipc'))}, not {to!r}")
