"""The transfer-path lab on a real GPU: the pinned and copy paths copy exact data into memory
gpushare owns, the shared path shares, a CUDA SharedBuffer is one allocation seen by torch, JAX,
CuPy and Numba at once, and compare()/bench() report device paths with their verdicts.

Run with ``pytest -m gpu``; everywhere without a CUDA driver these skip with "no CUDA".
"""

from __future__ import annotations

import gc
import re
import time

import numpy as np
import pytest

import gpushare
from gpushare import _native, lab
from _gpu import cuda_devices, need, require_cuda, to_host
from gpushare.exceptions import PathNotApplicableError

pytestmark = pytest.mark.gpu

torch = require_cuda()



def alive() -> int:
    gc.collect()
    return _native.share.shared_buffers_alive()


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("path", ["copy", "pinned"])
@pytest.mark.parametrize("dst", ["torch", "jax", "cupy", "numba"])
def test_device_copies_are_exact_and_land_in_gpushare_memory(path, dst, device):
    need(dst)
    x = torch.randn(1 << 20, device=device)
    r = gpushare.share(x, dst, path=path)
    assert r.verdict == "copied", r.reason
    assert r.target.cuda["device_ordinal"] == x.device.index  # the driver's word (Numba labels by its current device)
    assert r.target.data_ptr != x.data_ptr()
    assert r.target.cuda["memory_type"] == "device"
    assert np.array_equal(to_host(dst, r.value), x.cpu().numpy())


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("nbytes", [1, 4096, (8 << 20) + 12345, (40 << 20) + 7])
def test_pinned_staging_of_odd_sizes_across_chunks(nbytes, device):
    x = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
    r = gpushare.share(x, "torch", path="pinned")
    assert r.verdict == "copied" and torch.equal(r.value, x)


def gpu_layouts(cuda: str):
    """Device views a compact copy must gather: broadcast, reversed (via CuPy: torch has no negative
    strides), transposed, stepped, misaligned, and every unit width the gather kernel uses."""
    views = {
        "stepped columns": torch.arange(48, dtype=torch.float32, device=cuda).reshape(6, 8)[:, ::2],
        "broadcast column": torch.arange(4.0, device=cuda).reshape(4, 1).expand(4, 8),
        "broadcast scalar f64": torch.tensor(2.5, dtype=torch.float64, device=cuda).expand(3, 4, 5),
        "transposed int16": torch.arange(35, dtype=torch.int16, device=cuda).reshape(5, 7).t(),
        "uint8 stepped": torch.arange(200, dtype=torch.uint8, device=cuda)[1::3],
        "complex128 transposed": (torch.arange(12, dtype=torch.float64, device=cuda) * (1 + 1j)).reshape(3, 4).t(),
        "float32 from +4 bytes, stepped": torch.arange(80, dtype=torch.uint8, device=cuda)[4:76].view(torch.float32)[::3],
        "large broadcast": torch.arange(1 << 12, dtype=torch.float32, device=cuda).reshape(-1, 1).expand(1 << 12, 1 << 10),
        "many dims": torch.arange(2**10, dtype=torch.float32, device=cuda).reshape([2] * 10).permute(*range(9, -1, -1)),
    }
    # No reversed sources: torch cannot make negative strides, and CuPy's DLPack export of a
    # negative-stride view is unreadable (the CUDA matrix's "not exportable" cells), so no device
    # array with negative strides reaches gpushare by DLPack. Reversed host arrays are gathered in
    # tests/test_adversarial.py.
    return views


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("path", ["copy", "pinned"])
@pytest.mark.parametrize("dst", ["torch", "jax", "cupy", "tf"])
def test_device_copies_are_compact_gathers_of_any_layout(path, dst, device):
    need(dst)
    ordinal = int(device.split(":")[1])
    for label, x in gpu_layouts(device).items():
        expected = x.cpu().numpy()
        expected = np.ascontiguousarray(expected)
        if dst == "jax" and expected.dtype.itemsize == 8 and expected.dtype.kind != "c":
            import jax

            if not jax.config.jax_enable_x64:
                continue  # JAX narrows 64-bit dtypes: another rule
        if expected.dtype == np.complex128 and dst in ("jax", "tf"):
            continue  # JAX narrows it with x64 off; not every TensorFlow build imports it
        r = gpushare.share(x, dst, path=path)
        assert r.verdict == "copied" == r.prediction["verdict"], f"{label}: {r.reason} / {r.prediction}"
        assert r.target.dlpack_device == (2, ordinal), label
        assert r.target.data_ptr % 256 == 0, label
        np.testing.assert_array_equal(to_host(dst, r.value), expected, err_msg=f"{label} → {dst} by {path}")


