"""Across processes on the GPU (``pytest -m gpu``): CUDA IPC by the Rust core, torch.multiprocessing's
CUDA sharing, NCCL send/recv (two GPUs) and its socket stand-in for two hosts.

"shared" is proven by a write in one process read in the other; each side shows its own context;
GPU memory and processes are released when the worker stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from _gpu import require_cuda
from _procs import gone as _gone

pytestmark = pytest.mark.gpu
torch = require_cuda()

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402
from gpushare.exceptions import PathNotApplicableError  # noqa: E402

two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


@pytest.fixture(scope="module")
def worker():
    with gpushare.Worker(device="cuda:0") as w:
        yield w


def _offset_tensor():
    # A view 4 KiB into a caching-allocator block: the handle names the block, the offset the view.
    base = torch.zeros(1 << 20, dtype=torch.float32, device="cuda:0")
    return base, base[1024:1024 + 4096]


def test_ipc_maps_the_same_allocation_in_another_context(worker):
    base, x = _offset_tensor()
    r = worker.share(x, path="ipc")
    src, dst = r.source["identity"], r.target["identity"]
    assert r.verdict == "shared", r.reason
    assert src["handle"] == dst["opened_handle"]
    assert src["offset"] == dst["offset"] and src["offset"] >= 4096
    assert src["size"] == dst["size"]
    assert r.source["pid"] != r.target["pid"]
    # Each side's context: same device, each process its own primary context.
    assert r.source["context"]["device"] == r.target["context"]["device"] == 0
    assert r.source["context"]["primary"] and r.target["context"]["primary"]
    # Parent writes, worker reads; worker writes, parent reads.
    x[5] = 42.0
    torch.cuda.synchronize()
    assert r.remote.read()[5] == 42.0
    r.remote.write(7, -3.0)
    assert float(x[7]) == -3.0
    assert r.bytes_moved == 0
    r.release()
    assert worker.slots() == []


@pytest.mark.parametrize("view", ["transposed", "a column", "every other row", "a sub-block"])
def test_ipc_hands_a_strided_view_over_as_the_same_view(worker, view):
    # The shm path on the GPU: the view's shape alone would be read as contiguous.
    base = torch.arange(48, dtype=torch.float32, device="cuda:0").reshape(6, 8)
    x = {"transposed": base.T, "a column": base[:, 3], "every other row": base[::2],
         "a sub-block": base[1:4, 2:6]}[view]
    r = worker.share(x, path="ipc")
    assert r.verdict == "shared", r.reason
    assert (r.remote.read() == x.cpu().numpy()).all()
    idx = (0,) * x.ndim
    r.remote.write(idx, -1.0)
    torch.cuda.synchronize()
    assert float(x[idx]) == -1.0
    r.release()


def test_ipc_into_cupy_in_the_worker(worker):
    pytest.importorskip("cupy", reason="cupy not installed")
    _, x = _offset_tensor()
    r = worker.share(x, path="ipc", to="cupy")
    assert r.verdict == "shared" and r.target["framework"] == "cupy"
    x[0] = 9.0
    torch.cuda.synchronize()
    assert r.remote.read()[0] == 9.0
    r.release()


def test_torch_multiprocessing_cuda_shares_the_block(worker):
    _, x = _offset_tensor()
    r = worker.share(x, path="torch_mp")
    assert r.verdict == "shared", r.reason
    assert r.source["identity"]["offset"] == r.target["identity"]["offset"]
    x[1] = 5.0
    torch.cuda.synchronize()
    assert r.remote.read()[1] == 5.0
    r.remote.write(2, 6.0)
    assert float(x[2]) == 6.0
    r.release()


@two_gpus
def test_torch_mp_hands_over_a_tensor_whose_device_is_not_the_current_one(worker):
    # The user's current device may be another GPU (importing JAX leaves the last one current);
    # torch exports a CUDA tensor only while its device is current, which is gpushare's to arrange.
    _, x = _offset_tensor()
    with torch.cuda.device(1):
        r = worker.share(x, path="torch_mp")
        assert torch.cuda.current_device() == 1  # left as the user had it
    assert r.verdict == "shared", r.reason
    x[3] = 4.0
    torch.cuda.synchronize()
    assert r.remote.read()[3] == 4.0
    r.release()


@pytest.mark.parametrize("path", ["ipc", "torch_mp"])
def test_lazy_conjugate_and_negative_views_on_the_gpu_are_refused_as_in_one_process(worker, path):
    # No process path carries PyTorch's conjugate or negative bit; the worker would read
    # unconjugated or wrong-signed values. The one-process rule (the adapter's check_view_bits).
    from gpushare.exceptions import ConversionError, UnsafeInputError

    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64, device="cuda:0")
    with pytest.raises(ConversionError, match="conjugate bit"):
        worker.share(z.conj(), path=path)
    neg = torch._neg_view(torch.arange(4, dtype=torch.float32, device="cuda:0"))
    with pytest.raises(UnsafeInputError, match="negative bit"):
        worker.share(neg, path=path)
    r = worker.share(neg.resolve_neg(), path=path)
    assert r.remote.read().tolist() == [-0.0, -1.0, -2.0, -3.0]
    r.release()


def test_nccl_on_one_gpu_is_a_predicted_refusal(worker):
    x = torch.ones(1024, device="cuda:0")
    with pytest.raises(PathNotApplicableError, match="Duplicate GPU"):
        worker.share(x, path="nccl")
    with pytest.raises(PathNotApplicableError, match="Duplicate GPU"):
        worker.share(x, path="nccl_socket")


def test_a_strided_cuda_tensor_is_refused_for_nccl_with_the_fix_before_anything_is_sent(worker):
    """torch.distributed's send takes only dense tensors: ``x[::2]`` once failed inside the worker in
    torch's words. The refusal comes first, names the fix, and the worker goes on serving."""
    x = torch.arange(64.0, device="cuda:0")[::2]
    for path in ("nccl", "nccl_socket"):
        with pytest.raises(PathNotApplicableError, match=r"x\.contiguous\(\)"):
            worker.share(x, path=path)
    r = worker.share(x.contiguous(), path="ipc")
    assert r.verdict == "shared"
    r.release()


