"""The worker process of :mod:`gpushare.processes`: its request loop and what it holds.

It runs in a process ``multiprocessing`` spawned; it answers one request at a time, each with the
id of its request, and keeps the arrays handed to it by slot until they are released.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from typing import Any

from gpushare import _native
from gpushare.exceptions import gpushare_error
from gpushare.process_identity import _address, _identity_of, cuda_identity


def _receivers(path: str) -> list[str]:
    """The frameworks a worker can hold an array handed by ``path`` in."""
    from gpushare.adapters import ADAPTERS

    return sorted(a.name for a in ADAPTERS.values() if path in a.worker_receives)




def _serve(conn: Any, env: dict) -> None:
    """The worker's main loop: one request at a time, each answered (id, "ok", value) or (id, "error", …)
    with the id of its request, so that the parent matches replies to requests across threads."""
    os.environ.update(env)
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


class _WorkerState:
    """What the worker holds: received arrays by slot, mappings, process groups."""

    def __init__(self) -> None:
        self.slots: dict[int, dict] = {}
        self.next_slot = 1
        self.groups: dict[str, Any] = {}

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
        # Shut down, not dropped: a group destroyed without shutdown() makes ProcessGroupNCCL print
        # "destroy_process_group() was not called" into the user's notebook as the worker exits.
        for key in list(self.groups):
            self.op_pg_close(key)

    # -- requests --

    def op_preload(self, modules: list) -> None:
        import importlib

        for name in modules:
            importlib.import_module(name)

    def op_ping(self) -> dict:
        return {"pid": os.getpid(), "python": sys.version.split()[0], "executable": sys.executable}

    def op_context(self, device: int) -> dict | None:
        """This process's context on ``device`` (created by torch if needed)."""
        import torch

        torch.cuda.set_device(device)
        torch.cuda.init()
        torch.empty(1, device=f"cuda:{device}")
        return _native.cuda_current_context()

    def op_recv_shm(self, name: str, offset: int, layout: dict, to: str) -> dict:
        import mmap

        import numpy as np

        # The segment is opened by name, not through SharedMemory: that would register it with the
        # resource tracker the worker shares with its parent, which then unlinks it twice.
        fd = os.open(f"/dev/shm/{name.lstrip('/')}", os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        # The source's own view: its strides (a transpose, a column, a step) and its dtype itself.
        arr = np.ndarray(layout["shape"], dtype=layout["dtype"], buffer=mm, offset=offset, strides=layout["strides"])
        value = _to_framework(arr, to)
        if layout["readonly"] and hasattr(value, "flags"):
            value.flags.writeable = False  # NumPy keeps the source's read-only flag; torch has none
        writable = bool(getattr(getattr(value, "flags", None), "writeable", True))
        return self._keep(value, [mm, arr], _identity_of(value, arr.nbytes), {"segment": name, "writable": writable})

    def op_recv_object(self, obj: Any) -> dict:
        # torch.multiprocessing's reductions rebuilt ``obj`` while the message was unpickled.
        nbytes = obj.untyped_storage().nbytes() if hasattr(obj, "untyped_storage") else 0
        ident = _identity_of(obj, nbytes, export=False)
        if ident and ident["kind"] == "cuda":
            # torch opened the sender's handle; the identity names the allocation it mapped.
            ident["opened_handle"] = None
        return self._keep(obj, [], ident)

    def op_ipc_open(self, handle: bytes, ordinal: int, offset: int, nbytes: int, shape: tuple, dtype: str,
                    to: str, strides: tuple | None = None) -> dict:
        mapping = _native.IpcMapping(handle, ordinal, offset, nbytes)
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
                   timeout: float) -> dict:
        t0 = time.perf_counter()
        self.groups[key] = _make_group(backend, port, rank, world, device, timeout, is_master=False)
        return {"seconds": time.perf_counter() - t0}

    def op_pg_recv(self, key: str, shape: tuple, dtype: str, device: int | None, src: int = 0) -> dict:
        import torch

        t = torch.empty(shape, dtype=getattr(torch, dtype), device="cpu" if device is None else f"cuda:{device}")
        group = self.groups[key]
        t0 = time.perf_counter()
        group.recv([t], src, 0).wait()
        if t.is_cuda:
            torch.cuda.synchronize(t.device)
        seconds = time.perf_counter() - t0
        return self._keep(t, [], _identity_of(t, t.nbytes, export=False), {"seconds": seconds})

    def op_pg_pingpong(self, key: str, role: str, slot: int | None, shape: tuple, dtype: str, device: int | None,
                       peer: int, repeat: int) -> dict:
        """``repeat`` handoffs, each acknowledged: the sender sends its slot's tensor and waits for a
        one-element reply; the receiver receives into a buffer of its own, then replies."""
        import torch

        dev = torch.device("cpu" if device is None else f"cuda:{device}")

        def sync() -> None:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)

        group, times = self.groups[key], []
        t = self.slots[slot]["value"] if role == "send" else torch.empty(shape, dtype=getattr(torch, dtype), device=dev)
        ack = torch.zeros(1, device=dev)
        for _ in range(repeat):
            t0 = time.perf_counter()
            if role == "send":
                group.send([t], peer, 0).wait()
                group.recv([ack], peer, 1).wait()
            else:
                group.recv([t], peer, 0).wait()
                sync()
                group.send([ack], peer, 1).wait()
            sync()
            times.append(time.perf_counter() - t0)
        if role == "send":
            return {"seconds": times}
        info = self._keep(t, [], _identity_of(t, t.nbytes, export=False))
        info["seconds"] = times
        return info

    def op_pg_close(self, key: str) -> None:
        group = self.groups.pop(key, None)
        if group is not None and hasattr(group, "shutdown"):
            try:
                group.shutdown()
            except Exception:
                pass

    def op_read(self, slot: int) -> Any:
        value = self.slots[slot]["value"]
        import numpy as np

        if hasattr(value, "detach"):
            return value.detach().cpu().numpy().copy()
        if hasattr(value, "get"):  # cupy
            return value.get()
        return np.array(value, copy=True)

    def op_write(self, slot: int, index: Any, value: Any) -> None:
        arr = self.slots[slot]["value"]
        arr[index] = value
        _synchronize(arr)

    def op_info(self, slot: int) -> dict:
        import gpushare

        value = self.slots[slot]["value"]
        return gpushare.inspect(value).to_dict()

    def op_release(self, slot: int) -> None:
        entry = self.slots.pop(slot, None)
        if entry is None:
            return
        value = entry.pop("value")
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
        import torch

        return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device)}


