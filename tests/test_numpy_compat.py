"""NumPy from 1.26 to 2.x, as source and as target, with nothing but NumPy installed.

NumPy's ``__dlpack__`` takes ``max_version`` (and so exports versioned capsules, READ_ONLY flag
included) only from 2.1 on; before, it exports legacy capsules and refuses read-only arrays there.
These tests run in the main environment (NumPy 2.x, next to every framework) and in `make test`'s
.venv-oldnumpy (Python 3.9, NumPy 1.26, no other framework), and assert what each version must do.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpushare
from gpushare import adapters
from gpushare.exceptions import ConversionError

NUMPY = tuple(int(p) for p in np.__version__.split(".")[:2])
VERSIONED = NUMPY >= (2, 1)  # NumPy's __dlpack__ takes max_version from 2.1 on


def read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def test_numpy_exports_the_capsule_generation_its_version_has():
    a = np.arange(6.0)
    info = gpushare.inspect(a)
    assert info.dlpack_version == ((1, info.dlpack_version[1]) if VERSIONED else None)
    assert adapters.exports_versioned(a) is VERSIONED
    # The second inspection takes the remembered route and reads the same facts.
    again = gpushare.inspect(a)
    assert (again.data_ptr, again.shape, again.strides) == (a.ctypes.data, [6], [1])
    assert np.from_dlpack(a)[3] == 3.0  # inspection consumed nothing


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12.0).reshape(3, 4),
        lambda: np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2],  # strided view
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4).T,
        lambda: np.zeros((0, 3), dtype=np.complex64),
        lambda: np.array(2.5),
        lambda: np.ones(5, dtype=bool),
    ],
    ids=["c-order", "strided", "transposed", "zero-size", "0-d", "bool"],
)
@pytest.mark.parametrize("ro", [False, True], ids=["writable", "read-only"])
def test_inspect_reads_layout_and_read_only_flag(make, ro):
    a = make()
    if ro:
        read_only(a)
    info = gpushare.inspect(a)
    assert info.readonly is ro
    assert info.framework == "numpy" and info.device == "cpu"
    assert info.dtype == str(a.dtype)
    assert info.shape == list(a.shape)
    assert info.strides == [s // a.itemsize for s in a.strides] or a.size <= 1
    if a.size:
        assert info.data_ptr + info.byte_offset == a.ctypes.data
    assert a.flags.writeable is not ro  # inspection changed nothing


def test_read_only_flag_is_taken_from_the_array_not_guessed():
    """A writable view of a read-only array's memory is writable, a read-only view of a writable
    array is read-only: the flag is the array's own, whichever capsule carried the layout."""
    base = np.arange(8.0)
    view = base[2:]
    view.flags.writeable = False
    assert gpushare.inspect(view).readonly is True
    assert gpushare.inspect(base).readonly is False
    frozen = read_only(np.arange(8.0))
    assert gpushare.inspect(frozen[::2]).readonly is True


def test_numpy_to_numpy_shares_memory():
    a = np.arange(10.0)
    r = gpushare.share(a, "numpy", repeat=3)
    assert r.verdict == "shared" and not r.unexpected
    assert np.shares_memory(r.value, a)
    a[0] = 42.0
    assert r.value[0] == 42.0


def test_read_only_numpy_to_numpy_fails_or_shares_read_only_as_predicted():
    a = read_only(np.arange(4.0))
    if VERSIONED:
        r = gpushare.share(a, "numpy")
        assert r.verdict == "shared" and not r.unexpected
        assert r.value.flags.writeable is False and np.shares_memory(r.value, a)
    else:
        # NumPy < 2.1 asks for a legacy capsule, which cannot say read-only: NumPy refuses, and
        # gpushare said so before calling it.
        with pytest.raises(ConversionError) as e:
            gpushare.share(a, "numpy")
        assert "readonly" in e.value.framework_error.lower()
        assert e.value.predicted is not None and e.value.predicted[0] == "failed"
        assert "UNEXPECTED" not in str(e.value)


@pytest.mark.parametrize("ro", [False, True], ids=["writable", "read-only"])
def test_copy_path_reads_any_numpy_array(ro):
    """The copy path reads the source through its capsule into a SharedBuffer: a read-only array
    must work on every NumPy, since gpushare, not NumPy, is then the producer."""
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    if ro:
        read_only(a)
    r = gpushare.share(a, "numpy", path="copy")
    assert r.verdict == "copied" and not r.unexpected
    assert np.array_equal(r.value, a) and not np.shares_memory(r.value, a)
    assert r.source.readonly is ro


def test_shared_buffer_into_numpy_and_back():
    buf = gpushare.SharedBuffer((3, 4), "float32", "cpu")
    view = buf.to("numpy")
    assert isinstance(view, np.ndarray) and view.shape == (3, 4) and view.dtype == np.float32
    # NumPy before 2.1 imports every DLPack tensor read-only (a legacy capsule cannot say it is
    # writable); gpushare reports the flag NumPy set.
    assert view.flags.writeable is VERSIONED
    assert gpushare.inspect(view).readonly is not VERSIONED
    assert buf.to("numpy").ctypes.data == view.ctypes.data  # the same memory, through a second export
    r = gpushare.share(view, "numpy", path="shared")
    assert r.verdict == "shared" and not r.unexpected and np.shares_memory(r.value, view)
    assert r.source.readonly is not VERSIONED


def test_gpuinfo_reports_numpy_export_generation():
    info = gpushare.gpuinfo().frameworks["numpy"]  # NumPy is imported, so it is described
    assert info.dlpack_export == ("versioned" if VERSIONED else "legacy")


def test_magic_shares_numpy(ip):
    ip.user_ns["a"] = np.arange(5.0)
    ip.run_line_magic("share", "a ->numpy -q")
    assert np.shares_memory(ip.user_ns["a_numpy"], ip.user_ns["a"])


# -- the fallback itself, on producers made to order ------------------------------------------------


class _Legacy:
    """A producer whose __dlpack__ predates max_version, as NumPy 1.26's and 2.0's do."""

    calls: list

    def __init__(self):
        self.calls = []
        self.inner = np.arange(3.0)

    def __dlpack__(self, *, stream=None):
        self.calls.append("legacy")
        return self.inner.__dlpack__()


class _Broken:
    """A producer that takes max_version and raises a TypeError of its own."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        raise TypeError("unsupported dtype for export")


def test_fallback_is_tried_once_per_type_and_remembered():
    first, second = _Legacy(), _Legacy()
    adapters.versioned_capsule(first)
    assert first.calls == ["legacy"]
    assert adapters.exports_versioned(second) is False
    # No second TypeError: the remembered type goes straight to the legacy export.
    real = _Legacy.__dlpack__
    seen = []

    def strict(self, **kwargs):
        seen.append(kwargs)
        return real(self, **kwargs)

    _Legacy.__dlpack__ = strict
    try:
        adapters.versioned_capsule(second)
    finally:
        _Legacy.__dlpack__ = real
    assert seen == [{}]


def test_an_unrelated_type_error_is_not_taken_for_an_old_producer():
    with pytest.raises(TypeError, match="unsupported dtype"):
        adapters.versioned_capsule(_Broken())
    assert adapters.exports_versioned(_Broken()) is True
