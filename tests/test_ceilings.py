"""Every figure has a ceiling and respects it, on the CPU: every compare/bench row's
bandwidth is at most the ceiling of the resource its copy crosses (host memory here, measured with
NumPy), a shared row shows none, a copying row's time is never below its own device time, and the
ceilings are cached per machine and measured again when the machine changes.

The same checks on a GPU are tests/test_ceilings_gpu.py (``pytest -m gpu``).
"""

from __future__ import annotations

import json

import pytest

import gpushare
from gpushare import _native
from gpushare import machine_ceilings as mc

torch = pytest.importorskip("torch", reason="torch not installed")

PAIRS = [("torch", "jax"), ("torch", "numpy"), ("torch", "tf")]
SIZES = ["4KiB", "1MiB", "64MiB"]
COPYING = "host,pinned,copy"


def need(fw: str) -> None:
    pytest.importorskip({"jax": "jax", "tf": "tensorflow", "numpy": "numpy"}[fw], reason=f"{fw} not installed")


@pytest.fixture(scope="module")
def limits(tmp_path_factory):
    """This machine's ceilings, measured for this module into a cache of its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield gpushare.ceilings()


def higher(a: dict, b: dict) -> dict:
    """Ceilings ``a`` with each point raised to ``b``'s where ``b`` measured more."""
    out = json.loads(json.dumps(a))
    for name, resource in out["resources"].items():
        other = dict((n, bps) for n, bps in b["resources"].get(name, {}).get("points", []))
        resource["points"] = [[n, max(bps, other.get(n, bps))] for n, bps in resource.get("points", [])]
    return out


def over_ceiling(table, limits: mc.Ceilings) -> list[str]:
    """The table's figures over their ceilings. A ceiling is the best of a few short copies: taken
    while the machine was busier than during the table, it reads low. So a figure over it is looked
    at again against the ceilings measured now (the higher of the two at each size) before it
    counts; a timing bug (a copy timed before it landed: 3x and more) stays over both."""
    found = mc.table_problems(table, limits)
    if found:
        found = mc.table_problems(table, mc.Ceilings(higher(limits.to_dict(), mc.measure(gpu=False))))
    return found


