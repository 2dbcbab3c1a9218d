"""One plan: under any cost model, the path a handoff runs is the path its prediction was made for,
and ``share``, ``compare``'s auto row and ``advise`` take the same path for every array.

For each share path, a synthetic cost model (no timing involved) makes that path the fastest of
every pair, and claims that every path that does not copy by design shared in its sweep: for many
dtypes and layouts that is not so (the calibration measures float32 arrays only). The conformance matrix then runs under it and must have no wrong
prediction, and the three ways of asking ``auto`` must agree cell by cell. A model may change which
path runs, never what the rules predict for the array.
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpushare  # noqa: E402
from conftest import have  # noqa: E402
from gpushare import _native, advice, paths  # noqa: E402
from tools import conformance as C  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")

# TensorFlow and PaddlePaddle crash beside each other, and the matrix's other pairs are covered by
# tests/test_conformance.py without a model: three frameworks whose pairs take every share path.
FRAMEWORKS = [fw for fw in ("numpy", "torch", "jax") if have(C._module(fw))]
SHARE_PATHS = paths.names_of("share")
# The cells where `auto` is compared three ways: dtypes where paths give different verdicts (JAX
# narrows 64-bit types; bfloat16 has no typestr), and layouts that copy or fail on some paths.
AGREEMENT_DTYPES = ("float32", "int64", "bfloat16", "bool")
AGREEMENT_LAYOUTS = ("contiguous", "transposed", "strided")


def _fastest_model(fastest: str) -> gpushare.CostModel:
    """Every share path of every pair of ``FRAMEWORKS`` on the CPU, ``fastest`` 1000× faster than
    the others (which are 10 % apart, in the table's order: no ties), each but the copies by design
    claimed to have shared in its sweep."""
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 10, 1 << 16, 1 << 20)
    for src, dst in itertools.permutations(FRAMEWORKS, 2):
        for i, path in enumerate(SHARE_PATHS):
            fixed = 1e-7 if path == fastest else 1e-4 * (1 + 0.1 * i)
            # A path that copies by design is said to have copied (a model file that says
            # otherwise is refused when read: tests/test_cache_files.py).
            shares = _native.paths.copied_by_design("share", path) is None
            m.add("share", path, src, dst, "cpu", [(n, fixed) for n in sizes], shares)
    return m


@pytest.fixture
def model_where(tmp_path, monkeypatch):
    """Installs a synthetic model in a fresh cache directory; the module's caches are dropped."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def install(fastest: str) -> None:
        advice.forget()
        advice.save(_fastest_model(fastest))
        assert advice.auto_model() is not None

    yield install
    advice.forget()


@pytest.mark.skipif(len(FRAMEWORKS) < 2, reason="fewer than two of numpy, torch, jax installed")
@pytest.mark.parametrize("fastest", SHARE_PATHS)
def test_no_wrong_prediction_under_a_model_where_one_path_is_fastest(model_where, fastest):
    model_where(fastest)
    bad, walked = [], 0
    for src, dst in itertools.permutations(FRAMEWORKS, 2):
        cells = C.run_pair(src, dst, "cpu", isolated=False)
        walked += len(cells)
        bad += [c for c in cells if c.problem]
    assert walked > 0
    assert not bad, f"{len(bad)} of {walked} cells with {fastest} fastest:\n" + "\n".join(c.describe() for c in bad[:30])


def _share_path(x, dst):
    """The path ``share`` ran, and the path its prediction was made for, or (None, None) where it
    was refused before a path ran."""
    try:
        r = gpushare.share(x, dst)
    except gpushare.GpushareError:
        return None
    return r.path


@pytest.mark.skipif(len(FRAMEWORKS) < 2, reason="fewer than two of numpy, torch, jax installed")
@pytest.mark.parametrize("fastest", SHARE_PATHS)
def test_share_compare_and_advise_take_the_same_auto_under_a_model(model_where, fastest):
    model_where(fastest)
    C.prepare(FRAMEWORKS, "cpu")
    warnings.simplefilter("ignore")
    disagreements, walked = [], 0
    for src, dst in itertools.permutations(FRAMEWORKS, 2):
        for dtype, layout in itertools.product(AGREEMENT_DTYPES, AGREEMENT_LAYOUTS):
            try:
                x = C.build(src, dtype, layout)
                gpushare.inspect(x)
            except Exception:  # the source cannot make or export it: the matrix says so
                continue
            walked += 1
            taken = _share_path(x, dst)
            if taken is None:
                continue  # refused: no path ran, and the matrix checks the refusal's prediction
            c = gpushare.compare(x, dst, repeat=1, number=1, warmup=0, min_sample_time=0.0)
            compared = [row.path for row in c.rows if row.auto]
            recommended = gpushare.advise(x, dst).recommended
            if compared != [taken] or recommended != taken:
                disagreements.append(
                    f"{src}→{dst} {dtype} {layout}: share {taken}, compare {compared}, advise {recommended}")
    assert walked > 0
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.skipif(not (have("torch") and have("jax")), reason="torch or jax not installed")
def test_a_plan_made_for_one_array_runs_another_arrays_own_path(model_where):
    """One plan serves arrays of one type and size range; the model's pick for that kind of array
    runs only for an array it serves as well as the rules' choice. A model that prefers ``cai``
    into JAX: on the CPU no array has ``__cuda_array_interface__``, whichever dtype asked first."""
    import jax
    import torch

    if jax.config.jax_enable_x64:
        pytest.skip("JAX runs with x64: int64 arrays share")
    model_where("cai")
    first = gpushare.share(torch.arange(16), "jax")  # int64: JAX narrows it, every path copies
    assert first.verdict == "copied" and not first.unexpected and first.path != "cai"
    then = gpushare.share(torch.ones(16), "jax")  # float32: DLPack shares
    assert then.path == "dlpack" and then.verdict == "shared" and not then.unexpected


@pytest.mark.skipif(not (have("numpy") and have("jax")), reason="numpy or jax not installed")
def test_a_sweeps_auto_row_is_the_path_a_share_of_its_own_array_takes(tmp_path, monkeypatch):
    """JAX copies a NumPy array that is not 64-byte aligned and shares one that is, so where the
    allocator placed a sweep's array decides what ``auto`` takes for it. Under a model whose DLPack
    sweep shared at some sizes and copied at others (as a calibration on the CPU measures), and
    where gpushare's ``copy`` copies faster, a share of the unaligned array takes ``copy`` and one
    of the aligned array keeps DLPack, which shares: ``bench`` marks, at each size, the path a
    share of the array it measured takes, not the path for an array like it."""
    import numpy as np

    from gpushare import lab

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 10, 1 << 16, 1 << 20)
    m.add("share", "dlpack", "numpy", "jax", "cpu", [(n, 1e-4 + n * 1e-9) for n in sizes], None)
    m.add("share", "copy", "numpy", "jax", "cpu", [(n, 1e-6 + n * 1e-12) for n in sizes], False)
    advice.forget()
    advice.save(m)
    aligned, unaligned = 64 << 10, 96 << 10
    made = {}

    def make_array(src, n, dtype, device):
        size = n * np.dtype(dtype).itemsize
        buf = np.ones(n + 64, dtype=dtype)
        start = (-buf.ctypes.data % 64) // buf.itemsize + (16 // buf.itemsize if size == unaligned else 0)
        made[size] = buf[start:start + n]
        return made[size]

    monkeypatch.setattr(lab, "make_array", make_array)
    try:
        b = gpushare.bench("numpy", "jax", [aligned, unaligned], paths=["auto", "dlpack"], repeat=1, progress=False)
        marked = {p.size: p.path for p in b.points if p.auto}
        assert made[aligned].ctypes.data % 64 == 0 and made[unaligned].ctypes.data % 64 == 16
        taken = {size: gpushare.share(made[size], "jax").path for size in (aligned, unaligned)}
        assert taken == {aligned: "dlpack", unaligned: "copy"}, taken
        assert marked == taken, (marked, taken)
        # The path auto took for the unaligned array was measured there, as every other row.
        row = [p for p in b.points if p.size == unaligned and p.auto][0]
        assert row.verdict == "copied", row
        # Every path, as benchmarks/bench_advice.py sweeps: the marks are the same.
        every = gpushare.bench("numpy", "jax", [aligned, unaligned], repeat=1, progress=False)
        assert {p.size: p.path for p in every.points if p.auto} == taken
    finally:
        advice.forget()


