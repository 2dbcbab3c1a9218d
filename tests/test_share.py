"""gpushare.share / inspect with the real frameworks on CPU: identity proven by writes, report fields,
and every bad input the core must answer with a clear error (and no crash)."""

from __future__ import annotations

import itertools
import sys
import warnings

import numpy as np
import pytest

import gpushare
from gpushare.exceptions import (
    ConversionError,
    FrameworkNotInstalledError,
    GpushareWarning,
    NotAnArrayError,
    UnknownFrameworkError,
    UnsafeInputError,
)
from conftest import have

torch = pytest.importorskip("torch", reason="torch not installed")
jax = pytest.importorskip("jax", reason="jax not installed")
tf = pytest.importorskip("tensorflow", reason="tensorflow not installed")
import jax.numpy as jnp  # noqa: E402

FRAMEWORKS = ["torch", "tf", "jax", "numpy"]


def make_source(fw: str, backing: "torch.Tensor"):
    """An array of `fw` that aliases `backing` (torch memory is 64-byte aligned, so every framework
    can alias it); writing through `backing` is then visible through every true share."""
    if fw == "torch":
        return backing
    if fw == "numpy":
        return backing.numpy()
    if fw == "jax":
        return jax.dlpack.from_dlpack(backing)
    if fw == "tf":
        return tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(backing))
    raise AssertionError(fw)


def read(fw: str, value) -> np.ndarray:
    if fw == "torch":
        return value.numpy().copy()
    if fw == "tf":
        return value.numpy().copy()
    return np.array(value, copy=True)


@pytest.mark.parametrize("src,dst", list(itertools.permutations(FRAMEWORKS, 2)))
def test_every_pair_shares_memory_proven_by_a_write(src, dst):
    backing = torch.arange(64, dtype=torch.float32)
    source = make_source(src, backing)
    assert np.array_equal(read(src, source), backing.numpy()), "source does not alias the backing"
    result = gpushare.share(source, dst)
    assert result.source.framework == src and result.target.framework == dst
    before = read(dst, result.value)
    backing[5] = -123.0  # write through the writable alias of the source's memory
    seen = read(dst, result.value)[5]
    assert result.verdict == "shared", result.reason
    assert result.reason is None
    assert seen == -123.0 and before[5] == 5.0, "verdict says shared but a write was not seen"
    assert result.target.data_ptr == result.source.data_ptr


def test_copy_is_detected_from_addresses_when_jax_narrows_int64():
    assert not jax.config.jax_enable_x64
    x = torch.arange(8)  # int64
    r = gpushare.share(x, "jax")
    assert r.verdict == "copied"
    assert "jax_enable_x64" in r.reason
    assert r.target.dtype == "int32"
    x[0] = 99
    assert int(r.value[0]) == 0  # it really is a copy


def test_numpy_misaligned_into_jax_copies_and_says_why():
    buf = np.zeros(65, dtype=np.float32)
    view = buf[1:]  # 4 bytes past an aligned start is never 64-byte aligned
    assert view.ctypes.data % 64 != 0
    r = gpushare.share(view, "jax")
    assert r.verdict == "copied"
    assert "aligned" in r.reason


def test_inspect_fields_match_the_framework():
    x = torch.arange(100, dtype=torch.float32).reshape(10, 10)[2:5, 1:9]
    info = gpushare.inspect(x)
    assert info.framework == "torch"
    assert info.dtype == "float32"
    assert info.shape == [3, 8]
    assert info.strides == [10, 1]
    assert info.device == "cpu"
    assert info.dlpack_device == (1, 0)
    assert info.data_ptr == x.data_ptr()
    assert info.nbytes == ((2 * 10 + 7) + 1) * 4
    assert info.contiguous is False
    assert info.alignment == min(256, x.data_ptr() & -x.data_ptr())
    assert info.readonly is False
    assert info.cuda is None
    assert info.to_dict()["strides"] == [10, 1]
    assert "float32" in repr(info) and "<table" in info._repr_html_()


def test_inspect_does_not_consume_or_leak():
    a = np.arange(10.0)
    for _ in range(3):
        gpushare.inspect(a)
    assert np.from_dlpack(a)[3] == 3.0  # still exportable after inspection
    t = torch.ones(4)
    info1, info2 = gpushare.inspect(t), gpushare.inspect(t)
    assert info1.data_ptr == info2.data_ptr


