"""Path advice on the CPU: ``calibrate`` fits each path's ``fixed + bytes /
bandwidth`` from a real sweep and caches it per machine, a model made for another machine is stale
and says why, ``advise`` predicts every applicable path without converting anything and recommends
the fastest path among those that share, and ``%share x ->DST --advise`` shows it.

The fitting, deciding and rendering are the core's (crates/core/src/advice, cargo-tested there with
exact lines); these tests check that the Python layer feeds them real measurements and the rules'
real verdicts.
"""

from __future__ import annotations

import pytest

import gpushare
from gpushare import _native, advice, auto, paths

torch = pytest.importorskip("torch", reason="torch not installed")
np = pytest.importorskip("numpy", reason="numpy not installed")

SIZES = ("64KiB", "1MiB", "8MiB")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        advice.forget()
        yield
        advice.forget()


@pytest.fixture(scope="module")
def model(cache):
    return gpushare.calibrate(["torch", "numpy"], sizes=SIZES, repeat=3, device="cpu")


#: The host's speed the given model was calibrated at, which its tests pin ``advice.host_speed`` to.
GIVEN_HOST_SPEED = 40e-6


def given_model() -> gpushare.CostModel:
    """A model of torch→numpy on the CPU whose fits are given, not calibrated, for the tests of what
    advise and the tables do with a prediction: a calibration on a loaded machine may leave a path
    too uncertain to predict (its tests use the live one, ``model``). dlpack shares in a constant
    20 µs; host and copy copy at a fixed 2 µs plus 1 ns a byte (faster than dlpack below 18 KB
    only), measured from 64 KiB to 8 MiB."""
    sizes = (64 << 10, 1 << 20, 8 << 20)
    speeds = [GIVEN_HOST_SPEED] * len(sizes)
    given = gpushare.CostModel(advice.machine_key(), 0.0)
    given.add("share", "dlpack", "torch", "numpy", "cpu", [(n, 20e-6) for n in sizes], True, speeds)
    for path in ("host", "copy"):
        given.add("share", path, "torch", "numpy", "cpu", [(n, 2e-6 + 1e-9 * n) for n in sizes], False, speeds)
    assert not given.uncertain()
    return given


def test_the_default_sweep_has_knots_close_enough_for_a_copy_and_leaves_the_benchmark_its_own_sizes():
    """A copy's cost per byte changes between sizes (a cache, a new mapping's page faults), and its
    prediction joins the sweep's points: from 64 KiB up no two neighbouring sizes of the default
    sweep lie more than 8x apart (the sweep of 64 KiB, 1, 16 and 64 MiB missed a copy at 256 KiB and
    4 MiB by a median 56 and 40 % on the 2-core CPU), and benchmarks/bench_advice.py calibrates
    with it yet evaluates at sizes it does not hold."""
    import ast
    from pathlib import Path

    from gpushare import lab

    sizes = [lab.parse_size(s) for s in advice.DEFAULT_SIZES]
    assert sizes == sorted(set(sizes)) and len(sizes) >= 3
    assert sizes[0] <= 4 << 10 and sizes[-1] >= 64 << 20
    wide = [(a, b) for a, b in zip(sizes, sizes[1:]) if a >= 64 << 10 and b > 8 * a]
    assert not wide, wide
    bench = ast.parse((Path(__file__).resolve().parents[1] / "benchmarks" / "bench_advice.py").read_text(encoding="utf-8"))
    assigned = {t.id: node.value for node in bench.body if isinstance(node, ast.Assign) for t in node.targets
                if isinstance(t, ast.Name)}
    assert ast.unparse(assigned["CALIBRATION_SIZES"]) == "advice.DEFAULT_SIZES"
    evaluated = [lab.parse_size(s) for s in ast.literal_eval(assigned["EVALUATION_SIZES"])]
    assert evaluated and not set(evaluated) & set(sizes)
    # Nor does it evaluate where calibrate measures inside a bend: the middle of a gap wider than
    # 2x beside a knot its neighbours missed (CostModel.refinements), asked of the core for a copy
    # whose cost per byte rises 20x past each inner size of the sweep in turn.
    middles = set()
    for knee in sizes[1:-1]:
        m = advice.CostModel({}, 0.0)
        bend = [(n, 1e-9 * min(n, knee) + 20e-9 * max(0, n - knee)) for n in sizes]
        assert m.add("share", "host", "torch", "jax", "cpu", bend, False)
        middles |= {middle for *_, middle in m.refinements()}
    assert len(middles) >= 3, middles
    near = [(gpushare._native.text.format_bytes(m), e) for m in middles for e in evaluated if abs(e - m) <= 0.1 * m]
    assert not near, near


