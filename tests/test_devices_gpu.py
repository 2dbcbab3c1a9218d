"""Devices on real GPUs: the current-device trap, peer views, page-locked host memory, moves.

``pytest -m gpu tests/test_devices_gpu.py``; skips with "no CUDA" without a GPU and "fewer than 2
GPUs" for the tests that need two. JAX is started first (tests/_gpu.py), so on two GPUs cuda:1 is
current, as in a notebook that imported JAX.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpushare
from gpushare import devices, topology
from gpushare.exceptions import ConversionError
from _gpu import cuda_devices, need, require_cuda, to_host

pytestmark = pytest.mark.gpu

torch = require_cuda()
two = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("dst", ["jax", "cupy"])
def test_torch_exports_from_any_device_whatever_is_current(device, dst):
    need(dst)
    x = torch.arange(1 << 12, dtype=torch.float32, device=device)
    current = torch.cuda.current_device()
    r = gpushare.share(x, dst)
    assert r.verdict == "shared", r.reason
    assert r.target.dlpack_device == x.__dlpack_device__()
    assert torch.cuda.current_device() == current, "gpushare restored the current device"
    moved = x.get_device() != current
    assert any("was current, not the source's" in n for n in r.notes) == moved, r.notes
    x[3] = -1.0
    torch.cuda.synchronize(x.device)
    assert to_host(dst, r.value)[3] == -1.0


@two
def test_the_raw_call_fails_where_gpushare_works():
    """The trap itself, so the test above means something: torch refuses without the guard."""
    jax = need("jax")
    import jax.dlpack

    with torch.cuda.device(1):
        x = torch.ones(8, device="cuda:0")
        with pytest.raises(BufferError, match="different CUDA device"):
            jax.dlpack.from_dlpack(x)
        r = gpushare.share(x, "jax")
    assert r.verdict == "shared" and any("would have failed" in n for n in r.notes), r.notes


_FIRST_USE = """
import sys, torch, jax, gpushare
x = torch.ones(8, device="cuda:0")
assert torch.cuda.current_device() == 0
if sys.argv[1] == "raw":
    import jax.dlpack
    try:
        jax.dlpack.from_dlpack(x)
    except BufferError as e:
        print("raw:", e)
else:
    r = gpushare.share(x, "jax")
    print(r.verdict, r.reason, r.notes)
