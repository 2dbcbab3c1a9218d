"""One error type and one conversion: every gpushare exception is made in Rust by the
binding's one ``impl From<PyGpushareErr> for PyErr``, Python code raises them through
``gpushare_error``/``explained`` (never by calling a class), and every failure carries ``.reason``,
``.fix``, ``.framework_error`` and ``.predicted`` in one form."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import gpushare
from gpushare import _native
from gpushare.exceptions import (
    ConversionError,
    CudaError,
    GpushareError,
    NotAnArrayError,
    PathNotApplicableError,
    UnknownFrameworkError,
    UnsafeInputError,
    explained,
    gpushare_error,
)

ROOT = Path(__file__).resolve().parents[1]
BINDING = ROOT / "crates" / "python" / "src"
PACKAGE = ROOT / "python" / "gpushare"
EXCEPTIONS = {
    "GpushareError", "UnknownFrameworkError", "FrameworkNotInstalledError", "NotAnArrayError", "DLPackError",
    "CudaError", "WorkerError", "ConversionError", "UnsafeInputError", "PathNotApplicableError",
}


def _rust_sources() -> dict[Path, str]:
    # Comments aside: a doc comment may name the conversion it describes.
    return {p: "\n".join(line.split("//")[0] for line in p.read_text().splitlines()) for p in BINDING.rglob("*.rs")}


def test_the_binding_has_exactly_one_conversion_into_a_python_exception():
    impls = [(p.name, m.group(0)) for p, text in _rust_sources().items()
             for m in re.finditer(r"impl\s*(<[^>]*>)?\s*From<[^{]*>\s*for\s+PyErr\b", text)]
    assert impls == [("errors.rs", "impl From<PyGpushareErr> for PyErr")], impls


def test_no_gpushare_exception_is_made_outside_the_one_conversion():
    made = re.compile(r"\b(%s)::new_err\b|\bwith_fix\b|\bfn\s+to_pyerr\b|PyErr::new::<" % "|".join(EXCEPTIONS))
    outside = [f"{p.relative_to(BINDING)}: {m.group(0)}" for p, text in _rust_sources().items()
               if p.name != "errors.rs" for m in made.finditer(text)]
    assert outside == []


def test_python_code_raises_gpushare_exceptions_through_the_rust_made_constructor():
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name in EXCEPTIONS:
                    calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}(...)")
    assert calls == [], "raise gpushare_error(kind, ...) or explained(kind, ...) instead"


def _raised(call) -> GpushareError:
    with pytest.raises(GpushareError) as e:
        call()
    return e.value


def _one_form(err: GpushareError) -> tuple:
    # Every gpushare exception carries all four, whichever code raised it.
    return err.reason, err.fix, err.framework_error, err.predicted


def test_an_unknown_framework_and_a_non_array_carry_the_one_form():
    err = _raised(lambda: gpushare.share(np.ones(3), "torhc"))
    assert type(err) is UnknownFrameworkError and "did you mean 'torch'" in str(err)
    assert _one_form(err) == (str(err), None, None, None)
    err = _raised(lambda: gpushare.share([1.0, 2.0], "numpy"))
    assert type(err) is NotAnArrayError and "builtins.list is not an array" in str(err)
    assert _one_form(err) == (str(err), None, None, None)


def test_an_unsafe_input_refused_by_an_adapter_or_the_core_reads_subject_reason_fix():
    torch = pytest.importorskip("torch")
    # The adapter refuses while checking the source, before any framework call: its refusal is
    # the prediction (a failure, in its own words).
    err = _raised(lambda: gpushare.share(torch._neg_view(torch.arange(4.0)), "numpy"))
    assert type(err) is UnsafeInputError
    assert str(err) == f"torch: {err.reason}. Fix: {err.fix}" and "negative bit" in err.reason
    assert err.framework_error is None and tuple(err.predicted)[:3] == ("failed", err.reason, err.fix)
    info = gpushare.inspect(np.arange(8.0)[::-2])
    err = _raised(lambda: info.refuse_for("torch"))
    assert type(err) is UnsafeInputError and str(err) == f"numpy → torch: {err.reason}. Fix: {err.fix}"


def test_a_path_that_does_not_apply_carries_the_one_form_and_its_prediction():
    err = _raised(lambda: gpushare.share(np.ones(3), "torch", path="cai"))
    assert type(err) is PathNotApplicableError and "__cuda_array_interface__" in str(err)
    assert err.reason == str(err) and err.fix is None and err.framework_error is None
    assert err.predicted is not None and err.predicted.verdict == "failed"


def test_a_cuda_error_without_cuda_carries_the_one_form_and_its_cuda_kind():
    if _native.cuda.driver_status()["available"]:
        pytest.skip("a CUDA driver is present: there is no CUDA-less failure to provoke")
    err = _raised(lambda: _native.share.SharedBuffer(4, "float32", device="cuda:0"))
    assert type(err) is CudaError and str(err).startswith("no CUDA: ")
    assert (err.kind, err.code) == ("unavailable", None) and _one_form(err) == (str(err), None, None, None)
    err = _raised(lambda: gpushare.share(np.ones(3), "numpy", device="cuda:1"))
    assert type(err) is CudaError and str(err).startswith("device='cuda:1' needs a CUDA device")
    assert err.kind == "invalid_argument" and err.reason == str(err)


def test_a_framework_failure_is_explained_with_the_frameworks_words():
    torch = pytest.importorskip("torch")
    err = _raised(lambda: gpushare.share(torch.ones(3, dtype=torch.bfloat16), "numpy", path="dlpack"))
    assert type(err) is ConversionError and str(err).startswith("torch → numpy via dlpack failed: ")
    assert err.reason and err.framework_error and err.predicted is not None


def test_the_rust_made_constructor_makes_each_kind_in_the_one_form():
    err = gpushare_error("conversion", "torch", reason="the conjugate bit is set", fix="x.resolve_conj()",
                         framework_error="RuntimeError: conj")
    assert type(err) is ConversionError and str(err) == "torch: the conjugate bit is set. Fix: x.resolve_conj()"
    assert _one_form(err) == ("the conjugate bit is set", "x.resolve_conj()", "RuntimeError: conj", None)
    assert explained("unsafe_input", "ipc", "r", "f").args == gpushare_error("unsafe_input", "ipc", reason="r", fix="f").args
    err = gpushare_error("path_not_applicable", "shm", reason="no room")
    assert type(err) is PathNotApplicableError and str(err) == "shm: no room" and err.fix is None
    err = gpushare_error("no_cuda", "libcuda not found")
    assert type(err) is CudaError and str(err) == "no CUDA: libcuda not found" and err.kind == "unavailable"
    for kind in ("unknown_framework", "framework_not_installed", "not_an_array", "dlpack", "cuda", "worker", "gpushare"):
        err = gpushare_error(kind, "words")
        assert isinstance(err, GpushareError) and str(err) == "words" and _one_form(err) == ("words", None, None, None), kind
    with pytest.raises(ValueError, match="unknown error kind 'conversoin'|unknown error kind \"conversoin\""):
        gpushare_error("conversoin", "x")
    with pytest.raises(ValueError, match="needs a reason and a fix"):
        gpushare_error("unsafe_input", "ipc")


class _Broken:
    """An adapter whose description fails as a framework's would."""

    name = "fake"

    def __init__(self, error: BaseException):
        self.error = error

    def inspect(self, obj):
        raise self.error


