"""The transfer-path lab on CPU: SharedBuffer shared by every framework at once, compare() and
bench() tables, JSON and plot, timing, and the magics through a real InteractiveShell."""

from __future__ import annotations

import base64
import gc
import json
import re
import warnings

import numpy as np
import pytest
from IPython.core.error import UsageError

import gpushare
from gpushare import _native, lab
from gpushare.exceptions import GpushareError, GpushareWarning, PathNotApplicableError
from gpushare.paths import PATH_NAMES

torch = pytest.importorskip("torch", reason="torch not installed")
jax = pytest.importorskip("jax", reason="jax not installed")
tf = pytest.importorskip("tensorflow", reason="tensorflow not installed")

CUDA = _native.cuda.driver_status()["available"]


def alive() -> int:
    gc.collect()
    return _native.share.shared_buffers_alive()


# -- SharedBuffer ------------------------------------------------------------------------------


def test_one_buffer_shared_by_torch_numpy_jax_and_tf_at_once():
    buf = gpushare.SharedBuffer((3, 4), "float32")
    t, n, j, f = buf.to("torch"), buf.to("numpy"), buf.to("jax"), buf.to("tf")
    t[1, 2] = 42.0  # written through torch ...
    t[0, 0] = -1.0
    for view in (n, np.asarray(j), f.numpy()):  # ... read through everyone else
        assert view[1, 2] == 42.0 and view[0, 0] == -1.0 and view.sum() == 41.0
    # Identity, not equality: every framework's array starts at the buffer's address.
    for view in (t, n, j, f):
        info = gpushare.inspect(view)
        assert info.data_ptr == buf.data_ptr and tuple(info.shape) == (3, 4)
    assert gpushare.inspect(t).dtype == "float32"
    # SharedBuffer.to is the public lab.buffer_to, which takes an adapter as well as a name.
    from gpushare.adapters import framework

    for to in ("numpy", framework("torch")):
        assert gpushare.inspect(lab.buffer_to(buf, to)).data_ptr == buf.data_ptr


def test_host_memory_is_256_byte_aligned():
    for shape, dtype in [((1,), "uint8"), ((7,), "float64"), ((3, 5), "int16"), ((0,), "float32"), ((), "bool")]:
        buf = gpushare.SharedBuffer(shape, dtype)
        assert buf.data_ptr % 256 == 0, (shape, dtype)
    assert gpushare.inspect(gpushare.SharedBuffer(100, "float32").to("numpy")).alignment == 256


def test_freed_only_after_the_last_consumer_lets_go():
    before = alive()
    buf = gpushare.SharedBuffer(1000, "float32")
    views = [buf.to("torch"), buf.to("jax"), buf.to("tf"), buf.to("numpy")]
    assert alive() == before + 1
    del buf
    assert alive() == before + 1, "the frameworks still hold it"
    while views:
        assert alive() == before + 1
        views.pop(0)
    assert alive() == before


def test_dlpack_protocol_legacy_versioned_and_refusals():
    buf = gpushare.SharedBuffer((2, 2), "int32")
    legacy, versioned = buf.__dlpack__(), buf.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" not in repr(legacy)
    assert "dltensor_versioned" in repr(versioned)
    assert buf.__dlpack_device__() == (1, 0)
    # Each call is a fresh header: both capsules import, as do old-ABI callers.
    a, b = torch.from_dlpack(legacy), torch.from_dlpack(versioned)
    a[0, 1] = 9
    assert int(b[0, 1]) == 9
    assert int(torch.utils.dlpack.from_dlpack(buf.__dlpack__())[0, 1]) == 9
    with pytest.raises(BufferError):
        buf.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(BufferError):
        buf.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    assert not hasattr(buf, "__cuda_array_interface__")


