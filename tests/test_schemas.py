"""The published JSON Schemas (python/gpushare/schemas/, generated from the Rust types) validate
what gpushare really produces, for every result kind; ``to_dict()`` keeps the schema version; and
``to_pandas()`` frames are tidy: identifying columns first, counts as integers."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources

import pytest

import gpushare
from gpushare import _native

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (pip install jsonschema)")
np = pytest.importorskip("numpy", reason="numpy not installed")
torch = pytest.importorskip("torch", reason="torch not installed")
HAVE_PANDAS = importlib.util.find_spec("pandas") is not None

KINDS = ("tensor", "share", "shares", "comparison", "benchmark")


def schema(kind: str) -> dict:
    """The file shipped in the package, as a user would load it."""
    return json.loads(resources.files("gpushare").joinpath("schemas", f"{kind}.schema.json").read_text())


def validate(kind: str, payload: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema(kind), format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(payload), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def from_dict(d: dict | list, kind: str) -> dict:
    """A to_dict() back in its envelope: the `schema` key it kept, and the rest as `data`."""
    if isinstance(d, list):
        return {"schema": f"gpushare.{kind}/1", "data": [from_dict(x, "share")["data"] for x in d]}
    d = dict(d)
    return {"schema": d.pop("schema"), "data": d}


@pytest.fixture(scope="module")
def results():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    shared = gpushare.share(x, "numpy", repeat=3, number=2)
    copied = gpushare.share(np.arange(6, dtype=np.float64), "torch", path="copy", repeat=3, number=2)
    return {
        "tensor": gpushare.inspect(x),
        "share": shared,
        "copied": copied,
        "shares": gpushare.ShareTable([shared, copied]),
        "comparison": gpushare.compare(x, "numpy", repeat=3),
        "benchmark": gpushare.bench("torch", "numpy", sizes=["4KiB", "64KiB"], repeat=3, progress=False),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_shipped_schema_is_the_one_the_rust_types_generate(kind):
    assert schema(kind) == _native.json_schema(kind)
    assert schema(kind)["properties"]["schema"]["const"] == f"gpushare.{kind}/1"
    jsonschema.Draft202012Validator.check_schema(schema(kind))


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match='unknown result kind "bogus".*tensor, share'):
        _native.json_schema("bogus")


@pytest.mark.parametrize("kind", KINDS)
def test_real_results_validate_in_json_and_dict_form(results, kind):
    r = results[kind]
    payload = json.loads(r.to_json())
    assert payload["schema"] == f"gpushare.{kind}/1"
    validate(kind, payload)
    # The notebook's JSON output is the same envelope.
    if hasattr(r, "_repr_mimebundle_"):
        validate(kind, r._repr_mimebundle_()["application/vnd.gpushare+json"])
    d = r.to_dict()
    if isinstance(d, dict):
        assert d["schema"] == f"gpushare.{kind}/1", "to_dict() keeps the schema version"
    else:
        assert all(x["schema"] == "gpushare.share/1" for x in d)
    validate(kind, from_dict(d, kind))


def test_a_copy_with_a_reason_validates(results):
    r = results["copied"]
    assert r.verdict == "copied" and r.reason
    validate("share", json.loads(r.to_json()))


def test_the_schema_rejects_what_gpushare_never_writes(results):
    payload = json.loads(results["share"].to_json())
    payload["data"]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(payload, schema("share"))
    payload = json.loads(results["share"].to_json())
    del payload["data"]["timing"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(payload, schema("share"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema": "gpushare.share/2", "data": payload["data"]}, schema("share"))


@pytest.mark.skipif(not HAVE_PANDAS, reason="pandas not installed")
def test_share_frames_are_tidy(results):
    df = results["shares"].to_pandas()
    assert len(df) == 2
    assert list(df.columns[:5]) == ["name", "source_framework", "target_framework", "path", "verdict"]
    assert list(df["source_framework"]) == ["torch", "numpy"] and list(df["verdict"]) == ["shared", "copied"]
    for column in ("nbytes", "source_data_ptr", "target_data_ptr", "repeats", "loops"):
        assert str(df[column].dtype) == "int64", (column, df[column].dtype)
    assert list(df["repeats"]) == [3, 3] and list(df["loops"]) == [2, 2]
    assert df.loc[0, "source_data_ptr"] == results["share"].source.data_ptr
    one = results["share"].to_pandas()
    assert list(one.columns) == list(df.columns) and one.loc[0, "verdict"] == "shared"


@pytest.mark.skipif(not HAVE_PANDAS, reason="pandas not installed")
def test_lab_frames_carry_identifying_columns_and_integer_counts(results):
    b = results["benchmark"].to_pandas()
    assert list(b.columns[:7]) == ["source_framework", "target_framework", "dtype", "device", "size", "path", "verdict"]
    assert set(b["source_framework"]) == {"torch"} and set(b["target_framework"]) == {"numpy"}
    assert set(b["dtype"]) == {"float32"} and set(b["device"]) == {"cpu"}
    assert sorted(set(b["size"])) == [4096, 65536]
    assert str(b["size"].dtype) == "int64" and str(b["bytes_moved"].dtype) == "int64"
    # Failed paths have no repeats: a nullable integer, never a float.
    assert str(b["repeats"].dtype) == "Int64" and str(b["loops"].dtype) == "Int64"
    worked = b[b["verdict"] != "failed"]
    assert (worked["repeats"] == 3).all()

    c = results["comparison"].to_pandas()
    assert list(c.columns[:7]) == ["source_framework", "target_framework", "dtype", "shape", "device", "nbytes", "path"]
    assert set(c["shape"]) == {(3, 4)} and set(c["nbytes"]) == {48}
    assert str(c["repeats"].dtype) == "Int64"


# -- process results (python/gpushare/processes/__init__.py; types in crates/core/src/report/process.rs) --------------

#: Each result of the process paths, and the kind (and version) of its JSON form: one handoff to a
#: worker is a share, a comparison or a sweep of the process paths a comparison or a sweep.
PROCESS_RESULTS = {"process-share": ("share", 1), "process-comparison": ("comparison", 1),
                   "process-bench": ("benchmark", 1)}
HAVE_PROC_MAPS = __import__("os").path.exists("/proc/self/maps")


@pytest.fixture(scope="module")
def process_results():
    if not HAVE_PROC_MAPS:
        pytest.skip("no /proc/self/maps (not Linux): the process paths cannot judge identities")
    with gpushare.Worker(device="cpu", timeout=60) as w:
        share = w.share(torch.arange(6, dtype=torch.float32), path="torch_mp", repeat=2)
        share_json = share.to_json()
        share.release()
        comparison = gpushare.compare(torch.ones(3, 4), "torch", across=w, repeat=2)
        bench = gpushare.bench("torch", "torch", sizes=["4KiB", "64KiB"], paths="shm,gloo", repeat=2,
                               across=w, device="cpu")
        yield {"process-share": share, "process-share-json": share_json, "process-comparison": comparison,
               "process-bench": bench}


def test_the_process_results_have_no_kinds_of_their_own():
    """A handoff to a worker is a share with its worker part; the share's schema describes it."""
    assert "worker" in schema("share")["$defs"]["ShareReport"]["properties"]
    assert "worker" not in schema("share")["$defs"]["ShareReport"]["required"]
    for gone in ("process-share", "process-comparison", "process-bench"):
        with pytest.raises(ValueError, match="unknown result kind"):
            _native.json_schema(gone)


