"""Every figure has a ceiling and respects it, on a GPU: the GPU ceilings are measured
with the CUDA driver, every compare/bench row's bandwidth is at most the ceiling of the resources its
copy crosses (a GPU's memory, the host link each way, a GPU pair's link), and a copying row's time is
never below its own device time (the H100 timed a 64 MiB ``copy`` into TensorFlow at 13.4 µs,
"5013 GB/s", beside its own 47.6 µs device time).

Run with ``pytest -m gpu tests/test_ceilings_gpu.py``; everywhere without a CUDA driver these skip
with "no CUDA". The CPU checks are tests/test_ceilings.py.
"""

from __future__ import annotations

import pytest

import gpushare
from gpushare import _native
from gpushare import machine_ceilings as mc
from _gpu import cuda_devices, need, require_cuda

pytestmark = pytest.mark.gpu

torch = require_cuda()

TARGETS = ["torch", "jax", "cupy", "numba", "numpy", "tf"]
SIZES = ["4KiB", "1MiB", "64MiB"]


@pytest.fixture(scope="module")
def limits(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield gpushare.ceilings()


def test_every_gpu_resource_has_a_measured_ceiling(limits):
    count = int(_native.cuda.driver_status()["device_count"])
    resources = limits.resources
    for d in range(count):
        for key in (f"device_memory:{d}", f"host_to_device:{d}", f"device_to_host:{d}"):
            points = resources[key]["points"]
            assert [n for n, _ in points] == list(mc.DEVICE_SIZES), (key, resources[key])
            assert all(bps > 1e9 for _, bps in points), (key, points)
        for e in range(count):
            if e != d:
                assert resources[f"peer:{d}->{e}"]["points"], resources[f"peer:{d}->{e}"]
        # A GPU's own memory copies faster than its host link carries, at streaming sizes.
        big = mc.DEVICE_SIZES[-1]
        assert limits.ceiling(f"device_memory:{d}", big) > limits.ceiling(f"host_to_device:{d}", big)
    assert "device_memory:0" in limits.text() and "GB/s" in limits.text()


@pytest.mark.parametrize("device", cuda_devices())
@pytest.mark.parametrize("dst", TARGETS)
def test_every_gpu_compare_and_bench_row_respects_its_ceiling_and_device_time(dst, device, limits):
    need(dst)
    for size in SIZES:
        x = torch.ones(gpushare.lab.parse_size(size) // 4, device=device)
        c = gpushare.compare(x, dst, repeat=5)
        assert mc.table_problems(c, limits) == [], c
    b = gpushare.bench("torch", dst, sizes=SIZES, device=device, repeat=5, progress=False)
    assert mc.table_problems(b, limits) == [], b


def test_a_64_mib_copy_into_tensorflow_is_timed_to_the_end_of_the_copy(limits):
    need("tf")
    x = torch.ones((64 << 20) // 4, device="cuda:0")
    c = gpushare.compare(x, "tf", "copy,host", repeat=7)
    for row in c.to_dict()["rows"]:
        t = row["timing"]
        assert t is not None, row
        if t["device_median"] is not None:
            assert t["median"] >= t["device_median"], row
    assert mc.table_problems(c, limits) == [], c


def test_moves_between_gpus_respect_the_pair_link(limits):
    if len(cuda_devices()) < 2:
        pytest.skip("one GPU: no pair to move between")
    for size in SIZES:
        x = torch.ones(gpushare.lab.parse_size(size) // 4, device="cuda:0")
        c = gpushare.compare(x, "torch", device="cuda:1", repeat=5)
        assert mc.table_problems(c, limits) == [], c
    for src in ("cuda:0", "cuda:1"):
        x = torch.ones((64 << 20) // 4, device=src)
        c = gpushare.compare(x, "torch", device="cpu", repeat=5)
        assert mc.table_problems(c, limits) == [], c