def test_fields_repr_and_arguments():
    buf = gpushare.SharedBuffer([4, 8], np.dtype("float64"))
    assert (buf.shape, buf.strides, buf.dtype, buf.device) == ((4, 8), (8, 1), "float64", "cpu")
    assert (buf.nbytes, buf.itemsize, buf.size, buf.ndim, len(buf)) == (256, 8, 32, 2, 4)
    assert re.fullmatch(r"SharedBuffer\(shape=\(4, 8\), dtype=float64, device=cpu, nbytes=256, data_ptr=0x[0-9a-f]+\)", repr(buf))
    assert gpushare.SharedBuffer(3, torch.bfloat16).dtype == "bfloat16"
    assert gpushare.SharedBuffer(3, np.int8).dtype == "int8"
    assert gpushare.SharedBuffer(3).dtype == "float32"
    with pytest.raises(ValueError, match="unknown dtype"):
        gpushare.SharedBuffer(3, "float7")
    with pytest.raises(ValueError, match="unknown device"):
        gpushare.SharedBuffer(3, "float32", "tpu:0")
    with pytest.raises(ValueError, match="negative"):
        gpushare.SharedBuffer((2, -1))
    if not CUDA:
        with pytest.raises(gpushare.exceptions.CudaError):
            gpushare.SharedBuffer(3, "float32", "cuda:0")


def test_copy_of_makes_strided_layouts_compact():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # strides (1, 4)
    buf = _native.share.SharedBuffer._copy_of(x.__dlpack__(max_version=(1, 0)), "copy", None)
    assert buf.shape == (4, 3) and buf.strides == (3, 1) and buf.nbytes == 48
    y = buf.to("torch")
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr() and y.is_contiguous()
    # A broadcast view becomes its full array; an offset view starts the buffer.
    b = torch.arange(3.0)[1:].reshape(2, 1).expand(2, 5)
    buf = _native.share.SharedBuffer._copy_of(b.__dlpack__(max_version=(1, 0)), "copy", None)
    assert buf.strides == (5, 1) and buf.nbytes == 40 and buf.data_ptr % 256 == 0
    assert torch.equal(buf.to("torch"), b)
    with pytest.raises(PathNotApplicableError, match="path='copy'"):
        _native.share.SharedBuffer._copy_of(x.__dlpack__(max_version=(1, 0)), "pinned", None)


def test_shared_buffer_of_finds_views_only():
    buf = gpushare.SharedBuffer(16, "float32")
    view = buf.to("torch")[4:8]
    found = _native.share.SharedBuffer._of(view.__dlpack__(max_version=(1, 0)))
    assert found is not None and found.data_ptr == buf.data_ptr + 16 and found.shape == (4,)
    assert _native.share.SharedBuffer._of(torch.ones(4).__dlpack__(max_version=(1, 0))) is None