def _synchronize(value: Any) -> None:
    if getattr(value, "is_cuda", False):
        import torch

        torch.cuda.synchronize(value.device)


def _context_report(value: Any) -> dict | None:
    ptr, is_cuda = _address(value)
    if not is_cuda or ptr is None:
        return None
    attrs = _native.cuda_pointer_attributes(ptr) or {}
    return {"context": attrs.get("context"), "primary": attrs.get("context_is_primary"),
            "device": attrs.get("device_ordinal"), "pid": os.getpid()}


class _CudaView:
    """``__cuda_array_interface__`` over a mapped IPC allocation, so torch or CuPy can view it.
    Frameworks keep this object alive as long as their view, and it keeps the mapping."""

    def __init__(self, mapping: Any, shape: tuple, dtype: str, strides: tuple | None = None):
        import numpy as np

        self.mapping = mapping
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": np.dtype(dtype).str, "data": (mapping.ptr, False),
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


def _make_group(backend: str, port: int, rank: int, world: int, device: int | None, timeout: float,
                is_master: bool, store: Any = None) -> Any:
    """A process group of its own (not torch.distributed's default one, which the user may own):
    a TCPStore on loopback and a gloo or NCCL backend object."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    td = timedelta(seconds=timeout)
    if store is None:
        store = dist.TCPStore("127.0.0.1", port, world, is_master, timeout=td, wait_for_workers=False)
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, world, td)
    if backend == "nccl":
        if not is_master:  # the worker works on its device; the parent's current device is the user's
            torch.cuda.set_device(device)
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = td
        return dist.ProcessGroupNCCL(store, rank, world, options)
    raise gpushare_error("gpushare", f"unknown backend {backend!r}")