@pytest.mark.parametrize("result", PROCESS_RESULTS)
def test_real_process_results_validate_in_json_and_dict_form(process_results, result):
    kind, version = PROCESS_RESULTS[result]
    r = process_results[result]
    payload = json.loads(process_results.get(f"{result}-json") or r.to_json())
    assert payload["schema"] == f"gpushare.{kind}/{version}"
    validate(kind, payload)
    if result != "process-share":  # the share's worker array is released: its bundle was taken before
        validate(kind, r._repr_mimebundle_()["application/vnd.gpushare+json"])
    d = r.to_dict()
    assert d["schema"] == f"gpushare.{kind}/{version}", "to_dict() keeps the schema version"
    validate(kind, from_dict(d, kind))


def test_the_process_rows_are_the_measured_ones(process_results):
    """What the schema validated above is the real outcome, not an empty shell."""
    share = json.loads(process_results["process-share-json"])["data"]
    assert share["path"] == "torch_mp" and share["verdict"] == "shared"
    assert share["source"]["framework"] == share["target"]["framework"] == "torch"
    assert share["target"]["shape"] == [6] and share["target"]["device"] == "cpu"
    sides = share["worker"]
    assert sides["source"]["identity"]["kind"] == "host" and sides["target"]["identity"]["kind"] == "host"
    assert sides["target"]["pid"] != sides["source"]["pid"] and len(share["timing"]["samples"]) == 2
    rows = {r["path"]: r for r in process_results["process-comparison"].to_dict()["rows"]}
    assert rows["shm"]["worker"]["segment"]["name"] and rows["gloo"]["verdict"] == "copied"
    assert rows["ipc"]["verdict"] == "failed" and rows["ipc"]["timing"] is None
    points = process_results["process-bench"].to_dict()["points"]
    assert [(p["size"], p["path"]) for p in points] == [(4096, "shm"), (4096, "gloo"), (65536, "shm"), (65536, "gloo")]


