"""The cache files (the cost model, the machine's ceilings) are data to check, not to trust.

A model file decides no verdict (the rules say which paths share), every number in it is checked,
and a file that fails is named in one GpushareWarning and treated as absent. Only regular files of a
bounded size are read and the open never blocks (a FIFO, a link to /dev/zero, a directory). A model
that cannot be saved says so and leaves no temporary file behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import pytest

import gpushare
from gpushare import advice, cache_files, machine_ceilings
from gpushare.exceptions import GpushareWarning

np = pytest.importorskip("numpy", reason="numpy not installed")
torch = pytest.importorskip("torch", reason="torch not installed")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")

SIZES = (64 << 10, 1 << 20, 16 << 20)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "gpushare").mkdir()
    advice.forget()
    yield tmp_path / "gpushare"
    advice.forget()


def model_text(**fits_changes) -> str:
    """A model of this machine for numpy→torch on the CPU (DLPack 20 µs, shares; gpushare's copy
    1 µs, copies), as its cache file holds it, with ``fits_changes`` (path → fields) applied."""
    m = gpushare.CostModel(advice.machine_key(), time.time())
    m.add("share", "dlpack", "numpy", "torch", "cpu", [(n, 20e-6) for n in SIZES], True)
    m.add("share", "copy", "numpy", "torch", "cpu", [(n, 1e-6) for n in SIZES], False)
    data = json.loads(m.to_json())
    for path, changes in fits_changes.items():
        data["fits"][f"share numpy->torch {path} @cpu"].update(changes)
    return json.dumps(data)


def gpushare_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, GpushareWarning)]


def test_a_model_file_that_says_copy_shares_changes_no_verdict_and_is_named_once(cache):
    (cache / "model.json").write_text(model_text(copy={"shares": True}))
    x = np.ones(1 << 16, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            r = gpushare.share(x, "torch")
            assert r.path == "dlpack" and r.verdict == "shared", (r.path, r.verdict)
        assert gpushare.advise(x, "torch").recommended == "dlpack"
    said = gpushare_warnings(caught)
    assert len(said) == 1, said
    assert str(cache / "model.json") in said[0] and "copy copies by design" in said[0]
    assert advice.model() is None


def test_a_model_file_that_says_dlpack_copies_does_not_make_auto_copy(cache):
    (cache / "model.json").write_text(model_text(dlpack={"shares": False}))
    x = np.ones(1 << 16, dtype=np.float32)
    r = gpushare.share(x, "torch")
    assert r.verdict == "shared" and r.path != "copy"
    assert r.value.data_ptr() == x.ctypes.data
    assert gpushare.advise(x, "torch").recommended != "copy"
    # THE auto, as every entry point asks it (the predictor, a sweep's auto row).
    numpy, torch_ = gpushare.adapters.framework("numpy"), gpushare.adapters.framework("torch")
    for nbytes in (None, x.nbytes, 1 << 26):
        assert gpushare.auto.choice(numpy, torch_, nbytes=nbytes)[0] in ("dlpack", "capsule", "cai")


@pytest.mark.parametrize("changes, words", [
    ({"fixed": -0.29}, "fixed cost"),
    ({"per_byte": -1e-9}, "per byte"),
    ({"speed_exponent": 400.0, "host_speed": 1e-6}, "exponent"),
    ({"host_speed": 0.0}, "host speed"),
])
def test_a_model_file_with_a_number_no_calibration_makes_is_ignored_and_json_stays_valid(cache, changes, words):
    (cache / "model.json").write_text(model_text(dlpack=changes))
    x = np.ones(1 << 16, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = gpushare.advise(x, "torch")
        table = gpushare.compare(x, "torch", repeat=1)
    said = gpushare_warnings(caught)
    assert len(said) == 1 and words in said[0] and str(cache / "model.json") in said[0], said
    assert all(row["prediction"] is None for row in a.rows)  # as on an uncalibrated machine
    schema = _native_schema("comparison")
    payload = table.to_dict()
    envelope = {"schema": payload.pop("schema"), "data": payload}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(envelope))
    assert not errors, errors[:3]


def _native_schema(kind: str) -> dict:
    return gpushare._native.json_schema(kind)


@pytest.mark.parametrize("kind", ["directory", "dev_zero", "huge", "not_utf8"])
def test_a_model_file_that_is_not_a_small_regular_file_is_named_and_ignored(cache, kind):
    path = cache / "model.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with open(path, "wb") as f:  # sparse: takes no disk
            f.truncate(cache_files.MAX_BYTES + 1)
    else:
        path.write_bytes(b"\xff\xfe{}")
    x = np.ones(16, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert gpushare.share(x, "torch").verdict == "shared"
        assert gpushare.advise(x, "torch").recommended == "dlpack"
        gpushare.compare(x, "torch", repeat=1)
    said = gpushare_warnings(caught)
    assert len(said) == 1 and str(path) in said[0], said


def _run(code: str, cache_root, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_root), "PYTHONWARNINGS": "always"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name, code", [
    ("model.json", "import gpushare, numpy as np; print(gpushare.advise(np.ones(4), 'numpy').recommended)"),
    ("ceilings.json", "import gpushare; print(len(repr(gpushare.ceilings(gpu=False))) > 0)"),
])
def test_a_fifo_in_place_of_a_cache_file_does_not_block(tmp_path, name, code):
    (tmp_path / "gpushare").mkdir()
    os.mkfifo(tmp_path / "gpushare" / name)
    # Without a writer, a plain open of a FIFO waits forever: the limit only ends a hang.
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "a FIFO, not a regular file" in done.stderr


def test_a_far_future_creation_time_is_shown_as_unknown(cache):
    m = gpushare.CostModel(advice.machine_key(), 1e20)
    m.add("share", "dlpack", "numpy", "torch", "cpu", [(n, 20e-6) for n in SIZES], True)
    (cache / "model.json").write_text(m.to_json())
    line = advice.summary()
    assert "1 paths fitted, made an unknown time" in line
    assert "made an unknown time" in gpushare.gpuinfo().cost_model


@pytest.mark.parametrize("resources", [{}, None, {"host_memory": None}, {"host_memory": {"points": [[1, "fast"]]}}])
def test_ceilings_with_empty_or_null_resources_are_measured_again(cache, resources):
    data = {"key": machine_ceilings.machine_key(), "measured_at": "x", "resources": resources}
    (cache / "ceilings.json").write_text(json.dumps(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        limits = gpushare.ceilings(gpu=False)
    assert not limits.cached and limits.ceiling("host_memory", 1 << 20) > 0
    assert len(gpushare_warnings(caught)) == 1
    # A Ceilings made from such figures by hand reads as nothing measured.
    made = gpushare.Ceilings(data)
    assert "no resource measured" in repr(made) or "not measured" in repr(made)
    made._repr_html_()
    assert made.ceiling("host_memory", 1 << 20) is None


def test_a_model_that_cannot_be_saved_says_so_and_leaves_nothing_behind(cache):
    m = gpushare.CostModel(advice.machine_key(), time.time())
    (cache / "model.json").mkdir()
    with pytest.warns(GpushareWarning, match="nothing was saved"):
        assert advice.save(m) is False
    assert sorted(p.name for p in cache.iterdir()) == ["model.json"]
    # The model still serves this process.
    assert advice.auto_model() is m


def test_a_full_disk_leaves_no_temporary_model_behind(tmp_path):
    """A write that fails half-way (the file-size limit stands in for a full disk: the same short
    write, as root too): nothing is left beside the cache, and the warning says nothing was saved."""
    (tmp_path / "gpushare").mkdir()
    code = (
        "import resource, signal, warnings\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
        "import gpushare, time\n"
        "from gpushare import advice\n"
        "m = gpushare.CostModel(advice.machine_key(), time.time())\n"
        "m.add('share', 'dlpack', 'numpy', 'torch', 'cpu', [(n, 2e-5) for n in (65536, 1 << 20, 1 << 24)], True)\n"
        "print(advice.save(m))\n"
    )
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert "nothing was saved" in done.stderr
    assert os.listdir(tmp_path / "gpushare") == []


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: a directory's permissions do not stop root")
def test_calibrate_into_a_read_only_cache_directory_says_nothing_was_saved(cache):
    cache.chmod(0o500)
    try:
        with pytest.warns(GpushareWarning, match="nothing was saved"):
            gpushare.calibrate(["numpy", "torch"], sizes=("4KiB", "8KiB", "16KiB"), repeat=1, device="cpu")
        assert not (cache / "model.json").exists()
    finally:
        cache.chmod(0o700)


def test_calibrate_where_the_cache_directory_cannot_be_made_says_nothing_was_saved(tmp_path, monkeypatch):
    """The cache's parent is a file (a read-only cache directory as root sees one: root writes
    through permissions): calibrate still returns the model, and says it was not saved."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    advice.forget()
    try:
        with pytest.warns(GpushareWarning, match="could not save the cost model .*nothing was saved"):
            m = gpushare.calibrate(["numpy", "torch"], sizes=("4KiB", "8KiB", "16KiB"), repeat=1, device="cpu")
        assert len(m) > 0
        assert sorted(os.listdir(tmp_path)) == ["not-a-directory"]
    finally:
        advice.forget()