def test_inspect_reports_read_only_and_immutable():
    a = np.arange(4.0)
    a.flags.writeable = False
    assert gpushare.inspect(a).readonly is True
    assert gpushare.inspect(jnp.ones(3)).readonly is True
    assert gpushare.inspect(tf.ones(3)).readonly is True


def test_result_object_forms():
    r = gpushare.share(torch.ones(3, 4), "numpy", repeat=5, number=3)
    assert r.timing.repeats == 5 and r.timing.loops == 3
    assert 0 < r.timing.min <= r.timing.median
    d = r.to_dict()
    assert d["verdict"] == "shared" and d["source"]["shape"] == [3, 4]
    bundle = r._repr_mimebundle_()
    assert bundle["application/vnd.gpushare+json"]["schema"] == "gpushare.share/1"
    assert "<table" in bundle["text/html"] and "shared" in bundle["text/plain"]
    assert "torch→numpy" in repr(r)
    if have("pandas"):
        df = r.to_pandas()
        assert df.loc[0, "verdict"] == "shared"


def test_chain_shows_identity_across_every_hop():
    x = torch.arange(16, dtype=torch.float32)
    hops = gpushare.share_chain(x, ["jax", "tf", "numpy"])
    assert [h.target.framework for h in hops] == ["jax", "tf", "numpy"]
    assert all(h.verdict == "shared" and h.shares_origin for h in hops)
    x[0] = 42
    assert hops[-1].value[0] == 42


def test_zero_d_and_zero_size_work():
    r = gpushare.share(torch.tensor(3.5), "numpy")
    assert r.value.shape == () and float(r.value) == 3.5
    assert r.verdict == "shared"
    r = gpushare.share(np.zeros((0, 3), dtype=np.float32), "torch")
    assert tuple(r.value.shape) == (0, 3)
    # An array of 0 bytes has no memory to share: "copied", and the reason says there was nothing to
    # share, on a path that copies by design as on one that views; predicted so.
    assert r.verdict == "copied" and r.reason.startswith("zero-size: nothing to share"), r.reason
    assert r.prediction["verdict"] == "copied" and not r.unexpected
    for path in ("host", "dlpack"):
        r = gpushare.share(np.zeros((2, 0), np.float32), "numpy", path=path)
        assert r.value.shape == (2, 0)
        assert r.verdict == "copied" and r.reason.startswith("zero-size: nothing to share"), (path, r.reason)
        assert r.prediction["verdict"] == "copied" and not r.unexpected, (path, r.prediction)


def test_read_only_numpy_into_torch_works_with_a_warning():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.warns(GpushareWarning, match="read-only"):
        r = gpushare.share(a, "torch")
    assert r.verdict == "shared"


# -- bad input: a clear error, nothing lost, no crash -----------------------------------------------


def test_unknown_framework_suggests_the_closest():
    with pytest.raises(UnknownFrameworkError, match="did you mean 'tf'"):
        gpushare.share(torch.ones(2), "tfx")
    with pytest.raises(UnknownFrameworkError):
        gpushare.share(torch.ones(2), ["tf"])  # not a name at all


@pytest.mark.skipif(have("cupy"), reason="cupy is installed, so it cannot be reported missing")
def test_framework_not_installed():
    with pytest.raises(FrameworkNotInstalledError, match="cupy is not installed"):
        gpushare.share(torch.ones(2), "cupy")


def test_not_an_array():
    with pytest.raises(NotAnArrayError, match="not an array"):
        gpushare.share([1, 2, 3], "torch")
    with pytest.raises(NotAnArrayError, match="expected a jax array, got a torch array"):
        gpushare.share(torch.ones(2), "numpy", source="jax")


def test_negative_strides_into_torch_are_refused_not_crashed():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    with pytest.raises(UnsafeInputError, match="188023") as e:
        gpushare.share(a, "torch")
    assert "ascontiguousarray" in e.value.fix
    assert gpushare.share(np.ascontiguousarray(a), "torch").verdict == "shared"


