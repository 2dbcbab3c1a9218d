"""PyTorch's own steps of the process paths (``TorchAdapter.process_steps()``): torch.multiprocessing
for ``torch_mp``, torch.distributed for ``gloo``, ``nccl`` and ``nccl_socket``, and the tensors the
worker makes for them. gpushare.processes (the parent) and gpushare.processes.worker (the worker) keep
the transport and call these; nothing outside the adapters imports torch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gpushare.exceptions import gpushare_error


def _torch() -> Any:
    import torch

    return torch


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _alias(obj: Any) -> Any:
    """``obj`` over a storage of its own that views the same memory from the same start (torch's
    export looks the start up in the caching allocator, so a storage starting mid-block would be
    refused): the whole storage's bytes through DLPack, then ``obj``'s dtype, shape, strides and
    offset over them."""
    torch = _torch()
    storage = obj.untyped_storage()
    if storage.nbytes() == 0 or storage.nbytes() % obj.element_size():
        return obj
    data = torch.empty(0, dtype=torch.uint8, device=obj.device).set_(storage)
    # torch exports a CUDA tensor only while its device is current; the user's current device may be
    # another (JAX leaves the last GPU current): made current for this call only, then restored.
    with torch.cuda.device(obj.device):
        whole = torch.from_dlpack(data)
    alias = whole.view(obj.dtype).as_strided(obj.shape, obj.stride(), obj.storage_offset())
    if obj.requires_grad:
        alias.requires_grad_(True)
    return alias


class TorchProcessSteps:
    """What the process paths ask of PyTorch, in the parent and in the worker."""

    # -- applicability --

    def unavailable(self) -> str | None:
        """Why torch.distributed cannot run here, or None."""
        try:
            _dist()
        except ImportError:
            return "torch.distributed is not available in this torch build"
        return None

    def nccl_unavailable(self) -> str | None:
        return None if _dist().is_nccl_available() else "this torch build has no NCCL"

    # -- torch.multiprocessing (torch_mp) --

    def sharing_strategy(self) -> str:
        import torch.multiprocessing as tmp  # registers torch's reductions with ForkingPickler

        return tmp.get_sharing_strategy()

    def release_sent(self) -> None:
        """Frees what torch.multiprocessing keeps of CUDA tensors sent to a worker that has let go of
        them (``torch.cuda.ipc_collect``). Until then the producer holds each block in limbo, and at
        exit torch warns "Producer process has been terminated before all shared CUDA tensors
        released" although the worker released them."""
        torch = _torch()
        if torch.cuda.is_initialized():
            torch.cuda.ipc_collect()

    def register_reductions(self) -> None:
        """torch's reductions for the pipe (a tensor pickles as a handle, not as its bytes)."""
        import torch.multiprocessing  # noqa: F401

    def shared_memory_needed(self, obj: Any) -> int:
        """Bytes of shared memory torch.multiprocessing will create to send a CPU tensor: its whole
        storage, unless it is already shared."""
        if obj.is_cuda or obj.is_shared():
            return 0
        return int(obj.untyped_storage().nbytes())

    def storage_nbytes(self, obj: Any) -> int:
        return int(obj.untyped_storage().nbytes()) if hasattr(obj, "untyped_storage") else 0

    def sendable(self, obj: Any) -> Any:
        """What torch.multiprocessing sends for ``obj``: a CUDA tensor goes as an alias over the same
        memory with a storage of its own (a DLPack view). torch marks every CUDA storage it sends for
        good: the storage keeps a slot of torch's reference-count file until it is freed, and a
        producer that still holds it at exit warns "Producer process has been terminated before all
        shared CUDA tensors released" although the consumer let go (plain torch does so too). The
        alias is what gets marked; the parent drops it once sent, torch keeps the memory until the
        worker lets go (its limbo), and ``release_sent`` frees it once the worker has stopped. The
        user's tensor is never marked."""
        if not obj.is_cuda or (obj.requires_grad and not obj.is_leaf):
            return obj  # host memory has no such mark; torch's own refusal of a non-leaf stays
        return _alias(obj)

    def ipc_handle(self, obj: Any) -> str:
        """The CUDA IPC handle torch sends for ``obj`` (cudaIpcGetMemHandle of the caching
        allocator's segment), hex. torch counts each export as one more consumer of the block, so
        this one, which nobody receives, is counted back at once: else the block would never leave
        torch's limbo."""
        torch = _torch()
        shared = obj.untyped_storage()._share_cuda_()
        handle, counter_file, counter_offset = shared[1], shared[4], shared[5]
        if counter_file:
            torch.UntypedStorage._release_ipc_counter(counter_file, counter_offset, device=obj.device)
        return bytes(handle).hex()

    def unmoved_source(self, obj: Any, path: str) -> tuple[Any, str | None]:
        """What a comparison hands over by ``path``, and a note if it is not ``obj``: torch moves a
        CPU tensor's storage into shared memory when it is first sent (torch_mp), so that path
        gets a clone and the caller's tensor is left as it was."""
        if path != "torch_mp" or obj.is_cuda or obj.is_shared():
            return obj, None
        # A leaf as the tensor is: `clone()` of a leaf that requires grad is not a leaf, and
        # torch.multiprocessing refuses to send such a tensor, where it sends the caller's.
        clone = obj.detach().clone().requires_grad_(obj.requires_grad)
        return clone, "measured on a clone: torch.multiprocessing would move your tensor's storage into shared memory"

    # -- torch.distributed (gloo, nccl, nccl_socket) --

    def store(self, port: int, world: int, is_master: bool, timeout: float, host: str = "127.0.0.1") -> Any:
        """A TCPStore (``port`` 0: a free one); the master listens on every interface, the others
        reach it at ``host`` (loopback, or the address a remote peer reaches the master at)."""
        return _dist().TCPStore(host, port, world, is_master, timeout=timedelta(seconds=timeout),
                                wait_for_workers=False)

    def make_group(self, backend: str, port: int, rank: int, world: int, device: int | None, timeout: float,
                   is_master: bool, store: Any = None, host: str = "127.0.0.1", interface: str | None = None) -> Any:
        """A process group of its own (not torch.distributed's default one, which the user may own):
        a TCPStore (on loopback unless ``host``) and a gloo or NCCL backend object. ``interface``:
        the one gloo connects over (else its GLOO_SOCKET_IFNAME, else the hostname's address)."""
        dist = _dist()
        td = timedelta(seconds=timeout)
        if store is None:
            store = self.store(port, world, is_master, timeout, host)
        if backend == "gloo":
            if interface is not None:
                # A device for that interface, without setting GLOO_SOCKET_IFNAME in the caller's process.
                options = dist.ProcessGroupGloo._Options()
                options._timeout = td
                options._devices = [dist.ProcessGroupGloo.create_device(interface=interface)]
                return dist.ProcessGroupGloo(store, rank, world, options)
            return dist.ProcessGroupGloo(store, rank, world, td)
        if backend == "nccl":
            if not is_master:  # the worker works on its device; the parent's current device is the user's
                _torch().cuda.set_device(device)
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = td
            return dist.ProcessGroupNCCL(store, rank, world, options)
        raise gpushare_error("gpushare", f"unknown backend {backend!r}")

    def send(self, group: Any, obj: Any, peer: int, tag: int = 0) -> None:
        """Sends ``obj`` to ``peer`` and waits until its device has done so."""
        group.send([obj.contiguous()], peer, tag).wait()
        self.synchronize(obj)

    def abort(self, group: Any) -> None:
        """Aborts ``group``: its pending operations are abandoned, so that dropping it frees its sockets
        at once (a blocked ``wait()`` would hold them until the group's timeout)."""
        try:
            group.abort()
        except Exception:
            pass

    def recv(self, group: Any, buffer: Any, peer: int, tag: int = 0) -> None:
        group.recv([buffer], peer, tag).wait()

    # -- the worker's tensors and device --

    def empty(self, shape: tuple, dtype: str, device: int | None) -> Any:
        torch = _torch()
        return torch.empty(shape, dtype=getattr(torch, dtype), device=self._device(device))

    def ack(self, device: int | None) -> Any:
        """The one-element tensor a receiver sends back to acknowledge a handoff."""
        return _torch().zeros(1, device=self._device(device))

    def synchronize(self, obj: Any) -> None:
        if getattr(obj, "is_cuda", False):
            _torch().cuda.synchronize(obj.device)

    def synchronize_device(self, device: int | None) -> None:
        if device is not None:
            _torch().cuda.synchronize(f"cuda:{device}")

    def make_context(self, device: int) -> None:
        """This process's context on ``device`` (created by torch if needed)."""
        torch = _torch()
        torch.cuda.set_device(device)
        torch.cuda.init()
        torch.empty(1, device=f"cuda:{device}")

    def memory(self, device: int) -> dict:
        cuda = _torch().cuda
        return {"allocated": cuda.memory_allocated(device), "reserved": cuda.memory_reserved(device)}

    @staticmethod
    def _device(device: int | None) -> str:
        return "cpu" if device is None else f"cuda:{device}"

    def dtype_name(self, obj: Any) -> str:
        return str(obj.dtype).replace("torch.", "")


STEPS = TorchProcessSteps()