@pytest.mark.skipif(not have("torch") or not have("numpy"), reason="framework not installed")
def test_a_moves_auto_is_kept_by_the_models_planner_and_goes_with_the_model(model_where, monkeypatch):
    """What ``auto`` decided with a model is kept by that model's planner: the planner is made with
    the model and replaced with it (a new calibration), so nothing decided with an old model is
    asked again. A move to where the array lies moves nothing, whatever the producer does: its state
    is not asked."""
    import torch

    from gpushare import auto, model_cache
    from gpushare.adapters import framework

    advice.forget()
    rules = model_cache.planner()
    assert rules is model_cache.planner()  # one per model, not one per call
    assert rules.model is None or rules.model is advice.auto_model()
    src, dst = framework("torch"), framework("numpy")

    def never() -> bool:
        raise AssertionError("the producer's state was asked of a move that moves nothing")

    assert rules.move_auto(src, dst, (1, 0), (1, 0), 64, never) == "move"
    monkeypatch.setattr(advice, "producer_state", lambda *a: never())
    r = gpushare.share(torch.arange(4.0), "numpy", device="cpu")
    assert r.path == "move" and r.verdict == "shared"
    model_where("dlpack")
    calibrated = model_cache.planner()
    assert calibrated is not rules and calibrated.model is advice.auto_model() is not None
    assert calibrated.move_auto(src, dst, (1, 0), (1, 0), 64, never) == auto.choice(src, dst, (1, 0), (1, 0), nbytes=64)[0]