@two_gpus
def test_the_dense_copy_of_a_strided_tensor_goes_by_nccl_to_a_second_gpu():
    x = torch.arange(64.0, device="cuda:0")[::2]
    with gpushare.Worker(device="cuda:1") as w:
        with pytest.raises(PathNotApplicableError, match=r"x\.contiguous\(\)"):
            w.share(x, path="nccl")
        r = w.share(x.contiguous(), path="nccl")
        assert r.verdict == "copied"
        assert (r.remote.read() == x.cpu().numpy()).all()
        r.release()


_SENT_THEN_STOPPED = r"""
import torch, gpushare
x = torch.ones(1 << 20, device="cuda:0")
with gpushare.Worker(device="cuda:0") as w:
    print("TORCH_MP", w.share(x, path="torch_mp").verdict, flush=True)
print("DONE", flush=True)
"""


def test_a_stopped_worker_leaves_no_cuda_tensor_of_torch_multiprocessing_behind():
    """torch.multiprocessing keeps each CUDA block it sent until the receiver lets go and the
    producer collects it; a worker stopped normally has let go, so the process ends without torch's
    warning that the producer ended before all shared CUDA tensors were released."""
    proc = subprocess.run([sys.executable, "-c", _SENT_THEN_STOPPED], capture_output=True, text=True, timeout=300)
    assert "TORCH_MP shared" in proc.stdout and "DONE" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "terminated before all shared CUDA tensors released" not in proc.stderr, proc.stderr[-2000:]


_POOL = r"""
import os, sys, torch, gpushare
from gpushare.exceptions import PathNotApplicableError
x = torch.ones(1 << 20, device="cuda:0")
with gpushare.Worker(device="cuda:0") as w:
    try:
        w.share(x, path="ipc")
    except PathNotApplicableError as e:
        print("REFUSED", e, flush=True)
    else:
        print("SHARED", flush=True)
    try:
        print("TORCH_MP", w.share(x, path="torch_mp").verdict, flush=True)
    except Exception as e:  # torch's own route for this memory may be refused in a container
        print("TORCH_MP failed:", type(e).__name__, str(e).splitlines()[0], flush=True)
"""


@pytest.mark.parametrize("conf, words", [
    ("backend:cudaMallocAsync", "stream-ordered pool"),
    ("expandable_segments:True", "VMM"),
])
def test_memory_legacy_ipc_cannot_export_gets_a_predicted_explained_refusal(conf, words):
    env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": conf}
    out = subprocess.run([sys.executable, "-c", _POOL], env=env, capture_output=True, text=True, timeout=300)
    assert "REFUSED" in out.stdout and words in out.stdout, out.stdout + out.stderr
    # torch.multiprocessing has its own route for this memory (or says why not): a row either way.
    print(out.stdout)


def test_gpu_memory_and_processes_are_released_when_the_worker_stops():
    free_before, _ = _native.cuda.mem_info(0, True)
    x = torch.ones(1 << 22, device="cuda:0")
    w = gpushare.Worker(device="cuda:0").start()
    pid = w.pid
    r = w.share(x, path="ipc")
    assert r.verdict == "shared"
    ctx = w.context(0)
    assert ctx is not None
    w.stop()
    assert _gone(pid), f"worker {pid} still running"
    del r
    # The worker's context and its mapping are gone with it: free memory is back (tolerance for the
    # parent's own caching allocator, which keeps x).
    deadline = time.monotonic() + 10
    while True:
        free_after, _ = _native.cuda.mem_info(0, True)
        if free_after >= free_before - x.nbytes - (64 << 20) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert free_after >= free_before - x.nbytes - (64 << 20), (free_before, free_after)
    # The parent's tensor is intact and usable.
    assert float(x.sum()) == x.numel()