@pytest.mark.skipif(not HAVE_PANDAS, reason="pandas not installed")
def test_process_frames_put_the_identifying_columns_first(process_results):
    frame = process_results["process-comparison"].to_pandas()
    ids = ["source_framework", "target_framework", "dtype", "shape", "device", "nbytes"]
    assert list(frame.columns[: len(ids)]) == ids
    assert list(frame["path"]) == [r["path"] for r in process_results["process-comparison"].rows]
    assert set(frame["target_framework"]) == {"torch"} and set(frame["shape"]) == {(3, 4)}
    assert set(frame["nbytes"]) == {48} and str(frame["nbytes"].dtype) == "int64"
    bench = process_results["process-bench"].to_pandas()
    assert list(bench.columns[:6]) == ["source_framework", "target_framework", "dtype", "device", "size", "path"]
    assert list(bench["size"]) == [4096, 4096, 65536, 65536]


def test_a_process_dict_the_schema_does_not_describe_is_refused(process_results):
    comparison = process_results["process-comparison"].to_dict()
    comparison.pop("schema")
    good = next(r for r in comparison["rows"] if r["path"] == "ipc")  # refused on the CPU: no timing
    assert good["applicable"] is False and good["worker"]["target"] is None
    validate("comparison", {"schema": "gpushare.comparison/1", "data": {**comparison, "rows": [good]}})
    # The schema refuses what the Rust types refuse (crates/core/src/report/process.rs tests them),
    # for anyone validating without gpushare.
    for bad in ({**good, "worker": {**good["worker"], "colour": "blue"}}, {**good, "colour": "blue"},
                {**good, "verdict": "maybe"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"schema": "gpushare.comparison/1", "data": {**comparison, "rows": [bad]}},
                                schema("comparison"))
    share = json.loads(process_results["process-share-json"])
    share["data"]["worker"]["colour"] = "blue"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(share, schema("share"))
    # A sweep's point (flattened in Rust) with a key the schema does not know, to a worker too.
    point = {**good, "size": 4096, "surprise": 1}
    bench = {"source_framework": "numpy", "target_framework": "numpy", "dtype": "float32", "device": "cpu",
             "sizes": [4096], "paths": ["ipc"], "points": [point], "interrupted": False, "repeat": 1, "warmup": 5}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema": "gpushare.benchmark/1", "data": bench}, schema("benchmark"))
    point.pop("surprise")
    jsonschema.validate({"schema": "gpushare.benchmark/1", "data": bench}, schema("benchmark"))


