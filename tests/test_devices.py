"""Devices on any machine: device= arguments, the topology parser, the current-device guard.

The GPU half (peer views, p2p and pinned moves, the guard against JAX's current device) is in
tests/test_devices_gpu.py."""

from __future__ import annotations

import pytest

import gpushare
from gpushare import devices, topology
from gpushare.exceptions import CudaError, PathNotApplicableError

torch = pytest.importorskip("torch")

TOPO_2xH200 = """\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tSYS\t0-31\t0\t\tN/A
GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A
NIC0\tSYS\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def no_cuda() -> bool:
    return not gpushare._native.cuda.driver_status().get("available")


def test_topo_matrix_is_parsed_and_priced():
    links = topology.parse_topo_matrix(TOPO_2xH200)
    assert links == {(0, 1): "NV18", (1, 0): "NV18"}
    assert topology.nvlink_limit_Bps("NV18", 9) == 450e9
    assert topology.nvlink_limit_Bps("SYS", 9) is None
    assert "NVLink ×18" in topology.link_words("NV18")
    assert "PCIe" in topology.link_words("PHB")
    four = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\nGPU0\t X \tNV4\tPIX\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\tPIX\t0-7\n"
    assert topology.parse_topo_matrix(four)[(0, 2)] == "PIX"
    assert topology.parse_topo_matrix(four)[(1, 3)] == "PIX"
    # nvidia-smi underlines the header with terminal escapes even when its output is piped.
    underlined = TOPO_2xH200.replace("\tGPU0\tGPU1", "\t\x1b[4mGPU0\tGPU1", 1).replace("GPU NUMA ID", "GPU NUMA ID\x1b[0m", 1)
    assert topology.parse_topo_matrix(underlined) == {(0, 1): "NV18", (1, 0): "NV18"}


def test_device_names_parse_and_bad_ones_are_gpushare_errors():
    assert devices.parse_device("cpu") == (True, 0)
    assert devices.parse_device(" CUDA:1 ") == (False, 1)
    assert devices.parse_device("gpu") == (False, 0)
    with pytest.raises(PathNotApplicableError, match="unknown device"):
        gpushare.share(torch.ones(3), "numpy", device="tpu:0")


@pytest.mark.skipif(not no_cuda(), reason="this machine has CUDA: the error is for machines without")
@pytest.mark.parametrize("api", ["share", "compare"])
def test_a_cuda_device_without_cuda_is_a_clear_error(api):
    x = torch.arange(4.0)
    before = x.clone()
    with pytest.raises(CudaError, match=r"device='cuda:1' needs a CUDA device: there is no usable CUDA"):
        getattr(gpushare, api)(x, "numpy", device="cuda:1")
    assert torch.equal(x, before)


def test_device_cpu_works_where_it_makes_sense():
    x = torch.arange(6.0)
    assert gpushare.share(x, "numpy", device="cpu").verdict == "shared"  # already there: a handoff
    moved = gpushare.share(x, "numpy", device="cpu", path="dlpack")  # copy=True asked for
    assert moved.verdict == "copied" and moved.value.tolist() == x.tolist()
    own = gpushare.share(x, "torch", device="cpu", path="move")
    assert own.path == "move" and own.value.tolist() == x.tolist()
    with pytest.raises(PathNotApplicableError, match="p2p moves device memory"):
        gpushare.share(x, "numpy", device="cpu", path="p2p")


@pytest.mark.parametrize("path", ["auto", "move"])
def test_a_move_of_a_negative_view_is_refused_as_the_one_process_path_refuses_it(path):
    """A move of torch._neg_view(x) said "shared" and NumPy read every value with the
    wrong sign. A framework's move keeps the bit (torch's .to where the tensor lies, and across
    devices), and no handoff by memory carries it: the one pipeline's rule refuses it."""
    from gpushare.exceptions import UnsafeInputError

    x = torch.arange(4.0)
    with pytest.raises(UnsafeInputError, match="negative bit") as e:
        gpushare.share(torch._neg_view(x), "numpy", device="cpu", path=path)
    assert "resolve_neg" in str(e.value)
    conj = torch.arange(4.0) + 1j * torch.arange(4.0)
    with pytest.raises(gpushare.GpushareError, match="conjugate bit"):
        gpushare.share(conj.conj(), "numpy", device="cpu", path=path)
    # A tensor that requires grad moves as before: the move detaches it (the same memory here).
    g = torch.arange(4.0, requires_grad=True)
    assert gpushare.share(g, "numpy", device="cpu", path=path).value.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_cpu_0_is_pytorchs_spelling_of_the_host():
    """``device="cpu:0"`` is a CPU device, not an unknown one."""
    assert devices.parse_device("cpu:0") == devices.parse_device("CPU") == (True, 0)
    x = torch.arange(4.0)
    r = gpushare.share(x, "numpy", device="cpu:0")
    assert r.verdict == "shared" and r.value.tolist() == x.tolist()
    assert [row["path"] for row in gpushare.compare(x, "numpy", device="cpu:0", repeat=1).rows] == list(devices.MOVE_PATHS)
    with pytest.raises(PathNotApplicableError, match="the host is one device"):
        gpushare.share(x, "numpy", device="cpu:1")


