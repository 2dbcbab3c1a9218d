"""GPU suite (``pytest -m gpu``): the routes adapters declare (``Adapter.describe_by``) describe
device memory as the adapters' own capsule reading does, on every device, whichever is current
(JAX leaves the last GPU current: tests/_gpu.py)."""

from __future__ import annotations

import pytest

from _gpu import cuda_devices, require_cuda

pytestmark = pytest.mark.gpu
torch = require_cuda()

from gpushare import _native  # noqa: E402
from gpushare.adapters import Adapter, framework  # noqa: E402


def _same(adapter, x):
    declared = _native.share.describe_declared(x, adapter)
    assert declared is not None, f"{adapter.name}'s declared route declined {x!r}"
    fast, slow = declared.to_dict(), Adapter.inspect(adapter, x).to_dict()
    fast.pop("dlpack_version"), slow.pop("dlpack_version")
    assert fast == slow


@pytest.mark.parametrize("device", cuda_devices())
def test_torch_cuda_tensors_are_described_by_the_exchange_api(device):
    if getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this torch has no DLPack exchange API (DLPack 1.3)")
    t = framework("torch")
    base = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6)
    for x in (base, base[1:3, ::2], base.t(), torch.ones(2, device=device, requires_grad=True)):
        _same(t, x)


@pytest.mark.parametrize("device", cuda_devices())
def test_cuda_core_views_of_device_memory_are_described_by_the_exchange_api(device):
    utils = pytest.importorskip("cuda.core.utils", reason="cuda.core not installed")
    smv = utils.StridedMemoryView
    if getattr(smv, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this cuda.core has no DLPack exchange API on StridedMemoryView")
    base = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6)
    torch.cuda.synchronize(base.device)
    for x in (base, base[1:3, ::2]):
        _same(framework("cuda_core"), smv.from_dlpack(x, stream_ptr=1))


@pytest.mark.parametrize("device", cuda_devices())
def test_cupy_arrays_are_described_by_their_capsule(device):
    cupy = pytest.importorskip("cupy", reason="cupy not installed")
    with cupy.cuda.Device(int(device.split(":")[1])):
        x = cupy.arange(24, dtype=cupy.float32).reshape(4, 6)
    for v in (x, x[1:3, ::2]):
        _same(framework("cupy"), v)


@pytest.mark.parametrize("device", cuda_devices())
def test_jax_gpu_arrays_are_described_by_their_attributes(device):
    jax = pytest.importorskip("jax", reason="jax not installed")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    ordinal = int(device.split(":")[1])
    if ordinal >= len(gpus):
        pytest.skip(f"JAX sees no {device}")
    x = jax.device_put(jax.numpy.arange(24.0).reshape(4, 6), gpus[ordinal])
    _same(framework("jax"), x)


@pytest.mark.parametrize("device", cuda_devices())
def test_numba_device_arrays_are_described_by_their_strided_recipe(device):
    """Numba's arrays name no device: the recipe's is the driver's, as inspect() says, whichever
    device is current; a zero-size array (no memory) is left to inspect()."""
    pytest.importorskip("numba.cuda", reason="numba not installed")
    import numpy as np
    from numba import cuda

    adapter = framework("numba")
    ordinal = int(device.split(":")[1])
    with cuda.gpus[ordinal]:
        base = cuda.to_device(np.arange(24, dtype=np.float32).reshape(4, 6))
        others = [cuda.to_device(np.ones(5, dtype=t)) for t in (np.int8, np.bool_, np.complex64, np.float16)]
        fortran = cuda.to_device(np.asfortranarray(np.ones((3, 5), dtype=np.float64)))
        empty = cuda.device_array((0, 3), dtype=np.float32)
    # (Numba's `.T` is a copy made by a kernel, not a view: a Fortran-ordered array stands for it.)
    for x in (base, base[1:3, ::2], base[:, 2], fortran, *others):
        declared = _native.share.describe_declared(x, adapter)
        assert declared is not None, f"the Strided recipe declined {x.shape} {x.dtype} {x.strides}"
        assert declared.to_dict() == type(adapter).inspect(adapter, x).to_dict()
        assert declared.device == device
    assert _native.share.describe_declared(empty, adapter) is None