@two_gpus
def test_nccl_send_recv_between_two_gpus_is_a_copy():
    with gpushare.Worker(device="cuda:1") as w:
        x = torch.arange(1 << 16, dtype=torch.float32, device="cuda:0")
        r = w.share(x, path="nccl", repeat=3)
        assert r.verdict == "copied" and r.bytes_moved == x.nbytes
        assert r.target["identity"]["device"] == 1
        got = r.remote.read()
        assert got[123] == 123.0
        x[123] = -1.0
        torch.cuda.synchronize()
        assert r.remote.read()[123] == 123.0  # a copy: the parent's write is not seen
        assert r.timing.first_call > 0 and r.timing.repeats == 3


@two_gpus
def test_nccl_socket_stand_in_is_labelled_and_measured():
    with gpushare.Worker(device="cuda:1") as w:
        x = torch.ones(1 << 20, device="cuda:0")
        r = w.share(x, path="nccl_socket", repeat=3)
        assert r.verdict == "copied"
        assert "stand-in for two hosts" in r.mechanism
        assert r.timing["median"] > 0


@two_gpus
def test_nccl_paths_leave_no_framework_chatter_in_the_users_output():
    # The workers inherit the kernel's stderr, so ProcessGroupNCCL's warnings (unbatched
    # send/recv, "destroy_process_group() was not called ...") landed in the notebook's cell. A child
    # process stands in for the kernel: everything its workers print reaches its own stderr.
    code = """
import torch, gpushare
x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
with gpushare.Worker(device="cuda:1") as w:
    for path in ("nccl", "nccl_socket"):
        r = w.share(x, path=path, repeat=3)
        assert r.verdict == "copied", r.reason
    gpushare.compare(x, "torch", across=w, paths="nccl", repeat=2)
print("done")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    said = out.stdout + out.stderr
    for words in ("ProcessGroupNCCL", "destroy_process_group", "unbatched P2P"):
        assert words not in said, said[-3000:]


@two_gpus
def test_ipc_across_devices_maps_over_peer_access():
    with gpushare.Worker(device="cuda:1") as w:
        _, x = _offset_tensor()
        r = w.share(x, path="ipc")
        assert r.verdict == "shared", r.reason
        x[3] = 11.0
        torch.cuda.synchronize()
        assert r.remote.read()[3] == 11.0


def test_compare_across_puts_every_path_in_one_table(worker):
    x = torch.ones(1 << 18, device="cuda:0")
    c = gpushare.compare(x, "torch", across=worker, repeat=3)
    rows = {row["path"]: row for row in c.rows}
    assert rows["ipc"]["verdict"] == "shared" and rows["torch_mp"]["verdict"] == "shared"
    assert rows["shm"]["verdict"] == "failed" and "GPU" in rows["shm"]["reason"]
    print(c)


def _schema_check(kind: str, payload: dict) -> None:
    """Validated against the shipped schema where jsonschema is installed; to_json() has already
    read the data through the Rust types the schema is generated from (a misfit raises there)."""
    try:
        import jsonschema
    except ImportError:
        return
    from importlib import resources

    schema = json.loads(resources.files("gpushare").joinpath("schemas", f"{kind}.schema.json").read_text())
    jsonschema.validate(payload, schema)


def test_cuda_process_results_fit_their_schemas(worker):
    """The CUDA identities and contexts (handles, offsets, context handles) of ipc and torch_mp
    go through the Rust types unchanged."""
    _, x = _offset_tensor()
    for path in ("ipc", "torch_mp"):
        r = worker.share(x, path=path, repeat=2)
        payload = json.loads(r.to_json())
        _schema_check("share", payload)
        data = payload["data"]
        assert data["verdict"] == "shared", data["reason"]
        sides = data["worker"]
        for side in ("source", "target"):
            assert sides[side]["identity"]["kind"] == "cuda"
            assert sides[side]["identity"]["offset"] == r.row["worker"][side]["identity"]["offset"]
            assert sides[side]["context"]["device"] == 0
        assert sides["target"]["identity"]["opened_handle"] == r.target["identity"]["opened_handle"]
        assert r.to_dict()["schema"] == "gpushare.share/1"
        # Both arrays as gpushare describes each in its own process: the same device and bytes.
        assert data["source"]["device"] == data["target"]["device"] == "cuda:0"
        assert data["source"]["nbytes"] == data["target"]["nbytes"] == x.nbytes
        r.release()
    c = gpushare.compare(x, "torch", across=worker, repeat=2)
    _schema_check("comparison", json.loads(c.to_json()))
    assert c.to_dict()["source"]["device"] == "cuda:0" and c.source["device"] == "cuda:0"


def test_cuda_process_comparison_frame_names_the_device(worker):
    pytest.importorskip("pandas", reason="pandas not installed")
    _, x = _offset_tensor()
    frame = gpushare.compare(x, "torch", across=worker, repeat=2).to_pandas()
    assert set(frame["device"]) == {"cuda:0"} and set(frame["nbytes"]) == {x.nbytes}
    assert set(frame.loc[frame["verdict"] == "shared", "target_memory"]) == {"cuda"}
