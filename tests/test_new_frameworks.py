"""MLX, NVIDIA Warp, cuda.core and PyCUDA (issue 23), each added through its adapter and its rules
alone: real shares on the CPU with the installed frameworks (skipped by name where one is not
installed), and PyCUDA, which cannot be built without the CUDA toolkit, against a stand-in that
speaks ``__cuda_array_interface__`` with PyCUDA's GPUArray layout."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

import gpushare
from gpushare import _native, paths
from gpushare.adapters import ADAPTERS, adapter_of
from gpushare.exceptions import ConversionError


def need(module: str):
    try:
        return pytest.importorskip(module, reason=f"framework not installed: {module}")
    except pytest.skip.Exception:
        raise


# -- MLX ---------------------------------------------------------------------------------------


def test_mlx_exports_share_and_its_cpu_import_copies_with_the_reason():
    mx = need("mlx.core")
    torch = need("torch")
    a = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    r = gpushare.share(a, "torch")
    assert (r.path, r.verdict, r.prediction["verdict"]) == ("dlpack", "shared", "shared")
    r = gpushare.share(torch.arange(4.0), "mlx")
    assert (r.verdict, r.prediction["verdict"]) == ("copied", "copied")
    assert "copies every array" in r.prediction["reason"]
    # mx.from_dlpack narrows 64-bit floats: the prediction says so rather than the generic copy.
    r = gpushare.share(np.arange(4.0), "mlx")
    assert r.verdict == "copied" and "float64 → float32" in r.prediction["reason"]
    assert str(r.value.dtype) == "mlx.core.float32"


def test_mlx_negative_strides_fail_as_predicted():
    mx = need("mlx.core")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    with pytest.raises(ConversionError) as e:
        gpushare.share(a, "mlx")
    assert e.value.predicted.verdict == "failed" and "negative strides" in e.value.predicted.reason
    del mx


def test_an_mlx_slice_with_a_byte_offset_is_refused_into_paddle_and_warp():
    """MLX exports a slice as the allocation plus a byte_offset; Paddle's and Warp's imports drop
    the offset and would view the bytes before the slice: gpushare refuses, with the fix."""
    mx = need("mlx.core")
    a = mx.arange(25, dtype=mx.float32)[1:]
    assert _native.TensorInfo.from_capsule(a.__dlpack__(), "mlx", "cpu", False).byte_offset == 4
    for target in ("warp", "paddle"):
        if not ADAPTERS[target].installed():
            continue
        # Paddle is never imported beside TensorFlow (the two crash together): gpushare refuses to
        # import it into a test process that already holds TensorFlow, and says so instead.
        if any(m in sys.modules for m in ADAPTERS[target].crashes_beside):
            continue
        with pytest.raises(gpushare.GpushareError) as e:
            gpushare.share(a, target)
        assert "byte_offset" in str(e.value)


# -- Warp --------------------------------------------------------------------------------------


def test_warp_shares_both_ways_on_its_cpu_device():
    wp = need("warp")
    torch = need("torch")
    w = wp.array(np.arange(6, dtype=np.float32), device="cpu")
    r = gpushare.share(w, "torch")
    assert (r.verdict, r.prediction["verdict"]) == ("shared", "shared")
    assert r.value.data_ptr() == w.ptr
    t = torch.arange(6, dtype=torch.float32)
    r = gpushare.share(t, "warp")
    assert (r.verdict, r.prediction["verdict"]) == ("shared", "shared") and r.value.ptr == t.data_ptr()
    # Warp's export takes no max_version: gpushare reads its legacy capsule.
    assert gpushare.inspect(w).dlpack_version is None


def test_warp_has_no_complex_and_the_prediction_names_it():
    need("warp")
    with pytest.raises(ConversionError) as e:
        gpushare.share(np.ones(3, dtype=np.complex64), "warp")
    assert e.value.predicted.verdict == "failed" and "complex" in e.value.predicted.reason


def test_a_share_into_warp_before_its_runtime_started_says_what_the_raw_call_does():
    """wp.from_dlpack raises until Warp's runtime is started; gpushare starts it and the result
    says what the raw call would have done (a fresh process, where nothing started it)."""
    need("warp")
    need("torch")
    code = (
        "import torch, warp as wp, gpushare\n"
        "t = torch.arange(4.0)\n"
        "try:\n"
        "    wp.from_dlpack(t); print('raw: ok')\n"
        "except RuntimeError as e:\n"
        "    print('raw:', e)\n"
        "r = gpushare.share(t, 'warp')\n"
        "print('verdict:', r.verdict)\n"
        "print('notes:', r.notes)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "raw: DLPack device conversion requires an initialized Warp runtime" in out
    assert "verdict: shared" in out
    assert "gpushare ran wp.init() first" in out


# -- cuda.core ---------------------------------------------------------------------------------


def test_cuda_core_views_host_memory_and_keeps_the_read_only_flag():
    need("cuda.core")
    torch = need("torch")
    x = np.arange(6, dtype=np.float32)
    r = gpushare.share(x, "cuda_core")
    assert (r.verdict, r.prediction["verdict"]) == ("shared", "shared") and r.value.ptr == x.ctypes.data
    ro = np.arange(6, dtype=np.float32)
    ro.flags.writeable = False
    r = gpushare.share(ro, "cuda_core")  # it asks for a versioned capsule, so NumPy exports it
    assert r.verdict == "shared" and r.value.readonly
    back = gpushare.share(r.value, "torch")
    assert back.verdict == "shared" and back.value.data_ptr() == ro.ctypes.data
    del torch


def test_cuda_core_refuses_bfloat16_as_predicted():
    need("cuda.core")
    torch = need("torch")
    with pytest.raises(gpushare.GpushareError) as e:
        gpushare.share(torch.ones(3, dtype=torch.bfloat16), "cuda_core")
    assert e.value.predicted.verdict == "failed" and "bfloat16" in e.value.predicted.reason


def test_gpuinfo_reports_the_new_frameworks():
    """Version, DLPack support and devices, through each adapter's describe_runtime hook."""
    info = gpushare.gpuinfo(import_frameworks=True)
    expected = {"mlx.core": "legacy", "warp": "legacy", "cuda.core": "versioned"}
    checked = 0
    for module, export in expected.items():
        adapter = next(a for a in ADAPTERS.values() if a.module == module)
        if not adapter.installed():
            continue
        f = info.frameworks[module]
        assert f.imported and f.version and f.error is None, (module, f.error)
        assert f.dlpack_export == export and f.from_dlpack, (module, f.dlpack_export)
        # No GPU here: an empty list. Warp's devices are known only once its runtime started (listing
        # them would start it, banner and all), until then "n/a".
        assert f.gpu_devices == [] or (module == "warp" and not f.gpu_devices), (module, f.gpu_devices)
        assert module in repr(info)
        checked += 1
    if not checked:
        pytest.skip("framework not installed: mlx, warp and cuda-core")


