"""A busy producer on a real GPU (``pytest -m gpu``, skipped with "no CUDA" elsewhere):
with matmuls queued on torch's stream the driver says the producer is busy, ``advise`` says so and
recommends a path ordered on the device, and the one ``auto`` (``share``) takes such a path, does
not wait for the queue, and the consumer still reads the values the queued work wrote."""

from __future__ import annotations

import math
import time

import pytest

import gpushare
from _gpu import need, require_cuda
from gpushare import _native, advice, verdicts
from gpushare.adapters import framework

pytestmark = pytest.mark.gpu

torch = require_cuda()

N = 1 << 18  # 1 MiB of float32


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """torch→jax calibrated on cuda:0, in a cache of this module's own."""
    need("jax")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        advice.forget()
        yield gpushare.calibrate(["torch", "jax"], sizes=("64KiB", "1MiB", "4MiB"), device="cuda:0", repeat=3)
        advice.forget()


def settle() -> None:
    """Waits for every GPU: torch.cuda.synchronize() waits for the current device only, and on the
    GPU pair that was not cuda:0, where the matmuls are queued (another framework made cuda:1's
    context current on this thread)."""
    for ordinal in range(torch.cuda.device_count()):
        torch.cuda.synchronize(ordinal)


@pytest.fixture(scope="module")
def queue():
    """Queues a few milliseconds of matmuls on torch's current stream (warmed: cuBLAS loaded, the
    kernels chosen) and returns how long they take."""
    a = torch.randn(4096, 4096, device="cuda:0")
    (a @ a).sum().item()
    settle()
    stream = torch.cuda.current_stream(a.device)  # the stream the matmuls run on, whatever is current

    def timed(count: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(count):
            a @ a
        end.record(stream)
        end.synchronize()  # on a's device: the current device may be another (torch.cuda.synchronize() waits for that one only)
        return start.elapsed_time(end) / 1e3

    # As many matmuls as make about 10 ms on this GPU (an H200 does a 4096² one in well under 1 ms).
    count = max(8, math.ceil(10e-3 / max(timed(8) / 8, 1e-6)))

    def queue_work() -> None:
        for _ in range(count):
            a @ a

    queue_work.seconds = timed(count)
    assert queue_work.seconds > 2e-3, f"the queue must be long enough to tell a wait ({queue_work.seconds * 1e3:.2f} ms)"
    return queue_work


def test_the_driver_tells_a_busy_producer_from_an_idle_one(queue):
    x = torch.ones(N, device="cuda:0")
    src = framework("torch")
    settle()
    assert advice.producer_state(src, x) == "idle"
    queue()
    assert advice.producer_state(src, x) == "busy"
    settle()
    assert advice.producer_state(src, x) == "idle"


def test_advise_says_the_producer_is_busy_and_recommends_a_path_ordered_on_the_device(model, queue):
    x = torch.ones(N, device="cuda:0")
    settle()
    idle = gpushare.advise(x, "jax")
    assert idle.producer == "idle" and "producer idle" in repr(idle)
    queue()
    busy = gpushare.advise(x, "jax")
    settle()
    assert busy.producer == "busy", repr(busy)
    assert "producer busy" in repr(busy) and "assumed: producer busy" in repr(busy)
    waits = {r["path"]: r["waits"] for r in busy.rows}
    # JAX's DLPack import waits on the host (measured): predicted as at least its queue.
    assert waits.get("dlpack") is True, busy.rows
    # Where a sharing path ordered on the device is calibrated, it is the recommendation.
    if any(not r["waits"] and r["verdict"] == "shared" and r["prediction"] is not None and r["ordered"] for r in busy.rows):
        assert not waits[busy.recommended], repr(busy)
        assert "+ queue" in repr(busy), repr(busy)


def test_auto_takes_a_path_ordered_on_the_device_and_the_consumer_reads_finished_values(model, queue):
    jnp = need("jax").numpy
    x = torch.ones(N, device="cuda:0")
    settle()
    idle = gpushare.share(x, "jax")
    src, jax = framework("torch"), framework("jax")
    # Where a calibrated path is ordered and does not wait, a busy producer moves auto to it;
    # where none is (into JAX: its interface import ignores the stream), auto keeps its idle pick.
    # Either way the consumer must read the values the queue wrote.
    switches = verdicts.predictor(src, jax, "auto").follows_producer(gpushare.inspect(x))
    # Warm the busy plan: the route, the target's import.
    queue()
    gpushare.share(x, "jax")
    settle()
    for value in (3.0, 5.0):
        queue()
        x.fill_(value)  # queued after the matmuls: the consumer must read it, not the old values
        t0 = time.perf_counter()
        r = gpushare.share(x, "jax")
        took = time.perf_counter() - t0
        total = float(jnp.sum(r.value))
        settle()
        # First of all the consumer reads the values the queue wrote, whatever auto took.
        assert total == value * N, f"{r.path} read {total}, not {value * N}: the handoff was not ordered"
        if switches:
            assert r.path != idle.path, (r.path, idle.path)
            assert not _native.paths.path_waits("share", r.path, "cuda:0", jax.accepts_objects, jax.dlpack_import_waits)
            assert any("producer is busy" in n for n in r.notes), r.notes
            assert took < queue.seconds / 2, f"{r.path} took {took * 1e3:.2f} ms with {queue.seconds * 1e3:.2f} ms queued"
        else:  # no calibrated path into JAX is both ordered and free of the wait (cai is not ordered)
            assert r.path == idle.path, (r.path, idle.path)
    # Idle again: the calibrated pick.
    assert gpushare.share(x, "jax").path == idle.path


def test_a_busy_producer_moves_by_a_path_that_does_not_wait_and_the_values_arrive(model, queue):
    """Two GPUs: the peer copy waits on the host for the producer's queue (the core synchronises
    the source's stream after its copy); the framework's own move is queued after it on the device."""
    if torch.cuda.device_count() < 2:
        pytest.skip("fewer than 2 GPUs")
    gpushare.calibrate(["torch"], sizes=("1MiB", "16MiB", "64MiB"), device="cuda:0", to_device="cuda:1", repeat=3,
                       shares=False)
    x = torch.ones(N, device="cuda:0")
    settle()
    queue()
    busy = gpushare.advise(x, "torch", device="cuda:1")
    settle()
    assert busy.producer == "busy", repr(busy)
    waits = {r["path"]: r["waits"] for r in busy.rows}
    assert waits.get("p2p") is True and waits.get("pinned") is True, busy.rows
    calm = [r["path"] for r in busy.rows if not r["waits"] and r["prediction"] is not None and r["verdict"] != "failed"]
    if not calm:
        pytest.skip(f"no move that does not wait was calibrated here: {busy.rows}")
    assert busy.recommended in calm, repr(busy)
    queue()
    x.fill_(7.0)
    r = gpushare.share(x, "torch", device="cuda:1")
    total = float(r.value.sum())
    settle()
    assert not waits.get(r.path, False), r.path
    assert total == 7.0 * N, f"{r.path} moved {total}, not {7.0 * N}"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
def test_a_worker_on_another_gpu_is_calibrated_apart_and_nccl_is_predicted_there(tmp_path, monkeypatch):
    """The process paths include NCCL, which needs the worker on another GPU: calibrating with
    ``worker_device`` fits the paths there under their own place, advise for such a worker predicts
    NCCL, and the process table shows each row's prediction beside its measurement."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    try:
        m = gpushare.calibrate(["torch"], sizes=("64KiB", "1MiB", "4MiB"), device="cuda:0", processes=True,
                               shares=False, worker_device="cuda:1", repeat=3)
        places = {k[4] for k in m.keys() if k[0] == "process"}
        assert places == {"cuda:0->process", "cuda:0->process@cuda:1"}, places
        there = {k[1] for k in m.keys() if k[0] == "process" and k[4] == "cuda:0->process@cuda:1"}
        assert {"ipc", "nccl"} <= there, there
        x = torch.ones(N, device="cuda:0")
        with gpushare.Worker(device="cuda:1") as w:
            a = gpushare.advise(x, "torch", across=w)
            assert a.predicted("nccl") is not None and a.predicted("ipc") is not None, a.rows
            c = gpushare.compare(x, "torch", across=w, paths="ipc,nccl", repeat=3)
        rows = {r["path"]: r for r in c.to_dict()["rows"]}
        assert all(rows[p]["predicted"]["seconds"] > 0 for p in ("ipc", "nccl")), rows
    finally:
        advice.forget()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
def test_a_move_takes_the_path_fastest_for_its_own_size_in_share_compare_bench_and_advise(tmp_path, monkeypatch):
    """`auto` "for this size": a model of this pair in which the framework's own move starts
    sooner and the peer copy streams faster (equal at 24 MB, the shape a real H100 pair's fits
    have at a smaller size). A 1 MiB array takes ``move``, a 64 MiB one ``p2p``, and ``share``,
    ``compare``'s auto row, ``bench``'s auto per size and ``advise`` all say so."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 20, 16 << 20, 256 << 20)
    m.add("move", "p2p", "torch", "torch", "cuda:0->cuda:1", [(n, 30e-6 + n / 400e9) for n in sizes], False)
    m.add("move", "move", "torch", "torch", "cuda:0->cuda:1", [(n, 10e-6 + n / 300e9) for n in sizes], False)
    advice.save(m)
    try:
        expected = {1 << 20: "move", 64 << 20: "p2p"}
        arrays = [torch.ones(n // 4, device="cuda:0") for n in expected]
        for _ in range(2):
            for x in arrays:
                r = gpushare.share(x, "torch", device="cuda:1")
                assert r.path == expected[x.nbytes] and r.value.device.index == 1, (x.nbytes, r.path)
                assert float(r.value[-1]) == 1.0
        for x in arrays:
            c = gpushare.compare(x, "torch", device="cuda:1", repeat=1)
            assert [row.path for row in c.rows if row.auto] == [expected[x.nbytes]], x.nbytes
            a = gpushare.advise(x, "torch", device="cuda:1")
            assert a.recommended == expected[x.nbytes], x.nbytes
            assert [r["path"] for r in a.to_dict()["auto_by_size"]] == ["move", "p2p"], a.to_dict()["auto_by_size"]
        b = gpushare.bench("torch", "torch", sizes=list(expected), paths="auto", to_device="cuda:1", repeat=1,
                           progress=False, device="cuda:0")
        marked = {(p["size"], p["path"]) for p in b.to_dict()["points"] if p["auto"]}
        assert marked == set(expected.items()), marked
    finally:
        advice.cache_file().unlink()
        advice.forget()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
def test_a_calibration_prices_the_device_switch_and_predictions_add_it_only_where_another_gpu_is_current(tmp_path, monkeypatch):
    """A handoff of a torch tensor on cuda:0 while cuda:1 is current makes cuda:0 current and
    cuda:1 again after (the guard; JAX makes the last GPU current when it starts). The sweeps run
    with the arrays' device current, the switch is measured apart, and a prediction adds it
    exactly when another device is current: in ``compare``'s rows as in the model's own call."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    try:
        need("cupy")
        with torch.cuda.device(1):  # calibrated from the state a JAX user is in
            m = gpushare.calibrate(["torch", "cupy"], sizes=("4KiB", "64KiB", "1MiB"), device="cuda:0", repeat=3,
                                   progress=False)
            assert torch.cuda.current_device() == 1, "calibrate left another device current"
        switch = m.device_switch("torch", "cuda:0")
        assert switch is not None and 0.0 < switch < 1e-4, switch
        assert m.device_switch("cupy", "cuda:0") is not None
        src = framework("torch")
        plain = m.predict("share", "capsule", "torch", "cupy", "cuda:0", 1 << 20, shares=True)
        switched = m.predict("share", "capsule", "torch", "cupy", "cuda:0", 1 << 20, shares=True, switches_device=True)
        assert math.isclose(switched.seconds - plain.seconds, switch, rel_tol=1e-9), (plain, switched)
        assert switched.device_switch == switch and plain.device_switch == 0.0
        x = torch.ones(N, device="cuda:0")
        with torch.cuda.device(0):
            assert not advice.switches_device(src, "share", "capsule", "cuda:0")
            here = gpushare.compare(x, "cupy", paths="capsule", repeat=1).to_dict()["rows"][0]["predicted"]
        with torch.cuda.device(1):
            assert advice.switches_device(src, "share", "capsule", "cuda:0")
            # A move by torch's own `move` goes by torch's current device: no guard, no switch.
            assert not advice.switches_device(src, "move", "move", "cuda:0->cuda:1")
            there = gpushare.compare(x, "cupy", paths="capsule", repeat=1).to_dict()["rows"][0]["predicted"]
        # compare's rows scale the switch, host work, by the host's speed right before each row.
        assert there.get("device_switch", 0.0) > 0.0 and "device_switch" not in here, (here, there)
    finally:
        advice.forget()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")
def test_a_model_that_prefers_cai_into_cupy_is_overruled_where_cupys_current_device_would_copy(tmp_path, monkeypatch):
    """A JAX array on cuda:1 into CuPy, with a model that prices ``cai`` fastest: with cuda:1 current,
    ``cai`` shares and ``auto`` takes it; with cuda:0 current, CuPy's ``cai`` import copies the array
    to cuda:0, and ``auto`` takes a path that shares. The same kind of array, alternately, through
    one plan: what ``auto`` decided under one current device is not reused under the other."""
    need("jax")
    cupy = need("cupy")
    import jax
    import jax.numpy as jnp

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 14, 1 << 20, 1 << 24)
    m.add("share", "dlpack", "jax", "cupy", "cuda:1", [(n, 20e-6) for n in sizes], True)
    m.add("share", "cai", "jax", "cupy", "cuda:1", [(n, 5e-6) for n in sizes], True)
    advice.save(m)
    try:
        x = jax.device_put(jnp.arange(4096, dtype=jnp.float32), jax.devices("gpu")[1])
        x.block_until_ready()
        for _ in range(2):
            for current in (1, 0):
                with cupy.cuda.Device(current):
                    r = gpushare.share(x, "cupy")
                assert r.verdict == "shared" and not r.unexpected, (current, r.path, r.reason)
                assert r.target.dlpack_device == (2, 1), (current, r.path, r.target.dlpack_device)
                assert (r.path == "cai") == (current == 1), (current, r.path)
    finally:
        advice.cache_file().unlink()
        advice.forget()
