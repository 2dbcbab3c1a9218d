"""Helpers shared by the GPU suites (``pytest -m gpu``): the module-level skip with its condition,
and each framework's import and host read-back."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gpushare import _native

# Let JAX share the GPU with the other frameworks instead of taking 75 % of it at first use.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def require_cuda():
    """Skips the calling test module with the condition when there is no usable GPU; returns torch."""
    status = getattr(_native.cuda, "driver_status", None)
    if not (status and status()["available"]):
        pytest.skip("no CUDA", allow_module_level=True)
    torch = pytest.importorskip("torch", reason="torch not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA (torch sees no GPU)", allow_module_level=True)
    start_jax()
    return torch


def start_jax() -> None:
    """Starts JAX's GPU backends first, as a notebook that imports JAX does: on a machine with
    several GPUs that leaves the last one current, which every GPU suite must survive."""
    try:
        import jax

        jax.devices()
    except Exception:  # no JAX, or no GPU backend: the suites still run, without the trap
        pass


def cuda_devices() -> list[str]:
    """``cuda:0`` and, where present, ``cuda:1``: what the GPU suites parametrise over."""
    count = int(_native.cuda.driver_status().get("device_count") or 0) if _native.cuda.driver_status().get("available") else 0
    return [f"cuda:{i}" for i in range(min(max(count, 1), 2))]


def need(fw: str):
    """The framework's module, or a skip naming why it cannot run on the GPU here."""
    if fw == "torch":
        return pytest.importorskip("torch", reason="torch not installed")
    if fw == "jax":
        jax = pytest.importorskip("jax", reason="jax not installed")
        if not any(d.platform == "gpu" for d in jax.devices()):
            pytest.skip("jax has no GPU backend")
        return jax
    if fw == "cupy":
        return pytest.importorskip("cupy", reason="cupy not installed")
    if fw == "numba":
        return pytest.importorskip("numba.cuda", reason="numba not installed")
    if fw == "numpy":  # host memory only: a target the GPU suites hand device memory to by the host route
        return pytest.importorskip("numpy", reason="numpy not installed")
    if fw == "tf":
        # On the GPU machine TensorFlow brings a CUDA 12 runtime beside JAX's CUDA 13 one; imported
        # first, it leaves JAX with no GPU backend ("Unknown backend cuda"), so JAX starts first.
        try:
            import jax

            jax.devices()
        except ImportError:
            pass
        tf = pytest.importorskip("tensorflow", reason="tensorflow not installed")
        if not tf.config.list_physical_devices("GPU"):
            pytest.skip("tensorflow has no GPU here (a CPU build, or its CUDA libraries are missing)")
        # TensorFlow sets up each GPU device (streams, allocator: 4 MiB of the driver's memory on an
        # H100, and 1,280 B of its own allocator on a second H100) at its first op there; a share's
        # memory ledger must not count that as the share's, on cuda:1 as on cuda:0.
        for ordinal in range(len(tf.config.list_logical_devices("GPU"))):
            with tf.device(f"/GPU:{ordinal}"):
                tf.zeros([1]).numpy()
        return tf
    raise AssertionError(fw)


def to_host(fw: str, value) -> np.ndarray:
    """A GPU array's values as NumPy, read back by its own framework."""
    if fw == "torch":
        return value.cpu().numpy()
    if fw == "cupy":
        return value.get()
    if fw == "numba":
        return value.copy_to_host()
    if fw == "tf":
        return value.numpy()
    return np.asarray(value)
