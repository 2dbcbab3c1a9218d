"""gpushare's report of contexts where there may be no GPU (notebook 09's machinery; the facts on a
GPU are tests/test_contexts_gpu.py): without CUDA the meter and the framework contexts raise
gpushare's error with the reason, the cross-context trial says it was not tried, and its child
process answers by the protocol the parent reads. What a measured step says about contexts is
derived from the driver's figures only, checked here on figures given by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gpushare
from gpushare import _native, context_access
from gpushare.context_costs import ContextCost

NO_CUDA = not _native.cuda.driver_status()["available"]
needs_no_cuda = pytest.mark.skipif(not NO_CUDA, reason="a CUDA driver is here: the no-CUDA answers are not what it gives")

OWN, PRIMARY = 0x5A000, 0x7B000


def ctx(handle, primary):
    return {"handle": handle, "device": 0, "is_primary": primary, "flags": 0}


def test_a_step_that_makes_a_context_of_its_own_says_so():
    row = ContextCost("import pycuda.autoinit", 80 << 30, (80 << 30) - (300 << 20), 81 << 30,
                      None, ctx(OWN, False), {"active": False}, {"active": False})
    assert row.taken == 300 << 20
    assert not row.primary_activated and row.new_current_context["handle"] == OWN
    assert row.what_happened == f"a context that is NOT the primary one {OWN:#x} became current on this thread"
    assert "+300 MiB" in repr(_meter_with(row)) and "NOT primary" in _meter_with(row)._repr_html_()


def test_a_step_that_activates_the_primary_context_says_so():
    row = ContextCost("import pycuda.autoprimaryctx", 10 << 30, 9 << 30, 81 << 30, ctx(OWN, False), ctx(PRIMARY, True),
                      {"active": False}, {"active": True, "handle": PRIMARY})
    assert row.primary_activated
    assert row.what_happened == (f"the primary context {PRIMARY:#x} was activated; "
                                 f"the primary context {PRIMARY:#x} became current on this thread")
    d = row.to_dict()
    json.dumps(d)
    assert d["taken"] == 1 << 30 and d["primary_activated"] is True


def test_a_framework_joining_the_active_primary_context_makes_no_new_one():
    primary = {"active": True, "handle": PRIMARY}
    row = ContextCost("torch", 9 << 30, (9 << 30) - (2 << 20), 81 << 30, ctx(PRIMARY, True), ctx(PRIMARY, True), primary, primary)
    assert not row.primary_activated and row.new_current_context is None
    assert row.what_happened == "no new context: the primary context was already active"


def _meter_with(row):
    meter = object.__new__(gpushare.ContextMeter)  # a meter's table without a driver behind it
    meter.device, meter.rows = 0, [row]
    meter._meter = type("M", (), {"context": 0x1000})()
    return meter


@needs_no_cuda
def test_without_cuda_the_meter_and_working_contexts_raise_with_the_reason():
    reason = _native.cuda.driver_status()["reason"]
    with pytest.raises(gpushare.GpushareError, match="no CUDA") as e:
        gpushare.ContextMeter(0)
    assert reason in str(e.value)
    with pytest.raises(gpushare.GpushareError, match="no CUDA|libcuda|disabled"):
        gpushare.working_contexts(["torch"])


@needs_no_cuda
def test_without_cuda_the_cross_context_trial_is_not_tried():
    access = gpushare.cross_context_access(0)
    assert access.kernels_share is None and access.problem.startswith("no CUDA")
    assert "not tried" in repr(access) and "not tried" in access._repr_html_()
    json.dumps(access.to_dict())


def test_the_child_answers_on_one_marked_line():
    """The child's protocol: one line ``gpushare-context-access: <json>``; without CUDA its answer is
    the driver's refusal, which the parent turns into the reason it was not tried."""
    child = subprocess.run([sys.executable, "-m", "gpushare.context_access", "--device", "0", "--nbytes", "4096"],
                           capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "GPUSHARE_DISABLE_CUDA": "1"})
    assert child.returncode == 0, child.stderr
    (line,) = [x for x in child.stdout.splitlines() if x.startswith("gpushare-context-access: ")]
    answer = json.loads(line.split(": ", 1)[1])
    assert answer == {"error": "CudaError: no CUDA: disabled by GPUSHARE_DISABLE_CUDA=1"}


def test_the_parent_reports_a_child_that_refused_or_died(monkeypatch):
    """Driven as if CUDA were here, the parent runs the real child and reads its answer: a refusal
    becomes the problem; a child that prints no answer is reported with its exit code."""
    monkeypatch.setattr(context_access._native.cuda, "driver_status", lambda: {"available": True})
    monkeypatch.setenv("GPUSHARE_DISABLE_CUDA", "1")
    access = context_access.cross_context_access(0, nbytes=4096)
    assert access.problem == "CudaError: no CUDA: disabled by GPUSHARE_DISABLE_CUDA=1" and access.kernels_share is None
    monkeypatch.setattr(context_access, "_MARK", "never printed: ")
    died = context_access.cross_context_access(0, nbytes=4096)
    assert died.problem.startswith("the child process exited with 0 and no answer")


def test_outcomes_make_the_summary():
    ok = {"outcome": "exact", "detail": "4096 bytes as expected"}
    fault = {"outcome": "failed", "detail": "cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"}
    shared = context_access.CrossContextAccess(0, {"kernel_read": ok, "kernel_write": ok, "copy_read": ok}, OWN, PRIMARY, 4096)
    assert shared.kernels_share is True and "exactly" in shared.summary
    assert f"{OWN:#x}" in repr(shared) and "<table" in shared._repr_html_()
    faulted = context_access.CrossContextAccess(0, {"kernel_read": fault, "kernel_write": {"outcome": "not tried", "detail": "x"},
                                                    "copy_read": {"outcome": "not tried", "detail": "x"}}, OWN, PRIMARY, 4096)
    assert faulted.kernels_share is False and "did NOT share" in faulted.summary and "ILLEGAL_ADDRESS" in faulted.summary


@pytest.mark.parametrize("imported_last", ["pycuda.autoinit", "pycuda.autoprimaryctx"])
def test_gpuinfo_names_pycudas_context_by_the_driver_not_by_the_module_imported(monkeypatch, imported_last):
    """Both modules may be imported, in either order; which context is PyCUDA's is the driver's word:
    its current context's handle against the device's primary context."""
    import types

    from gpushare.adapters import ADAPTERS
    from gpushare.adapters import pycuda as pycuda_adapter

    current = types.SimpleNamespace(handle=OWN if imported_last == "pycuda.autoinit" else PRIMARY)
    driver = types.ModuleType("pycuda.driver")
    driver.Context = type("Context", (), {"get_current": staticmethod(lambda: current)})
    driver.Device = type("Device", (), {"count": staticmethod(lambda: 1)})
    for name in ("pycuda.autoinit", "pycuda.autoprimaryctx"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.setattr(pycuda_adapter._native.cuda, "current_context", lambda: ctx(current.handle, current.handle == PRIMARY))
    monkeypatch.setattr(pycuda_adapter._native.cuda, "primary_context", lambda ordinal=0: {"active": True, "handle": PRIMARY})
    info = types.SimpleNamespace(notes=[])
    ADAPTERS["pycuda"].describe_runtime(info, None)
    (note,) = [n for n in info.notes if n.startswith("context")]
    if imported_last == "pycuda.autoinit":
        assert note == f"context {OWN:#x}: PyCUDA's own (pycuda.autoinit or make_context), not the primary one"
    else:
        assert note == f"context {PRIMARY:#x}: the device's primary context"