def test_paddle_moves_by_its_own_move():
    """A PaddlePaddle move to the CPU was refused ("paddle has no move between
    devices") although Paddle moves tensors (Tensor.cpu(), .cuda(n)). In a process of its own:
    Paddle and TensorFlow crash in one (Adapter.crashes_beside)."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("paddle") is None:
        pytest.skip("framework not installed: paddle")
    code = (
        "import paddle, numpy as np, gpushare\n"
        "x = paddle.arange(6, dtype='float32')\n"
        "r = gpushare.share(x, 'numpy', device='cpu', path='move')\n"
        "assert r.path == 'move' and r.value.tolist() == list(range(6)), r\n"
        "g = paddle.arange(3, dtype='float32'); g.stop_gradient = False\n"
        "assert gpushare.share(g, 'numpy', device='cpu', path='move').value.tolist() == [0, 1, 2]\n"
        "m = gpushare.adapters.framework('paddle').move(x, True, 0)\n"
        "assert m.data_ptr() == x.data_ptr()  # already on the host: Paddle keeps its memory\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_moves_are_predicted_and_a_copy_asked_for_is_copied_by_design():
    """Every move had prediction None, and DLPack's copy=True was explained as "the
    framework made its own copy"."""
    x = torch.arange(6.0)
    here = gpushare.share(x, "numpy", device="cpu")
    assert here.prediction is not None and here.prediction["verdict"] == here.verdict == "shared"
    asked = gpushare.share(x, "numpy", device="cpu", path="dlpack")
    assert asked.verdict == "copied" and asked.reason.startswith("copied by design"), asked.reason
    assert asked.prediction["verdict"] == "copied" and asked.prediction["reason"] == asked.reason
    assert not asked.unexpected
    own = gpushare.share(x, "torch", device="cpu", path="move")
    assert own.prediction is not None and own.prediction["verdict"] == own.verdict and not own.unexpected
    with pytest.raises(PathNotApplicableError):
        gpushare.share(x, "numpy", device="cpu", path="p2p")


def test_a_negative_view_moved_by_dlpack_copy_true_reads_the_right_values():
    """PyTorch's export with copy=True negates into the copy, so a negative view moved
    by path='dlpack' is allowed where the consumer asks the producer for the copy (NumPy, torch);
    JAX copies after a plain export (its values would be unnegated): refused there."""
    from gpushare.exceptions import UnsafeInputError

    x = torch.arange(4.0)
    r = gpushare.share(torch._neg_view(x), "numpy", device="cpu", path="dlpack")
    assert r.value.tolist() == [-0.0, -1.0, -2.0, -3.0] and r.verdict == "copied"
    t = gpushare.share(torch._neg_view(x), "torch", device="cpu", path="dlpack")
    assert t.value.tolist() == [-0.0, -1.0, -2.0, -3.0]
    pytest.importorskip("jax")
    with pytest.raises(UnsafeInputError, match="negative bit"):
        gpushare.share(torch._neg_view(x), "jax", device="cpu", path="dlpack")
    # The conjugate bit and grad are still refused: torch's copying export refuses them too.
    with pytest.raises(gpushare.GpushareError, match="conjugate bit"):
        gpushare.share((x + 1j * x).conj(), "numpy", device="cpu", path="dlpack")