"""


@two
@pytest.mark.parametrize("how", ["raw", "gpushare"])
def test_the_first_handoff_into_jax_survives_jax_starting_its_backends_on_the_other_gpu(how):
    """JAX starts its backends on first use and makes the last GPU current then: inside the first
    from_dlpack, after the current device was checked. On 2x H200 the calibration's first torch →
    jax handoff failed that way ("the tensor is not on the current CUDA device"). A fresh process,
    JAX imported but not started: the raw call shows the trap, gpushare's share works."""
    import subprocess
    import sys

    need("jax")
    done = subprocess.run([sys.executable, "-c", _FIRST_USE, how], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if how == "raw":
        assert "raw:" in done.stdout and "CUDA device" in done.stdout, done.stdout
    else:
        assert done.stdout.startswith("shared"), done.stdout + done.stderr[-3000:]


@two
def test_a_tensor_that_requires_grad_off_the_current_device_is_described_and_refused_for_grad():
    """``inspect`` used torch's __dlpack__, which refuses a tensor off the current device,
    so a requires_grad tensor on cuda:0 while cuda:1 was current failed with the wrong pair and reason
    ("torch → torch via inspect failed: the tensor is not on the current CUDA device")."""
    with torch.cuda.device(1):
        x = torch.ones(8, device="cuda:0", requires_grad=True)
        info = gpushare.inspect(x)
        assert info.dlpack_device == (2, 0) and info.data_ptr == x.data_ptr()
        with pytest.raises(ConversionError, match="requires grad") as raised:
            gpushare.share(x, "jax")
        assert "current CUDA device" not in str(raised.value)
        assert torch.cuda.current_device() == 1


@two
def test_numba_peer_view_is_shared_and_its_label_is_flagged():
    numba_cuda = need("numba")
    x = torch.arange(1024, dtype=torch.float32, device="cuda:1")
    with numba_cuda.gpus[0]:
        r = gpushare.share(x, "numba")
    assert r.verdict == "shared", (r.reason, r.notes)
    assert r.target.cuda["device_ordinal"] == 1
    notes = " ".join(r.notes)
    if r.target.dlpack_device != (2, 1):
        assert "labels the array cuda:0" in notes and "peer access" in notes, notes


def test_pinned_host_memory_viewed_by_jax_on_the_gpu_is_shared_when_it_is():
    """JAX asked for a GPU array of a page-locked host tensor: where it keeps the address (the
    reference run on the H200 saw that), the driver says pinned host memory and the verdict is
    shared, with the link named; where it copies, the address differs and the verdict is copied."""
    jax = need("jax")
    import jax.dlpack

    from gpushare.adapters import framework

    x = torch.arange(4096, dtype=torch.float32).pin_memory()
    gpu = jax.devices("gpu")[0]
    plan = gpushare._native.share.SharePlan(
        framework("torch"), framework("jax"), "dlpack", lambda t: jax.dlpack.from_dlpack(t, device=gpu), None, None
    )
    try:
        r = plan.run(x, 1, 1, None, None)
    except Exception as e:
        pytest.skip(f"this JAX does not import host memory onto the GPU: {e}")
    if r.target.data_ptr == x.data_ptr():
        assert r.target.cuda["memory_type"] == "pinned_host"
        assert r.verdict == "shared", (r.reason, r.notes)
        assert any("host link" in n for n in r.notes), r.notes
    else:
        assert r.verdict == "copied"
    np.testing.assert_array_equal(np.asarray(r.value), np.arange(4096, dtype=np.float32))


@two
@pytest.mark.parametrize("path", ["p2p", "pinned", "move", "dlpack"])
@pytest.mark.parametrize("dst", ["torch", "jax", "cupy"])
def test_moves_to_the_other_gpu(path, dst):
    need(dst)
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
    try:
        r = gpushare.share(x, dst, device="cuda:1", path=path)
    except gpushare.exceptions.ConversionError as e:
        if path == "dlpack":
            # CuPy 14.2 and JAX 0.11.2 cannot make this copy; gpushare must have said so before.
            assert "UNEXPECTED" not in str(e) and e.predicted is not None, e
            pytest.skip(f"the consumer cannot ask torch for a copy on another device here: {e}")
        raise
    assert r.verdict == "copied" and r.path == path
    assert r.target.dlpack_device == (2, 1)
    assert r.target.cuda["device_ordinal"] == 1
    np.testing.assert_array_equal(to_host(dst, r.value), np.arange(1 << 20, dtype=np.float32))


@two
def test_auto_move_is_p2p_and_compare_lists_every_move():
    x = torch.randn(1 << 22, device="cuda:0")
    assert gpushare.share(x, "torch", device="cuda:1").path == "p2p"
    c = gpushare.compare(x, "torch", device="cuda:1", repeat=3)
    rows = {r["path"]: r for r in c.rows}
    assert set(rows) == set(devices.MOVE_PATHS)
    for path in ("p2p", "pinned", "move"):
        assert rows[path]["verdict"] == "copied", rows[path]
    assert "NVLink" in repr(c) or "link:" in repr(c), repr(c)


@two
@pytest.mark.parametrize("dst", ["torch", "cupy"])
def test_one_auto_move_plan_decides_each_array_where_it_lies(dst):
    """`share(x, to, device=)` keeps one plan per array type, target and device, and the plan
    decides `auto` for each array: an array already on cuda:1 is handed over in place (shared),
    the next one on cuda:0 is copied across, each predicted for the path that ran."""
    need(dst)
    on_0 = torch.arange(1 << 16, dtype=torch.float32, device="cuda:0")
    on_1 = torch.arange(1 << 16, dtype=torch.float32, device="cuda:1")
    for x, verdict in ((on_0, "copied"), (on_1, "shared"), (on_0, "copied"), (on_1, "shared")):
        r = gpushare.share(x, dst, device="cuda:1")
        assert r.verdict == verdict, (r.path, r.reason)
        assert r.prediction is not None and r.prediction["verdict"] == verdict and not r.unexpected, (r.path, r.prediction)
        assert r.target.dlpack_device == (2, 1)
        np.testing.assert_array_equal(to_host(dst, r.value), np.arange(1 << 16, dtype=np.float32))
    assert gpushare.share(on_1, dst, device="cuda:1").path == "move"


@two
def test_topology_sees_both_gpus_and_peer_access_both_ways():
    t = topology.topology().to_dict()
    assert len(t["devices"]) >= 2
    pair = t["pairs"][0]
    assert pair["a_to_b"] == torch.cuda.can_device_access_peer(0, 1)
    assert pair["b_to_a"] == torch.cuda.can_device_access_peer(1, 0)
    assert "topology" in gpushare.gpuinfo().to_dict()


@two
@pytest.mark.parametrize("path", ["p2p", "pinned"])
def test_a_moved_buffer_let_go_is_not_overwritten_while_its_consumer_still_reads_it(path):
    """A move's result lives in gpushare's pooled memory on cuda:1. When the consumer lets it go
    with a read still queued on cuda:1's stream, the next move of the same size reuses that memory:
    its copy (queued on cuda:0's stream) must wait for the read. The ledger once took cuda:0's
    stream 0 and cuda:1's stream 0 for one stream and let the copy run at once."""
    n = 1 << 22
    first = torch.full((n,), 1.0, device="cuda:0")
    second = torch.full((n,), 2.0, device="cuda:0")
    gpushare.share(first, "torch", device="cuda:1", path=path)  # warm: the pool holds one buffer
    torch.cuda.synchronize(0), torch.cuda.synchronize(1)
    y = gpushare.share(first, "torch", device="cuda:1", path=path).value
    assert y.device.index == 1
    with torch.cuda.device(1):
        torch.cuda._sleep(int(2e8))  # ~0.1 s of spinning on cuda:1's current stream, before the read
        copy = y.clone()  # queued after the sleep: reads y's memory once the sleep is over
    del y  # the consumer lets go with its read still queued
    z = gpushare.share(second, "torch", device="cuda:1", path=path).value  # reuses the pooled memory
    torch.cuda.synchronize(0), torch.cuda.synchronize(1)
    assert float(copy.min()) == 1.0 and float(copy.max()) == 1.0, "the queued read saw the next move's bytes"
    assert float(z.min()) == 2.0 and float(z.max()) == 2.0


@two
@pytest.mark.parametrize("dst", ["torch", "jax", "cupy"])
def test_a_peer_move_left_running_is_waited_for_by_every_kind_of_consumer(dst):
    """A p2p move returns with the copy still crossing NVLink (queued on the source's stream after
    whatever the source queued): a consumer that names its stream waits for it on its device. Here
    the source's stream is held for ~0.1 s first, so a consumer that did not wait would read the
    pooled memory's old bytes."""
    need(dst)
    n = 1 << 22
    old = torch.full((n,), -1.0, device="cuda:0")
    gpushare.share(old, "torch", device="cuda:1", path="p2p")  # the pool now holds a buffer of -1s
    torch.cuda.synchronize(0), torch.cuda.synchronize(1)
    x = torch.arange(n, dtype=torch.float32, device="cuda:0")
    torch.cuda.synchronize(0)
    torch.cuda._sleep(int(2e8))  # on cuda:0's current stream: the copy queues after it
    r = gpushare.share(x, dst, device="cuda:1", path="p2p")
    assert r.verdict == "copied" and r.target.dlpack_device == (2, 1)
    # The timing ended when the copy had landed: never below the copy's own time.
    assert r.timing.median > 0.05, r.timing
    np.testing.assert_array_equal(to_host(dst, r.value), np.arange(n, dtype=np.float32))


@two
def test_a_peer_move_left_running_is_waited_for_by_an_interface_reader():
    """A reader of the moved buffer's __cuda_array_interface__ names no stream of its own: the
    interface waits for the copy on the host before it describes the memory."""
    n = 1 << 22
    x = torch.arange(n, dtype=torch.float32, device="cuda:0")
    torch.cuda.synchronize(0)
    torch.cuda._sleep(int(2e8))
    buf = gpushare._native.share.SharedBuffer._copy_of(
        gpushare.adapters.framework("torch").copy_source(x), "p2p", torch.cuda.current_stream(0).cuda_stream, "cuda:1")
    interface = buf.__cuda_array_interface__
    assert interface["stream"] is None, "the copy was waited for: no stream left to wait on"
    with torch.cuda.device(1):
        y = torch.as_tensor(buf, device="cuda:1")
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(n, dtype=np.float32))