def test_a_long_host_copy_stops_on_ctrl_c():
    import signal

    x = np.ones(64 << 20, dtype=np.float32)  # 256 MiB: four 64 MiB chunks, signals checked between
    before = alive()
    # The handler first, and the timer started inside the block that expects it: on a busy machine
    # an alarm set before could land outside it, and a KeyboardInterrupt there stops the test run.
    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            signal.setitimer(signal.ITIMER_REAL, 0.002)
            for _ in range(50):  # the alarm lands inside one of these copies, or between them
                _native.share.SharedBuffer._copy_of(x.__dlpack__(max_version=(1, 0)), "copy", None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        lab.empty_cache()
    assert alive() == before, "an interrupted copy leaks nothing"


# -- paths ---------------------------------------------------------------------------------------


def test_lab_paths_are_registered_under_their_design_names():
    assert PATH_NAMES == ("dlpack", "capsule", "cai", "host", "pinned", "copy", "shared")
    # Every path of the table has a route: it runs, or says why it does not apply to this pair.
    x = torch.arange(4.0)
    for name in PATH_NAMES:
        try:
            gpushare.share(x, "numpy", path=name)
        except GpushareError as e:
            assert "unknown transfer path" not in str(e), (name, e)


def test_host_and_copy_paths_copy_correct_data():
    x = torch.arange(10, dtype=torch.float32)
    for path in ("host", "copy"):
        r = gpushare.share(x, "jax", path=path)
        assert r.verdict == "copied", path
        assert np.array_equal(np.asarray(r.value), x.numpy())
    r = gpushare.share(x, "tf", path="copy")
    assert r.verdict == "copied" and np.array_equal(r.value.numpy(), x.numpy())


def test_pinned_without_cuda_is_not_applicable_with_the_driver_status():
    if CUDA:
        pytest.skip("this machine has CUDA")
    with pytest.raises(PathNotApplicableError, match=r"^pinned needs CUDA: .+"):
        gpushare.share(torch.ones(3), "jax", path="pinned")


def test_shared_path_hands_over_the_buffer_the_source_lives_in():
    buf = gpushare.SharedBuffer(8, "float32")
    src = buf.to("torch")
    r = gpushare.share(src, "jax", path="shared")
    assert r.verdict == "shared" and gpushare.inspect(r.value).data_ptr == buf.data_ptr
    with pytest.raises(PathNotApplicableError, match="not one"):
        gpushare.share(torch.ones(3), "jax", path="shared")


# -- compare ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def comparison():
    return gpushare.compare(torch.arange(4096, dtype=torch.float32), "jax", repeat=5)


def test_compare_has_a_row_for_every_path_and_reasons_for_the_rest(comparison):
    rows = comparison.rows
    assert [r["path"] for r in rows] == list(PATH_NAMES)
    by = {r["path"]: r for r in rows}
    assert by["dlpack"]["verdict"] == "shared" and by["dlpack"]["auto"]
    assert by["host"]["verdict"] == by["copy"]["verdict"] == "copied"
    assert by["capsule"]["applicable"] is False and "capsule" in by["capsule"]["reason"]
    assert by["shared"]["applicable"] is False and "SharedBuffer" in by["shared"]["reason"]
    if not CUDA:
        # The rules' sentence, as advise gives it (share's own error names the driver's status).
        assert by["pinned"]["applicable"] is False and "with the CUDA driver, which is unavailable here" in by["pinned"]["reason"]
    for r in rows:
        if r["verdict"] == "failed":
            assert r["reason"], r  # never hidden, always explained
        else:
            assert r["timing"]["median"] > 0 and len(r["timing"]["samples"]) == 5
    assert by["copy"]["bytes_moved"] == 4096 * 4 and by["dlpack"]["bytes_moved"] == 0
    assert by["copy"]["bandwidth"] == pytest.approx(4096 * 4 / by["copy"]["timing"]["median"])
    assert by["dlpack"]["bandwidth"] is None


def _quartiles(row):
    import numpy as np

    return np.percentile(row["timing"]["samples"], [25, 75])


def test_compare_highlights_exactly_the_fastest_or_a_tie(comparison):
    """★ goes to the fastest path only when it is faster than every other beyond the measured
    spread; otherwise the paths within its spread are a tie and nothing is starred."""
    rows = comparison.rows
    worked = [r for r in rows if r["verdict"] != "failed"]
    best = min(worked, key=lambda r: r["timing"]["median"])
    others = [r for r in worked if r is not best]
    clear = all(_quartiles(r)[0] > _quartiles(best)[1] for r in others)
    text = repr(comparison)
    # Table rows (the mark's column, then the two spaces between columns), not the notes under it.
    star = [line for line in text.splitlines() if line.startswith("★  ")]
    if clear:
        assert [r["path"] for r in rows if r["fastest"]] == [best["path"]] == [comparison.fastest]
        assert len(star) == 1 and best["path"] in star[0]
        # A class and an inline style (JupyterLab drops <style> in untrusted notebooks).
        assert re.search(f'<tr class="best"[^>]*data-path="{best["path"]}">', comparison._repr_html_())
    else:
        assert comparison.fastest is None and not star and not any(r["fastest"] for r in rows)
        tied = [r["path"] for r in rows if r["tied"]]
        assert best["path"] in tied and "a tie" in text, text


def test_one_sample_reads_as_1_sample_in_every_lab_table():
    """-n1 -r1 (one call timed once per path): compare and bench show a time and say "1 sample",
    in text and HTML, never a median or minimum, as share()'s report does."""
    x = torch.arange(1024, dtype=torch.float32)
    c = gpushare.compare(x, "numpy", repeat=1, number=1)
    b = gpushare.bench("torch", "numpy", sizes=["4KiB"], paths="dlpack,host", repeat=1, number=1, progress=False)
    for out in (repr(c), c._repr_html_(), repr(b), b._repr_html_()):
        assert "1 sample" in out, out
        assert "median" not in out and "minimum" not in out, out
    assert "time (" in repr(c).splitlines()[1]
    assert "median (" in repr(gpushare.compare(x, "numpy", repeat=3)), "several samples are medians"


def test_compare_uses_one_unit_per_column(comparison):
    lines = repr(comparison).splitlines()
    header = lines[1]
    # One time unit for every time column, said once (in the median's heading): narrower columns.
    assert re.search(r"median \((ns|µs|ms|s)\)", header) and re.search(r"\bmin\b", header) and "IQR" in header, header
    assert "moved (KiB)" in header and "GB/s" in header and "why" not in header
    assert "all in the median's unit" in " ".join(repr(comparison).split())
    # Cells carry bare numbers; a row's why is on indented lines under it, not in a column.
    numbers = slice(header.index("moved"), None)
    rows = [line for line in lines[2:] if line[:3].strip() in ("", "★", "≈") and line[3:4].isalpha()]
    assert {line.split()[0 if line[0] == " " else 1] for line in rows} == {"dlpack", "host", "copy"} | ({"pinned"} if CUDA else set())
    for line in rows:
        cells = line[numbers].split()
        assert cells and all(re.fullmatch(r"-|\d+(\.\d+)?", c) for c in cells), line
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)


