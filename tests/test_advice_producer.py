"""A busy producer on the CPU: the plumbing that lets ``auto`` and ``advise`` tell an
idle producer from a busy one. The decision is the core's (crates/core/src/advice/producer.rs and
paths.rs, cargo-tested there); these tests check that the Python layer asks the driver where it
can, says "unknown" where it cannot, and hands the state to the one ``auto`` and to ``advise``.
What a real queue on a real stream does is tests/test_advice_gpu.py's.
"""

from __future__ import annotations

import pytest

import gpushare
from gpushare import _native, advice, auto, model_cache, paths, verdicts
from gpushare.adapters import framework

torch = pytest.importorskip("torch", reason="torch not installed")

SIZES = (64 << 10, 1 << 20, 16 << 20)


def _model() -> gpushare.CostModel:
    """torch→jax on a GPU as the 2x H200 measured it idle: dlpack 20 µs, cai 40 µs, both shared."""
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    for path, seconds in (("dlpack", 20e-6), ("cai", 40e-6)):
        assert m.add("share", path, "torch", "jax", "cuda:0", [(n, seconds) for n in SIZES], True)
    return m


def test_the_paths_whose_host_waits_for_the_producer_are_the_cores():
    # From device memory: a capsule into TensorFlow (gpushare synchronises first), JAX's DLPack
    # import, the host and pinned copies, peer moves, process handles.
    assert _native.paths.path_waits("share", "capsule", "cuda:0", target_takes_objects=False)
    assert not _native.paths.path_waits("share", "capsule", "cuda:0", target_takes_objects=True)
    assert _native.paths.path_waits("share", "dlpack", "cuda:0", True, import_waits=True)
    assert not _native.paths.path_waits("share", "dlpack", "cuda:0", True, import_waits=False)
    assert not _native.paths.path_waits("share", "cai", "cuda:0")
    assert _native.paths.path_waits("share", "host", "cuda:0") and _native.paths.path_waits("share", "pinned", "cuda:0")
    assert _native.paths.path_waits("move", "p2p", "cuda:0->cuda:1") and not _native.paths.path_waits("move", "move", "cuda:0->cuda:1")
    assert _native.paths.path_waits("move", "move", "cuda:0->cpu")
    assert _native.paths.path_waits("process", "ipc", "cuda:0->process") and not _native.paths.path_waits("process", "nccl", "cuda:0->process")
    # Host memory has no queue to wait for.
    for path in ("dlpack", "capsule", "host", "pinned"):
        assert not _native.paths.path_waits("share", path, "cpu", False, True)
    # The adapters declare the import that waits (JAX's, as measured); the others do not.
    assert framework("jax").dlpack_import_waits is True
    assert framework("torch").dlpack_import_waits is False


def test_the_one_auto_takes_a_path_ordered_on_the_device_for_a_busy_producer():
    m = _model()
    jax = framework("jax")
    # A consumer whose DLPack import waits on the host and whose interface import honours the
    # producer's stream: busy, auto takes the interface, ordered on the device.
    ordered = _native.paths.Pair("torch", "jax", accepts_capsules=jax.accepts_capsules, import_waits=jax.dlpack_import_waits)
    idle = ordered.auto(_native.paths.HandoffFacts((2, 0), model=m))
    busy = ordered.auto(_native.paths.HandoffFacts((2, 0), model=m, producer_busy=True))
    assert idle[0] == "dlpack"
    assert busy[0] == "cai"
    assert "busy" in busy[2] and "dlpack waits on the host" in busy[2]
    # Host memory: nothing queued to wait for, the same path either way.
    assert ordered.auto(_native.paths.HandoffFacts((1, 0), model=m, producer_busy=True))[0] == "dlpack"
    # JAX itself ignores the interface's stream (it read the values from before the queue on an
    # H100): cai into it is not ordered, so a busy producer keeps dlpack, which waits but is right.
    assert jax.cai_import_orders is False
    real = auto.pair(framework("torch"), jax)
    assert real.auto(_native.paths.HandoffFacts((2, 0), model=m, producer_busy=True))[0] == "dlpack"
    assert _native.paths.path_ordering("share", "cai", "cuda:0", True, jax.cai_import_orders)[2] is False