# -- PyCUDA, through a stand-in ----------------------------------------------------------------


class StandInGPUArray:
    """A stand-in for pycuda.gpuarray.GPUArray (PyCUDA cannot be built here: no CUDA toolkit): the
    constructor's signature and ``__cuda_array_interface__`` as PyCUDA 2026.1 writes them
    (strides in bytes always given, ``"stream": None``, never read-only), over host memory that a
    NumPy array owns."""

    def __init__(self, shape, dtype, allocator=None, base=None, gpudata=None, strides=None, order="C"):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        if gpudata is None:
            self._owner = np.zeros(self.shape, self.dtype)
            gpudata, strides = self._owner.ctypes.data, self._owner.strides
        self.gpudata, self.base = gpudata, base
        self.strides = tuple(strides) if strides is not None else tuple(np.zeros(self.shape, self.dtype).strides)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "strides": self.strides, "data": (int(self.gpudata), False),
                "typestr": self.dtype.str, "stream": None, "version": 3}


@pytest.fixture
def stand_in_pycuda(monkeypatch):
    """``pycuda``, ``pycuda.gpuarray`` and ``pycuda.driver`` as stand-in modules, with a current context."""
    package = types.ModuleType("pycuda")
    gpuarray = types.ModuleType("pycuda.gpuarray")
    driver = types.ModuleType("pycuda.driver")
    StandInGPUArray.__module__ = "pycuda.gpuarray"
    gpuarray.GPUArray = StandInGPUArray
    driver.Context = type("Context", (), {"get_current": staticmethod(lambda: object())})
    package.gpuarray, package.driver, package.__version__ = gpuarray, driver, "stand-in"
    for name, module in (("pycuda", package), ("pycuda.gpuarray", gpuarray), ("pycuda.driver", driver)):
        monkeypatch.setitem(sys.modules, name, module)
    adapter = ADAPTERS["pycuda"]
    monkeypatch.setattr(adapter, "_installed", True)
    yield adapter
    StandInGPUArray.__module__ = __name__


def test_pycuda_arrays_are_found_and_described_by_their_interface(stand_in_pycuda):
    x = StandInGPUArray((3, 4), np.float32)
    assert adapter_of(x) is stand_in_pycuda
    info = stand_in_pycuda.inspect(x)
    assert (list(info.shape), list(info.strides), info.dtype) == ([3, 4], [4, 1], "float32")
    assert info.data_ptr == x.gpudata and info.dlpack_device[0] == 2


def test_pycuda_takes_and_gives_the_cuda_array_interface_only(stand_in_pycuda):
    torch_adapter = ADAPTERS["torch"]
    # auto: no DLPack either way, so device memory goes by __cuda_array_interface__.
    assert paths.resolve_auto(stand_in_pycuda, torch_adapter, (2, 0)) == "cai"
    assert paths.resolve_auto(torch_adapter, stand_in_pycuda, (2, 0)) == "cai"
    assert paths.endpoints(stand_in_pycuda, stand_in_pycuda) == _native.known_endpoints("pycuda", "pycuda")
    # Its import is a GPUArray over the same memory that keeps the source alive.
    source = StandInGPUArray((2, 3), np.int16)
    view = stand_in_pycuda.from_cai(source)
    assert isinstance(view, StandInGPUArray) and view.gpudata == source.gpudata and view.base is source
    assert view.strides == source.strides


def test_pycuda_without_a_context_says_which_module_makes_one(stand_in_pycuda, monkeypatch):
    monkeypatch.setattr(sys.modules["pycuda.driver"].Context, "get_current", staticmethod(lambda: None))
    with pytest.raises(gpushare.GpushareError) as e:
        stand_in_pycuda.from_cai(StandInGPUArray((2,), np.float32))
    assert "pycuda.autoprimaryctx" in str(e.value)
