"""MLX, NVIDIA Warp, cuda.core and PyCUDA, each added through its adapter and its rules
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
from gpushare import _native, auto, paths
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
    assert _native.share.TensorInfo.from_capsule(a.__dlpack__(), "mlx", "cpu", False).byte_offset == 4
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


def test_cuda_core_views_bfloat16_as_its_own_from_dlpack_does():
    """StridedMemoryView.from_dlpack(x, stream_ptr=-1) views a bfloat16 tensor (its dtype from
    ml_dtypes) although the view's own __dlpack__ refuses to export it: gpushare describes the view
    from its attributes, shares, and predicts it; float8 it still refuses, as predicted."""
    need("cuda.core")
    need("ml_dtypes")
    torch = need("torch")
    x = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    r = gpushare.share(x, "cuda_core")
    assert (r.verdict, r.prediction["verdict"], r.unexpected) == ("shared", "shared", False), r
    assert r.value.ptr == x.data_ptr() and r.target.dtype == "bfloat16" and list(r.target.shape) == [2, 3]
    with pytest.raises(gpushare.GpushareError) as e:
        gpushare.share(torch.ones(3, dtype=torch.float8_e5m2), "cuda_core")
    assert e.value.predicted.verdict == "failed" and "float8_e5m2" in e.value.predicted.reason


def test_gpuinfo_reports_the_new_frameworks():
    """Version, DLPack support and devices, through each adapter's describe_runtime hook."""
    info = gpushare.gpuinfo(import_frameworks=True)
    expected = {"mlx.core": "legacy", "warp": "legacy", "cuda.core": "versioned"}
    status = _native.cuda.driver_status()
    driver_devices = [f"cuda:{i}" for i in range(status.get("device_count") or 0)] if status["available"] else []
    checked = 0
    for module, export in expected.items():
        adapter = next(a for a in ADAPTERS.values() if a.module == module)
        if not adapter.installed():
            continue
        f = info.frameworks[module]
        assert f.imported and f.version and f.error is None, (module, f.error)
        assert f.dlpack_export == export and f.from_dlpack, (module, f.dlpack_export)
        # The GPUs it lists are the driver's (none without one; on 2x H200 cuda.core listed both and
        # MLX, which uses one device, cuda:0). Warp's devices are known only once its runtime
        # started (listing them would start it, banner and all), until then "n/a".
        if not (module == "warp" and not f.gpu_devices):
            assert set(f.gpu_devices) <= set(driver_devices), (module, f.gpu_devices, driver_devices)
            if module == "cuda.core":
                assert f.gpu_devices == driver_devices, (f.gpu_devices, driver_devices)
            if not driver_devices:
                assert f.gpu_devices == [], (module, f.gpu_devices)
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
            assert base is None  # as PyCUDA 2026.1's GPUArray.__init__ asserts
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
    assert auto.path_for(stand_in_pycuda, torch_adapter, (2, 0)) == "cai"
    assert auto.path_for(torch_adapter, stand_in_pycuda, (2, 0)) == "cai"
    # Neither side speaks DLPack: no __dlpack__, no object or capsule import.
    assert auto.pair(stand_in_pycuda, stand_in_pycuda).endpoints == (False, False, False, True)
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


# -- What the CUDA matrix on 2x H200 showed (MLX, Warp, cuda.core and PyCUDA on the GPU) ---------


def _pair(source: str, target: str):
    """What the two adapters declare, as every Predictor gpushare makes is given it."""
    return auto.pair(ADAPTERS[source], ADAPTERS[target])


def _cuda_info(framework: str, dtype_code: int = 2, bits: int = 32, shape=(4, 6), strides=(6, 1), ptr=0x7F0000000000):
    return _native.share.tensor_info_from_fields(framework, "cuda:0", ptr, list(shape), list(strides), dtype_code, bits, 2, 0, False)


