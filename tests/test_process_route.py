"""A process path is a transport the core's pipeline drives: the binding's
``ProcessRoute`` over a Python transport refuses, times, judges and builds the typed row; the
transports of gpushare.process_routes only move the array and describe each side."""

from __future__ import annotations

import os
from pathlib import Path

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

    def result(self, reply):
        return "remote", "local", []


def test_the_core_times_judges_and_builds_the_row_over_a_transport():
    t = FakeTransport()
    r = _native.processes.handoff(t, 2)
    assert type(r) is _native.processes.ProcessShareResult
    assert t.log == ["facts", "set_up", "hand_over 1", "release 1", "hand_over 2", "release 2", "hand_over 3"]
    assert (r.verdict, r.reason, r.bytes_moved, r.nbytes) == ("shared", None, 0, 32)
    assert r.timing.repeats == 2 and r.timing.first_call >= 0.25
    assert (r.remote, r.local, r.notes, r.source.pid) == ("remote", "local", ["last slot 3"], os.getpid())
    assert r.mechanism == "torch.multiprocessing reduce_tensor"
    copied = _native.processes.handoff(FakeTransport(target={**SEGMENT, "offset": 64}), 1)
    assert (copied.verdict, copied.reason, copied.bytes_moved) == ("copied", "same file, different offsets", 32)


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


def test_a_failed_path_is_the_cores_row():
    r = _native.processes.failure("gloo", "numpy", 32, "gloo hands torch tensors; this is a numpy array", False)
    assert (r.verdict, r.applicable, r.timing, r.target) == ("failed", False, None, None)
    c = _native.processes.comparison("numpy", None, "float32", [8], "cpu", [r])
    assert c["gloo"].reason == "gloo hands torch tensors; this is a numpy array"
    b = _native.processes.bench("numpy", "numpy", "float32", "cpu", [32], [(32, r)], False, 2)
    assert b.points[0].size == 32 and b.points[0].path == "gloo"


@pytest.mark.parametrize("module", ["process_routes.py", "process_collectives.py", "process_tables.py"])
def test_no_transport_builds_a_row_judges_or_times(module):
    source = (PACKAGE / module).read_text(encoding="utf-8")
    for word in ("judge_handoff", "measure_handoffs", "handoff_timing", '"verdict":', "def _row", "RUNNERS"):
        assert word not in source, word