def ones(size: str):
    return torch.ones(gpushare.lab.parse_size(size) // 4)


@pytest.mark.parametrize("src,dst", PAIRS)
def test_a_copying_paths_time_is_never_below_its_own_device_time(src, dst):
    need(dst)
    c = gpushare.compare(ones("1MiB"), dst, COPYING, repeat=3)
    timed = [r for r in c.to_dict()["rows"] if r["timing"]]
    assert timed, "at least one copying path ran"
    for row in timed:
        device = row["timing"]["device_median"]
        if device is not None:  # a device clock exists only on a GPU
            assert row["timing"]["median"] >= device, row
    assert over_ceiling(c, mc.Ceilings(mc.measure(gpu=False))) == []


@pytest.mark.parametrize("src,dst", PAIRS)
def test_every_compare_and_bench_bandwidth_is_under_its_ceiling(src, dst, limits):
    need(dst)
    copied = 0
    for size in SIZES:
        c = gpushare.compare(ones(size), dst, repeat=5)
        assert over_ceiling(c, limits) == [], c
        copied += sum(1 for r in c.to_dict()["rows"] if r["bandwidth"])
    b = gpushare.bench(src, dst, sizes=SIZES, repeat=5, progress=False)
    assert over_ceiling(b, limits) == [], b
    copied += sum(1 for p in b.to_dict()["points"] if p["bandwidth"])
    assert copied >= len(SIZES) * 2, "the copying paths ran, so the check checked something"


class _Forged:
    """A table whose data was edited: what a timing bug would have produced."""

    def __init__(self, data: dict):
        self._data = data

    def to_dict(self) -> dict:
        return self._data


def test_a_bandwidth_above_its_ceiling_or_a_shared_row_with_one_is_caught(limits):
    need("numpy")
    c = gpushare.compare(ones("1MiB"), "numpy", "dlpack,copy", repeat=3)
    data = c.to_dict()
    # As measured, nothing is over (looked at again against ceilings measured now, as every check
    # here is: the module's ceilings, taken while the machine was busier, read low).
    assert over_ceiling(_Forged(data), limits) == []
    copy = next(r for r in data["rows"] if r["path"] == "copy")
    ceiling, crossed = limits.bound("share", "copy", (1, 0), (1, 0), copy["bytes_moved"])
    assert crossed == ["host_memory"] and ceiling > 0
    copy["bandwidth"] = 3 * ceiling  # a copy timed before it landed: the H100's "5013 GB/s"
    shared = next(r for r in data["rows"] if r["path"] == "dlpack")
    shared["bandwidth"] = 1e9
    copy["timing"]["device_median"] = 2 * copy["timing"]["median"]
    problems = mc.table_problems(_Forged(data), limits)
    assert any("copy" in p and "above" in p and "host_memory" in p for p in problems), problems
    assert any("dlpack" in p and "moves no bytes" in p for p in problems), problems
    assert any("below its own device time" in p for p in problems), problems
    # The tests' second look at a figure over its ceiling still finds the bug.
    assert any("copy" in p and "above" in p for p in over_ceiling(_Forged(data), limits))


def test_each_copy_crosses_the_resources_between_its_ends():
    assert _native.advice.copy_resources("share", "copy", None, None) == [("host_memory", "host memory copy")]
    keys = lambda *a: [k for k, _ in _native.advice.copy_resources(*a)]  # noqa: E731
    assert keys("share", "copy", 0, 0) == ["device_memory:0"]
    assert keys("share", "host", 0, 0) == ["device_to_host:0", "host_to_device:0"]
    assert keys("share", "host", 0, None) == ["device_to_host:0"]
    assert keys("move", "p2p", 0, 1) == ["peer:0->1"]
    assert keys("move", "pinned", 1, 0) == ["device_to_host:1", "host_to_device:0"]
    with pytest.raises(ValueError, match="unknown path kind"):
        _native.advice.copy_resources("teleport", "copy", None, None)


def test_the_ceilings_are_cached_per_machine_and_measured_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = gpushare.ceilings()
    assert not first.cached
    path = tmp_path / "gpushare" / "ceilings.json"
    assert mc.cache_path() == path and path.exists()
    stored = json.loads(path.read_text())
    key = stored["key"]
    assert set(key) >= {"hostname", "cpu", "devices", "driver", "gpushare"}
    assert key["gpushare"] == gpushare.__version__
    again = gpushare.ceilings()
    assert again.cached and again.to_dict() == first.to_dict()
    # Another gpushare (or driver, devices, CPU, host): measured again, and the cache rewritten.
    stored["key"]["gpushare"] = "0.0.0-older"
    stored["measured_at"] = "then"
    path.write_text(json.dumps(stored))
    fresh = gpushare.ceilings()
    assert not fresh.cached and fresh.to_dict()["measured_at"] != "then"
    assert json.loads(path.read_text())["key"] == mc.machine_key()
    # A cache that cannot be read is measured again, not an error.
    path.write_text("{not json")
    assert not gpushare.ceilings().cached


def test_ceilings_show_as_text_html_and_data(limits):
    text = limits.text()
    assert "host_memory" in text and "GB/s" in text
    assert repr(limits) == text
    html = limits._repr_html_()
    assert "<table" in html and "host_memory" in html
    data = limits.to_dict()
    points = data["resources"]["host_memory"]["points"]
    assert [n for n, _ in points] == list(mc.HOST_SIZES) and all(bps > 0 for _, bps in points)
    if not _native.cuda.driver_status()["available"]:
        note = data["resources"]["gpu"]["note"]
        assert note.startswith("not measured: "), note
        assert "not measured" in text


def test_a_ceiling_is_the_fastest_copy_measured_near_the_size():
    c = mc.Ceilings({"key": {}, "resources": {"host_memory": {"points": [[1 << 20, 40e9], [256 << 20, 10e9]]}}})
    assert c.ceiling("host_memory", 1 << 20) == 40e9
    assert c.ceiling("host_memory", 4 << 20) == 40e9, "a copy within 16x of 1 MiB may still hit the cache"
    assert c.ceiling("host_memory", 64 << 20) == 10e9, "only 256 MiB is within 16x: memory, not cache"
    assert c.ceiling("host_memory", 1 << 40) == 10e9, "beyond every size: the nearest"
    assert c.ceiling("device_memory:0", 1 << 20) is None


def test_the_cost_models_table_shows_no_rate_above_its_ceiling(limits, tmp_path, monkeypatch):
    """The calibration's table (what ``gpushare.calibrate()`` and ``%gpuinfo`` show) states each
    copying path's bandwidth as the rate it reached at the largest size measured, which its
    resources' ceiling bounds; the line's per-byte term is no such rate (on 2x H200 it read 7.7 TB/s
    for a copy within one GPU that reached 1.9 TB/s), so it is never what the table shows."""
    import re

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    gpushare.advice.forget()
    try:
        model = gpushare.calibrate(["torch", "numpy"], sizes=["4KiB", "1MiB", "16MiB"], device="cpu", repeat=1)
        text = repr(model)
        rates = re.findall(r"^(\S+)→(\S+)\s+(\w+) \(share\)\s+cpu\s+\S+ \S+\s+([\d.]+) GB/s at (\d+) (KiB|MiB)", text, re.M)
        assert rates, text
        for source, target, path, gbps, size, unit in rates:
            nbytes = int(size) << (20 if unit == "MiB" else 10)
            assert nbytes == 16 << 20, text
            limit, crossed = limits.bound("share", path, (1, 0), (1, 0), nbytes)
            assert limit is not None, crossed
            if float(gbps) * 1e9 > mc.TOLERANCE * limit:  # a ceiling measured on a busier moment: look again
                now = mc.Ceilings(higher(limits.to_dict(), mc.measure(gpu=False)))
                limit = now.bound("share", path, (1, 0), (1, 0), nbytes)[0]
            assert float(gbps) * 1e9 <= mc.TOLERANCE * limit, f"{source}→{target} {path}: {gbps} GB/s over {limit / 1e9:.1f} ({crossed})"
            # The figure is the model's own time at that size, not its line's per-byte term.
            p = model.predict("share", path, source, target, "cpu", nbytes)
            assert abs(nbytes / p.seconds / 1e9 / float(gbps) - 1) < 0.01, (path, p.seconds, gbps)
            # Past the sweep the fit carries the ceiling of larger copies (measured by calibrate, the
            # fastest copy of 64 MiB or more), and no prediction beats it: 1 GiB costs at least the
            # 16 MiB measured plus the rest at the ceiling.
            big = 1 << 30
            fit = json.loads(model.to_json())["fits"][f"share {source}->{target} {path} @cpu"]
            assert fit.get("ceiling", 0) > 0, fit
            predicted = model.predict("share", path, source, target, "cpu", big)
            assert big / predicted.seconds <= big / (big - nbytes) * fit["ceiling"], (path, big / predicted.seconds, fit)
            # The prediction's JSON states that rate (`rate`), beside the line's per-byte term.
            assert predicted.rate == pytest.approx(big / predicted.seconds, rel=1e-9), predicted.to_dict()
            assert predicted.to_dict()["rate"] == predicted.rate
            assert predicted.rate <= mc.TOLERANCE * big / (big - nbytes) * fit["ceiling"]
    finally:
        gpushare.advice.forget()


def test_a_machine_whose_ceilings_cannot_be_measured_still_gets_its_model(tmp_path, monkeypatch):
    """The ceilings only bound the fits past their sweep: when measuring them fails (a GPU too full
    for their copies), calibrate says so and fits the lines as measured."""
    from gpushare.exceptions import GpushareWarning, gpushare_error

    def refuse(*args, **kwargs):
        raise gpushare_error("cuda", "out of memory (a stand-in for a full GPU)")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(mc, "ceilings", refuse)
    gpushare.advice.forget()
    try:
        with pytest.warns(GpushareWarning, match="ceilings could not be measured"):
            model = gpushare.calibrate(["torch", "numpy"], sizes=["4KiB", "64KiB", "1MiB"], device="cpu", repeat=1)
        fits = json.loads(model.to_json())["fits"]
        assert fits and not any("ceiling" in f for f in fits.values())
        assert model.predict("share", "copy", "torch", "numpy", "cpu", 1 << 30) is not None
    finally:
        gpushare.advice.forget()