def test_compare_json_dict_and_pandas(comparison):
    payload = json.loads(comparison.to_json())
    assert payload["schema"] == "gpushare.comparison/1"
    assert payload["data"]["source"]["framework"] == "torch" and payload["data"]["target_framework"] == "jax"
    bundle = comparison._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.gpushare+json"}
    df = comparison.to_pandas()
    assert list(df["path"]) == list(PATH_NAMES)
    assert {"verdict", "median_s", "min_s", "iqr_s", "bandwidth_Bps", "bytes_moved", "reason", "fastest"} <= set(df.columns)
    assert comparison["copy"]["verdict"] == "copied"
    assert set(comparison.values) == {r["path"] for r in comparison.rows if r["verdict"] != "failed"}


def test_compare_into_tf_goes_by_capsule():
    c = gpushare.compare(torch.ones(64), "tf", paths="dlpack,capsule,copy", repeat=3)
    by = {r["path"]: r for r in c.rows}
    assert by["capsule"]["verdict"] == "shared" and by["capsule"]["auto"]
    assert by["dlpack"]["verdict"] == "failed" and "capsule" in by["dlpack"]["reason"]
    assert by["copy"]["verdict"] == "copied"


def test_compare_checks_its_arguments():
    with pytest.raises(ValueError, match="unknown transfer path"):
        gpushare.compare(torch.ones(3), "jax", paths="dlpack,teleport")
    with pytest.raises(ValueError):
        gpushare.compare(torch.ones(3), "jax", repeat=0)


# -- bench -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benchmark():
    return gpushare.bench("torch", "jax", sizes=["4KiB", "64KiB", "1MiB"], paths="dlpack,capsule,host,pinned,copy,shared",
                          repeat=3, progress=False)


