"""Capsules gpushare makes for TensorFlow, which imports only legacy ("dltensor") capsules and whose
export takes no stream. Real NumPy, PyTorch and TensorFlow on the host; the GPU side of
the same routes is in tests/test_gpu.py."""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest

import gpushare
from gpushare import _native
from gpushare.adapters import framework
from gpushare.exceptions import DLPackError, GpushareError

tf = pytest.importorskip("tensorflow", reason="tensorflow not installed")


def capsule_name(capsule) -> str:
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule).decode()


def test_a_versioned_capsule_reaches_tensorflow_as_the_same_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    versioned = a.__dlpack__(max_version=(1, 0))
    assert capsule_name(versioned) == "dltensor_versioned"
    with pytest.raises(Exception, match="dltensor"):
        tf.experimental.dlpack.from_dlpack(a.__dlpack__(max_version=(1, 0)))  # what TensorFlow does alone
    legacy = _native.share.legacy_capsule(versioned)
    assert capsule_name(legacy) == "dltensor"
    assert capsule_name(versioned) == "used_dltensor_versioned", "the versioned capsule is consumed"
    t = tf.experimental.dlpack.from_dlpack(legacy)
    assert gpushare.inspect(t).data_ptr == a.ctypes.data
    a[1, 2] = -7.0
    assert t.numpy()[1, 2] == -7.0, "TensorFlow sees a write through NumPy: the same memory"


def test_the_versioned_tensor_is_deleted_once_whoever_lets_go():
    a = np.ones(1000, dtype=np.float64)
    base = sys.getrefcount(a)
    # Consumed by TensorFlow, then TensorFlow's tensor dropped.
    t = tf.experimental.dlpack.from_dlpack(_native.share.legacy_capsule(a.__dlpack__(max_version=(1, 0))))
    assert sys.getrefcount(a) > base
    del t
    gc.collect()
    assert sys.getrefcount(a) == base
    # Never consumed: the capsule's own destructor deletes it.
    cap = _native.share.legacy_capsule(a.__dlpack__(max_version=(1, 0)))
    assert sys.getrefcount(a) > base
    del cap
    gc.collect()
    assert sys.getrefcount(a) == base


def test_legacy_and_consumed_capsules():
    a = np.ones(4, dtype=np.float32)
    legacy = a.__dlpack__()
    assert _native.share.legacy_capsule(legacy) is legacy
    used = a.__dlpack__(max_version=(1, 0))
    _native.share.legacy_capsule(used)
    with pytest.raises(DLPackError, match="consumed"):
        _native.share.legacy_capsule(used)
    with pytest.raises(DLPackError):
        _native.share.legacy_capsule(object())


def test_tensorflow_capsule_importer_takes_a_versioned_capsule():
    """CuPy 14 exports versioned capsules even from toDlpack(): the TF adapter forwards them."""
    a = np.arange(6, dtype=np.int64)
    t = framework("tf").capsule_importer()(a.__dlpack__(max_version=(1, 0)))
    assert t.numpy().tolist() == list(range(6))


def test_capsule_over_memory_an_owner_keeps_alive():
    """The capsule gpushare makes over a Numba device array's memory, tried on host memory."""
    owner = np.arange(10, dtype=np.float32)
    base = sys.getrefcount(owner)
    cap = _native.share.capsule_over(owner, owner.ctypes.data, [2, 5], [5, 1], 2, 32, 1, 0)
    assert capsule_name(cap) == "dltensor" and sys.getrefcount(owner) == base + 1
    t = tf.experimental.dlpack.from_dlpack(cap)
    assert t.numpy().tolist() == owner.reshape(2, 5).tolist()
    owner[3] = 99.0
    assert t.numpy()[0, 3] == 99.0
    del cap, t
    gc.collect()
    assert sys.getrefcount(owner) == base, "the owner is released when the consumer lets go"
    # A capsule never consumed releases its owner too.
    _native.share.capsule_over(owner, owner.ctypes.data, [10], [1], 2, 32, 1, 0)
    gc.collect()
    assert sys.getrefcount(owner) == base
    with pytest.raises(DLPackError, match="differ in length"):
        _native.share.capsule_over(owner, owner.ctypes.data, [10], [], 2, 32, 1, 0)
    assert sys.getrefcount(owner) == base


def test_tensorflow_export_refuses_a_stream_and_gpushare_passes_none():
    t = tf.constant(np.arange(8, dtype=np.float32))
    with pytest.raises(Exception):
        t.__dlpack__(stream=1)  # TensorFlow's own export, as torch/CuPy call it for CUDA memory
    export = framework("tf").stream_free_export(t)
    assert export.__dlpack_device__() == t.__dlpack_device__()
    cap = export.__dlpack__(stream=1, max_version=(1, 0))
    assert capsule_name(cap) == "dltensor"
    with pytest.raises(BufferError, match="copy"):
        export.__dlpack__(copy=True)
    torch = pytest.importorskip("torch", reason="torch not installed")
    x = torch.from_dlpack(framework("tf").stream_free_export(t))
    assert x.data_ptr() == gpushare.inspect(t).data_ptr


def test_tf_routes_say_how_they_order_the_work():
    from gpushare import auto

    torch = pytest.importorskip("torch", reason="torch not installed")
    _, into_tf = auto.route(framework("torch"), framework("tf"))
    assert "waited for torch's queued work" in into_tf.ordering
    _, out_of_tf = auto.route(framework("tf"), framework("torch"))
    assert "TensorFlow's export waits" in out_of_tf.ordering
    r = gpushare.share(torch.arange(4.0), "tf")
    assert r.verdict == "shared"
    r = gpushare.share(tf.constant([1.0, 2.0]), "torch")
    assert r.verdict == "shared"


def test_tf_to_numba_needs_cuda_memory():
    """The interface gpushare writes for a TensorFlow tensor describes CUDA memory only."""
    from gpushare.adapters import _CudaArrayView

    t = tf.constant([1.0, 2.0])
    with pytest.raises(GpushareError, match="cuda_array_interface"):
        _CudaArrayView.of(gpushare.inspect(t), t, "tf")


@pytest.mark.parametrize("target", ["numpy", "torch"])
def test_a_tensorflow_move_by_dlpack_copy_true_fails_as_predicted(target):
    """from_dlpack(x, device=…, copy=True) passes dl_device and copy to TensorFlow's __dlpack__,
    which refuses both: predicted "copied" before, it is predicted to fail in TensorFlow's words.
    JAX asks TensorFlow for a plain export and views its aligned memory despite copy=True."""
    pytest.importorskip(target)
    t = tf.constant(np.arange(6, dtype=np.float32))
    with pytest.raises(GpushareError) as raised:
        gpushare.share(t, target, device="cpu", path="dlpack")
    predicted = raised.value.predicted
    assert predicted is not None and predicted.verdict == "failed", predicted
    assert "TensorFlow's __dlpack__ refuses dl_device" in predicted.reason


def test_a_tensorflow_move_into_jax_by_dlpack_copy_true_shares_as_predicted():
    pytest.importorskip("jax")
    t = tf.constant(np.arange(16, dtype=np.float32))
    r = gpushare.share(t, "jax", device="cpu", path="dlpack")
    assert r.verdict == r.prediction["verdict"] and not r.unexpected, r
