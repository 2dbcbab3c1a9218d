"""Handoffs to another process run through the core: the verdict is the core's
identity judge, each path is timed by the core's one timing loop, and the results are the core's
typed reports (pyclasses), built from Python objects with no JSON text on the way."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import numpy as np
import pytest

import gpushare
from gpushare import _native, processes

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="no /proc/self/maps (not Linux)")

PACKAGE = Path(gpushare.__file__).parent


@pytest.fixture(scope="module")
def worker():
    with gpushare.Worker(device="cpu", timeout=60) as w:
        yield w


def test_a_handoff_to_a_worker_is_a_row_of_a_share_table(worker):
    x = np.arange(6, dtype=np.float32)
    here = gpushare.share(x, "numpy")
    there = worker.share(x, path="shm")
    try:
        table = gpushare.ShareTable([here, there])
        payload = json.loads(table.to_json())
        assert payload["schema"] == "gpushare.shares/1"
        first, second = payload["data"]
        assert "worker" not in first and second["worker"]["target"]["pid"] == worker.pid
        assert (first["path"], second["path"], second["verdict"]) == (here.path, "shm", there.verdict)
        assert "shm" in repr(table) and len(table.to_pandas()) == 2
    finally:
        there.release()


def test_results_are_the_cores_typed_reports(worker):
    r = worker.share(np.arange(6, dtype=np.float32), path="shm", repeat=4)
    try:
        # A handoff to a worker is a ShareResult like any other, its worker named.
        assert type(r) is gpushare.ShareResult and r.worker.pid == worker.pid and r.worker.host is None
        assert r.value is r.remote and r.path == "shm" and r.timing.repeats == 4 and r.auto is False
        payload = json.loads(r.to_json())
        assert payload["schema"] == "gpushare.share/1"
        assert r.to_dict() == {"schema": payload["schema"], **payload["data"]}
        # Its JSON is a share's: both arrays described, each in its own process, and the worker part
        # whose memory identities the verdict was judged by.
        data = payload["data"]
        assert (data["source"]["framework"], data["target"]["framework"]) == ("numpy", "numpy")
        assert data["source"]["shape"] == data["target"]["shape"] == [6] and data["target"]["dtype"] == "float32"
        assert data["worker"]["target"]["pid"] == worker.pid and data["worker"]["segment"] == r.segment
        assert data["timing"] == r.row["timing"] and data["verdict"] == r.verdict
        assert r._repr_mimebundle_()["application/vnd.gpushare+json"] == payload
        # A private source is copied into a segment first: the core's judge says so, naming it.
        assert r.verdict == "copied" and r.segment["name"] in r.reason
        assert "median of 4" in repr(r) and "gpushare-processes" in r._repr_html_()
        frame = r.to_pandas()
        assert list(frame["path"]) == ["shm"] and list(frame["target_pid"]) == [worker.pid]
        assert list(frame.columns[:4]) == ["name", "source_framework", "target_framework", "path"]
        assert (r.remote.read() == np.arange(6)).all()
    finally:
        r.release()
    c = gpushare.compare(torch.ones(8), "torch", across=worker, paths="shm,gloo", repeat=2)
    assert type(c) is gpushare.Comparison and c.worker.pid == worker.pid and c.worker.host is None
    assert json.loads(c.to_json())["schema"] == "gpushare.comparison/1"  # a comparison, as every other
    assert [row.path for row in c.rows] == ["shm", "gloo"] and c["gloo"].verdict == "copied"
    # Its rows are the PathRows of every comparison, whose worker part (sides, mechanism) is typed
    # too, and whose keys still read its JSON form.
    row = c.paths["gloo"]
    assert type(row) is gpushare.PathRow and row.verdict is gpushare.Verdict.COPIED and row.size is None
    assert row.worker.pid == worker.pid and row.mechanism.startswith("gloo") and row.nbytes == 32
    assert row.bytes_per_handoff == 32 and row.bandwidth == pytest.approx(32 / row.timing.median)
    # Ranked as any comparison's rows: two samples each have no spread to tell them apart by, so
    # neither is named the fastest and the two read as tied.
    assert [(r.fastest, r.tied) for r in c.rows] == [(False, True), (False, True)]
    # The timing is the Timing of every handoff, with the first call (and its one-off costs) apart.
    assert type(row.timing) is gpushare.Timing and row.timing.repeats == 2 and row.timing.first_call > 0
    assert row["timing"]["median"] == row.timing.median == row.to_dict()["timing"]["median"]
    assert isinstance(row.target, _native.processes.ProcessSide) and row.target.pid == worker.pid
    assert row.source.pid == os.getpid() and row.source.framework == "torch" and "identity" in row.source
    assert isinstance(c.worker, _native.processes.WorkerInfo) and c.worker["pid"] == worker.pid
    assert row.to_dict() == json.loads(c.to_json())["data"]["rows"][1]
    with pytest.raises(KeyError):
        row["speed"]


def test_the_path_auto_took_reads_as_autos(worker):
    r = gpushare.share(np.arange(4.0), "numpy", across=worker)
    try:
        assert r.path == "shm" and r.auto is True and r.row["auto"] is True
    finally:
        r.release()
    c = gpushare.compare(np.arange(4.0), "numpy", across=worker, paths="auto,shm", repeat=1)
    assert [(row.path, row.auto) for row in c.rows] == [("shm", True), ("shm", False)]
    assert c.rows[0].to_dict()["auto"] is True and "shm (auto)" in repr(c)


def test_the_timing_is_the_cores_loop_and_median(worker):
    r = worker.share(torch.arange(16, dtype=torch.float32), path="torch_mp", repeat=5)
    try:
        t = r.timing
        # The samples in the order they were timed, as every Timing keeps them; the first call apart.
        assert type(t) is gpushare.Timing and t.repeats == 5 and t.loops == 1
        assert t.median == pytest.approx(statistics.median(t.samples)) and t.min == min(t.samples)
        assert t.first_call > 0 and t.first_call not in t.samples
    finally:
        r.release()
    # The loop releases the last handoff before each timed one, never inside the timing.
    calls: list[str] = []
    last, timing = _native.processes.measure_handoffs(lambda: calls.append("handoff") or len(calls),
                                            lambda v: calls.append(f"release {v}"), 3)
    assert calls == ["handoff", "release 1", "handoff", "release 3", "handoff", "release 5", "handoff"]
    assert last == 7 and len(timing["samples"]) == 3 and timing["first_call"] >= 0


def test_memory_identities_are_compared_by_the_core():
    seg = {"kind": "host", "file": "/dev/shm/s", "unlinked": False, "mapping": "shared", "dev": "00:1b",
           "inode": 7, "offset": 0, "address": 4096}
    assert _native.processes.same_memory(seg, {**seg, "address": 8192}) == (True, "same file and offset, mapped shared by both processes")
    assert _native.processes.same_memory(seg, {**seg, "offset": 64}) == (False, "same file, different offsets")
    with pytest.raises(ValueError, match="colour"):
        _native.processes.same_memory({**seg, "colour": "blue"}, seg)


@pytest.mark.parametrize("module", sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "processes").glob("*.py")))
def test_the_process_modules_read_no_clock_and_write_no_json(module):
    source = (PACKAGE / module).read_text(encoding="utf-8")
    assert "perf_counter" not in source and "json.dumps" not in source and "json.loads" not in source
    assert not hasattr(_native.processes, "report_json") and not hasattr(_native, "process_report_json")


def test_processes_keeps_the_transport_only():
    lines = (PACKAGE / "processes" / "__init__.py").read_text(encoding="utf-8").count("\n")
    assert lines < 700, lines
    # The process results are every handoff's classes: no result class of their own (a class with a
    # notebook form). Their rows are PathRows, with a ProcessSide for each side and a WorkerInfo.
    classes = [getattr(m, n) for m in (processes, _native.processes) for n in dir(m) if isinstance(getattr(m, n), type)]
    results = {c.__name__ for c in classes if hasattr(c, "_repr_mimebundle_")}
    assert results <= {"ShareResult", "Comparison", "Benchmark"}, results
    assert not {"ProcessShareResult", "ProcessComparison", "ProcessBenchmark", "ProcessRow", "ProcessTiming"} & {
        c.__name__ for c in classes}
    assert processes.ShareResult is gpushare.ShareResult and processes.Comparison is gpushare.Comparison


def test_whether_a_path_applies_is_the_cores_rule_asking_costly_facts_only_when_needed():
    asked: list[str] = []

    def probe(name: str, answer: str | None = None):
        return lambda: asked.append(name) or answer

    def refusal(path: str, framework: str, on_device: bool, library: str | None = None, ipc: str | None = None):
        return _native.processes.refusal(path, framework, None, ["numpy", "torch"], library, on_device, 0, 0,
                                       probe("library"), probe("nccl"), probe("ipc", ipc))

    assert "in host memory" in refusal("ipc", "numpy", False) and asked == []
    assert refusal("gloo", "numpy", False, library="torch") == "gloo hands torch tensors; this is a numpy array"
    assert asked == []
    assert refusal("ipc", "torch", True, ipc="legacy IPC cannot export it") == "legacy IPC cannot export it"
    assert asked == ["ipc"]
    assert "both processes are on cuda:0" in refusal("nccl", "torch", True, library="torch")
    assert refusal("shm", "numpy", False) is None


def test_a_share_within_this_process_has_no_worker_and_takes_no_worker_notes():
    r = gpushare.share(np.arange(4, dtype=np.float32), "numpy")
    assert r.worker is None and r.remote is None and r.local is None
    with pytest.raises(TypeError, match="handoff to a worker process"):
        r.add_note("nothing")
    with pytest.raises(AttributeError):
        r.mechanism
    r.release()  # nothing is held outside this process
    assert r.value is not None and r.verdict == "shared"