def test_bench_points_cover_sizes_times_paths(benchmark):
    points = benchmark.points
    assert len(points) == 3 * 6 and not benchmark.interrupted
    assert {p["size"] for p in points} == {4096, 65536, 1 << 20}
    by = {(p["size"], p["path"]): p for p in points}
    assert by[(4096, "shared")]["verdict"] == "shared", "the shared path starts from a SharedBuffer"
    assert by[(1 << 20, "copy")]["bytes_moved"] == 1 << 20
    for size in (4096, 65536, 1 << 20):
        starred = [p for p in ("dlpack", "capsule", "host", "pinned", "copy", "shared") if by[(size, p)]["fastest"]]
        tied = [p for p in ("dlpack", "capsule", "host", "pinned", "copy", "shared") if by[(size, p)]["tied"]]
        # One winner beyond the spread, or a tie of at least two and no winner.
        assert (len(starred) == 1 and not tied) or (not starred and len(tied) >= 2), (size, starred, tied)
        # The shared path starts from a SharedBuffer: shown, never ranked against the others.
        assert not by[(size, "shared")]["fastest"] and not by[(size, "shared")]["tied"]


def test_bench_table(benchmark):
    text = repr(benchmark)
    assert text.startswith("torch → jax · float32 on cpu · 3 sizes × 6 paths")
    # The unit once, in the title; a column per path that applies, headed by its name alone.
    assert re.fullmatch(r"median time per handoff \((ns|µs|ms)\)", text.splitlines()[1]), text
    header = text.splitlines()[2].split()
    assert header[:4] == ["size", "dlpack", "host", "copy"] and "capsule" not in header, header
    assert ("pinned" in header) == CUDA, header
    for size in ("4 KiB", "64 KiB", "1 MiB"):
        assert size in text
    # A path that cannot run here is one grey footnote with its reason, never "failed".
    flat = " ".join(text.split())
    assert "Not applicable here (not run): capsule (jax does not import raw DLPack capsules" in flat, text
    assert "failed" not in text and all(len(line) <= 100 for line in text.splitlines()), text
    html = benchmark._repr_html_()
    assert 'data-quantity="time"' in html and 'data-quantity="bandwidth"' in html
    # The plot is an <img> of the same SVG: an untrusted notebook drops inline <svg> elements.
    src = html.split('src="data:image/svg+xml;base64,')[1].split('"')[0]
    assert "<svg" not in html and base64.b64decode(src).decode() == benchmark.svg


def test_bench_svg_plot(benchmark):
    svg = benchmark.svg
    working = [p for p in ("dlpack", "host", "copy", "shared")]
    if CUDA:
        working.append("pinned")
    for path in working:
        assert f'<g class="legend-entry" data-path="{path}"' in svg
        # One point per size in the time panel, and one more per size in the bandwidth panel for copies.
        copies = path in ("host", "copy", "pinned")
        assert svg.count(f'<circle class="point" data-path="{path}"') == 3 * (2 if copies else 1), path
    assert 'data-path="capsule"' not in svg, "a path that never worked has no line"
    for label in (">size (bytes)</text>", ">time (median)</text>", ">bandwidth (GB/s)</text>"):
        assert label in svg
    assert ">4 KiB</text>" in svg and ">1 MiB</text>" in svg


def test_the_matplotlib_plot_draws_every_path_as_the_svg_does(benchmark):
    import re as _re

    from gpushare import bench_plot, paths

    svg, compared = benchmark.svg, []
    for row in paths.PATH_TABLE:
        colour, dash, marker = bench_plot.style(row["name"])
        assert colour == row["colour"], row["name"]
        assert marker
        # The SVG's line of the path, where the sweep drew one, has the same dashes.
        line = _re.search(rf'<g class="series" data-path="{row["name"]}"><polyline ([^>]*)/>', svg)
        if line:
            drawn = _re.search(r'stroke-dasharray="([^"]*)"', line.group(1))
            assert dash == ((0, tuple(int(x) for x in drawn.group(1).split())) if drawn else "solid"), row["name"]
            compared.append(row["name"])
    assert {"dlpack", "host", "copy"} <= set(compared), compared


