"""How an adapter's arrays are described is declared by the adapter (``Adapter.describe_by``,
``Adapter.source_flags``) and implemented once in the core (crates/python/src/binding/declared.rs).
Each declared route must say what the adapter's own ``inspect()`` says, and the core
must take it without calling ``inspect()``."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from gpushare import _native  # noqa: E402
from gpushare.adapters import Adapter, framework  # noqa: E402


def _counting(adapter_type, **declared):
    """A subclass of ``adapter_type`` with ``declared`` class attributes that counts its inspect()
    and check_source() calls."""
    calls = {"inspect": 0, "check_source": 0}

    def inspect(self, obj):
        calls["inspect"] += 1
        return adapter_type.inspect(self, obj)

    def check_source(self, obj, target=None, path=None):
        calls["check_source"] += 1
        return adapter_type.check_source(self, obj, target, path)

    cls = type("Declared" + adapter_type.__name__, (adapter_type,), {**declared, "inspect": inspect, "check_source": check_source})
    return cls(), calls


def test_cuda_core_is_described_by_the_exchange_api_read_only_flag_included():
    """cuda.core's StridedMemoryView carries the DLPack C exchange API: the core describes it by one
    C call, as its capsule would (a read-only view stays read-only: the bare DLTensor of the API has
    no flags, so the core reads the versioned managed tensor), without calling inspect()."""
    pytest.importorskip("cuda.core", reason="cuda.core not installed")
    smv_module = pytest.importorskip("cuda.core.utils")
    smv = smv_module.StridedMemoryView
    if getattr(smv, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this cuda.core has no DLPack exchange API on StridedMemoryView")
    cuda_core = framework("cuda_core")
    assert cuda_core.describe_by == "exchange_api"
    counted, calls = _counting(type(cuda_core))
    plan = _native.share.SharePlan(counted, counted, "dlpack", lambda v: v, None)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    for array in (base, base[1:3, ::2], base.T, np.full((), 1.5), np.zeros((0, 2)), frozen):
        view = smv.from_dlpack(array, stream_ptr=-1)
        fast = plan.run(view).source.to_dict()
        slow = Adapter.inspect(cuda_core, view).to_dict()
        fast.pop("dlpack_version"), slow.pop("dlpack_version")
        assert fast == slow, (array.shape, array.strides)
        assert _native.share.describe_declared(view, cuda_core).readonly == (array is frozen)
    assert calls["inspect"] == 0, "the core read the exchange API itself"


def test_a_declared_route_that_cannot_describe_hands_the_array_to_inspect():
    """An array whose type has no exchange API (NumPy's, here) under an adapter that declares one:
    the core calls inspect(), which describes it."""
    numpy_adapter = framework("numpy")
    if getattr(np.ndarray, "__dlpack_c_exchange_api__", None) is not None:
        pytest.skip("this NumPy has the exchange API")
    counted, calls = _counting(type(numpy_adapter), describe_by="exchange_api")
    x = np.ones(3)
    assert _native.share.describe_declared(x, counted) is None
    r = _native.share.SharePlan(counted, numpy_adapter, "dlpack", np.from_dlpack, None).run(x)
    assert r.source.to_dict() == numpy_adapter.inspect(x).to_dict()
    assert calls["inspect"] == 1


def test_source_flags_decide_whether_check_source_runs():
    """``source_flags``: the core reads the declared flags itself and calls check_source() only when
    one is set (here ``ndim``: set on a vector, clear on a scalar; ``all()`` a method)."""
    numpy_adapter = framework("numpy")
    counted, calls = _counting(type(numpy_adapter), source_flags=("ndim", "all()"))
    plan = _native.share.SharePlan(counted, numpy_adapter, "dlpack", np.from_dlpack, None, check_source=True)
    plan.run(np.zeros(()))  # ndim 0, all() False: nothing set
    assert calls["check_source"] == 0
    plan.run(np.zeros(3))  # ndim 1
    assert calls["check_source"] == 1
    plan.run(np.ones(()))  # all() True
    assert calls["check_source"] == 2
    # Without declared flags, an adapter that overrides check_source is asked every time.
    undeclared, calls = _counting(type(numpy_adapter))
    _native.share.SharePlan(undeclared, numpy_adapter, "dlpack", np.from_dlpack, None, check_source=True).run(np.zeros(()))
    assert calls["check_source"] == 1


def test_torch_declares_what_its_check_source_reads():
    """PyTorch's flags (grad, conjugate and negative bits) are declared, and a tensor with one set
    is still refused by its check_source."""
    torch = pytest.importorskip("torch")
    import gpushare

    assert set(framework("torch").source_flags) == {"requires_grad", "is_conj()", "is_neg()"}
    with pytest.raises(gpushare.exceptions.GpushareError, match="requires grad"):
        gpushare.share(torch.ones(2, requires_grad=True), "numpy")
    with pytest.raises(gpushare.exceptions.GpushareError, match="negative bit"):
        gpushare.share(torch._neg_view(torch.ones(2)), "numpy")


def test_an_unknown_route_is_refused_in_words():
    numpy_adapter = framework("numpy")
    wrong, _ = _counting(type(numpy_adapter), describe_by="by magic")
    with pytest.raises(ValueError, match="describe_by"):
        _native.share.describe_declared(np.ones(1), wrong)


def test_tensorflow_is_described_from_its_exporters_capsule_without_inspect():
    """TensorFlow's ExportedCapsule recipe: the core calls its exporter, reads the capsule and the
    device in TensorFlow's words, as its inspect() does, without calling inspect(); a dtype whose
    export would abort the process is declined before the export, and inspect() refuses it."""
    tf = pytest.importorskip("tensorflow")
    import gpushare

    tf_adapter = framework("tf")
    counted, calls = _counting(type(tf_adapter))
    plan = _native.share.SharePlan(counted, counted, "dlpack", lambda v: v, None)
    arrays = (tf.ones((3, 4)), tf.constant([1, 2, 3], dtype=tf.int64), tf.zeros((0, 2)), tf.constant(True),
              tf.transpose(tf.ones((2, 3))), tf.constant(1.5, dtype=tf.float16))
    for t in arrays:
        fast = plan.run(t).source.to_dict()
        assert fast == tf_adapter.inspect(t).to_dict(), t
        assert fast["device"] == t.device
    assert calls["inspect"] == 0, "the core read the capsule itself"
    text = tf.constant(["a"])
    assert _native.share.describe_declared(text, tf_adapter) is None
    with pytest.raises(gpushare.exceptions.UnsafeInputError, match="tf.string"):
        gpushare.share(text, "numpy")


class _StridedStandIn:
    """What a Numba device array carries (shape, strides in bytes, a NumPy dtype, a ctypes
    pointer), over memory of the test's choosing."""

    def __init__(self, base, address=None):
        import ctypes

        self.shape, self.strides, self.dtype = base.shape, base.strides, base.dtype
        self.device_ctypes_pointer = ctypes.c_void_p(base.ctypes.data if address is None else address)


def test_a_strided_recipe_leaves_memory_no_gpu_holds_and_null_addresses_to_inspect():
    """Numba's Strided recipe names the device the CUDA driver places the address on: host memory
    (or no driver), a null address and a dtype or strides it cannot state in elements are declined,
    and its inspect() describes or refuses them."""
    numba_adapter = framework("numba")
    from gpushare.adapters.description import Strided

    assert isinstance(numba_adapter.describe_by, Strided)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert _native.share.describe_declared(_StridedStandIn(base), numba_adapter) is None
    assert _native.share.describe_declared(_StridedStandIn(base, address=0), numba_adapter) is None
    assert numba_adapter._dtype_code_bits(np.dtype(np.float16)) == (2, 16)
    assert numba_adapter._dtype_code_bits(np.dtype(np.complex64)) == (5, 64)
    assert numba_adapter._dtype_code_bits(np.dtype(bool)) == (6, 8)
    assert numba_adapter._dtype_code_bits(np.dtype("U3")) == ()
    assert _native.share.describe_declared(_StridedStandIn(np.array(["abc"])), numba_adapter) is None


def test_a_strided_recipe_without_its_adapters_method_is_refused_in_words():
    from gpushare.adapters.description import Strided

    numpy_adapter = framework("numpy")
    wrong, _ = _counting(type(numpy_adapter), describe_by=Strided(dtype_code_bits="no_such_method", pointer="device_ctypes_pointer"))
    with pytest.raises(ValueError, match="no_such_method"):
        _native.share.describe_declared(_StridedStandIn(np.ones(2)), wrong)