def test_mlx_refuses_cuda_memory_in_the_words_the_prediction_expects():
    """MLX 0.32's mx.from_dlpack refuses a CUDA tensor before it reads a byte, on any backend: a
    capsule that says kDLCUDA over host memory gets the CPU build's answer, which the rule predicts."""
    mx = need("mlx.core")
    host = np.arange(24, dtype=np.float32)
    capsule = _native.share.capsule_over(host, host.ctypes.data, [4, 6], [6, 1], 2, 32, 2, 0)
    with pytest.raises(ValueError) as raised:
        mx.from_dlpack(capsule)
    predicted = _native.paths.Predictor("mlx", mx.__version__, "dlpack", "", pair=_pair("torch", "mlx"))(_cuda_info("torch"))
    assert predicted.verdict == "failed" and predicted.expected_error in str(raised.value), (predicted, raised.value)
    assert "path='host'" in predicted.fix


def test_the_rule_facts_hook_reads_a_changing_fact_at_each_prediction_and_only_where_a_rule_needs_it():
    context = {"current": False}
    calls = []

    def has_context():
        calls.append("context")
        return context["current"]

    into_pycuda = _native.paths.Predictor("pycuda", "2026.1", "auto", "", target_facts={"has_current_context": has_context},
                                    pair=_pair("torch", "pycuda"))
    source = _cuda_info("torch")
    p = into_pycuda(source)
    assert p.verdict == "failed" and "pycuda.autoprimaryctx" in p.fix, p
    context["current"] = True  # import pycuda.autoprimaryctx, later in the same kernel
    assert into_pycuda(source).verdict == "shared"
    assert calls == ["context", "context"]
    # JAX's x64 flag is asked only of a 64-bit dtype, the only ones it narrows.
    x64_reads = []
    into_jax = _native.paths.Predictor("jax", "0.11.2", "auto", "",
                                 target_facts={"keeps_64_bit": lambda: x64_reads.append(1) or True}, pair=_pair("torch", "jax"))
    assert into_jax(_cuda_info("torch")).verdict == "shared" and x64_reads == []
    assert into_jax(_cuda_info("torch", 2, 64)).verdict == "shared" and x64_reads == [1]
    with pytest.raises(ValueError, match="unknown rule fact"):
        _native.paths.Predictor("jax", "", "auto", "", target_facts={"jax_x64": True}, pair=_pair("torch", "jax"))
    with pytest.raises(ValueError, match="read once"):
        _native.paths.Predictor("torch", "", "auto", "", target_facts={"per_thread_default_stream": lambda: True},
                          pair=_pair("cupy", "torch"))


def test_each_adapter_declares_its_rule_facts_through_the_one_hook():
    facts = {name: a.rule_facts() for name, a in ADAPTERS.items()}
    assert callable(facts["jax"]["keeps_64_bit"]) and callable(facts["torch"]["current_device"])
    assert callable(facts["pycuda"]["has_current_context"])
    assert facts["cupy"]["per_thread_default_stream"] in (True, False)
    # A target without from_dlpack(x, device=…) says so: a move by `dlpack` into it cannot run.
    assert facts["numpy"] == {} and facts["mlx"] == {"dlpack_takes_device": False}
    # Every name is one the core knows: a Predictor takes each adapter's facts on both sides.
    for name, declared in facts.items():
        _native.paths.Predictor(name, "", "auto", "", target_facts=declared, source_facts=declared, pair=_pair(name, name))


def test_pycuda_facts_follow_its_context_stack(stand_in_pycuda, monkeypatch):
    from gpushare import verdicts

    source = _cuda_info("torch")
    torch_adapter = ADAPTERS["torch"]
    assert stand_in_pycuda.has_current_context()
    assert verdicts.predict(torch_adapter, stand_in_pycuda, source, "auto").verdict == "shared"
    monkeypatch.setattr(sys.modules["pycuda.driver"].Context, "get_current", staticmethod(lambda: None))
    p = verdicts.predict(torch_adapter, stand_in_pycuda, source, "auto")
    assert p.verdict == "failed" and p.reason == "PyCUDA has no current CUDA context", p


