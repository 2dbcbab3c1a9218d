"""One result vocabulary: every result has attributes, not nested dicts; every
``to_pandas()`` has the same missing-value convention (crates/python/src/binding/frames.rs); ``share_chain`` returns a
``ShareTable`` as ``%share -o`` does; ``Benchmark.plot()`` draws with matplotlib, imported lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gpushare
from gpushare import PathRow

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def comparison():
    return gpushare.compare(torch.arange(1024, dtype=torch.float32), "numpy", repeat=3)


@pytest.fixture(scope="module")
def benchmark():
    return gpushare.bench("torch", "numpy", sizes=["4KiB", "64KiB"], paths="dlpack,host,pinned", repeat=3,
                          progress=False)


def test_comparison_rows_are_read_by_attribute(comparison):
    host = comparison.paths["host"]
    assert isinstance(host, PathRow)
    assert host.timing.median > 0 and host.verdict == "copied" and host.bytes_moved == 4096
    assert host.timing.median == comparison.rows[[r.path for r in comparison.rows].index("host")].timing.median
    pinned = comparison.paths["pinned"]  # no CUDA here, or no driver: a row without a timing
    if not pinned.applicable or pinned.verdict == "failed":
        assert pinned.timing is None and pinned.reason
    # Older code that indexes by key reads the same values.
    assert comparison["host"]["timing"]["median"] == host.timing.median
    with pytest.raises(AttributeError, match="has no attribute 'speed'"):
        host.speed


def test_benchmark_points_are_read_by_attribute(benchmark):
    point = benchmark.points[0]
    assert isinstance(point, PathRow) and point.size == 4096 and point.path == "dlpack"
    assert point.timing.median > 0
    assert point.to_dict()["size"] == 4096


def _missing_measurements(frame, columns):
    """Each float column's dtype and what a missing value is in it."""
    return {c: (str(frame[c].dtype), frame[c].isna().any()) for c in columns if c in frame.columns}


def test_every_frame_has_one_missing_value_convention(comparison, benchmark):
    pytest.importorskip("pandas")
    frames = {
        "Comparison": comparison.to_pandas(),
        "Benchmark": benchmark.to_pandas(),
        "ShareResult": gpushare.share(torch.ones(4), "numpy").to_pandas(),
        "ShareTable": gpushare.share_chain(torch.ones(4), ["numpy", "torch"]).to_pandas(),
    }
    for name, frame in frames.items():
        for column in ("median_s", "min_s", "iqr_s", "device_median_s", "bandwidth_Bps"):
            if column not in frame.columns:
                continue
            # A measurement is a float column; where there is none (a failed path, no device
            # time on a CPU) it is NaN, never None in an object column.
            assert str(frame[column].dtype) == "float64", f"{name}.{column} is {frame[column].dtype}"
        for column in ("repeats", "loops"):
            if column in frame.columns:
                assert str(frame[column].dtype) in ("int64", "Int64"), f"{name}.{column} is {frame[column].dtype}"
    # On a CPU the device time is missing in every frame, and reads as NaN in each.
    for name in ("Comparison", "Benchmark", "ShareResult", "ShareTable"):
        frame = frames[name]
        assert frame["device_median_s"].isna().all(), name


def test_share_chain_returns_a_share_table():
    x = torch.arange(16, dtype=torch.float32)
    hops = gpushare.share_chain(x, ["numpy", "torch"])
    assert isinstance(hops, gpushare.ShareTable)
    assert len(hops) == 2 and [h.target.framework for h in hops] == ["numpy", "torch"]
    assert hops[-1].shares_origin and "<table" in hops._repr_html_()


