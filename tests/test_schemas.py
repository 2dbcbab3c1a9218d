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
