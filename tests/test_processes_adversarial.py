"""Across processes, under the inputs users really give them: strided views of a segment,
dtypes NumPy has no type for, lazy conjugate and negative views, results read after release, a full
/dev/shm, two threads on one worker, read-only memory, other frameworks' tensors. Every case runs in
real worker processes; the worker's values are read back and compared with the source's own.
Cases that could crash the test process, or that import a framework which cannot live beside
another (TensorFlow, PaddlePaddle), run in a child process.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import gpushare
from gpushare.processes import rules as process_rules
from gpushare.exceptions import (
    ConversionError,
    GpushareError,
    GpushareWarning,
    PathNotApplicableError,
    UnsafeInputError,
    WorkerError,
)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/shm"), reason="no /dev/shm (not Linux)")


@pytest.fixture(scope="module")
def worker():
    with gpushare.Worker(device="cpu", timeout=60) as w:
        yield w


def _child(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh Python: a crash there (SIGSEGV, SIGBUS) is a return code here."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


# -- a strided view of memory already in a segment ---------------------------------------

VIEWS = {
    "transposed": lambda a: a.T,
    "a column": lambda a: a[:, 3],
    "every other row": lambda a: a[::2],
    "a sub-block": lambda a: a[1:4, 2:6],
    "reversed rows": lambda a: a[::-1],
    "stepped columns of a block": lambda a: a[1:5, ::3],
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_a_strided_view_of_a_segment_reaches_the_worker_as_the_same_view(worker, view):
    base = np.arange(48, dtype=np.float64).reshape(6, 8)
    r0 = gpushare.share(base, "numpy", across=worker, path="shm")
    v = VIEWS[view](r0.local)
    r = gpushare.share(v, "numpy", across=worker, path="shm")
    assert r.verdict == "shared", r.reason
    np.testing.assert_array_equal(r.remote.read(), v)
    # The same memory, element for element: a write in the worker lands where the view says.
    idx = (0,) * v.ndim
    r.remote.write(idx, -1.0)
    assert v[idx] == -1.0
    r.release()
    r0.release()


def test_a_strided_view_into_torch_keeps_its_layout_and_a_reversed_one_is_refused_by_the_core_rule(worker):
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    r0 = gpushare.share(base, "numpy", across=worker, path="shm")
    r = gpushare.share(r0.local.T, "torch", across=worker, path="shm")
    np.testing.assert_array_equal(r.remote.read(), base.T)
    r.release()
    # torch.from_dlpack/from_numpy cannot take negative strides: the one-process refusal, with its fix.
    with pytest.raises(UnsafeInputError, match="negative strides") as e:
        gpushare.share(r0.local[::-1], "torch", across=worker, path="shm")
    assert "ascontiguousarray" in e.value.fix
    r0.release()


# -- dtypes NumPy does not know natively ----------------------------------------------------


def _extended_dtypes() -> dict:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return {"bfloat16": ml_dtypes.bfloat16, "int4": ml_dtypes.int4, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
            "structured": np.dtype([("a", "<i4"), ("b", "<f4")])}


@pytest.mark.parametrize("name", ["bfloat16", "int4", "float8_e4m3fn", "structured"])
@pytest.mark.parametrize("in_segment", [False, True], ids=["copied-in", "in-segment"])
def test_shm_carries_a_dtype_numpy_lacks_natively(worker, name, in_segment):
    dtype = _extended_dtypes()[name]
    if name == "structured":
        x = np.zeros(6, dtype=dtype)
        x["a"], x["b"] = np.arange(6), np.arange(6) / 2
    else:
        x = np.arange(-3, 3).astype(dtype)
    r0 = None
    if in_segment:
        r0 = gpushare.share(x, "numpy", across=worker, path="shm")
        x = r0.local
    r = gpushare.share(x, "numpy", across=worker, path="shm")
    got = r.remote.read()
    assert got.dtype == x.dtype, (got.dtype, x.dtype)
    assert got.tobytes() == x.tobytes() and (got == x).all()
    # Both sides described although NumPy's DLPack export refuses the dtype: as NumPy names it.
    d = r.to_dict()
    assert d["source"]["dtype"] == d["target"]["dtype"] == str(x.dtype), (d["source"]["dtype"], d["target"]["dtype"])
    assert d["target"]["shape"] == [6] and d["target"]["nbytes"] == x.nbytes and d["target"]["dlpack_device"] == [1, 0]
    r.release()
    if r0 is not None:
        r0.release()


def test_a_dtype_the_target_cannot_view_is_refused_with_the_core_explanation(worker):
    x = np.zeros(4, dtype=[("a", "<i4"), ("b", "<f4")])
    with pytest.raises(ConversionError, match="structured") as e:
        gpushare.share(x, "torch", across=worker, path="shm")
    assert e.value.fix


def test_a_byte_order_the_target_cannot_view_is_a_gpushare_refusal_and_numpy_carries_it(worker):
    x = np.arange(4, dtype=">f4")
    with pytest.raises(ConversionError, match=">f4") as e:
        gpushare.share(x, "torch", across=worker, path="shm")
    assert "newbyteorder" in e.value.fix and "byte order" in e.value.framework_error
    r = gpushare.share(x, "numpy", across=worker, path="shm")
    assert (r.remote.read() == x).all()  # (the pipe's pickle hands values back in native order)
    # The worker's view has the source's byte order: its write reads back right in the parent.
    r.remote.write(0, 7.5)
    assert r.local[0] == 7.5 and r.local.dtype == x.dtype
    r.release()


def test_a_torch_bfloat16_tensor_on_shm_is_refused_naming_the_dtype_and_the_path_that_carries_it(worker):
    with pytest.raises(ConversionError, match="bfloat16") as e:
        gpushare.share(torch.ones(4, dtype=torch.bfloat16), "torch", across=worker, path="shm")
    assert "torch_mp" in e.value.fix
    # ... and torch_mp does carry it.
    r = gpushare.share(torch.arange(4, dtype=torch.bfloat16), "torch", across=worker, path="torch_mp")
    assert r.verdict == "shared"
    r.release()


# -- lazy conjugate and negative views, sparse tensors ------------------------------


@pytest.mark.parametrize("path", ["gloo", "torch_mp", "shm"])
def test_a_conjugate_view_is_refused_on_every_process_path_as_in_one_process(worker, path):
    x = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj()
    with pytest.raises(ConversionError, match="conjugate bit") as e:
        gpushare.share(x, "torch", across=worker, path=path)
    assert "resolve_conj" in e.value.fix


@pytest.mark.parametrize("path", ["gloo", "torch_mp", "shm"])
def test_a_negative_view_is_refused_on_every_process_path_as_in_one_process(worker, path):
    x = torch._neg_view(torch.arange(4, dtype=torch.float32))
    with pytest.raises(UnsafeInputError, match="negative bit") as e:
        gpushare.share(x, "torch", across=worker, path=path)
    assert "resolve_neg" in e.value.fix
    # What the fix says works: the worker reads the negated values.
    r = gpushare.share(x.resolve_neg(), "torch", across=worker, path=path)
    np.testing.assert_array_equal(r.remote.read(), -np.arange(4, dtype=np.float32))
    r.release()


def test_a_sparse_tensor_on_shm_gets_the_core_explanation(worker):
    x = torch.eye(3).to_sparse()
    with pytest.raises(ConversionError, match="sparse") as e:
        gpushare.share(x, "torch", across=worker, path="shm")
    assert "to_dense" in e.value.fix


# -- reading a result after it was released ------------------------------------------------


def test_a_shm_result_read_after_release_or_after_the_worker_stopped_does_not_crash():
    out = _child("""
        import numpy as np, gpushare
        x = np.arange(1 << 20, dtype=np.float64)
        with gpushare.Worker(device="cpu") as w:
            r = gpushare.share(x, "numpy", across=w, path="shm")
            r.release()
            a = float(r.local.sum())
            r2 = gpushare.share(x, "numpy", across=w, path="shm")
        b = float(r2.local.sum())  # after the with block ended
        assert a == b == float(x.sum()), (a, b)
        print("ok")
    """)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.strip().endswith("ok")


def test_the_worker_array_of_a_released_handoff_is_said_to_be_released(worker):
    r = gpushare.share(np.arange(16.0), "numpy", across=worker, path="shm")
    remote = r.remote
    r.release()
    for use in (remote.read, remote.info, lambda: remote.write(0, 1.0)):
        with pytest.raises(WorkerError, match=r"no longer holds .* released \(r\.release\(\)\)"):
            use()
    assert worker.alive  # the worker says so and goes on


def test_a_released_segment_leaves_no_name_in_dev_shm(worker):
    r = gpushare.share(np.ones(1000), "numpy", across=worker, path="shm")
    name = r.row["worker"]["segment"]["name"]
    assert os.path.exists(f"/dev/shm/{name}")
    local = r.local
    r.release()
    assert not os.path.exists(f"/dev/shm/{name}")
    assert local.sum() == 1000  # the parent's view keeps its memory until it goes


# -- /dev/shm too small --------------------------------------------------------------------


def test_a_segment_larger_than_the_free_room_in_dev_shm_is_refused_before_anything_is_copied(worker, monkeypatch):
    monkeypatch.setattr(process_rules, "free_bytes", lambda directory=process_rules.SHM_DIR: 64 << 20)
    before = set(os.listdir("/dev/shm"))
    x = np.zeros(96 << 20, dtype=np.uint8)
    with pytest.raises(PathNotApplicableError, match="SIGBUS") as e:
        gpushare.share(x, "numpy", across=worker, path="shm")
    assert "96 MiB" in str(e.value) and "64 MiB" in str(e.value)
    assert "--shm-size" in e.value.fix
    assert set(os.listdir("/dev/shm")) <= before
    # compare() shows it as a row that does not apply, with the reason.
    table = gpushare.compare(x, "numpy", across=worker, paths="shm", repeat=1)
    assert table["shm"]["applicable"] is False and "SIGBUS" in table["shm"]["reason"]


def test_torch_mp_refuses_a_storage_that_does_not_fit_in_dev_shm(worker, monkeypatch):
    monkeypatch.setattr(process_rules, "free_bytes", lambda directory=process_rules.SHM_DIR: 64 << 20)
    x = torch.zeros(96 << 20, dtype=torch.uint8)
    with pytest.raises(PathNotApplicableError, match="torch.multiprocessing"):
        gpushare.share(x, "torch", across=worker, path="torch_mp")
    assert not x.is_shared()  # refused before torch moved it


def test_a_full_dev_shm_found_when_the_segment_is_made_is_an_error_not_sigbus(worker, monkeypatch):
    # Another process took the room between the check and the segment: posix_fallocate says so.
    def no_room(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    before = set(os.listdir("/dev/shm"))
    with pytest.raises(PathNotApplicableError, match="SIGBUS") as e:
        gpushare.share(np.ones(1000), "numpy", across=worker, path="shm")
    assert "7.81 KiB" in str(e.value) and "No space left" in e.value.framework_error
    assert set(os.listdir("/dev/shm")) <= before


def test_a_filesystem_without_fallocate_still_gets_its_segment(worker, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    x = np.arange(1000.0)
    r = gpushare.share(x, "numpy", across=worker, path="shm")
    assert (r.remote.read() == x).all()
    r.release()


# -- other frameworks' tensors on shm (each in a child: TensorFlow and Paddle crash together) ---


def test_a_tensorflow_tensor_on_shm_is_handed_over_or_refused_by_gpushare():
    if importlib.util.find_spec("tensorflow") is None:  # not imported here: it crashes beside paddle
        pytest.skip("tensorflow not installed")
    out = _child("""
        import numpy as np, tensorflow as tf, gpushare
        from gpushare.exceptions import PathNotApplicableError
        t = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        with gpushare.Worker(device="cpu") as w:
            r = gpushare.share(t, "numpy", across=w, path="shm")
            assert (r.remote.read() == t.numpy()).all()
            assert r.nbytes == 24, r.nbytes
            r.to_json()
            try:
                w.share(t, path="shm")
            except PathNotApplicableError as e:
                assert "to='numpy'" in str(e), e
            else:
                raise AssertionError("a tensorflow worker array was not refused")
        print("ok")
    """)
    assert out.returncode == 0, out.stderr[-3000:]


# -- the JSON of a PaddlePaddle source -------------------------------------------------------


def test_the_json_of_a_process_share_from_a_paddle_source_fits_its_schema():
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("paddle not installed")
    out = _child("""
        import json, numpy as np, paddle, gpushare
        x = paddle.to_tensor(np.arange(6, dtype=np.float32))
        with gpushare.Worker(device="cpu") as w:
            r = gpushare.share(x, "numpy", across=w, path="shm")
            d = json.loads(r.to_json())
            assert d["schema"] == "gpushare.share/1" and d["data"]["worker"]["nbytes"] == 24, d["data"]["worker"]
            assert d["data"]["source"]["framework"] == "paddle" and d["data"]["target"]["framework"] == "numpy"
            assert (r.remote.read() == x.numpy()).all()
        print("ok")
    """)
    assert out.returncode == 0, out.stderr[-3000:]


# -- read-only memory ----------------------------------------------------------------------


def test_a_read_only_mapping_stays_read_only_in_a_numpy_worker_and_a_torch_one_is_warned(worker, tmp_path):
    path = "/dev/shm/gpushare-test-readonly"
    np.arange(8, dtype=np.float32).tofile(path)
    try:
        ro = np.memmap(path, dtype=np.float32, mode="r")
        with warnings.catch_warnings():
            warnings.simplefilter("error", GpushareWarning)
            r = gpushare.share(ro, "numpy", across=worker, path="shm")
        assert r.verdict == "shared"
        with pytest.raises(GpushareError, match="read-only"):
            r.remote.write(0, 99.0)
        assert ro[0] == 0.0
        r.release()
        with pytest.warns(GpushareWarning, match="read-only"):
            r = gpushare.share(ro, "torch", across=worker, path="shm")
        assert any("read-only" in n for n in r.notes)
        r.release()
    finally:
        os.unlink(path)


# -- the same layout rule on the ipc path (its handoff runs on a GPU: tests/test_processes_gpu.py) ----


def test_the_ipc_layout_carries_strides_and_the_span_the_mapping_must_cover():
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    assert process_rules.ipc_layout(base, 4) == {"shape": (6, 8), "strides": None, "span": 192}
    assert process_rules.ipc_layout(base.T, 4) == {"shape": (8, 6), "strides": (4, 32), "span": 192}
    # A column spans from its first element to its last, not 6 elements' bytes.
    assert process_rules.ipc_layout(base[:, 3], 4) == {"shape": (6,), "strides": (32,), "span": 164}
    with pytest.raises(UnsafeInputError, match="negative strides"):
        process_rules.ipc_layout(np.arange(6.0)[::-1], 8)


def test_a_paddle_bfloat16_tensor_on_shm_reaches_the_worker_as_bfloat16():
    """Paddle gives a bfloat16 tensor to NumPy as its raw bits in uint16: shm carried those integers
    to the worker without a word. It carries bfloat16 (ml_dtypes), values equal."""
    if importlib.util.find_spec("paddle") is None or importlib.util.find_spec("ml_dtypes") is None:
        pytest.skip("paddle or ml_dtypes not installed")
    out = _child("""
        import numpy as np, paddle, ml_dtypes, gpushare
        x = paddle.to_tensor(np.array([1.5, -2.0, 3.25], dtype=np.float32)).astype("bfloat16")
        with gpushare.Worker(device="cpu") as w:
            r = gpushare.share(x, "numpy", across=w, path="shm")
            back = r.remote.read()
            assert back.dtype == ml_dtypes.bfloat16, back.dtype
            assert back.astype(np.float32).tolist() == [1.5, -2.0, 3.25], back
        print("ok")
    """)
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_paddle_bfloat16_tensor_on_shm_into_torch_is_refused_naming_the_pair_and_the_path():
    """The worker hands the segment's NumPy view to torch by DLPack, which NumPy cannot export for
    bfloat16: the refusal names the pair and the path, not NumPy alone."""
    if any(importlib.util.find_spec(m) is None for m in ("paddle", "ml_dtypes", "torch")):
        pytest.skip("paddle, ml_dtypes or torch not installed")
    out = _child("""
        import numpy as np, paddle, gpushare
        x = paddle.to_tensor(np.array([1.5, -2.0], dtype=np.float32)).astype("bfloat16")
        with gpushare.Worker(device="cpu") as w:
            try:
                gpushare.share(x, "torch", across=w, path="shm")
            except gpushare.GpushareError as e:
                print(str(e))
    """)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("paddle → torch via shm: ") and "bfloat16" in out.stdout, out.stdout


def test_ctrl_c_while_a_worker_starts_leaves_no_worker_running(monkeypatch):
    """A KeyboardInterrupt during Worker.start() (here: while it waits for the worker's first
    answer) left the worker process running; start() stops it before the interrupt goes on."""
    started = []

    def interrupted(self, op, **kwargs):
        started.append(self._proc)
        raise KeyboardInterrupt

    monkeypatch.setattr(gpushare.Worker, "_call", interrupted)
    w = gpushare.Worker(device="cpu")
    with pytest.raises(KeyboardInterrupt):
        w.start()
    (proc,) = started
    assert not proc.is_alive() and proc.exitcode is not None


def test_a_script_that_starts_a_worker_at_top_level_is_told_the_fix(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import gpushare
        try:
            gpushare.Worker(device="cpu", start_timeout=120).start()
        except gpushare.GpushareError as e:
            print("REFUSED", e)
        else:
            print("STARTED")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert "REFUSED" in out.stdout, out.stdout + out.stderr[-2000:]
    assert 'if __name__ == "__main__":' in out.stdout, out.stdout


def test_a_cuda_core_view_of_host_memory_goes_to_a_worker_by_shm(worker):
    """np.asarray of a StridedMemoryView is a 0-d object array, so shm refused the view as "an
    object array": the view's host memory is viewed through its DLPack export."""
    if importlib.util.find_spec("cuda.core") is None:
        pytest.skip("cuda.core not installed")
    from cuda.core.utils import StridedMemoryView

    x = np.arange(12.0)
    view = StridedMemoryView.from_dlpack(x, stream_ptr=-1)
    r = gpushare.share(view, "numpy", across=worker, path="shm")
    assert (r.remote.read() == x).all()
    r.release()


