"""PyTorch: the DLPack C exchange API for inspection, ``torch.from_dlpack`` and
``torch.utils.dlpack`` for capsules, ``__cuda_array_interface__`` through ``torch.as_tensor``."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters.base import Adapter, TensorInfo, explained, probe_export, versioned_capsule
from gpushare.exceptions import GpushareError, foreseen


class TorchAdapter(Adapter):
    name = "torch"
    views_gpushare_buffers = True  # from_dlpack of gpushare's buffer: a view, a stream wait at most
    calibrate_on = ("cpu", "cuda")
    import_calls = {
        "dlpack": "torch.from_dlpack({x})",
        "capsule": "torch.utils.dlpack.from_dlpack({x}.__dlpack__())",
        "cai": "torch.as_tensor({x}, device='cuda')",
    }
    to_numpy_call = "{x}.numpy(force=True)"
    from_numpy_call = "torch.from_numpy({a})"
    move_call = "{x}.to('{device}', non_blocking=True)"
    module = "torch"
    aliases = ("pytorch", "pt")
    type_modules = ("torch",)
    copy_by_producer = True  # torch.from_dlpack(x, device=, copy=True) asks x.__dlpack__(copy=True)
    tracks_allocator = True
    imports_cai = True
    imports_readonly_cai = False  # torch.as_tensor: "the read only flag is not supported, should always be False"
    worker_receives = ("ipc", "shm", "torch_mp", "nccl", "nccl_socket", "gloo", "remote")
    process_paths = ("torch_mp", "nccl", "nccl_socket", "gloo", "remote")
    process_modules = ("torch.multiprocessing", "torch.distributed")
    shares_host_memory_across_processes = True  # torch_mp: storage moved into shared memory once
    moving_process_paths = ("torch_mp",)
    describe_by = "exchange_api"  # from 2.10: one C call fills a DLTensor, ~20x cheaper than __dlpack__
    source_flags = ("requires_grad", "is_conj()", "is_neg()")  # what check_source() reads

    def is_array(self, obj: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(obj, torch.Tensor)

    def inspect_capsule(self, obj: Any) -> Any:
        if obj.requires_grad:
            obj = obj.detach()  # inspection only: the address is the same
        if obj.is_cuda:
            # Tensor.__dlpack__ refuses a tensor off the current CUDA device ("Can't export tensors on
            # a different CUDA device index"), because it orders the export on the current device's
            # stream. Inspection reads the layout and orders nothing, so it asks torch's C export,
            # which has no such check: a tensor on cuda:0 is described while JAX made cuda:1 current.
            C = sys.modules["torch"]._C
            export = getattr(C, "_to_dlpack_versioned", None) or C._to_dlpack
            return export(obj)
        return versioned_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # The exchange API (describe_by) where this PyTorch has it, else a capsule; a tensor it cannot
        # export (sparse, meta, nested) is refused in a sentence instead of PyTorch's backtrace.
        try:
            info = _native.share.describe_declared(obj, self)
            return info if info is not None else super().inspect(obj)
        except GpushareError:
            raise
        except Exception as e:
            refusal = self._unexportable(obj, f"{type(e).__name__}: {e}")
            if refusal is None:
                raise
            raise refusal from e

    @staticmethod
    def _unexportable(obj: Any, framework_error: str) -> Exception | None:
        """Why torch could not export ``obj`` (its layout or device has no DLPack form), in a
        sentence instead of PyTorch's message and C++ backtrace; None for other failures."""
        torch = sys.modules["torch"]
        if obj.is_nested:
            reason = "a nested tensor holds tensors of different shapes; DLPack describes one strided array"
            fix = "share its components (x.unbind()) or a padded tensor (x.to_padded_tensor(0.0))"
        elif obj.layout != torch.strided:
            reason = f"a sparse tensor ({obj.layout}) stores indices and values, not one strided array; DLPack has no sparse form"
            fix = "share x.to_dense(), or its parts (x.indices() and x.values() for COO)"
        elif obj.is_meta:
            reason = "a tensor on the meta device has a shape and dtype but no memory to share"
            fix = "materialise it first (torch.empty_like(x, device='cpu'), or load its data)"
        else:
            return None
        return explained("conversion", "torch", reason, fix, framework_error)

    def check_source(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        if obj.requires_grad and not self._exports_with_grad(target, path):
            raise foreseen(explained(
                "conversion", "torch's DLPack export",
                "tensor requires grad (Tensor.__dlpack__ refuses it: \"Can't export tensors that require gradient\")",
                "x.detach(), which views the same memory",
            ))
        self.check_view_bits(obj)

    @staticmethod
    def _exports_with_grad(target: str | None, path: str | None) -> bool:
        """Whether the handoff's own call exports a tensor that requires grad (torch 2.15, measured):
        Tensor.__dlpack__ refuses it, torch.utils.dlpack.to_dlpack (the capsule path's export)
        exports it as is, and gpushare's own copies read a detached view of the same memory. A
        target whose from_dlpack falls back to the producer's exporter (MLX's) takes it too."""
        if path in ("capsule", "copy", "pinned", "p2p", "shared"):
            return True
        if path == "dlpack" and target is not None:
            from gpushare.adapters import ADAPTERS

            adapter = ADAPTERS.get(target)
            return bool(adapter is not None and adapter.exports_by_producer_fallback)
        return False

    def check_view_bits(self, obj: Any) -> None:
        # Lazy conjugation and negation are bits on the tensor that DLPack cannot carry. PyTorch
        # refuses to export a conjugate view; a negative view it exports as is, and the target
        # reads every value with the wrong sign.
        if obj.is_conj():
            raise foreseen(explained(
                "conversion", "torch",
                "the tensor's conjugate bit is set (x.conj() is a lazy view): DLPack cannot carry the bit, "
                "and PyTorch refuses to export such a tensor",
                "share x.resolve_conj(), a conjugated copy",
            ))
        if obj.is_neg():
            raise foreseen(explained(
                "unsafe_input", "torch",
                "the tensor's negative bit is set (a lazy negation such as torch._neg_view(x) or x.conj().imag): "
                "DLPack cannot carry the bit, so the target would read every value with the wrong sign",
                "share x.resolve_neg(), a negated copy",
            ))

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def from_capsule(self, capsule: Any) -> Any:
        return self.load().utils.dlpack.from_dlpack(capsule)

    def to_capsule(self, obj: Any) -> Any:
        return self.load().utils.dlpack.to_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.to_dlpack

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.from_dlpack

    def from_cai(self, obj: Any) -> Any:
        torch = self.load()
        # "cuda" is the current device, which another framework may have changed: the memory's own
        # device (the driver's word) keeps the handoff a view instead of a copy to the current GPU.
        device = "cuda"
        if torch.cuda.device_count() > 1:
            attrs = _native.cuda.pointer_attributes(obj.__cuda_array_interface__["data"][0])
            if attrs is not None and attrs.get("memory_type") == "device" and attrs.get("device_ordinal", -1) >= 0:
                device = f"cuda:{attrs['device_ordinal']}"
        return torch.as_tensor(obj, device=device)

    def synchronize(self, obj: Any) -> None:
        if obj.is_cuda:
            self.load().cuda.synchronize(obj.device)

    def current_stream(self, obj: Any) -> int | None:
        if not obj.is_cuda:
            return None
        torch = self.load()
        # The raw handle without building a torch.cuda.Stream (9 µs on an H100 host against ~1):
        # what torch's own compiler backends call. Public form where this PyTorch lacks it.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return int(raw(obj.get_device()))  # the ordinal as an int, without a torch.device object
        return int(torch.cuda.current_stream(obj.device).cuda_stream)

    def rule_facts(self) -> dict[str, Any]:
        return {"current_device": self._current_device}

    @staticmethod
    def _current_device() -> int | None:
        """PyTorch exports only from its current CUDA device: the device it would export from."""
        torch = sys.modules.get("torch")
        try:
            return int(torch.cuda.current_device()) if torch is not None else None
        except Exception:  # no CUDA initialised: nothing to predict from
            return None

    def to_numpy(self, obj: Any) -> Any:
        # .numpy() refuses lazy conjugate and negative views; the host route copies anyway.
        return obj.detach().cpu().resolve_conj().resolve_neg().numpy()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        torch = self.load()
        if on_host or array.flags.writeable:
            t = torch.from_numpy(array)
            return t if on_host else t.to(f"cuda:{ordinal}")
        # A read-only host array (JAX's np.asarray view) on its way to the GPU: the CPU tensor lives
        # only until the copy, so torch's "not writable" UserWarning would be noise in the user's
        # cell (it showed under `gpushare.calibrate` in notebook 08).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
            return torch.from_numpy(array).to(f"cuda:{ordinal}")

    def ones(self, n: int, dtype: str, on_host: bool, ordinal: int) -> Any:
        torch = self.load()
        return torch.ones(n, dtype=getattr(torch, dtype), device="cpu" if on_host else f"cuda:{ordinal}")

    def has_gpu(self) -> bool:
        return bool(self.load().cuda.is_available())

    off_device_failure = (
        "torch's __dlpack__ refuses a tensor that is not on the current device when the consumer passes a "
        "stream (\"Can't export tensors on a different CUDA device index\")"
    )

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        ordinal = obj.get_device()  # -1 on the host
        if ordinal < 0:
            return None
        current = self.current_ordinal()
        return None if current == ordinal else (ordinal, current, self.device_made_current(ordinal))

    def current_ordinal(self) -> int | None:
        torch = sys.modules["torch"]
        # A tensor on a GPU means torch's CUDA state is initialised: its raw getter skips
        # current_device()'s _lazy_init (asked on every handoff of a CUDA tensor).
        return int(getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)())

    def device_made_current(self, ordinal: int) -> Any:
        return self.load().cuda.device(ordinal)

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return self.load().from_dlpack(obj, device="cpu" if on_host else f"cuda:{ordinal}", copy=True)

    current_device_setter = "torch.cuda.set_device"

    def detached(self, obj: Any) -> Any:
        return obj.detach() if obj.requires_grad else obj

    def host_memory_shared(self, obj: Any) -> bool:
        # `share_memory_()` (or a tensor received from another process): torch_mp moves nothing.
        return not obj.is_cuda and obj.is_shared()

    def in_device_memory(self, obj: Any) -> bool:
        return not obj.is_cpu  # 0.1 µs; torch's __dlpack_device__ costs 3.5 (torch 2.15)

    def check_copying_export(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        # With copy=True torch's export negates into the copy (torch 2.15: from_dlpack(neg_view,
        # copy=True) reads the right signs); it still refuses grad and the conjugate bit.
        if obj.is_neg() and not obj.is_conj() and not obj.requires_grad:
            return
        self.check_source(obj, target, path)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return obj.detach().to("cpu" if on_host else f"cuda:{ordinal}")

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        info.dlpack_export, info.dlpack_export_source = probe_export(module.zeros(1)), "probed"
        # is_available() counts devices without creating a CUDA context (torch keeps fork-safety).
        if module.cuda.is_available():
            info.gpu_devices = [f"cuda:{i}" for i in range(module.cuda.device_count())]
        else:
            info.gpu_devices = []
        if not module.cuda.is_initialized():
            info.notes.append("CUDA not initialised yet (no context, nothing allocated)")

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        # is_initialized() is False until torch has created its CUDA state; asking for figures
        # before would return zeros at best.
        if cuda is None or not cuda.is_initialized() or ordinal >= cuda.device_count():
            return None
        # The nested form comes straight from the allocator: memory_allocated() and friends each
        # flatten it in Python first (~70 µs apiece on an H200 host); the C call itself skips
        # memory_stats_as_nested_dict's device-index parsing, which the ledger pays twice a share.
        stats_of = getattr(torch._C, "_cuda_memoryStats", None) or cuda.memory_stats_as_nested_dict
        stats = stats_of(ordinal)
        allocated, reserved = stats.get("allocated_bytes", {}).get("all", {}), stats.get("reserved_bytes", {}).get("all", {})
        return {
            "allocated": int(allocated.get("current", 0)),
            "reserved": int(reserved.get("current", 0)),
            "peak_allocated": int(allocated.get("peak", 0)),
        }

    # -- Across processes: torch.multiprocessing and torch.distributed ----------
    def process_steps(self) -> Any:
        from gpushare.adapters.torch_process import STEPS

        return STEPS

    def host_view(self, obj: Any) -> Any:
        return obj.detach().numpy()
