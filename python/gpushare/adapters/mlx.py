"""MLX (``mlx.core``): ``__dlpack__`` takes ``max_version``, ``dl_device`` and ``copy`` yet hands out
legacy capsules (measured: 0.32.4), ``mx.from_dlpack`` takes objects and capsules, arrays are
immutable (``a[i] = v`` makes a new buffer), and the CPU build's import always copies."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare.adapters.base import Adapter, explained, probe_export, versioned_capsule
from gpushare.exceptions import gpushare_error


class MlxAdapter(Adapter):
    name = "mlx"
    module = "mlx.core"
    type_modules = ("mlx",)
    distribution_names = ("mlx",)
    # An update (``a[0] = 1``, measured) makes a new buffer and rebinds the array: a view handed to
    # another framework never sees it, and MLX never writes through memory it shares.
    immutable = True
    exports_cai = False  # no __cuda_array_interface__, neither way (0.32.4)
    copy_by_producer = True  # mx.from_dlpack passes copy= to the producer's __dlpack__
    # Where the producer's __dlpack__ refuses, MLX's binding (nanobind) exports with the producer's
    # own to_dlpack: mx.from_dlpack(torch.ones(3, requires_grad=True)) works (measured: 0.32.4,
    # torch 2.15), as its CPU build's copy.
    exports_by_producer_fallback = True
    tracks_allocator = True

    def pip_name(self) -> str:
        return '"mlx[cpu]" on Linux (the core wheel alone has no backend), "mlx[cuda13]" for an NVIDIA GPU'

    def is_array(self, obj: Any) -> bool:
        mx = sys.modules.get("mlx.core")
        return mx is not None and isinstance(obj, mx.array)

    def device(self, obj: Any) -> str:
        kind, ordinal = obj.__dlpack_device__()
        return "cpu" if int(kind) == 1 else f"cuda:{int(ordinal)}"

    def inspect_capsule(self, obj: Any) -> Any:
        # The export evaluates a lazy array first (its buffer exists only then).
        return versioned_capsule(obj)

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def from_capsule(self, capsule: Any) -> Any:
        return self.load().from_dlpack(capsule)

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def synchronize(self, obj: Any) -> None:
        mx = self.load()
        mx.eval(obj)
        mx.synchronize()

    def to_numpy(self, obj: Any) -> Any:
        import numpy as np

        if "bfloat16" in str(obj.dtype):
            try:
                import ml_dtypes
            except ImportError:
                raise explained("conversion", "mlx", "NumPy has no bfloat16 without ml_dtypes, and MLX's buffer "
                                "protocol has no format for it", "pip install ml_dtypes, or cast to float32 first "
                                "(x.astype(mx.float32))") from None
            return np.asarray(obj.view(self.load().uint16)).view(ml_dtypes.bfloat16)
        # MLX's buffer says "Q"/"q" for 64-bit integers, which torch.from_numpy refuses ("numpy.ulonglong"):
        # the same bytes viewed as NumPy's own uint64/int64.
        out = np.asarray(obj)
        return out.view(np.dtype(out.dtype.name)) if out.dtype.kind in "iu" else out

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        mx = self.load()
        name = array.dtype.name
        if name == "complex128":
            raise explained("conversion", "mlx", "MLX has no complex128", "cast to complex64 first")
        dtype = getattr(mx, "bool_" if name == "bool" else name, None)
        if name == "bfloat16":
            return mx.array(array.view("uint16")).view(mx.bfloat16)
        if dtype is None:
            raise explained("conversion", "mlx", f"MLX has no {name} arrays", "cast to float32 first")
        device = mx.cpu if on_host else mx.gpu
        if not on_host and not self.has_gpu():
            raise gpushare_error("path_not_applicable", "this MLX build has no GPU backend: install mlx[cuda13]")
        with mx.stream(device):
            # mx.array(float64 NumPy) narrows to float32 unless the dtype is given.
            out = mx.array(array, dtype=dtype)
            mx.eval(out)
        return out

    def has_gpu(self) -> bool:
        cuda = getattr(self.load(), "cuda", None)
        return bool(cuda is not None and cuda.is_available())

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        info.dlpack_export, info.dlpack_export_source = probe_export(module.zeros(1)), "probed"
        cuda = getattr(module, "cuda", None)
        info.gpu_devices = ["cuda:0"] if cuda is not None and cuda.is_available() else []
        if not info.gpu_devices:
            info.notes.append("CPU build: mx.from_dlpack copies every import (\"Cannot import a CPU array without a copy\")")

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        mx = sys.modules.get("mlx.core")
        cuda = getattr(mx, "cuda", None)
        if mx is None or cuda is None or ordinal != 0 or not cuda.is_available():
            return None
        return {"active": int(mx.get_active_memory()), "peak": int(mx.get_peak_memory()),
                "cache": int(mx.get_cache_memory())}