def test_compare_with_device_lists_the_move_paths():
    c = gpushare.compare(torch.arange(1024.0), "numpy", device="cpu", repeat=2)
    assert [r["path"] for r in c.rows] == list(devices.MOVE_PATHS)
    by_path = {r["path"]: r for r in c.rows}
    assert by_path["p2p"]["verdict"] == "failed" and by_path["p2p"]["applicable"] is False
    assert by_path["dlpack"]["verdict"] == "copied"


def test_a_link_note_divides_the_bytes_by_the_rows_own_median(monkeypatch):
    """The note beside a move's row (notebooks/executed/05 said "2621.7 GB/s is 583% of its 450
    GB/s" beside a measured 375 GB/s: the per-call median divided by the loop count again). The
    link here is a stand-in with a stated ceiling (no GPU pair on a CPU machine); the move, its
    timing and the note are the real ones."""
    ceiling = 1e13  # 10 TB/s: no host copy of 4 KiB comes near it
    monkeypatch.setattr(topology, "link_for", lambda *a: {"name": "a test link", "limit_Bps": ceiling,
                                                          "limit_source": "stated by the test"})
    x = torch.arange(1024.0)  # 4 KiB: a copy of about a microsecond, many loops per sample
    c = gpushare.compare(x, "numpy", paths=["dlpack"], device="cpu", repeat=3, min_sample_time=0.002)
    row = c.to_dict()["rows"][0]
    assert row["verdict"] == "copied" and row["timing"]["loops"] > 1, row
    (note,) = [n for n in row["notes"] if n.startswith("link: a test link")]
    import re

    rate = float(re.search(r"; ([\d.]+) GB/s is", note).group(1)) * 1e9
    expected = row["bytes_moved"] / row["timing"]["median"]
    assert rate == pytest.approx(expected, rel=0.01, abs=0.05e9), (note, expected)
    assert rate == pytest.approx(row["bandwidth"], rel=0.01, abs=0.05e9), "the note and the table agree"
    assert rate <= ceiling, note


def test_the_guard_makes_the_source_device_current_and_says_so():
    """A stand-in source whose framework has another device current: the guarded route runs the
    conversion inside the adapter's scope and the note names who moves the current device."""
    entered = []

    class Scope:
        def __enter__(self):
            entered.append("in")

        def __exit__(self, *exc):
            entered.append("out")

    class Src(gpushare.adapters.TorchAdapter):
        def device_scope(self, obj):
            return (0, 1, Scope())

    seen = []
    route = devices.guard(Src(), lambda obj: seen.append(list(entered)) or obj, "dlpack")
    assert route("x") == "x"
    assert seen == [["in"]] and entered == ["in", "out"]
    (note,) = route.take_notes()
    assert "cuda:1 was current, not the source's cuda:0" in note
    assert "Can't export tensors on a different CUDA device index" in note
    assert route.take_notes() == []
    # Sources whose framework does not care are not wrapped at all (no cost per share).
    plain = lambda obj: obj  # noqa: E731
    assert devices.guard(gpushare.adapters.NumpyAdapter(), plain, "dlpack") is plain


def test_gpuinfo_and_topology_render_without_cuda():
    t = topology.topology()
    assert "Topology" in repr(t) and "<" in t._repr_html_()
    assert t._repr_mimebundle_()["application/vnd.gpushare+json"]["schema"] == "gpushare.topology/1"


