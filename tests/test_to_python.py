"""Results reach Python as objects built from the Rust structs (crates/python/src/binding/forms.rs):
no JSON text crosses the seam, and the objects are the ones the JSON form reads as."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpushare


@pytest.fixture
def share_result():
    return gpushare.share(np.arange(8, dtype=np.float32), "numpy", path="dlpack")


def test_dicts_and_bundles_are_built_without_json_text(share_result, monkeypatch):
    def no_loads(*args, **kwargs):
        raise AssertionError("json.loads called for a result")

    expected = {
        "share": json.loads(share_result.to_json()),
        "tensor": json.loads(share_result.source.to_json()),
    }
    monkeypatch.setattr(json, "loads", no_loads)
    for kind, obj in (("share", share_result), ("tensor", share_result.source)):
        bundle = obj._repr_mimebundle_()
        assert bundle["application/vnd.gpushare+json"] == expected[kind], kind
        data = obj.to_dict()
        assert data == {**expected[kind]["data"], "schema": expected[kind]["schema"]}, kind
        # The fields in the order the JSON form writes them, the schema last.
        assert list(data) == [*expected[kind]["data"], "schema"], kind
    assert share_result.timing.to_dict()["samples"] == list(share_result.timing.samples)


def test_numbers_keep_their_python_types(share_result):
    data = share_result.to_dict()
    assert type(data["source"]["nbytes"]) is int and data["source"]["nbytes"] == 32
    assert type(data["timing"]["median"]) is float
    assert data["source"]["shape"] == [8] and isinstance(data["source"]["contiguous"], bool)


def test_lab_results_are_built_without_json_text(monkeypatch):
    c = gpushare.compare(np.arange(64, dtype=np.float32), "numpy", paths="dlpack,copy", repeat=2)
    b = gpushare.bench("numpy", "numpy", sizes=[256], paths="dlpack,copy", repeat=2, progress=False)
    expected = {c: json.loads(c.to_json()), b: json.loads(b.to_json())}

    def no_loads(*args, **kwargs):
        raise AssertionError("json.loads called for a result")

    monkeypatch.setattr(json, "loads", no_loads)
    for obj, envelope in expected.items():
        assert obj._repr_mimebundle_()["application/vnd.gpushare+json"] == envelope
        assert obj.to_dict() == {**envelope["data"], "schema": envelope["schema"]}
    assert [r.path for r in c.rows] == ["dlpack", "copy"] and c["copy"].bytes_moved == 256
    assert [(p.size, p.path) for p in b.points] == [(256, "dlpack"), (256, "copy")]


def test_a_dict_reads_as_the_json_form_reads():
    # A float JSON cannot write (no samples: a NaN median) is None in the dict as in the JSON text,
    # and the keys keep the order the JSON form writes them in.
    t = gpushare.Timing([])
    assert t.median != t.median  # the attribute is the float itself
    data = t.to_dict()
    assert data["median"] is None and data["min"] is None
    assert list(data)[:3] == ["samples", "loops", "median"]