def test_non_contiguous_into_tf_and_zero_stride_into_jax_fail_with_an_explanation():
    with pytest.raises(ConversionError, match="compact row-major") as e:
        gpushare.share(torch.ones(4, 3).t(), "tf")
    assert "Invalid strides" in e.value.framework_error and e.value.fix
    base = np.arange(3.0, dtype=np.float32)
    b = np.lib.stride_tricks.as_strided(base, shape=(4, 3), strides=(0, 4))  # writable zero stride
    with pytest.raises(ConversionError, match="compact layouts") as e:
        gpushare.share(b, "jax")
    assert e.value.fix


def test_transposed_torch_into_jax_is_accepted():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    r = gpushare.share(x, "jax")
    assert np.array_equal(np.asarray(r.value), x.numpy())


def test_requires_grad_says_detach():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(ConversionError, match=r"detach\(\)"):
        gpushare.share(x, "numpy")
    assert gpushare.share(x.detach(), "numpy").verdict == "shared"


def test_dtype_the_target_lacks_is_a_conversion_error():
    with pytest.raises(ConversionError) as e:
        gpushare.share(torch.ones(3, dtype=torch.bfloat16), "numpy")
    assert e.value.framework_error  # the framework's own words are kept


@pytest.mark.parametrize("dtype", ["bool", "complex64", "uint16", "uint32", "uint64", "bfloat16"])
@pytest.mark.parametrize("dst", ["tf", "jax", "numpy"])
def test_awkward_dtypes_work_or_fail_cleanly(dtype, dst):
    x = torch.zeros(4, dtype=getattr(torch, dtype))
    try:
        r = gpushare.share(x, dst)
    except ConversionError as e:
        assert str(e) and e.framework_error
    else:
        assert r.verdict in ("shared", "copied")
        assert (r.reason is None) == (r.verdict == "shared")


def test_bad_repeat_is_a_value_error():
    with pytest.raises(ValueError):
        gpushare.share(torch.ones(2), "numpy", repeat=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: jnp.ones((3, 4)),
        lambda: jax.dlpack.from_dlpack(torch.ones(3, 4).t()),
        lambda: jax.dlpack.from_dlpack(torch.ones(2, 3, 4).permute(2, 0, 1)),
        lambda: jnp.array(2.0),
        lambda: jnp.zeros((0, 3)),
        lambda: jnp.arange(5),
        lambda: jnp.ones(3, dtype=bool),
        lambda: jnp.ones(2, dtype=jnp.complex64),
        lambda: jnp.ones(2, dtype=jnp.bfloat16),
    ],
)
def test_jax_attribute_inspection_equals_the_dlpack_reading(make):
    """JAX arrays are described from their buffer and layout (cheaper than __dlpack__); both routes
    must give the same TensorInfo, layout caches included (each case runs twice)."""
    from gpushare import _native
    from gpushare.adapters import Adapter, framework

    jax_adapter = framework("jax")
    for _ in range(2):
        x = make()
        # The attribute route declines only extended dtypes (bfloat16): those read the DLPack capsule.
        assert (_native.share.describe_declared(x, jax_adapter) is None) == (x.dtype == jnp.bfloat16)
        fast = jax_adapter.inspect(x).to_dict()
        slow = Adapter.inspect(jax_adapter, x).to_dict()
        fast.pop("dlpack_version"), slow.pop("dlpack_version")
        assert fast == slow


def test_torch_exchange_api_inspection_equals_the_capsule_reading():
    from gpushare.adapters import Adapter, framework

    if getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this torch has no DLPack exchange API (DLPack 1.3)")
    from gpushare import _native

    torch_adapter = framework("torch")
    grad = torch.ones(2, requires_grad=True)
    for x in (torch.ones(3, 4), torch.ones(4, 6)[1:3, ::2], torch.tensor(1.5), torch.zeros(0, 2), grad):
        assert _native.share.describe_declared(x, torch_adapter) is not None
        fast = torch_adapter.inspect(x).to_dict()
        slow = Adapter.inspect(torch_adapter, x).to_dict()
        fast.pop("dlpack_version"), slow.pop("dlpack_version")
        assert fast == slow