def test_a_strided_cuda_tensor_is_refused_for_nccl_before_it_is_sent():
    """torch.distributed's send takes only non-overlapping, dense tensors: x[::2] by nccl failed inside
    the worker in torch's words. The route's facts say the tensor is strided, and the core's rule
    refuses it before anything is sent, with the fix (the GPU run exercises the route itself)."""
    torch = pytest.importorskip("torch")
    from gpushare import _native
    from gpushare.processes import routes as process_routes

    x = torch.arange(16.0)
    assert process_routes._dense(x) and process_routes._dense(x.reshape(4, 4).T)
    assert process_routes._dense(x[:0]) and process_routes._dense(x.reshape(1, 16)[:, :])
    assert not process_routes._dense(x[::2]) and not process_routes._dense(torch.ones(1).expand(4))
    none = lambda: None  # noqa: E731
    args = ("nccl", "torch", None, ["torch"], "torch", True, 0, 1, none, none, none)
    why = _native.processes.refusal(*args, strided=True)
    assert why is not None and "x.contiguous()" in why, why
    assert _native.processes.refusal(*args) is None


def test_a_comparison_hands_a_leaf_that_requires_grad_as_share_does(worker):
    """torch_mp runs a comparison on a clone; the clone of a leaf that requires grad is a leaf too,
    so the row says what a share of the tensor itself does (torch refuses only non-leaf tensors)."""
    x = torch.ones(16, requires_grad=True)
    c = gpushare.compare(x, "torch", across=worker, paths="torch_mp", repeat=2)
    assert c["torch_mp"].verdict == "shared", c["torch_mp"].reason
    assert x.requires_grad and x.is_leaf and not x.is_shared()  # the caller's tensor is left as it was
    r = worker.share(x, path="torch_mp")
    try:
        assert r.verdict == "shared"
    finally:
        r.release()
