"""A process path is a transport the core's pipeline drives: the binding's
``ProcessRoute`` over a Python transport refuses, times, judges and builds the typed row; the
transports of gpushare.processes.routes only move the array and describe each side."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import gpushare
from gpushare import _native
from gpushare.exceptions import PathNotApplicableError, WorkerError

PACKAGE = Path(gpushare.__file__).parent

SEGMENT = {"kind": "host", "file": "/dev/shm/s", "unlinked": False, "mapping": "shared", "dev": "00:1b", "inode": 7,
           "offset": 0, "address": 4096}


class FakeTransport:
    """Hands nothing over; logs what the pipeline asked, in order."""

    detail = None

    def __init__(self, path: str = "torch_mp", target: dict | None = SEGMENT, on_device: bool = False,
                 fail_at: int | None = None):
        self.path, self.target, self.on_device, self.fail_at = path, target, on_device, fail_at
        self.log: list[str] = []
        self.handoffs = 0

    def facts(self):
        self.log.append("facts")
        return ("numpy", None, ["numpy", "torch"], None, self.on_device, None, None, False)

    def library_unavailable(self):
        return None

    def nccl_unavailable(self):
        return None

    def ipc_refusal(self):
        self.log.append("ipc_refusal")
        return "legacy IPC cannot export it"

    def set_up(self):
        self.log.append("set_up")
        return 0.25

    def hand_over(self):
        self.handoffs += 1
        if self.handoffs == self.fail_at:
            raise WorkerError("the worker died")
        self.log.append(f"hand_over {self.handoffs}")
        return {"slot": self.handoffs}

    def release(self, reply):
        self.log.append(f"release {reply['slot']}")

    def sides(self, reply):
        return ("numpy", 32, SEGMENT, None), (os.getpid() + 1, "numpy", self.target, None)

    def staged(self):
        return None

    def notes(self, reply):
        return [f"last slot {reply['slot']}"]

    def described(self, reply):
        self.log.append("described")
        if self.fail_at == "described":
            raise WorkerError("the worker died before it described its array")
        source = gpushare.inspect(SOURCE).to_dict()
        return source, {**source, "data_ptr": 8192}

    def result(self, reply):
        return "remote", "local", []


SOURCE = np.zeros(8, dtype=np.float32)


def test_the_core_times_judges_and_builds_the_row_over_a_transport():
    t = FakeTransport()
    r = _native.processes.handoff(t, 2)
    assert type(r) is gpushare.ShareResult and r.worker is not None
    assert t.log == ["facts", "set_up", "hand_over 1", "release 1", "hand_over 2", "release 2", "hand_over 3",
                     "described"]
    # Its JSON is a share's: both arrays as each process described them, the verdict the judge's of
    # the memory identities (the worker part), not of two addresses in two address spaces.
    d = r.to_dict()
    assert d["schema"] == "gpushare.share/1" and d["verdict"] == "shared"
    assert (d["source"]["data_ptr"], d["target"]["data_ptr"]) == (SOURCE.ctypes.data, 8192)
    assert d["worker"]["target"]["identity"] == SEGMENT and d["notes"] == ["last slot 3"]
    assert (r.verdict, r.reason, r.bytes_moved, r.nbytes) == ("shared", None, 0, 32)
    assert r.timing.repeats == 2 and r.timing.first_call >= 0.25
    assert (r.remote, r.local, r.notes, r.source.pid) == ("remote", "local", ["last slot 3"], os.getpid())
    assert r.mechanism == "torch.multiprocessing reduce_tensor"
    copied = _native.processes.handoff(FakeTransport(target={**SEGMENT, "offset": 64}), 1)
    assert (copied.verdict, copied.reason, copied.bytes_moved) == ("copied", "same file, different offsets", 32)


class HeldArray:
    """The worker's array of a handoff, as the transport's ``result`` gives it."""

    def __init__(self, log: list[str], slot: int):
        self.log, self.slot = log, slot

    def release(self):
        self.log.append(f"released the worker's array of slot {self.slot}")


def test_a_handoff_that_cannot_be_described_releases_what_it_holds():
    t = FakeTransport(fail_at="described")
    t.result = lambda reply: (HeldArray(t.log, reply["slot"]), "local", [lambda: t.log.append("segment freed")])
    with pytest.raises(WorkerError, match="described its array"):
        _native.processes.handoff(t, 1)
    assert t.log[-3:] == ["described", "released the worker's array of slot 2", "segment freed"]


def test_a_transports_exception_comes_back_as_itself():
    t = FakeTransport(fail_at=2)
    with pytest.raises(WorkerError, match="the worker died"):
        _native.processes.handoff(t, 3)
    assert t.log == ["facts", "set_up", "hand_over 1", "release 1"]


def test_a_path_that_does_not_apply_is_refused_before_set_up_asking_costly_facts_only_when_needed():
    t = FakeTransport(path="ipc")
    with pytest.raises(PathNotApplicableError) as e:
        _native.processes.handoff(t, 1)
    assert e.value.reason.startswith("CUDA IPC shares device memory") and t.log == ["facts"]
    t = FakeTransport(path="ipc", on_device=True)
    assert _native.processes.route_refusal(t) == "legacy IPC cannot export it"
    assert t.log == ["facts", "ipc_refusal"]


class FakeLab:
    """The side the core's table loops ask: ``auto``, one path's handoff (here always refused) and
    a sweep's arrays (none of 64 bytes; Ctrl-C at 128)."""

    def __init__(self):
        self.log: list[tuple[str, int]] = []

    def auto(self, obj):
        return "shm"

    def try_path(self, obj, path, repeat):
        self.log.append((path, repeat))
        return f"{path} refused here", False, obj.nbytes

    def make_source(self, size):
        if size == 64:
            raise MemoryError("no room")
        if size == 128:
            raise KeyboardInterrupt
        return np.zeros(size // 4, np.float32)


def test_a_failed_path_is_the_cores_row_and_the_tables_are_the_cores_loops():
    lab = FakeLab()
    x = np.zeros(8, np.float32)
    c = _native.processes.compare_paths(lab, x, ["auto", "gloo"], 2, False, (gpushare.inspect(x), "numpy"))
    assert [row.path for row in c.rows] == ["shm", "gloo"] and c["gloo"].reason == "gloo refused here"
    assert (c["gloo"].verdict, c["gloo"].applicable, c["gloo"].timing, c["gloo"].worker.pid) == ("failed", False, None, None)
    # No path reached a worker: the comparison is across processes, with no worker's pid to name.
    assert c.worker is not None and c.worker.pid is None
    assert c.results == {} and lab.log == [("shm", 2), ("gloo", 2)]
    # The comparison of every handoff: the array as gpushare describes it, `auto`'s row named.
    assert c.source == {"source_framework": "numpy", "target_framework": "numpy", "dtype": "float32",
                        "shape": [8], "device": "cpu"}
    assert c.to_dict()["auto_path"] == "shm" and c.fastest is None
    lab = FakeLab()
    b = _native.processes.bench_paths(lab, [32, 64, 128, 256], ["gloo"], 2, "numpy", "numpy", "float32", "cpu")
    # The warm-up on the first array, the point of 32 bytes, a failed point where no array could be
    # made, then Ctrl-C: the sweep ends with what it measured.
    assert lab.log == [("gloo", _native.processes.WARM_UP_HANDOFFS - 1), ("gloo", 2)]
    assert [(p.size, p.path) for p in b.points] == [(32, "gloo"), (64, "gloo")] and b.interrupted
    assert b.points[1].reason == "could not make the source array: no room" and b.worker.pid is None


@pytest.mark.parametrize("module", ["processes/routes.py", "processes/collectives.py", "processes/tables.py"])
def test_no_transport_builds_a_row_judges_or_times(module):
    source = (PACKAGE / module).read_text(encoding="utf-8")
    for word in ("judge_handoff", "measure_handoffs", "handoff_timing", '"verdict":', "def _row", "RUNNERS"):
        assert word not in source, word