def test_share_asks_the_producer_only_where_auto_depends_on_it(monkeypatch):
    """Whether `auto` follows the producer is the core's word (explain::auto_follows_producer,
    cargo-tested with a device array); a share asks the source framework for its stream only then.
    A host tensor never is asked, with or without a model."""
    m = _model()
    monkeypatch.setattr(model_cache, "auto_model", lambda: m)
    advice.forget()
    src = framework("torch")
    asked = []
    real = type(src).current_stream
    monkeypatch.setattr(type(src), "current_stream", lambda self, obj: asked.append(obj) or real(self, obj))
    try:
        for _ in range(2):
            assert gpushare.share(torch.ones(4), "jax").verdict in ("shared", "copied")
        assert asked == []
        predictor = verdicts.predictor(src, framework("jax"), "auto")
        assert predictor.follows_producer(gpushare.inspect(torch.ones(4))) is False
    finally:
        advice.forget()


def test_the_producer_state_is_asked_of_the_driver_and_unknown_without_one(monkeypatch):
    src = framework("torch")
    assert advice.producer_state(src, torch.ones(4)) == "idle"  # host memory: nothing queued
    # A stand-in for a tensor on a GPU: its stream handle goes to the driver's cuStreamQuery.
    monkeypatch.setattr(paths, "in_device_memory", lambda obj, adapter: True)
    monkeypatch.setattr(type(src), "current_stream", lambda self, obj: 0x7F00)
    driver = _native.cuda.driver_status().get("available")
    if not driver:
        # No CUDA here: the driver cannot say, and nothing is assumed.
        assert _native.cuda.stream_busy(0x7F00, 0) is None
        assert advice.producer_state(src, torch.ones(4)) == "unknown"
    asked = []
    monkeypatch.setattr(_native.cuda, "stream_busy", lambda handle, ordinal=0: asked.append(handle) or True)
    assert advice.producer_state(src, torch.ones(4)) == "busy"
    monkeypatch.setattr(_native.cuda, "stream_busy", lambda handle, ordinal=0: False)
    assert advice.producer_state(src, torch.ones(4)) == "idle"
    assert asked == [0x7F00]
    # A framework without a current stream cannot say.
    monkeypatch.setattr(type(src), "current_stream", lambda self, obj: None)
    assert advice.producer_state(src, torch.ones(4)) == "unknown"


def test_advice_states_the_producer_it_assumed_and_prefers_a_path_ordered_on_the_device():
    m = _model()
    rows = [
        {"path": path, "kind": "share", "verdict": "shared", "reason": None, "ordering": "x", "ordered": True,
         "waits": waits, "prediction": m.predict("share", path, "torch", "jax", "cuda:0", 1 << 20)}
        for path, waits in (("dlpack", True), ("cai", False))
    ]
    busy = gpushare.Advice("torch", "jax", 1 << 20, "cuda:0", rows, "dlpack", 0.0, None, "busy")
    assert busy.producer == "busy" and busy.recommended == "cai"
    assert "amount unknown" in busy.assumed
    text = repr(busy)
    assert "producer busy (amount queued unknown)" in text and "+ queue" in text and "★ cai" in text
    assert busy.to_dict()["producer"] == "busy"
    assert [r["waits"] for r in busy.rows] == [True, False]
    idle = gpushare.Advice("torch", "jax", 1 << 20, "cuda:0", rows, "dlpack", 0.0, None, "idle")
    assert idle.recommended == "dlpack" and "producer idle" in repr(idle)
    with pytest.raises(ValueError, match="producer state"):
        gpushare.Advice("torch", "jax", 1, "cuda:0", rows, "dlpack", 0.0, None, "sleepy")


def test_advise_on_the_host_assumes_an_idle_producer_and_a_given_queue_is_busy():
    a = gpushare.advise(torch.ones(1024), "numpy")
    assert a.producer == "idle"
    assert gpushare.advise(torch.ones(1024), "numpy", queued=2e-3).producer == "busy"