def test_calibration_fits_every_path_that_worked_and_caches_it(model):
    keys = set(model.keys())
    for src, dst in (("torch", "numpy"), ("numpy", "torch")):
        for path in ("dlpack", "host", "copy"):
            assert ("share", path, src, dst, "cpu") in keys, (src, dst, path)
    assert advice.cache_file().exists()
    cached = advice.model()
    assert cached is not None and len(cached) == len(model)
    assert set(cached.keys()) == keys
    assert f"{len(model)} paths fitted" in advice.summary()
    assert "cost model:" in gpushare.gpuinfo().cost_model


def test_a_copy_has_a_bandwidth_and_its_prediction_grows_with_size(model):
    small = model.predict("share", "host", "torch", "numpy", "cpu", 64 << 10)
    large = model.predict("share", "host", "torch", "numpy", "cpu", 4 << 20)
    assert small is not None and large is not None
    assert large.seconds > small.seconds
    assert large.bandwidth is not None and large.bandwidth > 0
    assert large.extrapolated is False and large.extrapolated_from is None
    # Past the largest size calibrated (8 MiB), even within 4x of it, every line is carried on.
    past = model.predict("share", "host", "torch", "numpy", "cpu", 16 << 20)
    assert past.extrapolated is True and past.extrapolated_from == 8 << 20
    assert model.predict("share", "host", "torch", "numpy", "cpu", 64 << 30).extrapolated is True
    # Never calibrated: no prediction, not a guess.
    assert model.predict("share", "dlpack", "torch", "tf", "cpu", 1 << 20) is None