def test_the_core_reads_a_capsule_itself_where_the_adapter_says_that_is_all_inspect_does():
    """``describe_by = "capsule"`` (CuPy's adapter): the plan reads ``__dlpack__(max_version=(1, 0))``
    in Rust, and what it says equals the adapter's own inspect(); anything it cannot read goes to
    the adapter. Checked here with NumPy arrays under such an adapter (CuPy needs a GPU)."""
    from gpushare import _native
    from gpushare.adapters import Adapter, framework

    numpy_adapter = framework("numpy")
    if not hasattr(np.ones(1), "__dlpack__") or np.lib.NumpyVersion(np.__version__) < "2.1.0":
        pytest.skip("this NumPy exports no versioned capsules")
    calls = []

    class ByCapsule(type(numpy_adapter)):
        describe_by = "capsule"

        def inspect(self, obj):
            calls.append(obj)
            return Adapter.inspect(self, obj)

    by_capsule = ByCapsule()
    plan = _native.share.SharePlan(by_capsule, numpy_adapter, "dlpack", np.from_dlpack, None)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for x in (base, base[1:3, ::2], base.T, np.full((), 1.5), np.zeros((0, 2)), base[::-1]):
        r = plan.run(x)
        fast, slow = r.source.to_dict(), Adapter.inspect(by_capsule, x).to_dict()
        assert fast == slow, (x.shape, x.strides)
    assert calls == [], "the adapter's inspect() was not called: the core read the capsules"
    # A structured array has no DLPack form: the core hands it to the adapter, which explains.
    with pytest.raises(Exception):
        plan.run(np.zeros(3, dtype=[("a", "i4")]))
    assert len(calls) == 1


def test_a_kind_of_share_is_planned_once_and_each_array_takes_its_own_auto(monkeypatch):
    """One plan per (array type, target, path) serves arrays of every dtype, layout and size: the
    plan's `auto` is decided per array in the core, so nothing about an array is in the plan's key.
    The model changing (advice.forget()) drops the plans."""
    from gpushare import advice, model_cache

    advice.forget()
    planner = model_cache.planner()
    for x in (torch.ones(4), torch.arange(8), torch.ones(2, 6)[:, ::2], torch.zeros(0), torch.ones(1 << 16)):
        r = gpushare.share(x, "numpy")
        assert r.prediction["verdict"] == r.verdict, (x.dtype, x.shape, r.prediction)
    assert list(planner.plans) == [(torch.Tensor, "numpy")]
    advice.forget()
    assert model_cache.planner() is not planner and not model_cache.planner().plans


def test_one_plan_predicts_and_judges_each_array_on_its_own(monkeypatch):
    """A plan is made once per (array type, target, path); what it reports depends on each array,
    and on JAX's x64 flag at the time of the share, not on the array the plan was made for."""
    from gpushare import advice, model_cache

    advice.forget()
    r = gpushare.share(torch.ones(4), "numpy")
    assert r.verdict == "shared" and r.prediction["verdict"] == "shared"
    plans = len(model_cache.planner().plans)
    with pytest.raises(ConversionError) as e:
        gpushare.share(torch.zeros(3, dtype=torch.bfloat16), "numpy")
    assert e.value.predicted.verdict == "failed" and "bfloat16" in e.value.predicted.reason
    with pytest.raises(ConversionError, match="detach"):
        gpushare.share(torch.ones(2, requires_grad=True), "numpy")
    assert gpushare.share(torch.ones(4, 6)[:, ::2], "numpy").verdict == "shared"
    with pytest.raises(UnsafeInputError) as e:
        gpushare.share(np.arange(4.0)[::-1], "torch")
    assert e.value.predicted.verdict == "failed"
    assert gpushare.share(np.arange(4.0), "torch").verdict == "shared"
    assert len(model_cache.planner().plans) == plans + 1  # numpy->torch; torch->numpy was planned once

    x = torch.arange(8)  # int64: JAX narrows it (a copy) unless x64 is on
    assert gpushare.share(x, "jax").prediction["verdict"] == "copied"
    # Twice each way: the facts read with x64 on are kept for the next share that reads the same,
    # and must not outlive the flag.
    for _ in range(2):
        jax.config.update("jax_enable_x64", True)
        try:
            for _ in range(2):
                r = gpushare.share(x, "jax")
                assert r.verdict == "shared" and r.prediction["verdict"] == "shared"
        finally:
            jax.config.update("jax_enable_x64", False)
        r = gpushare.share(x, "jax")
        assert r.verdict == "copied" and r.prediction["verdict"] == "copied"