def test_bench_pandas_and_json(benchmark):
    df = benchmark.to_pandas()
    assert len(df) == 18 and list(df.columns[:7]) == [
        "source_framework", "target_framework", "dtype", "device", "size", "path", "verdict"]
    payload = json.loads(benchmark.to_json())
    assert payload["schema"] == "gpushare.benchmark/1"
    data = payload["data"]
    assert data["sizes"] == [4096, 65536, 1 << 20] and data["dtype"] == "float32" and data["device"] == "cpu"
    assert data["points"][0]["timing"]["loops"] >= 1


def test_bench_stops_cleanly_on_ctrl_c(monkeypatch):
    calls = {"n": 0}
    real = lab._path_route

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "_path_route", interrupting)
    with pytest.warns(GpushareWarning, match="interrupted: 2 of 4 points"):
        b = gpushare.bench("torch", "numpy", sizes=[1024, 2048], paths="dlpack,copy", repeat=2, progress=False)
    assert b.interrupted and len(b.points) == 2
    assert "Interrupted: partial results" in repr(b)


def test_bench_progress_bar_falls_back_without_tqdm(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    # The bar is for a terminal (a redirected stderr gets no frames): stderr is one here.
    monkeypatch.setattr("gpushare.progress.on_terminal", lambda stream=None: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    gpushare.bench("numpy", "torch", sizes=[256], paths="dlpack", repeat=1)
    err = capsys.readouterr().err
    assert "sharebench numpy→torch [" in err and "1/1" in err


def test_sizes_and_paths_are_parsed():
    assert [lab.parse_size(s) for s in ("4KiB", "1MiB", "256MiB", "1.5 KB", 100, "1GiB")] == [
        4096, 1 << 20, 256 << 20, 1500, 100, 1 << 30]
    with pytest.raises(ValueError, match="cannot read size"):
        lab.parse_size("four")
    assert lab.parse_paths("all") == list(PATH_NAMES)
    assert lab.parse_paths("copy, dlpack") == ["copy", "dlpack"]


def test_bench_reads_sizes_as_calibrate_does():
    """One reader of size lists: empty items are dropped, a whole float is a size, a huge one is
    refused with the limit, and the item that cannot be read is named."""
    b = gpushare.bench("numpy", "torch", sizes="4KiB,,1KiB,", paths="dlpack", repeat=1, progress=False)
    assert [p.size for p in b.points] == [4096, 1024]
    b = gpushare.bench("numpy", "torch", sizes=[4096.0], paths="dlpack", repeat=1, progress=False)
    assert [p.size for p in b.points] == [4096]
    with pytest.raises(ValueError, match=r"sizes\[1\]: cannot read size"):
        gpushare.bench("numpy", "torch", sizes="4KiB,four", paths="dlpack", repeat=1, progress=False)
    with pytest.raises(ValueError, match=r"sizes\[0\] must be at most"):
        gpushare.bench("numpy", "torch", sizes=[1 << 70], paths="dlpack", repeat=1, progress=False)


def test_sizes_are_written_by_the_cores_one_formatter(monkeypatch):
    """Python writes sizes as the core's tables do: the tick of a plot, a size that does not fit,
    a context's cost and the figures of gpuinfo read alike."""
    from gpushare import bench_plot, sweep_sizes

    assert [_native.text.format_bytes(n) for n in (512, 1536, 4096, 256 << 20)] == ["512 B", "1.50 KiB", "4.00 KiB", "256 MiB"]
    assert [_native.text.size_label(n) for n in (4096, 1536, 1 << 30)] == ["4 KiB", "1.50 KiB", "1 GiB"]
    assert [_native.text.format_bytes(n, signed=True) for n in (64 << 20, -512, 0)] == ["+64 MiB", "-512 B", "±0 B"]
    with pytest.raises(ValueError, match="not negative"):
        _native.text.format_bytes(-1)
    assert bench_plot.bytes_label(1536.0) == "1.50 KiB" and bench_plot.bytes_label(4096) == "4 KiB"
    monkeypatch.setattr(sweep_sizes, "device_capacity", lambda device: 1024)
    with pytest.raises(ValueError, match=r"size 1.50 KiB \(1,536 bytes\) does not fit in the host memory \(1.00 KiB\)"):
        sweep_sizes.check_fits([1536], ["cpu"])

# -- timing ----------------------------------------------------------------------------------------
# The loop itself (warm-up, auto-ranging, budgets, each result dropped before the next call) is the
# core's, tested with fake samplers in crates/core/src/share/timing.rs. Here: what it does to Python.


class _CountingProducer:
    """A DLPack producer that notes, at every export, whether Python's garbage collector was on."""

    def __init__(self):
        self.array = np.arange(8.0)
        self.collector_on: list[bool] = []

    def __dlpack__(self, **kwargs):
        self.collector_on.append(gc.isenabled())
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("target", ["numpy", "torch"])
def test_a_timed_share_warms_up_then_samples_with_the_garbage_collector_off(target):
    producer = _CountingProducer()
    assert gc.isenabled()
    r = gpushare.share(producer, target, repeat=2, number=3, warmup=2)
    assert r.verdict == "shared" and (r.timing.repeats, r.timing.loops) == (2, 3)
    # Two warm-up handoffs with the collector as it was, then 2 samples of 3 handoffs without it,
    # as timeit does; it is on again afterwards.
    assert producer.collector_on == [True, True] + [False] * 6
    assert gc.isenabled()


def test_a_timed_share_leaves_a_collector_the_caller_turned_off_turned_off():
    producer = _CountingProducer()
    gc.disable()
    try:
        gpushare.share(producer, "numpy", repeat=2, number=2, warmup=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert producer.collector_on == [False] * 5


# -- magics ----------------------------------------------------------------------------------------


@pytest.fixture
def lab_shell(ip, run):
    if "sharebench" not in ip.magics_manager.magics["line"]:
        from gpushare import lab_magics

        lab_magics.load(ip)
    run("import torch, numpy as np, jax, tensorflow as tf")
    return ip


def test_sharebench_magic(lab_shell, run):
    b = run("%sharebench torch->jax --sizes 4KiB,16KiB --paths dlpack,copy,pinned -r 3 -q -o")
    assert isinstance(b, lab.Benchmark)
    assert {(p["size"], p["path"]) for p in b.points} == {(s, p) for s in (4096, 16384) for p in ("dlpack", "copy", "pinned")}
    assert 'src="data:image/svg+xml;base64,' in b._repr_html_()


def test_ctrl_c_on_sharebench_gives_one_output(lab_shell, capsys, monkeypatch):
    """The partial table, which says it was interrupted, and nothing else: no warning, no traceback;
    the cell still fails, so a notebook's Run All stops there."""
    from gpushare.lab_magics import SharebenchInterrupted

    calls = {"n": 0}
    real = lab._path_route

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "_path_route", interrupting)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = lab_shell.run_cell("%sharebench torch->numpy --sizes 1KiB,2KiB --paths dlpack,copy -r 2")
    assert isinstance(result.error_in_exec, SharebenchInterrupted)
    out = capsys.readouterr()
    assert out.out.count("torch → numpy · float32 on cpu") == 1 and "Interrupted: partial results" in out.out, out.out
    assert "Traceback" not in out.out + out.err and "KeyboardInterrupt" not in out.out + out.err, out
    assert not [w for w in caught if "interrupted" in str(w.message)], [str(w.message) for w in caught]


def test_sharebench_magic_displays(lab_shell, run, capsys):
    assert run("%sharebench numpy->torch --sizes 1KiB --paths dlpack -r 2 -q") is None
    run("%sharebench numpy->torch --sizes 1KiB --paths dlpack,host -r 2")
    out = capsys.readouterr().out
    assert "numpy → torch · float32 on cpu" in out and "1 KiB" in out


@pytest.mark.parametrize(
    "line, message",
    [
        ("%sharebench", "missing route"),
        ("%sharebench torch->jax->tf", "one source and one target"),
        ("%sharebench ->jax", "one source and one target"),
        ("%sharebench torch->jxa", "did you mean"),
        ("%sharebench torch->jax --sizes 4 parsecs", "unrecognized|cannot read size"),
        ("%sharebench torch->jax --sizes 4parsecs", "cannot read size"),
        ("%sharebench torch->jax --paths teleport", "unknown transfer path"),
        ("%sharebench torch->jax -r 0", "-r must be at least 1"),
        ("%sharebench torch->jax --device tpu", "unknown device"),
    ],
)
def test_sharebench_bad_arguments_raise_usage_errors(lab_shell, run, line, message):
    with pytest.raises(UsageError, match=message):
        run(line)


def test_sharebench_help(lab_shell):
    doc = lab_shell.find_line_magic("sharebench").__doc__
    assert "%sharebench SRC->DST" in doc and "--sizes" in doc and "-r" in doc


def test_share_path_all_through_the_shell(lab_shell, run):
    run("x = torch.arange(256, dtype=torch.float32)")
    c = run("%share x ->jax --path all -r 3 -o")
    assert isinstance(c, lab.Comparison)
    assert [r["path"] for r in c.rows] == list(PATH_NAMES)
    assert "x_jax" not in lab_shell.user_ns, "a comparison binds nothing"


def test_compare_describes_the_source_once():
    """The lab is the pipeline run once per path: the source is described once and that one
    description is handed to each path's handoff, not made again per path."""
    c = gpushare.compare(torch.arange(64, dtype=torch.float32), "numpy", paths="dlpack,host,copy", repeat=2)
    assert set(c.results) == {"dlpack", "host", "copy"}
    sources = [r.source for r in c.results.values()]
    assert all(s is sources[0] for s in sources), "one description for every path"
    assert c.to_dict()["source"]["data_ptr"] == sources[0].data_ptr


def test_a_sweep_labels_each_point_by_the_bytes_its_array_holds():
    """A size that is not whole elements of the dtype sweeps the array it can make, and says its bytes."""
    b = gpushare.bench("numpy", "numpy", sizes=[1, 12, 16], dtype="float64", paths="dlpack", repeat=1)
    assert [p.size for p in b.points] == [8, 16]
    assert all(p.target.nbytes == p.size for p in b.points), [(p.size, p.target) for p in b.points]
    assert "8 B" in repr(b) and " 1 B" not in repr(b)


def test_a_sweep_refuses_a_size_no_device_can_hold_before_making_any_array():
    from gpushare import sweep_sizes

    capacity = sweep_sizes.device_capacity("cpu")
    if capacity is None:
        pytest.skip("the OS does not report the host's physical memory (sysconf SC_PHYS_PAGES)")
    with pytest.raises(ValueError, match="does not fit in the host memory"):
        gpushare.bench("torch", "numpy", sizes=["4KiB", 2 * capacity], paths="dlpack", repeat=1)
    with pytest.raises(ValueError, match="does not fit in the host memory"):
        gpushare.bench("torch", "torch", sizes=[2 * capacity], paths="shm", repeat=1, across="processes", device="cpu")


def test_a_copy_of_a_strided_array_moves_its_elements_not_its_span():
    y = np.arange(10, dtype=np.float32)[::3]  # 4 elements, 16 bytes, spanning 40
    c = gpushare.compare(y, "torch", paths="dlpack,host", repeat=2)
    assert c["dlpack"].verdict == "shared" and c["dlpack"].bytes_moved == 0
    assert c["host"].verdict == "copied" and c["host"].bytes_moved == 16