@pytest.mark.parametrize("device", cuda_devices())
def test_a_numba_array_is_described_on_the_device_of_its_memory_whatever_is_current(device):
    """Numba's arrays name no device: gpushare asks the driver where the memory is, not Numba which
    device is current (on two GPUs with JAX started, cuda:1 is current for cuda:0's memory)."""
    need("numba")
    import numba.cuda

    x = torch.arange(64, dtype=torch.float32, device=device)
    with numba.cuda.gpus[x.get_device()]:
        arr = numba.cuda.as_cuda_array(x)
    for other in range(torch.cuda.device_count()):
        with numba.cuda.gpus[other]:
            info = gpushare.inspect(arr)
        assert info.device == device and tuple(info.dlpack_device) == (2, x.get_device()), (other, info.device)
    r = gpushare.share(x, "numba")
    assert r.verdict == "shared" and r.target.device == device, (r.target.device, r.reason)


@pytest.mark.parametrize("device", cuda_devices())
def test_an_array_made_for_the_lab_lies_on_the_device_asked_for_whatever_is_current(device):
    """The lab makes its arrays by each adapter's from_numpy on the device it was asked for: Numba
    allocated on its current device (cuda:1 once JAX started), so a bench on cuda:0 measured cuda:1's
    memory, and a process handoff of it opened a context in the worker every time (~110 ms)."""
    need("numba")
    from gpushare.adapters import framework

    ordinal = int(device.split(":")[1])
    for other in range(torch.cuda.device_count()):
        with torch.cuda.device(other):
            arr = framework("numba").from_numpy(np.arange(64, dtype=np.float32), False, ordinal)
        info = gpushare.inspect(arr)
        assert info.cuda["device_ordinal"] == ordinal and info.device == device, (other, info.device)