def test_a_model_for_another_machine_is_stale_and_says_what_changed(model, tmp_path, monkeypatch):
    stale = gpushare.CostModel({**advice.machine_key(), "frameworks": {"torch": "0.0.1"}}, 0.0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    advice.cache_file().parent.mkdir(parents=True)
    advice.cache_file().write_text(stale.to_json())
    assert advice.model() is None
    assert advice.model(allow_stale=True) is not None
    assert "stale (made for another frameworks)" in advice.stale_note()
    advice.forget()


def test_advise_sizes_a_strided_view_by_its_elements_not_its_span():
    """Every third float32 of 30 is 10 elements, 40 bytes, spanning 112: what a copy of it moves,
    and what its rows are predicted for, is the 40."""
    np = pytest.importorskip("numpy", reason="framework not installed: numpy")
    view = np.arange(30, dtype=np.float32)[::3]
    info = gpushare.inspect(view)
    assert (info.payload_bytes, info.nbytes) == (40, 112)
    header = str(gpushare.advise(view, "torch")).splitlines()[0]
    assert "40 B" in header and "112 B" not in header, header


def test_advise_recommends_the_fastest_sharing_path_and_converts_nothing(model, monkeypatch):
    """A sharing path is recommended over a copy the model predicts faster, and every row's figure is
    the model's. The model's fits are given here, not calibrated: a calibration on a loaded machine
    may be too uncertain to rank by, and advise then falls back to the rules' choice (tested with
    the live calibration in test_advice_kinds.py)."""
    def no_conversion(*args, **kwargs):
        raise AssertionError("advise must not build a route")

    monkeypatch.setattr(paths, "route", no_conversion)
    # The host's speed advise measures, pinned so that the expected prediction can be made here.
    monkeypatch.setattr(advice, "host_speed", lambda: GIVEN_HOST_SPEED)
    given = given_model()
    advice.save(given)
    try:
        x = torch.ones(1 << 18)
        a = gpushare.advise(x, "numpy")
        rows = {r["path"]: r for r in a.rows}
        assert rows["dlpack"]["verdict"] == "shared" and rows["host"]["verdict"] == "copied"
        assert a.recommended == "dlpack"
        assert "shares the source's memory" in a.why and "predicted fastest" in a.why, a.why
        for path in ("dlpack", "host", "copy"):
            expected = given.predict("share", path, "torch", "numpy", "cpu", x.numel() * 4, host_speed=GIVEN_HOST_SPEED)
            assert a.predicted(path) == pytest.approx(expected.seconds), path
        # A small array, where the model predicts both copies faster: sharing still wins.
        small = gpushare.advise(torch.ones(1024), "numpy")
        assert small.predicted("host") < small.predicted("dlpack")
        assert small.recommended == "dlpack", small.why
        text = repr(a)
        assert f"★ {a.recommended}" in text and "nothing converted" in text
    finally:
        advice.save(model)


def test_fixed_costs_follow_the_hosts_speed_when_predicted(model, monkeypatch):
    """The calibration measured the host's speed with every sweep: a prediction made while the host
    runs twice as slow multiplies a sharing path's time (all fixed cost) by 2 to the core's
    exponent for host memory (HOST_MEMORY_SPEED_EXPONENT: one for one, all of it host work; a
    device share's is HOST_SPEED_EXPONENT), and a copying path's fixed cost alone; its per-byte
    part stays."""
    fit = model.to_dict()["fits"]["share torch->numpy dlpack @cpu"]
    calibrated = fit["host_speed"]
    assert calibrated > 0
    nbytes = 1 << 20
    at = lambda path, speed: model.predict("share", path, "torch", "numpy", "cpu", nbytes, host_speed=speed)  # noqa: E731
    same, slow = at("dlpack", calibrated), at("dlpack", 2 * calibrated)
    assert same.host_slowdown == pytest.approx(1.0) and slow.host_slowdown == pytest.approx(2.0)
    assert fit["speed_exponent"] == _native.advice.HOST_MEMORY_SPEED_EXPONENT == 1.0
    assert 0 < _native.advice.HOST_SPEED_EXPONENT < 1
    assert slow.seconds == pytest.approx(2 * same.seconds)
    # Each fit is stated at the median speed of its own points (a copy's sweep holds more sizes:
    # calibrate measures it inside wide gaps too).
    host_fit = model.to_dict()["fits"]["share torch->numpy host @cpu"]
    copy_same, copy_slow = at("host", host_fit["host_speed"]), at("host", 2 * host_fit["host_speed"])
    added = copy_slow.seconds - copy_same.seconds
    fixed = host_fit["fixed"]
    # Exactly the fixed cost scales: none where the sweep's line has none (a noisy sweep on the 2-core
    # CI machine fitted the host route a fixed cost of 0), at most the whole prediction; the
    # per-byte part stays.
    assert added == pytest.approx(min(fixed, copy_same.seconds), rel=1e-6, abs=1e-12)
    if 0 < fixed < copy_same.seconds:
        assert 0 < added < copy_same.seconds
    # Without a speed now, the fixed cost is as calibrated.
    assert at("dlpack", None).host_slowdown is None
    assert at("dlpack", None).seconds == pytest.approx(same.seconds)


def test_advice_has_its_json_form_and_schema(model):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    a = gpushare.advise(np.ones(1024, dtype=np.float32), "torch")
    bundle = a._repr_mimebundle_()
    payload = bundle["application/vnd.gpushare+json"]
    assert payload["schema"] == "gpushare.advice/1"
    jsonschema.validate(payload, _native.json_schema("advice"))
    assert a.to_dict()["recommended"] == a.recommended
    assert "<table" in bundle["text/html"] and "data-path" in bundle["text/html"]


def test_without_a_model_the_rules_choice_stands_and_says_how_to_calibrate(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    x = torch.ones(16)
    a = gpushare.advise(x, "numpy")
    src, dst = gpushare.adapters.adapter_of(x), gpushare.adapters.framework("numpy")
    assert a.recommended == auto.path_for(src, dst)
    assert "calibrate" in a.why
    assert all(r["prediction"] is None for r in a.rows)
    advice.forget()


def test_a_faster_legacy_capsule_replaces_dlpack_only_for_a_writable_numpy_array_and_every_entry_point_agrees(
        tmp_path, monkeypatch):
    """numpy→torch on a CPU: the rules take dlpack. With a model in which the capsule path is
    faster, a writable array goes by capsule (nothing to lose: host memory orders nothing, and the
    array has no read-only flag to carry), in share, compare's auto row and advise alike; a
    read-only array stays on dlpack, since NumPy refuses it by legacy capsule, and still shares.
    (Replacements on a GPU, where a capsule carries no stream, are the core's tests in
    crates/core/src/paths_tests.rs.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    x = np.ones(1 << 16, dtype=np.float32)
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (64 << 10, 1 << 20, 16 << 20)
    m.add("share", "dlpack", "numpy", "torch", "cpu", [(n, 20e-6) for n in sizes], True)
    m.add("share", "capsule", "numpy", "torch", "cpu", [(n, 5e-6) for n in sizes], True)
    m.add("share", "copy", "numpy", "torch", "cpu", [(n, 1e-6) for n in sizes], False)
    advice.save(m)
    try:
        for _ in range(2):  # the second share takes the plan by its one lookup
            r = gpushare.share(x, "torch")
            assert r.path == "capsule" and r.verdict == "shared" and not r.unexpected
            assert r.value.data_ptr() == x.ctypes.data
            # Why auto left the rules' path is the share's last note, every time.
            assert "predicts capsule fastest" in r.notes[-1], r.notes
        table = gpushare.compare(x, "torch", repeat=2)
        assert [row.path for row in table.rows if row.auto] == ["capsule"]
        a = gpushare.advise(x, "torch")
        assert a.recommended == "capsule" and a.faster_copy == "copy"
        ro = np.arange(6, dtype=np.float32)
        ro.flags.writeable = False
        taken = gpushare.share(ro, "torch")
        assert taken.path == "dlpack" and taken.verdict == "shared" and not taken.unexpected
        assert [row.path for row in gpushare.compare(ro, "torch", repeat=1).rows if row.auto] == ["dlpack"]
        assert gpushare.advise(ro, "torch").recommended == "dlpack"
        # The writable array's plan did not leak into the read-only one's, nor back.
        assert gpushare.share(x, "torch").path == "capsule"
    finally:
        advice.cache_file().unlink()
        advice.forget()


def test_tables_show_the_prediction_beside_the_measurement_and_flag_a_miss(model, monkeypatch):
    """With a model, every compare row carries its prediction (in the JSON too) and how it was
    ordered; a row measured far off its prediction is flagged in the table."""
    monkeypatch.setattr(advice, "host_speed", lambda: GIVEN_HOST_SPEED)
    x = torch.ones(1 << 18)
    advice.save(given_model())
    try:
        c = gpushare.compare(x, "numpy", repeat=3)
        rows = c.to_dict()["rows"]
        host = next(r for r in rows if r["path"] == "host")
        assert host["predicted"]["seconds"] == pytest.approx(2e-6 + 1e-9 * x.numel() * 4)
        assert host["ordering"] == "nothing: host memory has no queue to order against"
        assert "predicted" in repr(c).splitlines()[1].split()  # a column, in the median's unit
        # A model that predicts 1 ns for the host route: the measurement misses it, and the row says so.
        fake = gpushare.CostModel(advice.machine_key(), 0.0)
        fake.add("share", "host", "torch", "numpy", "cpu", [(n, 1e-9) for n in (64 << 10, 1 << 20, 16 << 20)], False)
        advice.save(fake)
        c = gpushare.compare(x, "numpy", paths="host", repeat=3)
        row = c.to_dict()["rows"][0]
        assert row["misses_prediction"] is True
        assert "beyond the model's stated" in " ".join(repr(c).split())
        b = gpushare.bench("torch", "numpy", ["64KiB", "1MiB", "4MiB"], paths="host", repeat=3, progress=False)
        assert "predicted before it ran" in repr(b) and "⚠" in repr(b)
    finally:
        advice.save(model)


def test_a_path_that_shared_at_some_sizes_and_copied_at_others_is_never_replaced_by_a_copy(tmp_path, monkeypatch):
    """numpy→jax by DLPack shares an aligned array and copies one that is not (JAX wants 64 bytes,
    small NumPy arrays have 16): a calibration saw both. Its verdict is then unknown (None), not
    "copies", so a model in which gpushare's ``copy`` is predicted faster at some sizes leaves
    ``auto`` on DLPack at every size; a path that copied at every size is still replaced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (4096, 65536, 1 << 20, 16 << 20)

    def point(path: str, size: int, seconds: float, verdict: str) -> dict:
        return {"path": path, "size": size, "verdict": verdict, "timing": {"median": seconds}}

    points = [point("dlpack", n, 20e-6 + n * 1e-9, "copied" if n < 65536 else "shared") for n in sizes]
    points += [point("copy", n, 5e-6 + n * 0.5e-9, "copied") for n in sizes]
    assert advice._fit_points(m, "share", "numpy", "jax", "cpu", points) == 2
    fits = m.to_dict()["fits"]
    assert fits["share numpy->jax dlpack @cpu"]["shares"] is None
    assert fits["share numpy->jax copy @cpu"]["shares"] is False
    advice.save(m)
    try:
        src, dst = gpushare.adapters.framework("numpy"), gpushare.adapters.framework("jax")
        assert auto.size_breaks(src, dst) == ()
        assert {auto.choice(src, dst, nbytes=n)[0] for n in (1024, 1 << 18, 1 << 26)} == {"dlpack"}
    finally:
        advice.cache_file().unlink()
        advice.forget()


def test_a_fit_needs_three_sizes(cache):
    with pytest.raises(ValueError, match="at least three sizes"):
        gpushare.calibrate(["torch", "numpy"], sizes=("4KiB", "1MiB"))


def test_calibration_goes_one_size_at_a_time_across_the_pairs_and_can_be_recorded(cache):
    # A path's level moved by up to 2.5x between two moments half a minute apart on the 2x H200
    # (benchmarks/replay_advice.py): each pair is measured at several moments, one per size.
    record: list[dict] = []
    m = gpushare.calibrate(["torch", "numpy"], sizes=("4KiB", "64KiB", "1MiB"), repeat=1, device="cpu",
                           save=False, record=record)
    order = [(s["kind"], s["source"], s["target"], sorted({p["size"] for p in s["points"]})) for s in record]
    swept = [("share", src, dst, [size]) for size in (4096, 65536, 1 << 20) for src, dst in (("torch", "numpy"), ("numpy", "torch"))]
    assert order[:len(swept)] == swept
    assert [s["started"] for s in record] == sorted(s["started"] for s in record)
    timed = [p for s in record for p in s["points"] if p["verdict"] != "failed"]
    assert timed and all(p["timing"]["samples"] for p in timed)
    # Then each copying path in the middle of the gaps wider than 4x (CostModel.refinements): both
    # of these are 16x, and only paths that copy are measured there.
    refined = record[len(swept):]
    assert {p["size"] for s in refined for p in s["points"]} >= {16 << 10, 256 << 10}
    assert all(p["verdict"] != "shared" for s in refined for p in s["points"]), refined
    # Last, a second round of the paths that copy by design, in another dtype of the same bytes, at
    # the sizes from 1 MiB up: the fit then states how far the two rounds lay apart.
    second = [s for s in record if s["dtype"] == advice.SECOND_ROUND_DTYPE]
    assert second and record[-len(second):] == second
    assert {(s["source"], s["target"]) for s in second} == {("torch", "numpy"), ("numpy", "torch")}
    for s in second:
        assert {p["path"] for p in s["points"]} == {"host", "copy"}, s["points"]
        assert {p["size"] for p in s["points"]} == {1 << 20}
        assert all(p["verdict"] == "copied" for p in s["points"])
    # A path that copies is fitted range by range through its points; one that shares is not.
    fits = m.to_dict()["fits"]
    knots = [k["bytes"] for k in fits["share torch->numpy host @cpu"]["knots"]]
    assert knots[::len(knots) - 1] == [4096, 1 << 20] and {65536, 16 << 10, 256 << 10} <= set(knots), knots
    assert fits["share torch->numpy dlpack @cpu"]["shares"] is True
    assert not fits["share torch->numpy dlpack @cpu"].get("knots")


def test_the_magic_advises_without_converting(ip, model):
    ip.user_ns["adv_x"] = torch.ones(1024)
    result = ip.run_line_magic("share", "adv_x ->numpy --advise -o")
    assert isinstance(result, gpushare.Advice)
    assert "adv_x_numpy" not in ip.user_ns
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="--advise"):
        ip.run_cell_magic("share", "torch->numpy --advise", "y = torch.ones(2)")


def test_every_table_carries_the_prediction_beside_the_measured_time(model):
    """compare, bench and advise frames hold the predicted time, its stated error, whether it was
    extrapolated (and from which calibrated size) and how the handoff is ordered, as their JSON does."""
    pytest.importorskip("pandas", reason="pandas not installed")
    columns = {"predicted_s", "tolerance", "extrapolated", "extrapolated_from", "unpredictable", "misses_prediction"}
    x = torch.ones(1 << 18)
    given = given_model()
    advice.save(given)
    try:
        c = gpushare.compare(x, "numpy", repeat=3).to_pandas()
        assert columns | {"ordering", "median_s"} <= set(c.columns), list(c.columns)
        host = c[c["path"] == "host"].iloc[0]
        expected = given.predict("share", "host", "torch", "numpy", "cpu", 1 << 20)

        def stated_error(row) -> float:
            # The fit's own, widened by how far the correction for the host's speed now moved the
            # prediction from the one as calibrated (``expected``, asked with no host speed).
            return expected.tolerance + abs(row["predicted_s"] - expected.seconds) / row["predicted_s"]

        assert host["tolerance"] == pytest.approx(stated_error(host))
        assert host["extrapolated"] == False  # noqa: E712 (a numpy bool)
        assert host["predicted_s"] > 0 and not host["unpredictable"]
        # A bench past the largest size calibrated (8 MiB): extrapolated, from 8 MiB.
        b = gpushare.bench("torch", "numpy", sizes=["1MiB", "16MiB"], repeat=3, progress=False).to_pandas()
        assert columns | {"ordering", "median_s"} <= set(b.columns), list(b.columns)
        past = b[(b["path"] == "host") & (b["size"] == 16 << 20)].iloc[0]
        assert past["extrapolated"] == True and past["extrapolated_from"] == 8 << 20  # noqa: E712
        a = gpushare.advise(x, "numpy").to_pandas()
        assert columns | {"ordering", "ordered"} <= set(a.columns), list(a.columns)
        advised = a[a["path"] == "host"].iloc[0]
        assert advised["tolerance"] == pytest.approx(stated_error(advised))
    finally:
        advice.save(model)


def test_a_device_switch_is_priced_only_where_one_is_made_and_a_file_cannot_claim_an_absurd_one():
    """A handoff made while another GPU is current pays for making the array's device current and
    the other one again after; the calibration measures that apart (on two GPUs) and a prediction
    adds it when asked. Host memory never switches, and a cache file's switch is checked like its fits."""
    from gpushare.adapters import framework

    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 12, 1 << 20, 1 << 26)
    assert m.add("share", "capsule", "torch", "cupy", "cuda:0", [(n, 2.5e-6) for n in sizes], True)
    assert not m.set_device_switch("torch", "cuda:0", float("nan"))
    assert m.device_switch("torch", "cuda:0") is None
    assert m.set_device_switch("torch", "cuda:0", 2e-6)
    plain = m.predict("share", "capsule", "torch", "cupy", "cuda:0", 1 << 20, shares=True)
    switched = m.predict("share", "capsule", "torch", "cupy", "cuda:0", 1 << 20, shares=True, switches_device=True)
    assert switched.seconds == pytest.approx(plain.seconds + 2e-6) and switched.device_switch == 2e-6
    assert plain.device_switch == 0.0 and "device_switch" not in plain.to_dict()
    assert gpushare.CostModel.from_json(m.to_json()).device_switch("torch", "cuda:0") == 2e-6
    absurd = m.to_json().replace('"seconds":2e-6', '"seconds":5.0')
    assert absurd != m.to_json()
    with pytest.raises(ValueError, match="device switch"):
        gpushare.CostModel.from_json(absurd)
    # Host memory has no current device to switch; NumPy has none at all.
    assert not advice.switches_device(framework("torch"), "share", "dlpack", "cpu")
    assert not advice.switches_device(framework("numpy"), "share", "dlpack", "cuda:0")
    assert advice.measure_device_switch(framework("numpy"), "cpu") is None
