"""PaddlePaddle, added through its adapter alone: shares with the other frameworks on the
CPU, predicted and judged like them, and a tensor that requires gradients is explained."""

import pytest

paddle = pytest.importorskip("paddle", reason="framework not installed: paddle")
torch = pytest.importorskip("torch", reason="framework not installed: torch")
np = pytest.importorskip("numpy", reason="framework not installed: numpy")

import gpushare  # noqa: E402
from gpushare.exceptions import ConversionError  # noqa: E402


@pytest.mark.parametrize("dst", ["torch", "numpy"])
def test_paddle_shares_into_other_frameworks(dst):
    x = paddle.arange(12, dtype="float32").reshape([3, 4])
    r = gpushare.share(x, dst)
    assert r.source.framework == "paddle" and r.target.framework == dst
    assert r.verdict == "shared", r.reason
    assert r.source.data_ptr == r.target.data_ptr == x.data_ptr()
    assert r.prediction is not None and not r.unexpected


@pytest.mark.parametrize("make", [lambda: torch.arange(6.0), lambda: np.arange(6, dtype=np.float32)])
def test_other_frameworks_share_into_paddle(make):
    src = make()
    r = gpushare.share(src, "paddle")
    assert r.verdict == "shared" and not r.unexpected
    assert r.value.data_ptr() == r.source.data_ptr
    src[0] = 42  # a write through the source is seen by Paddle: the same memory
    assert float(r.value[0]) == 42.0


def test_paddle_into_jax_fails_as_predicted():
    """Paddle's __dlpack_device__ says (kDLCPU, None) on the host; JAX raises on the None. gpushare
    predicts the failure and explains it, and the raw call fails the same way."""
    jax = pytest.importorskip("jax", reason="framework not installed: jax")
    x = paddle.ones([4])
    with pytest.raises(Exception, match="device_from_local_hardware_id"):
        jax.dlpack.from_dlpack(x)
    with pytest.raises(ConversionError) as e:
        gpushare.share(x, "jax")
    assert e.value.predicted[0] == "failed" and "UNEXPECTED" not in str(e.value)
    assert "no device id" in e.value.reason and "device_from_local_hardware_id" in e.value.framework_error


def test_paddle_host_path_copies_by_design():
    x = paddle.ones([8])
    r = gpushare.share(x, "torch", path="host")
    assert r.verdict == "copied" and r.reason.startswith("copied by design")


def test_paddle_tensor_that_requires_gradients_is_explained():
    x = paddle.ones([3])
    x.stop_gradient = False
    with pytest.raises(ConversionError) as e:
        gpushare.share(x, "torch")
    assert "stop_gradient" in e.value.reason and e.value.fix == "x.detach()"
    assert gpushare.share(x.detach(), "torch").verdict == "shared"


def test_paddle_is_found_by_its_aliases():
    from gpushare.adapters import framework

    assert framework("paddle") is framework("paddlepaddle") is framework("pd")


def test_paddle_is_never_imported_beside_tensorflow():
    """Both in one process crash it (SIGSEGV); gpushare refuses to import either beside the other,
    with the reason, in a child process so that a crash would show as a signal."""
    import subprocess
    import sys

    code = (
        "import tensorflow, gpushare\n"
        "from gpushare.exceptions import FrameworkNotInstalledError\n"
        "try:\n    gpushare.share(tensorflow.ones([2]), 'paddle')\n"
        "except FrameworkNotInstalledError as e:\n    print('REFUSED', e)\n"
        "info = gpushare.gpuinfo(import_frameworks=True)\n"
        "print('PADDLE', [f.error for f in info.frameworks.values() if f.name == 'paddle'])\n"
    )
    pytest.importorskip("tensorflow", reason="framework not installed: tensorflow")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "REFUSED paddle is not imported: paddle and tensorflow crash" in proc.stdout, proc.stdout
    assert "PADDLE ['paddle is not imported" in proc.stdout, proc.stdout


def test_negative_strides_into_paddle_are_refused_before_paddle_reads_them():
    """Paddle 3.3's DLPack import keeps a negative stride but not the start: the raw call reads
    memory outside the source. gpushare refuses it, predicted, with the fix; the source is untouched."""
    from gpushare.exceptions import UnsafeInputError

    x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::-1]
    raw = paddle.from_dlpack(x)
    assert not np.array_equal(raw.numpy(), x), "Paddle now reads negative strides right: drop the refusal"
    before = x.copy()
    with pytest.raises(UnsafeInputError) as e:
        gpushare.share(x, "paddle")
    assert "outside the source" in e.value.reason and "ascontiguousarray" in e.value.fix
    assert e.value.predicted[0] == "failed"
    assert np.array_equal(x, before)
    assert gpushare.share(np.ascontiguousarray(x), "paddle").verdict == "shared"  # the fix works


def test_a_read_only_numpy_array_shares_writably_into_paddle_and_says_so():
    x = np.arange(6, dtype=np.float32)
    x.flags.writeable = False
    r = gpushare.share(x, "paddle")
    assert r.verdict == "shared" and not r.unexpected
    assert "paddle can mutate a read-only source" in r.prediction["reason"]


def test_the_host_route_keeps_paddle_values():
    """Paddle gives bfloat16 out as raw uint16 bits and reads NumPy uint16 as bfloat16 bits: the
    host route through NumPy changed values both ways (the conformance matrix's host column found it)."""
    jax = pytest.importorskip("jax", reason="framework not installed: jax")
    pytest.importorskip("ml_dtypes", reason="ml_dtypes not installed")
    x = paddle.to_tensor([1.5, -2.0, 3.25]).astype("bfloat16")
    r = gpushare.share(x, "jax", path="host")
    assert r.verdict == "copied" and not r.unexpected
    assert np.asarray(r.value, dtype=np.float32).tolist() == [1.5, -2.0, 3.25]
    back = gpushare.share(r.value, "paddle", path="host")
    assert back.value.astype("float32").numpy().tolist() == [1.5, -2.0, 3.25]
    for dtype in (np.uint16, np.uint32, np.uint64):
        with pytest.raises(ConversionError) as e:
            gpushare.share(np.arange(3, dtype=dtype), "paddle", path="host")
        assert e.value.predicted[0] == "failed" and "paddle has no" in e.value.reason


def test_paddle_labels_uint16_as_bfloat16_and_the_share_says_so():
    """paddle.from_dlpack of uint16 makes a tensor labelled bfloat16 over the same bytes, whose
    kernels treat it as uint16: the result names Paddle's label, and the share says so (predicted)."""
    x = np.arange(6, dtype=np.uint16)
    for path in ("auto", "dlpack", "capsule"):
        r = gpushare.share(x, "paddle", path=path)
        assert str(r.value.dtype).endswith("bfloat16")
        assert (r.source.dtype, r.target.dtype, r.verdict) == ("uint16", "bfloat16", "shared"), (path, r)
        assert any("labels the array bfloat16, not uint16" in n for n in r.notes), (path, r.notes)
        assert "labels the array bfloat16" in (r.prediction["reason"] or "") and not r.unexpected, (path, r.prediction)
    # A real bfloat16 tensor keeps its label, and nothing is said of labels.
    b = paddle.to_tensor(np.arange(6, dtype=np.float32)).astype("bfloat16")
    r = gpushare.share(b, "torch")
    assert r.source.dtype == r.target.dtype == "bfloat16" and not any("labels" in n for n in r.notes)