def test_an_inspection_failure_is_explained_in_rust_with_the_frameworks_exception_as_cause():
    boom = RuntimeError("boom")
    err = _raised(lambda: _native.share.inspect_explained(_Broken(boom), object()))
    assert type(err) is ConversionError and str(err) == "inspecting the fake array failed: RuntimeError: boom"
    assert (err.reason, err.framework_error, err.predicted) == ("RuntimeError: boom", "RuntimeError: boom", None)
    assert err.__cause__ is boom
    # gpushare's own errors and Ctrl-C pass through as themselves.
    own = gpushare_error("not_an_array", "not one")
    assert _raised(lambda: _native.share.inspect_explained(_Broken(own), object())) is own
    with pytest.raises(KeyboardInterrupt):
        _native.share.inspect_explained(_Broken(KeyboardInterrupt()), object())


def test_a_failure_while_describing_the_source_names_the_pair_asked_for():
    """Byte-swapped data cannot be described through DLPack: the message named the source twice
    ("numpy → numpy via inspect failed"); it names the pair, and says the description failed."""
    pytest.importorskip("torch")
    swapped = np.arange(4, dtype=">f4")
    err = _raised(lambda: gpushare.share(swapped, "torch"))
    assert isinstance(err, GpushareError)
    assert str(err).startswith("numpy → torch"), str(err)
    assert "numpy → numpy" not in str(err)


def test_float8_that_numpy_cannot_export_is_not_called_bfloat16():
    """ml_dtypes' float8_e5m2 has no DLPack code in NumPy: the reason named bfloat16."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    pytest.importorskip("torch")
    x = np.zeros(4, dtype=ml_dtypes.float8_e5m2)
    err = _raised(lambda: gpushare.share(x, "torch"))
    assert isinstance(err, GpushareError)
    assert err.reason and "bfloat16" not in err.reason.split(":")[0], err.reason
    assert "float8" in err.reason, err.reason


def test_a_consumed_capsule_is_said_to_be_consumed():
    torch = pytest.importorskip("torch")
    capsule = np.arange(4.0).__dlpack__()
    torch.from_dlpack(capsule)  # the consumer renames it "used_dltensor"
    err = _raised(lambda: gpushare.share(capsule, "torch"))
    assert type(err) is NotAnArrayError and "already consumed" in str(err), str(err)