@pytest.mark.skipif(not HAVE_PANDAS, reason="pandas not installed")
def test_process_frames_are_tidy(process_results):
    c = process_results["process-comparison"].to_pandas()
    assert list(c.columns[:8]) == ["source_framework", "target_framework", "dtype", "shape", "device", "nbytes",
                                   "path", "verdict"]
    assert len(c) == len(process_results["process-comparison"].rows)
    assert set(c["source_framework"]) == {"torch"} and set(c["target_framework"]) == {"torch"}
    assert set(c["dtype"]) == {"float32"} and set(c["shape"]) == {(3, 4)} and set(c["device"]) == {"cpu"}
    assert set(c["nbytes"]) == {48}
    for column in ("nbytes", "bytes_moved", "bytes_per_handoff", "source_pid"):
        assert str(c[column].dtype) == "int64", (column, c[column].dtype)
    # Failed paths have no timing and no worker: nullable integers, never floats.
    assert str(c["repeats"].dtype) == "Int64" and str(c["target_pid"].dtype) == "Int64"
    for column in ("first_call_s", "median_s", "min_s", "bandwidth_Bps"):
        assert str(c[column].dtype) == "float64", (column, c[column].dtype)
    by_path = c.set_index("path")
    assert by_path.loc["torch_mp", "verdict"] == "shared" and by_path.loc["torch_mp", "repeats"] == 2
    # ipc on host memory cannot run here: the tables' word, not "failed"; no count.
    assert by_path.loc["ipc", "verdict"] == ("failed" if by_path.loc["ipc", "applicable"] else "not applicable")
    assert by_path.loc["ipc", "repeats"] is __import__("pandas").NA
    # gloo moves the bytes on every handoff: a bandwidth; a shared mapping moves none: no bandwidth.
    assert by_path.loc["gloo", "bandwidth_Bps"] > 0 and by_path.loc["torch_mp", "bandwidth_Bps"] != by_path.loc["torch_mp", "bandwidth_Bps"]

    b = process_results["process-bench"].to_pandas()
    assert list(b.columns[:6]) == ["source_framework", "target_framework", "dtype", "device", "size", "path"]
    assert len(b) == 4 and sorted(set(b["size"])) == [4096, 65536]
    assert list(b["path"]) == ["shm", "gloo", "shm", "gloo"]
    assert str(b["size"].dtype) == "int64" and str(b["bytes_moved"].dtype) == "int64"
    assert list(b["bytes_moved"]) == [4096, 4096, 65536, 65536]
    assert (b["repeats"] == 2).all() and (b["median_s"] > 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_dict_forms_are_what_json_loads_gives(results, kind):
    """The mime bundle's and to_dict()'s objects are built from the Rust values directly, not by
    json.loads of the text: they must still be exactly what json.loads of the JSON gives."""
    r = results[kind]
    payload = json.loads(r.to_json())
    if hasattr(r, "_repr_mimebundle_"):
        assert r._repr_mimebundle_()["application/vnd.gpushare+json"] == payload
    d = r.to_dict()
    if isinstance(d, dict) and "data" not in d:
        assert d == {**payload["data"], "schema": payload["schema"]}


def _readme_columns(lead: str) -> list[str]:
    """The columns the README lists after ``lead`` (a bullet of its to_pandas() section)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    found = re.search(re.escape(lead) + r"[^`]*`([^`]*)`", readme)
    assert found, lead
    return [c.strip() for c in found.group(1).split(",")]


@pytest.mark.skipif(not HAVE_PANDAS, reason="pandas not installed")
def test_the_readme_names_the_columns_every_frame_has(process_results):
    """One vocabulary: a comparison's and a sweep's frame, within a process or to a worker, have the
    columns the README lists, in its order; a row to a worker adds its worker's columns after them."""
    comparison = _readme_columns("- `Comparison` (one row per path):")
    bench = _readme_columns("- `Benchmark` (one row per size × path):")
    worker = _readme_columns("- A row to a worker process")
    here = gpushare.compare(torch.ones(4), "numpy", repeat=3)
    assert list(here.to_pandas().columns) == comparison
    swept = gpushare.bench("torch", "numpy", sizes=["4KiB"], paths="dlpack", repeat=2)
    assert list(swept.to_pandas().columns) == bench + comparison[comparison.index("path"):]
    assert list(process_results["process-comparison"].to_pandas().columns) == comparison + worker
    assert list(process_results["process-bench"].to_pandas().columns) == bench + comparison[comparison.index("path"):] + worker
    share = _readme_columns("- `ShareResult`, `ShareTable`:")
    assert list(process_results["process-share"].to_pandas().columns) == share + worker
