"""The one ``auto`` on a real GPU (``pytest -m gpu``; without CUDA these skip with "no CUDA"):
from device memory into a framework that cannot address it (NumPy) ``auto`` takes the host route
and says why it copied, so ``%%share torch->numpy->tf`` works on a GPU; and ``compare``'s auto row
is the path ``share`` takes, for shares and moves alike; moves are predicted."""

from __future__ import annotations

import numpy as np
import pytest

import gpushare
from _gpu import need, require_cuda

pytestmark = pytest.mark.gpu

torch = require_cuda()


def test_auto_from_device_memory_into_numpy_takes_the_host_route_and_says_why():
    x = torch.arange(1024, dtype=torch.float32, device="cuda:0")
    r = gpushare.share(x, "numpy")
    assert (r.path, r.verdict) == ("host", "copied")
    assert any("numpy cannot address device memory" in n for n in r.notes), r.notes
    # Predicted before it ran, in the same words: not UNEXPECTED.
    assert r.prediction["verdict"] == "copied" and "auto took the host route" in r.prediction["reason"]
    np.testing.assert_array_equal(r.value, np.arange(1024, dtype=np.float32))
    # The same type of array on the host still shares: auto is decided per array.
    h = gpushare.share(torch.arange(8.0), "numpy")
    assert (h.path, h.verdict) == ("dlpack", "shared")


def test_compare_marks_the_host_route_as_auto_from_device_memory_into_numpy():
    x = torch.ones(4096, device="cuda:0")
    c = gpushare.compare(x, "numpy", repeat=2)
    assert [r["path"] for r in c.rows if r["auto"]] == ["host"] == [gpushare.share(x, "numpy").path]


def test_cell_chain_from_the_gpu_through_numpy_into_tf(run, ip):
    """The story the project began from: torch → NumPy → TensorFlow. From the GPU, NumPy's hop
    copies through the host (the one correct handoff, said as such); TensorFlow then takes NumPy's
    array on the host."""
    need("tf")
    table = run("%%share torch->numpy->tf -o\nimport torch\nt = torch.arange(6, dtype=torch.float32, device='cuda:0')\n")
    hop_numpy, hop_tf = list(table)
    assert (hop_numpy.path, hop_numpy.verdict) == ("host", "copied")
    assert any("cannot address device memory" in n for n in hop_numpy.notes)
    assert hop_tf.shares_origin is False  # NumPy's copy, not the tensor on the GPU
    np.testing.assert_array_equal(np.asarray(ip.user_ns["t_tf"]), np.arange(6, dtype=np.float32))


def test_a_move_to_the_host_is_predicted_and_compare_agrees():
    x = torch.arange(1 << 16, dtype=torch.float32, device="cuda:0")
    r = gpushare.share(x, "numpy", device="cpu")
    assert r.path == "move" and r.prediction is not None
    assert r.prediction["verdict"] == r.verdict == "copied"
    c = gpushare.compare(x, "numpy", device="cpu", repeat=2)
    assert [row["path"] for row in c.rows if row["auto"]] == ["move"]
    try:
        d = gpushare.share(x, "numpy", device="cpu", path="dlpack")
    except gpushare.exceptions.ConversionError as e:
        pytest.skip(f"NumPy cannot ask this torch for a copy on the host here: {e}")
    assert d.verdict == "copied" and d.reason.startswith("copied by design"), d.reason
    assert d.prediction is not None and d.prediction["verdict"] == "copied"


def test_a_negative_view_moved_by_dlpack_copy_reads_the_right_values():
    from gpushare.exceptions import ConversionError, UnsafeInputError

    x = torch.arange(8, dtype=torch.float32, device="cuda:0")
    # The framework's own move: refused where torch's .to keeps the negative bit (host to host), and
    # where its copy across devices resolves the bit (the GPU run saw no refusal), the
    # values it hands over are the negated ones. Either way no value changes without a word.
    try:
        moved = gpushare.share(torch._neg_view(x), "numpy", device="cpu", path="move")
    except UnsafeInputError as e:
        assert "negative bit" in str(e), e
    else:
        np.testing.assert_array_equal(moved.value, -np.arange(8, dtype=np.float32))
    try:
        r = gpushare.share(torch._neg_view(x), "numpy", device="cpu", path="dlpack")
    except UnsafeInputError:
        raise
    except ConversionError as e:
        pytest.skip(f"NumPy cannot ask this torch for a copy on the host here: {e}")
    np.testing.assert_array_equal(r.value, -np.arange(8, dtype=np.float32))
