"""The CUDA truth on a real GPU: every ordered pair among torch, tf, jax, cupy and numba on one device.

Run with ``pytest -m gpu``; everywhere without a CUDA driver these skip with "no CUDA". Identity is
proven by writing through a writable alias (a torch tensor over the same memory) and reading
through the target, and cross-checked with the driver's allocation identity, contexts, memory
types, the memory ledger and the stream report.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpushare
from gpushare import _native
from _gpu import cuda_devices, need, require_cuda, to_host

pytestmark = pytest.mark.gpu

torch = require_cuda()

FRAMEWORKS = ["torch", "tf", "jax", "cupy", "numba"]


def alias(fw: str, backing):
    """An array of `fw` over the memory of the torch tensor `backing`."""
    mod = need(fw)
    if fw == "torch":
        return backing
    if fw == "jax":
        import jax.dlpack

        # The raw import refuses a tensor off the current device (JAX made the last GPU current).
        with torch.cuda.device(backing.device):
            return jax.dlpack.from_dlpack(backing)
    if fw == "cupy":
        return mod.from_dlpack(backing)
    if fw == "numba":
        return mod.as_cuda_array(backing)
    if fw == "tf":
        return mod.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(backing))
    raise AssertionError(fw)


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("src,dst", list(itertools.permutations(FRAMEWORKS, 2)))
def test_pair_shares_device_memory(src, dst, device):
    need(src), need(dst)
    ordinal = int(device.split(":")[1])
    if ordinal and "numba" in (src, dst):
        pytest.skip("Numba's __cuda_array_interface__ carries no device ordinal: its views of cuda:1 are "
                    "tested as peer views in tests/test_devices_gpu.py")
    backing = torch.arange(1 << 16, dtype=torch.float32, device=device)
    source = alias(src, backing)
    r = gpushare.share(source, dst, observe=True)
    assert r.verdict == "shared", r.reason
    # Where the bytes are is the driver's word; a framework's own label may name the current device
    # instead (Numba's interface has no ordinal; JAX's import while another GPU is current), and
    # then the result must say so.
    assert r.source.cuda["device_ordinal"] == ordinal and r.target.cuda["device_ordinal"] == ordinal
    if {r.source.dlpack_device, r.target.dlpack_device} != {(2, ordinal)}:
        assert r.notes, f"a label other than cuda:{ordinal} went unmentioned: {r.source.dlpack_device} → {r.target.dlpack_device}"
    backing[7] = -5.0
    torch.cuda.synchronize()
    assert to_host(dst, r.value)[7] == -5.0, "verdict shared but a write through the source was not seen"
    # The driver's own words: device memory, same allocation, a context (primary, or none for pools).
    for info in (r.source, r.target):
        cuda = info.cuda
        assert cuda is not None and cuda["memory_type"] == "device"
        assert cuda["device_ordinal"] == ordinal
        assert cuda["context"] == 0 or cuda["context_is_primary"] is True
    assert r.source.cuda["buffer_id"] == r.target.cuda["buffer_id"]
    # A zero-copy share costs no new device memory in any allocator the ledger can read (figures
    # may fall: an unrelated tensor collected in between is freed, never allocated).
    memory = r.memory
    assert memory is not None
    grown = {f"{fw}.{k}": v for fw, figs in memory["frameworks"].items() for k, v in figs.items() if v > 0 and "peak" not in k and "limit" not in k}
    assert not grown and (memory["driver_used"] or 0) <= 0, memory
    # The ledger asks the pair's two allocators only (the driver's figure covers the rest), and
    # PyTorch's answers here: the backing tensor lives in it.
    from gpushare.adapters import framework

    pair = {framework(src).module, framework(dst).module}
    assert set(memory["frameworks"]) <= pair, memory
    assert "torch" not in pair or "torch" in memory["frameworks"], memory
    streams = r.streams
    assert streams is not None and "wait" in streams
    # TensorFlow takes and gives no stream: the report says how gpushare ordered the two sides.
    if dst == "tf" and src != "tf":
        assert f"waited for {src}'s queued work" in streams["wait"], streams
    elif src == "tf":
        assert "TensorFlow's export waits" in streams["wait"], streams


@pytest.mark.parametrize("dst", ["torch", "jax", "cupy", "numba"])
def test_tf_result_is_read_only_after_its_kernels_finish(dst):
    """A TensorFlow result exported while TensorFlow's kernels are still queued: the target reads
    the finished values (TensorFlow's export waits; the consumer's own stream is not ordered with
    TensorFlow's)."""
    tf = need("tf")
    need(dst)
    with tf.device("/GPU:0"):
        y = tf.zeros([16 << 20])
        for _ in range(50):
            y = y + 1.0
    r = gpushare.share(y, dst)
    assert r.verdict == "shared", r.reason
    assert to_host(dst, r.value).min() == 50.0


def test_into_tf_waits_for_the_source_stream():
    """torch work queued on its stream, then shared into TensorFlow at once: TensorFlow reads the
    finished values, because gpushare waited for torch first (TensorFlow's import takes no stream)."""
    tf = need("tf")
    x = torch.zeros(16 << 20, device="cuda")
    for _ in range(50):
        x.add_(1.0)
    r = gpushare.share(x, "tf")
    assert r.verdict == "shared", r.reason
    assert float(tf.reduce_min(r.value)) == 50.0


def test_copy_shows_its_cost_in_the_ledger():
    need("jax")
    x = torch.arange(1 << 20, device="cuda")  # int64: JAX without x64 narrows, so it copies
    r = gpushare.share(x, "jax")
    assert r.verdict == "copied" and "jax_enable_x64" in r.reason
    assert r.source.cuda["buffer_id"] != r.target.cuda["buffer_id"]


def test_torch_context_is_the_primary_context():
    x = torch.ones(16, device="cuda")
    info = gpushare.inspect(x)
    assert info.cuda["context_is_primary"] is True
    ctx = _native.cuda.current_context()
    assert ctx is not None and ctx["is_primary"] is True


def test_source_deleted_while_target_lives_is_not_reused():
    need("jax")
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    expected = x.cpu().numpy().copy()
    r = gpushare.share(x, "jax")
    assert r.verdict == "shared"
    ptr = x.data_ptr()
    del x
    torch.cuda.empty_cache()
    fresh = [torch.full((n,), 7.0, device="cuda") for _ in range(4)]
    assert all(f.data_ptr() != ptr for f in fresh), "memory still shared by JAX was handed out again"
    assert np.array_equal(np.asarray(r.value), expected)


def test_private_context_memory_is_reported_as_not_primary():
    alloc = _native.cuda.PrivateContextAllocation(1 << 20, 0)
    attrs = _native.cuda.pointer_attributes(alloc.ptr)
    assert attrs["context_is_primary"] is False
    assert attrs["context"] == alloc.context
    # The thread's current context is unchanged by the private allocation.
    torch.ones(1, device="cuda")
    assert _native.cuda.current_context()["is_primary"] is True


def test_gpuinfo_reports_the_device():
    info = gpushare.gpuinfo()
    d = info.to_dict()
    assert d["driver"]["available"] if "driver" in d else info.cuda_available
    text = repr(info)
    assert "GPU-" in text  # the device UUID


def test_separate_context_report_shows_what_each_framework_does():
    from gpushare.contexts import separate_context_report

    report = separate_context_report(1 << 16, frameworks=("torch", "cupy", "numba"))
    assert report.private_context_is_primary is False
    by_fw = {r.framework: r for r in report.rows}
    for fw in ("torch", "cupy", "numba"):
        row = by_fw[fw]
        assert row.outcome in ("aliased", "copied", "refused", "not installed"), row
        if row.outcome == "aliased":
            # The framework holds a pointer whose owning context is the private one, not its own.
            assert row.target_context == report.private_context and row.target_context_is_primary is False
    assert "NOT primary" in repr(report) or all(r.outcome != "aliased" for r in report.rows)


@pytest.mark.parametrize("dst", ["torch", "jax"])
def test_managed_memory_is_refused_with_a_prediction_and_torch_takes_it_by_cai(dst):
    """CuPy's managed memory (kDLCUDAManaged) into torch or JAX by DLPack fails in the
    framework; gpushare predicts it before calling, and for PyTorch names the route that works
    (__cuda_array_interface__, pytorch#96318), which then shares."""
    cupy = need("cupy")
    need(dst)
    from gpushare.exceptions import GpushareError

    n = 1 << 12
    memory = cupy.cuda.MemoryPointer(cupy.cuda.ManagedMemory(n * 4), 0)
    x = cupy.ndarray((n,), dtype=cupy.float32, memptr=memory)
    x[...] = cupy.arange(n, dtype=cupy.float32)
    assert x.__dlpack_device__()[0] == 13, "CuPy labels managed memory kDLCUDAManaged"
    with pytest.raises(GpushareError) as raised:
        gpushare.share(x, dst)
    err = raised.value
    assert getattr(err, "predicted", None), f"refused without a prediction: {err}"
    if dst == "torch":
        assert "path='cai'" in err.fix, err.fix
        r = gpushare.share(x, "torch", path="cai")
        assert r.verdict == "shared" and r.unexpected is False, (r.verdict, r.reason, r.prediction)
        x[5] = -3.0
        cupy.cuda.runtime.deviceSynchronize()
        assert float(r.value[5]) == -3.0


def test_a_read_only_host_array_made_into_a_cuda_tensor_brings_no_torch_warning():
    """The host route from JAX's device memory into torch goes through NumPy's read-only view of a
    JAX array: torch warned "The given NumPy array is not writable" under the user's cell (notebook
    08's calibrate on the 2x H200) for a CPU tensor that lives only until its copy to the GPU. In a
    fresh process: torch warns once per process, and an earlier warning would hide this one."""
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np\n"
        "from gpushare.adapters import framework\n"
        "a = np.ones(16, np.float32); a.flags.writeable = False\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('error')\n"
        "    t = framework('torch').from_numpy(a, False, 0)\n"
        "assert t.is_cuda and t.sum().item() == 16, t\n"
        "filters = list(warnings.filters)\n"
        "framework('torch').from_numpy(a, False, 0)\n"
        "assert warnings.filters == filters, 'the filter is the call\\'s own, not left behind'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_numba_is_described_alike_by_its_attributes_and_by_its_interface():
    """Numba's adapter reads a device array's own attributes (its interface's dict costs a share
    microseconds) and keeps the interface as the fallback: both must say the same of every layout."""
    cuda = need("numba")
    from gpushare.adapters import framework

    numba = framework("numba")
    base = cuda.to_device(np.arange(24 * 6, dtype=np.float32).reshape(24, 6))
    layouts = [
        base, base[3:9], base[:, 1:4], base[::2], base[::-1], base[1::3, ::2],
        cuda.device_array((0, 6), dtype=np.float32), cuda.to_device(np.float64(3.0)),
        cuda.to_device(np.arange(100, dtype=np.int8)), cuda.to_device(np.ones(7, dtype=np.complex128)),
        cuda.to_device(np.ones(5, dtype=np.bool_)), cuda.as_cuda_array(torch.ones(9, device="cuda:0")[::3]),
    ]
    fields = ("framework", "dtype", "shape", "strides", "device", "dlpack_device", "data_ptr", "nbytes",
              "contiguous", "alignment", "readonly")
    for array in layouts:
        by_attributes, by_interface = numba.inspect(array), numba._inspect_interface(array)
        assert {f: getattr(by_attributes, f) for f in fields} == {f: getattr(by_interface, f) for f in fields}, array
