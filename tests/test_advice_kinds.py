"""Calibrating the process paths on the CPU (issue 26.2, 26.5): ``calibrate(processes=True,
shares=False)`` measures the process paths that work here (``torch_mp``, ``shm``, ``gloo`` from
host memory) with real worker processes, fits them beside the share pairs calibrated before, and
``advise(x, to, across="process")`` then predicts each of them. The moves need two GPUs
(tests/test_advice_gpu.py and benchmarks/bench_advice.py on two)."""

from __future__ import annotations

import pytest

import gpushare
from gpushare import advice

torch = pytest.importorskip("torch", reason="torch not installed")

SIZES = ("64KiB", "1MiB", "4MiB")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        advice.forget()
        gpushare.calibrate(["torch", "numpy"], sizes=SIZES, repeat=3, device="cpu")
        shares = set(advice.model().keys())
        yield shares, gpushare.calibrate(["torch"], sizes=SIZES, repeat=3, device="cpu", processes=True, shares=False)
        advice.forget()


def test_the_process_paths_that_work_on_a_cpu_are_fitted_beside_the_shares(model):
    shares, m = model
    keys = set(m.keys())
    assert shares <= keys, "calibrating the processes keeps the share pairs fitted before"
    fitted = {k[1] for k in keys if k[0] == "process"}
    assert {"shm", "torch_mp", "gloo"} <= fitted, keys
    assert all(k[4] == "cpu->process" for k in keys if k[0] == "process")
    # Nothing that fails on a CPU is fitted: CUDA IPC and NCCL need device memory.
    assert not fitted & {"ipc", "nccl", "nccl_socket"}
    # shares=False swept no share pair again, and none that was not there before.
    assert {k for k in keys if k[0] == "share"} == shares
    # A share's fixed cost follows the host's speed; a process handoff's (the worker's round trip)
    # is kept as calibrated.
    fits = m.to_dict()["fits"]
    assert all(f.get("host_speed") is None for label, f in fits.items() if label.startswith("process "))
    assert all(f.get("host_speed") for label, f in fits.items() if label.startswith("share "))


def test_advise_across_processes_predicts_each_calibrated_path(model):
    a = gpushare.advise(torch.ones(1 << 18), "torch", across="process")
    predicted = {r["path"] for r in a.rows if r["prediction"] is not None}
    assert {"shm", "torch_mp", "gloo"} <= predicted, a.rows
    assert a.producer == "idle"
    assert a.recommended is not None and "calibrate" not in a.why, a.why