def test_pycuda_views_a_zero_size_source_without_memory(stand_in_pycuda):
    """A zero-size source has address 0: PyCUDA's GPUArray asserts that an array without gpudata
    has no base, so the view is made without one."""
    empty = StandInGPUArray((0, 6), np.float32)
    empty.gpudata = 0
    view = stand_in_pycuda.from_cai(empty)
    assert view.shape == (0, 6) and view.base is None


def test_cuda_core_device_readback_copies_the_span_once_whatever_the_strides():
    """cuda-core 1.2.0 has no StridedMemoryView.copy_to: the adapter copies the bytes the view spans
    (here host memory, moved the way the driver would) and views them with the strides."""
    import ctypes

    from gpushare.adapters.cuda_core import strided_copy_to_host

    base = np.arange(24, dtype=np.int16).reshape(4, 6)
    views = [base, base.T, base[1:3, 2:], base[:, ::-1], base[::-1, ::-2],
             np.lib.stride_tricks.as_strided(base[0], (4, 6), (0, 2)), base[:0], base[1:2, 1:2].reshape(())]
    for v in views:
        copies = []

        def copy(ptr, host):
            copies.append(host.nbytes)
            ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

        got = strided_copy_to_host(v.ctypes.data, v.shape, tuple(s // 2 for s in v.strides), v.dtype, copy)
        assert got.shape == v.shape and np.array_equal(got, v), (v.strides, got)
        assert len(copies) == (0 if v.size == 0 else 1)


def test_the_matrix_runs_a_target_in_each_of_its_states(monkeypatch):
    """PyCUDA's builders run it as a target without a context and with the primary one: run_pair
    runs every cell in each state its builders name, and says which on the cell."""
    import contextlib

    from tools.conformance import examples, running

    entered = []

    @contextlib.contextmanager
    def state(label):
        entered.append(label)
        yield

    monkeypatch.setattr(examples, "target_states",
                        lambda adapter: [("one", lambda: state("one")), ("two", lambda: state("two"))])
    need("torch")
    cells = running.run_pair("numpy", "torch", "cpu", ["float32"], ["contiguous"])
    assert [c.state for c in cells] == ["one", "two"] and entered == ["one", "two"]
    assert all(c.problem is None for c in cells), [c.describe() for c in cells]
    pycuda_builders = examples.builders_of(ADAPTERS["pycuda"])
    assert [label for label, _ in pycuda_builders.target_states(ADAPTERS["pycuda"])] == [
        "no PyCUDA context", "PyCUDA in the primary context"]


def test_mlx_refuses_a_negative_stride_on_an_axis_of_one_as_predicted():
    need("mlx.core")
    x = np.arange(6, dtype=np.float32).reshape(1, 6)[::-1]  # stride -24 bytes on an axis of one
    with pytest.raises(gpushare.GpushareError) as e:
        gpushare.share(x, "mlx", path="dlpack")
    assert e.value.predicted.verdict == "failed" and "negative strides" in e.value.predicted.reason


def test_warp_refuses_five_dimensions_and_int32_overflowing_shapes_as_predicted():
    need("warp")
    torch = need("torch")
    five = torch.zeros(1, 1, 1, 1, 2)
    long = torch.ones(1).expand(2**31)  # one dimension longer than 2**31-1, no memory
    for x, words in ((five, "at most 4 dimensions"), (long, "int32")):
        with pytest.raises(gpushare.GpushareError) as e:
            gpushare.share(x, "warp", path="dlpack")
        assert e.value.predicted.verdict == "failed" and words in e.value.predicted.reason, e.value.predicted


def test_a_cuda_core_view_moved_by_dlpack_copy_true_is_refused_as_predicted():
    need("cuda.core")
    from cuda.core.utils import StridedMemoryView

    view = StridedMemoryView.from_dlpack(np.arange(12.0), stream_ptr=-1)
    with pytest.raises(gpushare.GpushareError) as e:
        gpushare.share(view, "numpy", path="dlpack", device="cpu")
    assert e.value.predicted is not None and e.value.predicted.verdict == "failed", e.value.predicted
    # One refusal, one fix: the error's is the prediction's.
    assert e.value.fix == e.value.predicted.fix, (e.value.fix, e.value.predicted.fix)
