"""Calibrating the process paths on the CPU: ``calibrate(processes=True,
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
RECORDED: list = []  # the process calibration's sweeps, as calibrate(record=) keeps them


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        advice.forget()
        gpushare.calibrate(["torch", "numpy"], sizes=SIZES, repeat=3, device="cpu")
        shares = set(advice.model().keys())
        recorded: list = []
        m = gpushare.calibrate(["torch"], sizes=SIZES, repeat=3, device="cpu", processes=True, shares=False, record=recorded)
        RECORDED[:] = recorded
        yield shares, m
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
    # A handoff by a handle (shm's segment name, torch's storage descriptor) costs the same at every
    # size, whatever the worker's drift during the sweep; gloo sends the bytes, so its line grows.
    for path in ("shm", "torch_mp"):
        f = fits[f"process torch->torch {path} @cpu->process"]
        assert f["per_byte"] == 0.0 and not f.get("knots"), (path, f)
    gloo = m.predict("process", "gloo", "torch", "torch", "cpu->process", 64 << 20, "none")
    assert gloo.seconds > m.predict("process", "gloo", "torch", "torch", "cpu->process", 4 << 10, "none").seconds


def test_advise_across_processes_predicts_each_calibrated_path(model):
    a = gpushare.advise(torch.ones(1 << 18), "torch", across="process")
    predicted = {r["path"] for r in a.rows if r["prediction"] is not None}
    assert {"shm", "torch_mp", "gloo"} <= predicted, a.rows
    assert a.producer == "idle"
    # Calibrated on a loaded machine the fits may be too uncertain to rank by; never "not calibrated".
    assert a.recommended is not None and "run gpushare.calibrate()" not in a.why, a.why


def test_process_tables_show_the_prediction_made_before_each_handoff_and_flag_a_miss(model):
    """Every process row carries what the model predicted for it before it ran (in the table, the
    JSON and to_pandas), the same figure advise gives; a row measured far off it says so."""
    _, m = model
    x = torch.ones(1 << 18)
    advised = gpushare.advise(x, "torch", across="process")
    c = gpushare.compare(x, "torch", across="processes", paths="shm,torch_mp", repeat=3)
    rows = {r["path"]: r for r in c.to_dict()["rows"]}
    for path in ("shm", "torch_mp"):
        assert rows[path]["predicted"]["seconds"] == pytest.approx(advised.predicted(path)), path
    assert "predicted" in repr(c) and ">predicted<" in c._repr_html_()
    # A model that predicts 1 ns for shm: the measurement misses it, and the tables say so.
    fake = gpushare.CostModel(advice.machine_key(), 0.0)
    fake.add("process", "shm", "torch", "torch", "cpu->process", [(n, 1e-9) for n in (64 << 10, 1 << 20, 4 << 20)], False)
    advice.save(fake)
    try:
        c = gpushare.compare(x, "torch", across="processes", paths="shm", repeat=3)
        assert "beyond the model's stated" in repr(c) and "⚠" in c._repr_html_()
        b = gpushare.bench("torch", "torch", ["64KiB", "1MiB"], across="processes", paths="shm", repeat=3)
        # A sweep to a worker reads as any sweep: the predicted table beside the measured one.
        assert "predicted before it ran, cost model (ns); ⚠ measured beyond its stated error" in repr(b), repr(b)
        assert "64 KiB  1.00 ⚠" in repr(b) and "1 MiB   1.00 ⚠" in repr(b), repr(b)
        frame = b.to_pandas() if _has_pandas() else None
        if frame is not None:
            assert frame["misses_prediction"].all() and (frame["predicted_s"] == 1e-9).all()
    finally:
        advice.save(m)


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_worker_on_another_gpu_has_a_place_of_its_own():
    assert advice.process_place("cuda:0", None) == "cuda:0->process"
    assert advice.process_place("cuda:0", "cuda:0") == "cuda:0->process"
    assert advice.process_place("cuda:0", "cuda") == "cuda:0->process"
    assert advice.process_place("cuda:0", "cuda:1") == "cuda:0->process@cuda:1"
    # Every spelling of a device the core accepts names one place: a key calibrate stores is the
    # key advise looks up, however the user wrote the worker's device.
    assert advice.process_place("cuda:0", "gpu:0") == "cuda:0->process"
    assert advice.process_place("cuda:0", " GPU:1") == advice.process_place("cuda:0", "cuda:1")
    assert advice.process_place("cpu", "cuda:1") == "cpu->process", "host memory goes the same way to any worker"
    # A worker on another host: its link, fitted apart from every other host's (any port).
    assert advice.process_place("cpu", None, "10.0.0.2:29500") == "cpu->remote:10.0.0.2"
    assert advice.process_place("cpu", "cuda:0", "10.0.0.2:29501") == "cpu->remote:10.0.0.2"
    assert advice.process_place("cpu", None, "10.0.0.3:29500") != advice.process_place("cpu", None, "10.0.0.2:29500")


def test_the_process_paths_are_measured_in_rounds_apart_each_with_a_fresh_worker(model):
    """A process handoff's time drifts within seconds: every size is measured in PROCESS_ROUNDS
    sweeps one after another, each by a worker of its own, and the fit takes them all."""
    sweeps = [r for r in RECORDED if r["kind"] == "process"]
    assert len(sweeps) == advice.PROCESS_ROUNDS, [r["started"] for r in sweeps]
    assert [r["started"] for r in sweeps] == sorted(r["started"] for r in sweeps)
    workers = {p["worker"]["target"]["pid"] for r in sweeps for p in r["points"] if p["worker"].get("target")}
    assert len(workers) == advice.PROCESS_ROUNDS, workers
    for r in sweeps:
        assert {p["size"] for p in r["points"]} == {gpushare.lab.parse_size(s) for s in SIZES}
        timed = [p for p in r["points"] if p.get("timing")]
        assert timed and all(len(p["timing"]["samples"]) == -(-advice.PROCESS_REPEAT // advice.PROCESS_ROUNDS) for p in timed)


def test_no_prediction_for_what_no_adapter_describes(model):
    """A prediction is asked before every process handoff: an object no adapter describes gets
    none, and the handoff itself says what it makes of it."""
    assert advice.process_prediction(torch.ones(1 << 16), "shm", None) is not None
    assert advice.process_prediction(object(), "shm", None) is None


def test_a_remote_worker_reads_its_device_as_every_other_option_does():
    from gpushare.exceptions import GpushareError
    from gpushare.processes.remote import _device_arg

    for host in (None, "", "cpu", "cpu:0", "CPU"):
        assert _device_arg(host) is None, host
    assert [_device_arg(d) for d in ("cuda", "cuda:2", "gpu:1", " GPU:3 ")] == [0, 2, 1, 3]
    with pytest.raises(GpushareError, match=r'--device: unknown device "tpu:1": use cpu'):
        _device_arg("tpu:1")