@two
@pytest.mark.parametrize("path", ["p2p", "pinned"])
def test_an_own_copy_moves_every_layout_alike_from_the_description_and_from_the_array(path, monkeypatch):
    """share(device=) by gpushare's own copy runs from the pipeline's description of the source
    while the source's device is current (crates/python/src/binding/own_copy.rs), and from the
    array itself through the device guard while another is (gpushare.paths.OwnCopy). Both must
    move every layout to the same values, dtype, shape and strides, and say the same; which of the
    two ran is counted by the Python route's calls."""
    from gpushare.paths import OwnCopy

    python_route_calls = []
    real_call = OwnCopy.__call__

    def counted(self, obj):
        python_route_calls.append(obj)
        return real_call(self, obj)

    monkeypatch.setattr(OwnCopy, "__call__", counted)
    base = torch.arange(4 * 6 * 8, dtype=torch.float32, device="cuda:0").reshape(4, 6, 8)
    cases = {
        "compact": base,
        "transposed": base.transpose(0, 2),
        "sliced with an offset": base[1:, 2:5, ::2],
        "zero-size": base[:, :0],
        "0-d": base[1, 2, 3],
        "bool": base > 50,
        "bfloat16": base.to(torch.bfloat16),
        "complex64": torch.complex(base, -base),
        "int8": base.to(torch.int8),
    }
    for label, x in cases.items():
        said = {}
        for current in (0, 1):
            python_route_calls.clear()
            with torch.cuda.device(current):
                r = gpushare.share(x, "torch", device="cuda:1", path=path)
            # cuda:0 current: the Rust route, from the description; cuda:1: the guarded Python route.
            assert len(python_route_calls) == current, (label, current, len(python_route_calls))
            # A zero-size array has no memory: "copied", with nothing to share, wherever it lies.
            assert r.verdict == "copied" and r.path == path, (label, current, r.reason)
            assert x.numel() or r.reason.startswith("zero-size: nothing to share"), (label, current, r.reason)
            y = r.value
            assert y.device.index == 1 and y.dtype == x.dtype and y.shape == x.shape, (label, current)
            if x.numel():
                assert y.stride() == x.stride(), (label, current, y.stride(), x.stride())
            assert torch.equal(y.cpu(), x.cpu()), (label, current)
            said[current] = (r.reason, [n for n in r.notes if "was current" not in n])
        assert said[0] == said[1], (label, said)


@two
@pytest.mark.parametrize("src", ["cupy", "jax"])
def test_an_own_copy_from_another_framework_moves_its_values(src):
    """The own copy from the description for sources without torch's stream (CuPy's current
    stream, JAX's none): the values arrive on cuda:1."""
    fw = need(src)
    values = np.arange(1 << 16, dtype=np.float32)
    if src == "cupy":
        with fw.cuda.Device(0):
            x = fw.asarray(values)
    else:
        x = fw.device_put(values, [d for d in fw.devices() if d.platform == "gpu"][0])
    r = gpushare.share(x, "torch", device="cuda:1", path="p2p")
    assert r.verdict == "copied" and r.value.device.index == 1, r.reason
    np.testing.assert_array_equal(r.value.cpu().numpy(), values)


@two
def test_a_jax_array_on_the_second_gpu_into_cupy_is_predicted_on_every_path_and_auto_shares():
    """CuPy's ``__cuda_array_interface__`` import allocates on the current device: a JAX array on
    cuda:1 taken by ``cai`` once arrived as a copy on cuda:0 where the rules said shared, and
    ``auto`` took that path from a model. Each path's outcome is the predicted one, and ``auto``
    never takes a path that copies where another shares."""
    need("jax")
    need("cupy")
    import jax
    import jax.numpy as jnp

    from gpushare.exceptions import GpushareError

    x = jax.device_put(jnp.arange(4096, dtype=jnp.float32), jax.devices("gpu")[1])
    shared_by = []
    for path in ("cai", "dlpack", "capsule"):
        try:
            r = gpushare.share(x, "cupy", path=path)
        except GpushareError as e:
            assert getattr(e, "predicted", None), f"{path}: refused without a prediction: {e}"
            continue
        assert r.unexpected is False, (path, r.verdict, r.reason, r.prediction)
        if r.verdict == "shared":
            assert r.target.dlpack_device == x.__dlpack_device__(), (path, r.target.dlpack_device)
            shared_by.append(path)
    assert shared_by, "no path shares a JAX array on cuda:1 with CuPy"
    r = gpushare.share(x, "cupy")
    assert r.verdict == "shared" and r.unexpected is False, (r.path, r.verdict, r.reason)