def test_a_gather_queued_on_a_side_stream_is_ordered_after_the_source_is_written():
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.randn(1 << 12, device="cuda")
        y = (x * 3).reshape(-1, 1).expand(1 << 12, 256)  # written on the side stream, then broadcast
        r = gpushare.share(y, "torch", path="copy")
    torch.cuda.synchronize()
    assert r.value.is_contiguous() and torch.equal(r.value, (x * 3).reshape(-1, 1).expand(1 << 12, 256))


def test_a_copy_queued_on_a_side_stream_is_ready_for_a_consumer_on_another():
    need("cupy")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.randn(1 << 24, device="cuda")
        y = x * 3  # queued on the side stream
        r = gpushare.share(y, "cupy", path="copy")  # copy queued on the side stream too
    torch.cuda.synchronize()
    expected = (x * 3).cpu().numpy()
    assert np.array_equal(r.value.get(), expected)


def test_pinned_on_a_host_array_is_not_applicable():
    with pytest.raises(PathNotApplicableError, match="already in host"):
        gpushare.share(torch.ones(16), "torch", path="pinned")


def settled_alive() -> int:
    """alive() once it stops changing: XLA may still be running the DLPack deleters of arrays that
    earlier tests dropped."""
    last = alive()
    for _ in range(100):
        torch.cuda.synchronize()
        time.sleep(0.02)
        now = alive()
        if now == last:
            return now
        last = now
    return last


def release(fw: str, view) -> None:
    """Lets go of a view the way its framework frees device memory. Torch, CuPy and Numba free an
    imported buffer when their array goes; a JAX array is freed now by ``Array.delete()`` (going
    away frees it too), though XLA may run the DLPack deleter on its own thread a little later."""
    if fw == "jax":
        view.delete()


def alive_after_release(target: int, seconds: float = 10.0) -> int:
    """alive() once it reaches ``target``, or what it is after ``seconds``: an allocation imported
    by JAX is given back when XLA's deleter has run, which it may do asynchronously."""
    deadline = time.monotonic() + seconds
    while True:
        torch.cuda.synchronize()
        n = alive()
        if n == target or time.monotonic() > deadline:
            return n
        time.sleep(0.01)


def test_cuda_shared_buffer_is_one_allocation_for_torch_jax_cupy_and_numba():
    before = settled_alive()
    buf = gpushare.SharedBuffer((4, 256), "float32", "cuda:0")
    assert buf.device == "cuda:0" and buf.__dlpack_device__() == (2, 0) and buf.data_ptr % 256 == 0
    assert alive() == before + 1
    views = {"torch": buf.to("torch")}
    for fw in ("jax", "cupy", "numba"):
        try:
            need(fw)
        except pytest.skip.Exception:
            continue
        views[fw] = buf.to(fw)
    assert len(views) >= 3, f"need torch and two of jax/cupy/numba, got {sorted(views)}"
    t = views["torch"]
    t[2, 5] = 11.0
    t[0, 0] = -3.0
    torch.cuda.synchronize()
    for fw, view in views.items():
        host = to_host(fw, view)
        assert host[2, 5] == 11.0 and host[0, 0] == -3.0, fw
        if fw != "numba":
            info = gpushare.inspect(view)
            assert info.data_ptr == buf.data_ptr and info.cuda["memory_type"] == "device", fw
    # Only the frameworks' arrays may hold the memory now: not this test's own names for them
    # (`t`, and `view`, the loop's last one: they kept it alive after every framework was done).
    del t, view, host, info
    del buf
    assert alive() == before + 1, "the views hold the allocation"
    order = [fw for fw in ("torch", "cupy", "numba", "jax") if fw in views]
    for i, fw in enumerate(order):
        release(fw, views.pop(fw))
        if i < len(order) - 1:
            assert alive() == before + 1, f"freed when {fw} let go, while {', '.join(order[i + 1:])} still hold it"
    assert alive_after_release(before) == before, f"every framework let go ({order[-1]} last), the allocation lives on"