def test_auto_is_a_path_a_move_can_be_compared_and_swept_by():
    """``paths="auto"`` with a device: the move ``auto`` takes, marked as such (it was refused as
    an unknown move path, while compare and bench take it within a device)."""
    import torch

    b = gpushare.bench("torch", "numpy", sizes=[64, 4096], paths="auto", to_device="cpu", progress=False, repeat=1)
    d = b.to_dict()
    taken = gpushare.share(torch.ones(16), "numpy", device="cpu").path
    assert d["paths"] == [taken] and all(p["auto"] and p["path"] == taken for p in d["points"]), d["points"]
    c = gpushare.compare(torch.ones(8), "numpy", device="cpu", paths="auto", repeat=1)
    assert [(r.path, r.auto) for r in c.rows] == [(taken, True)]
    with pytest.raises(ValueError, match="unknown move path .bogus.; known paths: p2p, pinned, dlpack, move, auto, all"):
        gpushare.compare(torch.ones(8), "numpy", device="cpu", paths="bogus")


def test_bench_devices_alternates_abba_so_neither_side_always_runs_first():
    """benchmarks/bench_devices.py judges share(device=) against the core's peer copy by the median
    of paired ratios (the 3 % goal): the two take turns first (ABBA), and each sample and its
    ratio pair the right calls, whatever the order."""
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "bench_devices", pathlib.Path(__file__).parent.parent / "benchmarks" / "bench_devices.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    order: list[str] = []
    first, second = (lambda: order.append("A")), (lambda: order.append("B"))
    _, _, ratio, pending = bench.timed_pairs(first, second, lambda: None, pairs=4, idle=lambda: [])
    assert order[:6] == ["A", "B"] * 3, "three warm-ups of each, in order"
    assert order[6:] == list("ABBAABBA")
    assert ratio > 0 and pending == [[], []]


def test_jax_ignores_copy_true_for_aligned_host_memory_and_it_is_predicted():
    """JAX's from_dlpack(x, device=cpu, copy=True) views 64-byte aligned host memory (torch's)
    instead of copying it: predicted "copied by design", then shared and UNEXPECTED. The rules now
    say so; unaligned memory it still copies, as predicted."""
    pytest.importorskip("jax")
    import numpy as np

    x = torch.arange(64.0)
    r = gpushare.share(x, "jax", device="cpu", path="dlpack")
    assert (r.verdict, r.prediction["verdict"], r.unexpected) == ("shared", "shared", False), r
    assert "ignores copy=True" in r.prediction["reason"]
    base = np.arange(65, dtype=np.float32)
    offset = next(i for i in range(16) if (base.ctypes.data + 4 * i) % 64)
    unaligned = base[offset:offset + 8]
    r = gpushare.share(unaligned, "jax", device="cpu", path="dlpack")
    assert (r.verdict, r.prediction["verdict"], r.unexpected) == ("copied", "copied", False), r


def test_a_negative_stride_view_moved_to_the_host_by_dlpack_follows_each_consumers_copy():
    """from_dlpack(x, device="cpu", copy=True): PyTorch asks NumPy's __dlpack__ for the copy, which
    arrives compact, so its raw call takes a reversed view and gpushare must too (its refusal of
    negative strides guards torch's own import of them); JAX imports the view's layout itself and
    refuses it, which gpushare predicts rather than calling it a copy."""
    import numpy as np

    x = np.arange(8.0)[::-1]
    raw = torch.from_dlpack(x, device="cpu", copy=True)
    r = gpushare.share(x, "torch", path="dlpack", device="cpu")
    assert r.verdict == "copied" and r.prediction["verdict"] == "copied" and not r.unexpected
    assert torch.equal(r.value, raw)
    pytest.importorskip("jax")
    with pytest.raises(gpushare.GpushareError) as raised:
        gpushare.share(x, "jax", path="dlpack", device="cpu")
    assert raised.value.predicted is not None and raised.value.predicted.verdict == "failed"
    assert "UNEXPECTED" not in str(raised.value)