def test_a_predictor_made_before_the_target_was_imported_is_not_reused_after():
    """Predictors are kept per pair and path; a version read before the import ("" = unknown) must
    not stand for the imported framework's."""
    from gpushare import verdicts
    from gpushare.adapters import Adapter

    class Fake(Adapter):  # an adapter's defaults, with a version that changes
        def __init__(self, name, version):
            self.name, self._v = name, version

        def version(self):
            return self._v

    src, dst = Fake("numpy", "2.5.0"), Fake("torch", None)
    before = verdicts.predictor(src, dst, "auto")
    assert 'version=""' in repr(before)
    dst._v = "2.11.0"
    after = verdicts.predictor(src, dst, "auto")
    assert after is not before and 'version="2.11.0"' in repr(after)
    assert verdicts.predictor(src, dst, "auto") is after  # and made once
    assert verdicts.predictor(src, dst, "no-such-path") is None


def test_prediction_is_a_tuple_with_names():
    from gpushare.verdicts import Prediction

    p = Prediction("failed", "no bfloat16", "cast first", "bfloat16")
    verdict, reason, fix, expected = p
    assert (verdict, reason, fix, expected) == ("failed", "no bfloat16", "cast first", "bfloat16")
    assert p[0] == p.verdict == "failed" and p[-1] == p.expected_error == "bfloat16" and len(p) == 4
    assert p == ("failed", "no bfloat16", "cast first", "bfloat16") and p != ("failed", None, None, None)
    assert p == Prediction("failed", "no bfloat16", "cast first", "bfloat16")
    assert hash(p) == hash(tuple(p))
    assert Prediction("shared") == ("shared", None, None, None)
    with pytest.raises(IndexError):
        p[4]
    with pytest.raises(ValueError, match="unknown verdict"):
        Prediction("maybe")


def test_ctrl_c_during_a_conversion_is_not_turned_into_a_conversion_error():
    """A KeyboardInterrupt raised while the framework converts reaches the user as itself, and so
    does any other exception that is not an Exception."""
    from gpushare import _native, api
    from gpushare.adapters import framework

    src, dst = framework("torch"), framework("numpy")

    def interrupted(obj):
        raise KeyboardInterrupt

    plan = _native.share.SharePlan(src, dst, "dlpack", interrupted, None, api.allocator_memory)
    with pytest.raises(KeyboardInterrupt):
        plan.run(torch.ones(2))

    def broken(obj):
        raise RuntimeError("the framework broke")

    plan = _native.share.SharePlan(src, dst, "dlpack", broken, None, api.allocator_memory)
    with pytest.raises(ConversionError, match="the framework broke") as e:
        plan.run(torch.ones(2))
    assert isinstance(e.value.__cause__, RuntimeError)


def test_jax_arrays_without_a_layout_key_are_each_asked_their_layout():
    """The attribute route caches layouts by JAX's PjRt layout object; an array whose layout object
    is None must not reuse the order cached for another such array."""
    from types import SimpleNamespace

    from gpushare import _native
    from gpushare.adapters import framework

    real = jnp.ones((2, 3))

    def fake(order):
        layout = SimpleNamespace(tiling=(), sub_byte_element_size_in_bits=0, major_to_minor=order)
        return SimpleNamespace(
            sharding=real.sharding, _pjrt_layout=None, format=SimpleNamespace(layout=layout),
            dtype=real.dtype, shape=(2, 3), unsafe_buffer_pointer=real.unsafe_buffer_pointer,
        )

    adapter = framework("jax")
    row_major = _native.share.describe_declared(fake((0, 1)), adapter)
    transposed = _native.share.describe_declared(fake((1, 0)), adapter)
    assert row_major.strides == [3, 1]
    assert transposed.strides == [1, 2]


