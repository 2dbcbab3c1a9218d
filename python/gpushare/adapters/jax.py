"""JAX: arrays described from their attributes by the Rust core, ``jax.dlpack.from_dlpack``,
immutable arrays, and the x64 flag that decides whether 64-bit types narrow on import."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.adapters._cai import _dtype_code_bits
from gpushare.adapters.base import Adapter, TensorInfo, explained, probe_export
from gpushare.adapters.description import Attributes
from gpushare.exceptions import gpushare_error


class JaxAdapter(Adapter):
    name = "jax"
    calibrate_on = ("cpu", "cuda")
    import_calls = {"dlpack": "jax.dlpack.from_dlpack({x})"}
    to_numpy_call = "np.asarray({x})"
    from_numpy_call = "jax.numpy.asarray({a})"
    move_call = "jax.device_put({x}, jax.devices('gpu')[{ordinal}])"
    module = "jax"
    type_modules = ("jax", "jaxlib")
    tracks_allocator = True
    imports_cai = True
    immutable = True
    accepts_capsules = False  # removed in JAX 0.7.2
    import_settles_later = True  # the narrowing kernel of 64-bit types without x64
    queues_host_work = True  # its CPU client copies an array it cannot view after the call returned
    cai_import_orders = False  # measured on an H100: read the values from before the queued work
    dlpack_import_waits = True  # measured: its DLPack import waits on the host for the producer's queue
    keep_64_bit_fix = "let the target keep 64-bit types (JAX: jax_enable_x64)"

    def pip_name(self) -> str:
        # What to install: the distribution that provides the module, and the variant a GPU needs.
        return 'jax (for an NVIDIA GPU: "jax[cuda12]" or "jax[cuda13]")'

    def is_array(self, obj: Any) -> bool:
        jax = sys.modules.get("jax")
        return jax is not None and isinstance(obj, jax.Array)

    def device(self, obj: Any) -> str:
        devices = obj.devices()
        return repr(next(iter(devices))) if len(devices) == 1 else repr(obj.sharding)

    # JAX's __dlpack__ costs ~3 µs; the same facts are attributes of the array, which the Rust core
    # reads by this recipe. It asks the three methods below once per device, layout and dtype;
    # anything they decline (sharded arrays, tiled or sub-byte layouts, other platforms, extended
    # dtypes) goes through DLPack. The PjRt layout behind `format.layout` (~1.2 µs) keys the
    # layout's answer: it is hashable and compares by value ("{1,0}").
    describe_by = Attributes(
        device="sharding._device", device_words="_describe_device",
        layout="_pjrt_layout", layout_order="_layout_order", dtype_code_bits="_dtype_code_bits",
        pointer="unsafe_buffer_pointer", freed="is_deleted", ready="is_ready", wait="block_until_ready",
    )
    _platform_codes: ClassVar[dict[str, int]] = {"cpu": 1, "gpu": 2, "cuda": 2}

    def inspect(self, obj: Any) -> TensorInfo:
        info = _native.share.describe_declared(obj, self)
        if info is not None:
            return info
        # The attribute route declines deleted arrays (reading a deleted array's layout crashes the
        # process); JAX's own calls raise on them, and so does gpushare, before touching it.
        if obj.is_deleted():
            raise explained(
                "conversion", "jax",
                f"the array was deleted (x.delete() freed its buffer; shape {obj.shape}, dtype {obj.dtype}), "
                "so there is no memory to share",
                "share a live array: recreate it, or keep a reference instead of deleting it",
            )
        # JAX's __dlpack__ waits for a pending result holding the GIL, which the computation's end
        # can need (the core's attribute recipe, binding/declared.rs, says how it deadlocked): wait here,
        # where JAX releases it.
        if not obj.is_ready():
            obj.block_until_ready()
        return super().inspect(obj)

    def _describe_device(self, device: Any) -> tuple[str, int, int] | None:
        """``(words, DLPack device type, id)`` of a device the attribute route describes."""
        code = self._platform_codes.get(device.platform)
        return None if code is None else (repr(device), code, device.id)

    @staticmethod
    def _layout_order(obj: Any) -> tuple[int, ...] | None:
        """The layout's major-to-minor order; () for row-major; None for tiled or sub-byte layouts."""
        layout = obj.format.layout
        if layout.tiling or layout.sub_byte_element_size_in_bits:
            return None
        order = tuple(layout.major_to_minor)
        return () if order == tuple(range(len(order))) else order

    @staticmethod
    def _dtype_code_bits(dtype: Any) -> tuple[int, int] | tuple[()]:
        return _dtype_code_bits(dtype)

    def from_dlpack(self, obj: Any) -> Any:
        return self.dlpack_importer()(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        self.started()
        import jax.dlpack

        return jax.dlpack.from_dlpack

    def started(self) -> Any:
        """JAX with its backends started. JAX starts them on first use and makes the last GPU current
        then: inside the first ``from_dlpack`` of a two-GPU machine, after gpushare checked which
        device was current, so PyTorch's export refused the tensor on cuda:0 ("not on the current
        CUDA device"; bench_advice's calibration on 2x H200). Started before the handoff, the
        current-device guard sees what JAX did. The conversion into JAX starts them anyway."""
        jax = self.load()
        if not self.runtime_initialized():
            jax.devices()
        return jax

    def from_capsule(self, capsule: Any) -> Any:
        raise gpushare_error(
            "path_not_applicable",
            "JAX no longer imports raw capsules (removed in 0.7.2); use path='dlpack'"
        )

    def from_cai(self, obj: Any) -> Any:
        return self.load().numpy.asarray(obj)

    def data_pointer(self, obj: Any) -> int:
        return int(obj.unsafe_buffer_pointer())  # jax arrays have no __cuda_array_interface__ of their own

    def x64_enabled(self) -> bool:
        """``jax.config.jax_enable_x64`` when JAX is already imported; False otherwise (JAX's default),
        or when the ``JAX_ENABLE_X64`` environment variable says so for a JAX not imported yet."""
        jax = sys.modules.get("jax")
        if jax is not None:
            try:
                return bool(jax.config.jax_enable_x64)
            except AttributeError:
                return False
        return os.environ.get("JAX_ENABLE_X64", "").strip().lower() in ("1", "true", "yes", "on")

    def rule_facts(self) -> dict[str, Any]:
        # Rule 1: a 64-bit dtype narrows into JAX unless x64 is on, which can change at any time.
        return {"keeps_64_bit": self.x64_enabled}

    def synchronize(self, obj: Any) -> None:
        obj.block_until_ready()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        jax = self.load()
        return jax.device_put(array, jax.devices("cpu")[0] if on_host else jax.devices("gpu")[ordinal])

    moves_current_device = "jax is imported: JAX makes the last GPU current when its backends start"

    def _jax_device(self, on_host: bool, ordinal: int) -> Any:
        jax = self.load()
        return jax.devices("cpu")[0] if on_host else jax.devices("gpu")[ordinal]

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        self.started()
        import jax.dlpack

        return jax.dlpack.from_dlpack(obj, device=self._jax_device(on_host, ordinal), copy=True)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return self.load().device_put(obj, self._jax_device(on_host, ordinal))

    def has_gpu(self) -> bool:
        try:
            return any(d.platform == "gpu" for d in self.load().devices())
        except RuntimeError:
            return False

    def describe_runtime(self, info: Any, module: Any) -> None:
        dlpack = getattr(module, "dlpack", None)
        info.from_dlpack = hasattr(dlpack, "from_dlpack")
        if self.runtime_initialized():
            info.dlpack_export, info.dlpack_export_source = probe_export(module.numpy.zeros(1)), "probed"
            info.gpu_devices = [str(d) for d in module.local_devices() if d.platform in ("gpu", "cuda", "rocm")]
        else:
            # JAX's DLPACK_VERSION is (0, 8): legacy capsules only.
            info.dlpack_export, info.dlpack_export_source = "legacy", "documented"
            info.notes.append("backends not initialised yet (first use preallocates 75% of GPU memory by default)")
        try:
            if not module.config.jax_enable_x64:
                info.notes.append("x64 off: 64-bit arrays are copied to 32-bit on import")
        except AttributeError:
            pass

    def runtime_initialized(self) -> bool:
        """JAX has created its backends (on the first array or ``jax.devices()``). Before that,
        asking for devices would create them, and on a GPU preallocate 75% of its memory."""
        bridge = sys.modules.get("jax._src.xla_bridge")
        return bool(getattr(bridge, "_backends", None))

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        jax = sys.modules.get("jax")
        if jax is None or not self.runtime_initialized():
            return None
        for device in jax.local_devices():
            if device.platform not in ("gpu", "cuda", "rocm"):
                continue
            if getattr(device, "local_hardware_id", device.id) != ordinal:
                continue
            stats = device.memory_stats() or {}
            keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved")
            return {key: int(stats[key]) for key in keys if key in stats}
        return None

