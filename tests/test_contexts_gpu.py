"""The facts notebook 09 shows, checked on a real GPU: PyCUDA's own context (``pycuda.autoinit``) is
not the primary one and the primary context (``pycuda.autoprimaryctx``) is, by the driver; arrays of
both go to PyTorch (and TensorFlow where it has a GPU) with the verdict ``shared`` by pointer identity
and the memory's context reported on both sides; each context costs device memory, by the driver's
free-memory figure; and the cross-context trial gives an answer, which a write through PyTorch and a
read through PyCUDA then agree with.

The story runs in a process of its own (tests/_context_story.py): the primary context's cost is
measured when it is activated, which the other GPU suites' frameworks would already have done.
Run with ``pytest -m gpu``; without a driver, PyCUDA or PyTorch's GPU these skip with the condition.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare import _native

pytestmark = pytest.mark.gpu

if not _native.cuda.driver_status()["available"]:
    pytest.skip("no CUDA", allow_module_level=True)
if importlib.util.find_spec("pycuda") is None:
    pytest.skip("framework not installed: pycuda (docs/pycuda-on-gpu.md builds it)", allow_module_level=True)
if importlib.util.find_spec("torch") is None:
    pytest.skip("framework not installed: torch", allow_module_level=True)

STORY = Path(__file__).with_name("_context_story.py")
OUTCOMES = {"exact", "wrong bytes", "failed", "not tried"}


@pytest.fixture(scope="module")
def story():
    run = subprocess.run([sys.executable, str(STORY)], capture_output=True, text=True, timeout=300)
    lines = [line[len("STORY "):] for line in run.stdout.splitlines() if line.startswith("STORY ")]
    assert run.returncode == 0 and lines, f"the story failed (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return json.loads(lines[-1])


def cost(story, label):
    return next(r for r in story["costs"] if r["label"] == label)


def test_autoinit_makes_a_context_that_is_not_the_primary_one(story):
    assert not story["primary_at_start"]["active"], "something activated the primary context before the story began"
    current = story["current_after_autoinit"]
    assert current["handle"] == story["own_handle"] and current["is_primary"] is False
    row = cost(story, "import pycuda.autoinit")
    assert row["current_after"]["handle"] == story["own_handle"]
    assert not row["primary_activated"] and "NOT the primary one" in row["what_happened"]
    # PyCUDA's own array lives in that context.
    (pycuda_row,) = story["working_under_autoinit"]["rows"]
    assert (pycuda_row["context"], pycuda_row["is_primary"]) == (story["own_handle"], False)
    assert story["own_handle"] != story["meter_context"]


def test_autoprimaryctx_is_the_primary_context_and_the_frameworks_join_it(story):
    primary = story["primary"]["handle"]
    assert story["primary_handle_of_pycuda"] == primary != story["own_handle"]
    current = story["current_after_autoprimaryctx"]
    assert current["handle"] == primary and current["is_primary"] is True
    row = cost(story, "import pycuda.autoprimaryctx")
    assert row["primary_activated"] and row["primary_after"]["handle"] == primary
    # PyTorch (and TensorFlow) start in the context that is already active: no new one.
    joined = [cost(story, "torch's first CUDA array")] + ([cost(story, "TensorFlow's first GPU op")] if story["tf_gpu"] else [])
    for r in joined:
        assert r["primary_before"]["active"] and r["primary_after"]["handle"] == primary, r
        assert r["what_happened"].startswith("no new context"), r
    for w in story["working"]["rows"]:
        assert w["context"] in (primary, 0), w  # 0: a pool/VMM allocation, owned by no context
        if w["context"]:
            assert w["is_primary"] is True, w


def test_each_context_costs_device_memory_by_the_driver(story):
    for label in ("import pycuda.autoinit", "import pycuda.autoprimaryctx"):
        row = cost(story, label)
        assert row["taken"] > 0, row
        assert row["free_before"] - row["free_after"] == row["taken"] and row["total"] > row["free_before"]
    fresh = story["costs"][-1]
    assert fresh["label"].startswith("a context of gpushare's own") and fresh["taken"] > 0, fresh


@pytest.mark.parametrize("side", ["own", "primary"])
def test_arrays_of_both_contexts_are_shared_by_pointer_identity(story, side):
    targets = ["torch"] + (["tf"] if story["tf_gpu"] else [])
    context = story["own_handle"] if side == "own" else story["primary"]["handle"]
    for target in targets:
        r = story["shares"][f"{side}->{target}"]
        assert r["verdict"] == "shared", (target, r["reason"])  # "raised": the share itself failed
        assert r["target"]["data_ptr"] == r["source"]["data_ptr"]
        for end in ("source", "target"):
            cuda = r[end]["cuda"]
            assert cuda["context"] == context and cuda["context_is_primary"] is (side == "primary"), (target, end, cuda)


def test_the_cross_context_trial_answers_and_a_framework_agrees(story):
    access = story["access"]
    assert access["problem"] is None, access
    # Handles of the child process that tried it: the memory's own context is not the kernels' primary one.
    assert access["memory_context"] != access["kernel_context"]
    assert set(access["outcomes"]) == {"kernel_read", "kernel_write", "copy_read"}
    assert all(o["outcome"] in OUTCOMES for o in access["outcomes"].values()), access
    if access["kernels_share"]:
        # What gpushare's kernel did, PyTorch's does: its write is read back by PyCUDA in autoinit's context.
        assert story["pycuda_reads_after_torch_wrote"] == [-1.0, -2.0, -3.0, -4.0]
    else:
        failed = [o for o in access["outcomes"].values() if o["outcome"] != "exact"]
        assert failed and all(o["detail"] for o in failed), access
