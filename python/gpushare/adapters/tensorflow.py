"""TensorFlow: legacy capsules only (``tf.experimental.dlpack``), no stream in either direction,
immutable tensors, and dtypes whose export would abort the process."""

from __future__ import annotations

import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.adapters._cai import _CudaArrayView
from gpushare.adapters.base import Adapter, TensorInfo, explained
from gpushare.adapters.description import ExportedCapsule
from gpushare.exceptions import gpushare_error


class TensorFlowAdapter(Adapter):
    name = "tf"
    calibrate_on = ("cpu", "cuda")
    # TensorFlow takes a capsule, not an object with __dlpack__ (accepts_objects): no dlpack path.
    import_calls = {"capsule": "tf.experimental.dlpack.from_dlpack({x}.__dlpack__())"}
    to_numpy_call = "{x}.numpy()"
    from_numpy_call = "tf.convert_to_tensor({a})"
    module = "tensorflow"
    aliases = ("tensorflow",)
    crashes_beside = ("paddle",)  # PaddlePaddle 3.3 with TensorFlow 2.20
    # absl's "All log messages before absl::InitializeLog()…", oneDNN and CPU-feature notes, written
    # by C++ at import and first device query, whatever TF_CPP_MIN_LOG_LEVEL says.
    noisy_start = True
    type_modules = ("tensorflow", "keras")
    distribution_names = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos")
    tracks_allocator = True
    immutable = True
    accepts_objects = False  # tf.experimental.dlpack.from_dlpack takes capsules only
    # tf.Tensor.__dlpack__ raises on any stream ("does not support DLPack export with a non-None
    # stream"), and from_dlpack takes none; TensorFlow runs its GPU work on streams of its own,
    # which it does not expose (docs/gpu-results.md).
    export_takes_stream = False
    import_takes_stream = False
    exports_cai = False
    cai_view = True  # a tensor in CUDA memory, described for Numba by gpushare (_CudaArrayView)
    # What inspect() does, done by the core without its Python (every share into or out of
    # TensorFlow describes a tensor): the dtype checked before the export that would abort on it,
    # the capsule read, the device as TensorFlow names it.
    describe_by = ExportedCapsule(exporter="capsule_exporter", device="device", guard="_datatype_enum",
                                  declines="_UNEXPORTABLE")

    def pip_name(self) -> str:
        return 'tensorflow (or tensorflow-cpu; "tensorflow[and-cuda]" for an NVIDIA GPU)'

    def is_array(self, obj: Any) -> bool:
        tf = sys.modules.get("tensorflow")
        return tf is not None and isinstance(obj, tf.Tensor) and hasattr(obj, "numpy")

    def inspect_capsule(self, obj: Any) -> Any:
        self._refuse_unexportable(obj)
        return self.to_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # The base's steps in one frame (every share into or out of TensorFlow describes a tensor
        # this way, and the nested calls were most of its cost): the dtype asked by TensorFlow's C
        # method before the export that would abort on it, the device name as TensorFlow gives it.
        datatype = getattr(obj, "_datatype_enum", None)
        if datatype is None or datatype() in self._UNEXPORTABLE:
            self._refuse_unexportable(obj)
        export = TensorFlowAdapter._to_dlpack or self._dlpack_functions()[0]
        return TensorInfo.from_capsule(export(obj), self.name, obj.device, self.immutable)

    # DT_STRING, DT_RESOURCE, DT_VARIANT: TensorFlow's own DLPack export aborts the whole process on
    # them (`Check failed: DataTypeCanUseMemcpy(dtype())`, tensor.cc), so gpushare checks the dtype
    # before calling it. Each: (what the tensor is, the fix).
    _UNEXPORTABLE: ClassVar[dict[int, tuple[str, str]]] = {
        7: (
            "a tf.string tensor holds variable-length byte strings, not numbers: DLPack has no form for it",
            "decode it to numbers first (tf.strings.to_number, tf.strings.unicode_decode, a lookup table), "
            "or take x.numpy() for a NumPy object array",
        ),
        20: (
            "a tf.resource tensor is a handle to a variable (tf.Variable(...).handle), not the variable's values",
            "share the variable's values: v.read_value() or tf.convert_to_tensor(v)",
        ),
        21: (
            "a tf.variant tensor (a tf.data dataset, a TensorList) holds TensorFlow objects, not an array",
            "share the tensors it contains (iterate the dataset, or tf.raw_ops.TensorListStack)",
        ),
    }

    def _refuse_unexportable(self, obj: Any) -> None:
        known = self._UNEXPORTABLE.get(obj.dtype.as_datatype_enum)
        if known is not None:
            reason, fix = known
            raise explained(
                "unsafe_input", "tf",
                f"{reason}; TensorFlow's DLPack export would abort the process on it (Check failed: "
                f"DataTypeCanUseMemcpy), so gpushare does not call it",
                fix,
            )

    # tf.experimental.dlpack's functions, looked up once: both sit on every TensorFlow handoff.
    _to_dlpack: ClassVar[Any] = None
    _from_dlpack: ClassVar[Any] = None

    def _dlpack_functions(self) -> tuple[Any, Any]:
        if TensorFlowAdapter._to_dlpack is None:
            dlpack = self.load().experimental.dlpack
            TensorFlowAdapter._from_dlpack = dlpack.from_dlpack
            TensorFlowAdapter._to_dlpack = dlpack.to_dlpack
        return TensorFlowAdapter._to_dlpack, TensorFlowAdapter._from_dlpack

    def to_capsule(self, obj: Any) -> Any:
        return (TensorFlowAdapter._to_dlpack or self._dlpack_functions()[0])(obj)

    def from_dlpack(self, obj: Any) -> Any:
        raise gpushare_error(
            "path_not_applicable",
            "TensorFlow's from_dlpack takes legacy capsules only; use path='capsule' (auto does)"
        )

    def from_capsule(self, capsule: Any) -> Any:
        return (TensorFlowAdapter._import_capsule or self.capsule_importer())(capsule)

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self._dlpack_functions()[0]

    # Built once: it sits on every handoff into TensorFlow.
    _import_capsule: ClassVar[Any] = None

    def capsule_importer(self) -> Callable[[Any], Any]:
        # TensorFlow takes only "dltensor" capsules; CuPy 14 exports versioned ones from toDlpack().
        # A versioned capsule is forwarded as a legacy one (same tensor, no copy); a legacy capsule
        # passes through untouched.
        if TensorFlowAdapter._import_capsule is None:
            from_dlpack = self._dlpack_functions()[1]
            legacy = _native.share.legacy_capsule

            def import_capsule(capsule: Any) -> Any:
                return from_dlpack(legacy(capsule))

            TensorFlowAdapter._import_capsule = import_capsule
        return TensorFlowAdapter._import_capsule

    def export_without_stream(self) -> str:
        # TensorFlow's export waits for the work that produces the tensor before it returns
        # (measured on an H100: a 57 ms queue of TensorFlow kernels, exported at once, returned
        # after 57 ms with finished values), so the consumer has nothing to wait for.
        return (
            "TensorFlow's export waits for the tensor's queued work before it returns, and takes no stream; "
            "gpushare passed none, so the consumer reads finished values"
        )

    def stream_free_export(self, obj: Any) -> Any:
        return _StreamFreeExport(obj)

    def cuda_array_view(self, obj: Any) -> Any:
        return _CudaArrayView.of(self.inspect(obj), obj, self.name)

    def synchronize(self, obj: Any) -> None:
        # TensorFlow's streams are its own: SyncDevice on the tensor's device waits for them (what
        # tf.test.experimental.sync_devices does for every device; ~10 µs idle on an H100).
        if "GPU" not in obj.device:
            return
        tf = self.load()
        try:
            from tensorflow.python.ops import gen_sync_ops
        except ImportError:  # private module moved: the public, all-device form
            tf.test.experimental.sync_devices()
            return
        with tf.device(obj.device):
            gen_sync_ops.SyncDevice()

    def to_numpy(self, obj: Any) -> Any:
        return obj.numpy()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        tf = self.load()
        with tf.device("/CPU:0" if on_host else f"/GPU:{ordinal}"):
            return tf.convert_to_tensor(array)

    def has_gpu(self) -> bool:
        return bool(self.load().config.list_physical_devices("GPU"))

    def describe_runtime(self, info: Any, module: Any) -> None:
        try:
            info.from_dlpack = hasattr(module.experimental.dlpack, "from_dlpack")
        except AttributeError:
            info.from_dlpack = False
        # TF exports "dltensor" capsules only, and its export syncs the whole device: not probed.
        info.dlpack_export, info.dlpack_export_source = "legacy", "documented"
        info.notes.append("imports capsules only: use the capsule path")
        if self.runtime_initialized():
            info.gpu_devices = [d.name for d in module.config.list_logical_devices("GPU")]
        else:
            info.notes.append("runtime not initialised yet (maps nearly all GPU memory unless memory growth is on)")

    def runtime_initialized(self) -> bool:
        """TF has initialised its runtime (devices exist). Before that, listing devices would
        initialise it, and without memory growth TF maps nearly all GPU memory."""
        context = sys.modules.get("tensorflow.python.eager.context")
        try:
            return bool(context is not None and context.context()._initialized)
        except Exception:
            return False

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        tf = sys.modules.get("tensorflow")
        if tf is None or not self.runtime_initialized():
            return None
        # TF's GPU:N is a logical index: it equals the CUDA ordinal unless set_visible_devices was used.
        if ordinal >= len(tf.config.list_logical_devices("GPU")):
            return None
        info = tf.config.experimental.get_memory_info(f"GPU:{ordinal}")
        return {"current": int(info["current"]), "peak": int(info["peak"])}


class _StreamFreeExport:
    """Stands in for an array whose ``__dlpack__`` refuses streams (TensorFlow's) in a consumer's
    ``from_dlpack``: torch, CuPy and JAX pass their stream for CUDA memory, and the array's own
    export would raise. This one hands over the legacy capsule of ``__dlpack__()`` instead.
    That is safe only because TensorFlow's export waits for the work that produces the tensor
    before it returns (to_dlpack's documented guarantee, measured on an H100): the consumer's
    stream has nothing left to wait for. A copy or another device cannot be asked for here."""

    __slots__ = ("_array",)

    def __init__(self, array: Any):
        self._array = array

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if copy:
            raise BufferError("TensorFlow's DLPack export cannot make a copy (copy=True)")
        if dl_device is not None and tuple(dl_device) != tuple(self._array.__dlpack_device__()):
            raise BufferError(f"TensorFlow's DLPack export cannot move the tensor to {tuple(dl_device)}")
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self._array.__dlpack_device__()
