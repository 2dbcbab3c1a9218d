"""The extension's stage trace (crates/core/src/trace.rs), which benchmarks/bench_core.py reads for
the cost contract: off until switched on, and then each stage of a share with whose work it was."""

from __future__ import annotations

import pytest

import gpushare
from gpushare import _native

KINDS = {"own", "framework", "driver", "conversion", "wait"}


@pytest.fixture
def trace_off():
    yield
    _native.share._stage_trace(False)


def test_a_share_is_traced_stage_by_stage_only_while_the_trace_is_on(trace_off):
    torch = pytest.importorskip("torch", reason="torch not installed")
    t = torch.ones(16)
    gpushare.share(t, "numpy")
    assert _native.share._stage_trace() == []

    _native.share._stage_trace(True)
    gpushare.share(t, "numpy")
    stages = _native.share._stage_trace()
    names = [stage for stage, _, _ in stages]
    assert names[-1] == "the result object"
    assert {kind for _, kind, _ in stages} <= KINDS
    assert all(seconds >= 0 for _, _, seconds in stages)
    # The framework's import is the conversion; reading the tensor's layout is the check's read.
    assert ("convert", "conversion") in {(stage, kind) for stage, kind, _ in stages}
    assert ("describe: the framework's layout", "framework") in {(stage, kind) for stage, kind, _ in stages}
    assert ("judge and report", "own") in {(stage, kind) for stage, kind, _ in stages}
    assert _native.share._stage_trace() == []  # taken: a fresh start

    _native.share._stage_trace(False)
    gpushare.share(t, "numpy")
    assert _native.share._stage_trace() == []