@pytest.mark.parametrize("fw", ["torch", "jax", "cupy", "numba"])
def test_each_framework_frees_a_cuda_shared_buffer_when_it_lets_go(fw):
    need(fw)
    before = settled_alive()
    buf = gpushare.SharedBuffer((4, 256), "float32", "cuda:0")
    view = buf.to(fw)
    assert to_host(fw, view).shape == (4, 256)
    del buf
    assert alive() == before + 1, f"{fw}'s array holds the allocation"
    release(fw, view)
    del view
    assert alive_after_release(before) == before, f"{fw} let go of its array and the allocation lives on"


def test_shared_path_shares_on_the_gpu():
    need("jax")
    src = gpushare.SharedBuffer(1 << 16, "float32", "cuda:0").to("torch")
    r = gpushare.share(src, "jax", path="shared")
    assert r.verdict == "shared" and r.target.data_ptr == src.data_ptr()
    src.fill_(2.0)
    torch.cuda.synchronize()
    assert float(np.asarray(r.value).sum()) == 2.0 * (1 << 16)


def test_copy_path_reuses_pooled_device_memory_and_empties_the_cache():
    from gpushare.adapters import framework

    convert = gpushare.paths.route(framework("torch"), framework("torch"), "copy")[1]
    lab.empty_cache()
    x = torch.randn(1 << 20, device="cuda")
    first = convert(x)
    ptr = first.data_ptr()
    del first
    gc.collect()
    assert _native.share.shared_pool_usage() == (1, 4 << 20)
    second = convert(x)  # same stream as the last user: reused without waiting
    assert second.data_ptr() == ptr and torch.equal(second, x)
    del second
    gc.collect()
    lab.empty_cache()
    assert _native.share.shared_pool_usage() == (0, 0)


def test_compare_on_the_gpu_reports_device_paths_and_device_time():
    need("cupy")
    c = gpushare.compare(torch.randn(1 << 20, device="cuda"), "cupy", repeat=5)
    by = {r["path"]: r for r in c.rows}
    assert by["dlpack"]["verdict"] == "shared"
    assert by["cai"]["verdict"] == "shared"
    assert by["pinned"]["verdict"] == by["copy"]["verdict"] == by["host"]["verdict"] == "copied"
    assert by["shared"]["applicable"] is False
    for path in ("pinned", "copy", "host"):
        assert by[path]["bandwidth"] > 0, path
    # Device time from CUDA events on torch's current stream, reported beside the host time.
    assert by["copy"]["device_timing"] is not None and by["copy"]["device_timing"]["median"] > 0
    # A column in the median's unit, or the row's sub-line where the table would pass 100 columns.
    assert "device" in repr(c).splitlines()[1].split() or re.search(r"^\s+device \d", repr(c), re.M), repr(c)
    # Copying through page-locked memory beats the naive host route.
    assert by["pinned"]["timing"]["median"] < by["host"]["timing"]["median"]


def test_bench_on_the_gpu():
    need("cupy")
    b = gpushare.bench("torch", "cupy", sizes=["64KiB", "16MiB"], device="cuda:0", repeat=3, progress=False)
    by = {(p["size"], p["path"]): p for p in b.points}
    for size in (64 << 10, 16 << 20):
        assert by[(size, "dlpack")]["verdict"] == "shared"
        assert by[(size, "shared")]["verdict"] == "shared"
        assert by[(size, "copy")]["verdict"] == by[(size, "pinned")]["verdict"] == "copied"
    svg = b.svg
    for path in ("dlpack", "copy", "pinned", "host", "shared"):
        assert f'data-path="{path}"' in svg
    assert b.to_dict()["device"] == "cuda:0"