def test_benchmark_plot_draws_with_matplotlib_imported_only_then(benchmark):
    code = (
        "import sys, torch, gpushare\n"
        "b = gpushare.bench('torch', 'numpy', sizes=[4096], paths='dlpack', repeat=2, progress=False)\n"
        "assert 'matplotlib' not in sys.modules, 'imported before plot()'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    pytest.importorskip("matplotlib", reason="matplotlib not installed")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = benchmark.plot()
    # The Figure, not its Axes (a notebook echoed "<Axes: …>" above the plot), and not one pyplot
    # holds: a notebook shows it once, as the cell's value.
    assert isinstance(fig, matplotlib.figure.Figure) and plt.get_fignums() == before
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert {"dlpack", "host"} <= set(lines)
    # Each path its own dash and marker, as the SVG: coinciding lines stay visible.
    assert lines["dlpack"].get_linestyle() != lines["host"].get_linestyle()
    assert lines["dlpack"].get_marker() != lines["host"].get_marker()
    # Human units on the axes: µs/ms and KiB/MiB, never 10⁻⁴ or 2ⁿ.
    fig.canvas.draw()
    xticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    yticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert xticks and all(t.endswith((" B", "KiB", "MiB", "GiB")) for t in xticks), xticks
    assert {"4 KiB", "64 KiB"} <= set(xticks), xticks
    assert yticks and all(t.endswith((" ns", "µs", "ms", " s")) for t in yticks), yticks
    assert not any("$" in t for t in xticks + yticks), xticks + yticks  # mathtext: 10⁻⁴, 2¹²
    assert ax.get_xlabel() == "size"
    # Given axes, it draws on them and returns their figure.
    own = matplotlib.figure.Figure().subplots()
    assert benchmark.plot(own) is own.figure and own.get_lines()


def test_process_results_are_read_by_attribute():
    import os

    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc/self/maps (not Linux)")
    with gpushare.Worker(device="cpu", timeout=60) as w:
        c = gpushare.compare(torch.ones(1024), "torch", across=w, paths="shm,gloo", repeat=2)
        r = w.share(torch.ones(4), path="shm")
        assert r.timing.median > 0 and r.source.pid == os.getpid()
        r.release()
    assert c.paths["shm"].timing.median > 0 and c["gloo"].verdict == "copied"
    if not CUDA:
        # CUDA IPC cannot run for a host array: "not applicable" in the table (the footnote of every
        # comparison) and the frame, not "failed".
        with gpushare.Worker(device="cpu", timeout=60) as w:
            na = gpushare.compare(torch.ones(1024), "torch", across=w, paths="shm,ipc", repeat=2)
        assert "Not applicable here (not run): ipc (CUDA IPC shares device memory" in repr(na), repr(na)
        assert "failed" not in repr(na), repr(na)
        try:
            frame = na.to_pandas()
        except ImportError:
            frame = None
        if frame is not None:
            assert dict(zip(frame["path"], frame["verdict"]))["ipc"] == "not applicable"
    b = gpushare.bench("torch", "torch", sizes=["4KiB"], paths="shm", repeat=2, across="processes", device="cpu")
    assert b.points[0].size == 4096 and b.points[0].timing.median > 0
    assert b.points[0]["timing"]["median"] == b.points[0].timing.median  # keys still work


def test_frames_speak_the_tables_vocabulary_and_one_missing_value_convention(comparison, benchmark):
    """A path that cannot run here is "not applicable" in every frame, as in the tables, never
    "failed"; missing text is None in every frame (pandas 3 infers a ``str`` dtype with NaN unless
    told), missing measurements NaN."""
    pd = pytest.importorskip("pandas", reason="pandas not installed")
    frames = {
        "compare": comparison.to_pandas(),
        "bench": benchmark.to_pandas(),
        "advise": gpushare.advise(torch.ones(1024), "jax").to_pandas(),
        "share": gpushare.share(torch.ones(4), "numpy").to_pandas(),
    }
    for name in ("compare", "bench", "advise"):
        df = frames[name]
        assert set(df["verdict"]) <= {"shared", "copied", "not applicable", "failed"}, (name, set(df["verdict"]))
        if "applicable" in df:
            assert (df.loc[~df["applicable"], "verdict"] == "not applicable").all(), name
            assert (df.loc[df["verdict"] == "failed", "applicable"]).all(), name
    if not CUDA:
        assert "not applicable" in set(frames["compare"]["verdict"]) and "failed" not in set(frames["compare"]["verdict"])
        assert "not applicable" in set(frames["advise"]["verdict"]) and "failed" not in set(frames["advise"]["verdict"])
    for name, df in frames.items():
        for column in df.columns:
            values = df[column]
            if values.dtype == object or str(values.dtype) in ("str", "string"):
                assert values.dtype == object, (name, column, values.dtype)
                missing = [v for v in values if not isinstance(v, (str, tuple, list, dict, bool, int))]
                assert all(v is None for v in missing), (name, column, missing)
    assert frames["compare"]["reason"].map(lambda v: v is None).any(), "dlpack has no reason: None"
    assert pd.isna(frames["bench"]["median_s"]).any() or CUDA


def test_a_verdict_is_typed_and_reads_as_its_word(comparison):
    import json

    import numpy as np

    r = gpushare.share(np.arange(4.0), "numpy")
    row = comparison.paths["host"]
    for verdict, word in ((r.verdict, "shared"), (row.verdict, "copied")):
        assert isinstance(verdict, gpushare.Verdict) and verdict is gpushare.Verdict(word)
        assert verdict == word and str(verdict) == word and f"{verdict}" == word
        assert json.dumps({"v": verdict}) == f'{{"v": "{word}"}}' and {word: 1}[verdict] == 1
    with pytest.raises(gpushare.GpushareError) as failed:
        gpushare.share(np.arange(4.0), "numpy", path="cai")  # NumPy has no __cuda_array_interface__
    predicted = failed.value.predicted
    assert predicted.verdict is gpushare.Verdict.FAILED and predicted[0] == "failed"


def test_a_path_kind_is_typed_and_the_core_takes_it_or_its_word():
    from gpushare import PathKind, _native

    table = _native.paths.path_table()
    kinds = {row["name"]: row["kind"] for row in table if row["kind"] != "any"}
    assert all(isinstance(kind, PathKind) for kind in kinds.values())
    assert {row["kind"] for row in table if row["name"] == "p2p"} == {PathKind.MOVE}
    # The member and its word are the same question to the core.
    assert _native.paths.copied_by_design(PathKind.SHARE, "host") == _native.paths.copied_by_design("share", "host")
    assert _native.text.parse_paths(PathKind.PROCESS, ["shm,ipc"]) == ["shm", "ipc"]
    with pytest.raises(ValueError, match=r'unknown path kind "sideways": one of share, move, process'):
        _native.paths.copied_by_design("sideways", "host")
    with pytest.raises(TypeError):
        _native.paths.copied_by_design(3, "host")
    # advise's rows carry the kind and the verdict as the core's words, typed where they cross.
    import numpy as np

    advice = gpushare.advise(np.arange(4.0), "torch")
    assert advice.to_pandas()["kind"].tolist() == ["share"] * len(advice.rows)


def test_a_shares_prediction_is_typed_and_still_reads_by_key():
    import numpy as np

    r = gpushare.share(np.arange(4.0), "numpy")
    predicted = r.prediction
    assert isinstance(predicted, gpushare.Prediction)
    assert predicted.verdict is gpushare.Verdict.SHARED and predicted["verdict"] == "shared" == predicted[0]
    assert predicted["reason"] == predicted.reason and predicted["fix"] is None
    with pytest.raises(KeyError, match="speed"):
        predicted["speed"]
    assert predicted.get("reason") == predicted.reason and predicted.get("speed", "none") == "none"
    # The JSON form is unchanged: the verdict and the reason.
    assert r.to_dict()["predicted"] == {"verdict": "shared", "reason": predicted.reason}
    assert gpushare.Prediction(gpushare.Verdict.COPIED, "why") == ("copied", "why", None, None)