def test_narrowing_shares_into_jax_never_deadlock():
    """JAX narrows an int64 tensor by a computation, and describing its result while that runs
    used to wait holding the GIL that the computation's end needed (it releases the PyTorch
    tensor it read): `%share i ->jax` hung about one run in three. In a child process with a
    deadline, so that a hang fails this test instead of the whole run."""
    import subprocess
    import sys

    script = (
        "import torch, gpushare\n"
        "i = torch.arange(1024)\n"
        "for _ in range(100):\n"
        "    r = gpushare.share(i, 'jax', budget=0.05, warmup=1, observe=True)\n"
        "    assert r.verdict == 'copied' and r.target.dtype == 'int32', r\n"
        "print('done')\n"
    )
    try:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("100 narrowing shares into JAX did not finish in 240 s: the describe step deadlocked")
    assert run.returncode == 0 and "done" in run.stdout, run.stderr[-2000:]


def test_the_warnings_a_share_owes_name_the_pair_and_what_was_lost():
    """A writable view of memory the source holds read-only, and a copy that narrowed the dtype and
    lost values, each warn at the caller's line in the pair's words; a copy that lost nothing, and
    a plain shared view of writable memory, do not warn."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert gpushare.share(jnp.ones(4), "torch").shared
        narrowed = gpushare.share(np.array([0.1, 1e300]), "jax")
        kept = gpushare.share(np.array([0.5, 2.0]), "jax")
        gpushare.share(torch.ones(4), "numpy")
    messages = [str(w.message) for w in seen if issubclass(w.category, gpushare.GpushareWarning)]
    assert messages[0] == "jax → torch: the target can write to memory the source marks read-only", messages
    assert narrowed.verdict == "copied" and kept.verdict == "copied"
    assert messages[1].startswith("numpy → jax: the copy changed the dtype float64 → float32 and 1 of 2 values changed"), messages
    assert len(messages) == 2, messages
    assert all(w.filename == __file__ for w in seen), [w.filename for w in seen]


def test_a_planned_share_warns_at_the_callers_line_and_a_chain_at_the_users():
    """Once its plan is made the common share goes from the caller straight into the core: its
    warning still names the caller's line, and a chain's hop (gpushare's own call of share) names
    the line of the user's chain, not gpushare's."""
    gpushare.share(jnp.ones(4), "torch")  # the plan is made
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        planned_line = sys._getframe().f_lineno + 1
        gpushare.share(jnp.ones(4), "torch")
        chain_line = sys._getframe().f_lineno + 1
        gpushare.share_chain(jnp.ones(4), ["torch"])
    read_only = [w for w in seen if "read-only" in str(w.message)]
    assert [(w.filename, w.lineno) for w in read_only] == [(__file__, planned_line), (__file__, chain_line)]


def test_a_planned_shares_warning_follows_the_warning_filters():
    """The planned share warns through the interpreter's own ``warnings.warn``: shown once per line
    by default, every time under "always", never under "ignore", raised under "error"."""
    gpushare.share(jnp.ones(4), "torch")  # the plan is made

    def read_only_warnings(action: str) -> int:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter(action)
            for _ in range(3):
                assert gpushare.share(jnp.ones(4), "torch").shared
        return sum("read-only" in str(w.message) for w in seen)

    assert read_only_warnings("always") == 3
    assert read_only_warnings("default") == 1
    assert read_only_warnings("ignore") == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(GpushareWarning, match="jax → torch: the target can write"):
            gpushare.share(jnp.ones(4), "torch")


def test_a_timed_share_into_jax_on_the_host_waits_for_the_copy_it_queued(monkeypatch):
    """JAX's CPU client copies a NumPy array it cannot view after ``from_dlpack`` has returned (a
    200 MiB copy returned in 0.6 ms and landed 150 ms later): a timed share ends each sample by
    waiting for the target, as on a GPU, or it would report the copy as nearly free. One conversion
    alone stays the raw call's host time, with no wait."""
    from gpushare.adapters import framework

    jax_adapter = type(framework("jax"))
    waited = []
    real = jax_adapter.synchronize
    monkeypatch.setattr(jax_adapter, "synchronize", lambda self, obj: waited.append(obj) or real(self, obj))
    x = np.ones(4097, np.float32)[1:]  # 4 bytes past the allocation: not 64-byte aligned, so JAX copies
    r = gpushare.share(x, "jax", path="dlpack", repeat=3, number=2)
    assert r.verdict == "copied"
    assert len(waited) >= 3 and all(isinstance(y, jax.Array) for y in waited)
    waited.clear()
    gpushare.share(x, "jax", path="dlpack")
    assert waited == []
