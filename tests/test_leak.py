"""Leak checks: many shares leave memory flat, and gpushare keeps no reference to the arrays it
converts (on success, on a framework failure, and on a refusal).

Host memory: after a warm-up of 1,000 shares, 10,000 more shares of fresh 4 KiB arrays per pair must
grow the process's RSS by less than ``BOUND`` (8 MiB). Leaking the source of every share would grow it
by ~40 MiB, leaking one capsule or report per share by several MiB. The measured growth is printed:

    .venv/bin/python -m pytest -q tests/test_leak.py -s

The device variant (``-m gpu``) does the same with CUDA tensors and checks PyTorch's allocator and the
driver's free memory; it is skipped with "no CUDA" elsewhere.
"""

from __future__ import annotations

import gc
import os
import sys
import weakref

import pytest

import gpushare
from conftest import have
from gpushare.exceptions import ConversionError, UnsafeInputError

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch", reason="torch not installed")

pytestmark = pytest.mark.filterwarnings("ignore")

WARMUP = 1_000
ITERATIONS = 10_000
BOUND = 8 * 2**20  # bytes of RSS growth allowed over ITERATIONS shares of one pair
N = 1024  # float32 elements per array: 4 KiB


def rss() -> int:
    """Resident set size in bytes: psutil where installed, else /proc/self/statm."""
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


def make(src: str):
    if src == "torch":
        return torch.arange(N, dtype=torch.float32)
    if src == "numpy":
        return np.arange(N, dtype=np.float32)
    raise AssertionError(src)


PAIRS = [("torch", "numpy"), ("numpy", "torch"), ("torch", "jax"), ("torch", "tf")]
_MODULE = {"numpy": "numpy", "torch": "torch", "jax": "jax", "tf": "tensorflow"}


def _need(*fws: str) -> None:
    for fw in fws:
        if not have(_MODULE[fw]):
            pytest.skip(f"{_MODULE[fw]} not installed")


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_host_memory_stays_flat(src, dst, capsys):
    _need(src, dst)
    share = gpushare.share
    for _ in range(WARMUP):
        share(make(src), dst)
    gc.collect()
    before = rss()
    for _ in range(ITERATIONS):
        r = share(make(src), dst)
        del r
    gc.collect()
    growth = rss() - before
    with capsys.disabled():
        print(
            f"\n[leak] {src}→{dst}: {ITERATIONS} shares after {WARMUP} warm-up: RSS growth "
            f"{growth / 2**20:+.2f} MiB (bound {BOUND / 2**20:.0f} MiB)"
        )
    assert growth < BOUND, f"{src}→{dst}: RSS grew {growth / 2**20:.1f} MiB over {ITERATIONS} shares"


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_source_is_freed_after_del(src, dst):
    _need(src, dst)
    x = make(src)
    refs = sys.getrefcount(x)
    ref = weakref.ref(x)
    r = gpushare.share(x, dst)
    assert r.verdict == "shared"
    # The target views the source's memory, so it (not gpushare) may keep the source alive.
    del r
    gc.collect()
    assert sys.getrefcount(x) == refs, "gpushare kept a reference to the source"
    del x
    gc.collect()
    assert ref() is None, "the source outlived the source and the result"


def test_torch_storage_is_released_after_del():
    """Through the storage, not just the Python object: the memory itself is given back."""
    _need("torch", "numpy")
    x = torch.arange(N, dtype=torch.float32)
    storage_ref = weakref.ref(x.untyped_storage())
    r = gpushare.share(x, "numpy")
    value = r.value
    del r, x
    gc.collect()
    assert np.array_equal(value, np.arange(N, dtype=np.float32))  # the view still works
    del value
    gc.collect()
    assert storage_ref() is None


def test_failed_and_refused_conversions_keep_no_reference():
    """A framework failure (bfloat16 into NumPy) and a refusal (negative strides into torch) must not
    keep the source alive through the exception, its traceback or gpushare's caches."""
    _need("torch", "numpy")
    x = torch.zeros(N, dtype=torch.bfloat16)
    refs = sys.getrefcount(x)
    ref = weakref.ref(x)
    for _ in range(200):
        with pytest.raises(ConversionError):
            gpushare.share(x, "numpy")
    gc.collect()
    assert sys.getrefcount(x) == refs
    del x
    gc.collect()
    assert ref() is None
    a = np.arange(N, dtype=np.float32)[::-1]
    refs = sys.getrefcount(a)
    for _ in range(200):
        with pytest.raises(UnsafeInputError):
            gpushare.share(a, "torch")
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_failure_path_memory_stays_flat(capsys):
    _need("torch", "numpy")
    for _ in range(WARMUP):
        try:
            gpushare.share(torch.zeros(N, dtype=torch.bfloat16), "numpy")
        except ConversionError:
            pass
    gc.collect()
    before = rss()
    for _ in range(ITERATIONS):
        try:
            gpushare.share(torch.zeros(N, dtype=torch.bfloat16), "numpy")
        except ConversionError:
            pass
    gc.collect()
    growth = rss() - before
    with capsys.disabled():
        print(f"\n[leak] torch→numpy failing (bfloat16): {ITERATIONS} attempts: RSS growth {growth / 2**20:+.2f} MiB")
    assert growth < BOUND


@pytest.mark.gpu
def test_device_memory_stays_flat(capsys):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    targets = ["torch"]
    if have("cupy"):
        targets.append("cupy")
    if have("jax"):
        import jax

        try:
            jax.devices("gpu")
            targets.append("jax")
        except RuntimeError:
            pass  # JAX without a GPU backend here (e.g. JAX_PLATFORMS=cpu)
    from gpushare import _native

    mem_info = getattr(_native.cuda, "mem_info", None)
    for dst in targets:
        for _ in range(WARMUP):
            gpushare.share(torch.ones(N, device="cuda"), dst)
        gc.collect()
        torch.cuda.synchronize()
        base_alloc = torch.cuda.memory_allocated()
        base_free = mem_info(torch.cuda.current_device(), False) if mem_info else None
        for _ in range(ITERATIONS):
            r = gpushare.share(torch.ones(N, device="cuda"), dst)
            del r
        gc.collect()
        torch.cuda.synchronize()
        alloc_growth = torch.cuda.memory_allocated() - base_alloc
        free_now = mem_info(torch.cuda.current_device(), False) if mem_info else None
        used_growth = (base_free[0] - free_now[0]) if base_free and free_now else None
        with capsys.disabled():
            print(
                f"\n[leak] torch(cuda)→{dst}: {ITERATIONS} shares: torch allocated {alloc_growth / 2**20:+.2f} MiB, "
                f"driver used {'n/a' if used_growth is None else f'{used_growth / 2**20:+.2f} MiB'}"
            )
        assert alloc_growth < 2**20, f"torch's allocator kept {alloc_growth} bytes"
        if used_growth is not None:
            assert used_growth < 64 * 2**20, f"device memory in use grew {used_growth / 2**20:.1f} MiB"
