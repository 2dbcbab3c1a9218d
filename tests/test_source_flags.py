"""A torch tensor whose flags its DLPack export reads (requires_grad, the conjugate and negative
bits): each handoff accepts it exactly where the frameworks' own call does, and the prediction of
``share``, ``advise`` and the error equals the outcome, for every target installed here."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpushare
from gpushare.adapters import framework
from gpushare.exceptions import GpushareError

torch = pytest.importorskip("torch")

# TensorFlow crashes beside PaddlePaddle in one process (Adapter.import_conflict): not a target here.
TARGETS = ("mlx", "numpy", "jax", "torch", "paddle", "warp", "cuda_core")
SHARE_PATHS = ("auto", "dlpack", "capsule", "cai", "host", "copy")
MOVE_PATHS = ("auto", "dlpack", "move")


def _installed(to: str) -> None:
    if not framework(to).installed():
        pytest.skip(f"{framework(to).module} not installed")
    conflict = framework(to).import_conflict()
    if conflict is not None:
        pytest.skip(conflict)  # a framework imported already that crashes beside it


def _outcome(x, to: str, **kw) -> tuple[str, str | None, GpushareError | None]:
    """``(verdict, predicted verdict, error)`` of one share."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = gpushare.share(x, to, **kw)
        except GpushareError as e:
            predicted = getattr(e, "predicted", None)
            return "failed", None if predicted is None else predicted[0], e
    return r.verdict, None if r.prediction is None else r.prediction["verdict"], None


def _advised(x, to: str, **kw) -> dict[str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {row["path"]: row["verdict"] for row in gpushare.advise(x, to, **kw).rows}


GRAD = {
    "requires_grad": lambda: torch.arange(4.0).requires_grad_(),
    "nn.Parameter": lambda: torch.nn.Parameter(torch.arange(4.0)),
}


@pytest.mark.parametrize("kind", list(GRAD))
@pytest.mark.parametrize("to", TARGETS)
def test_a_tensor_that_requires_grad_goes_where_the_raw_call_takes_it_as_predicted(to, kind):
    _installed(to)
    dst = framework(to)
    dst.load()
    try:
        dst.dlpack_importer()(GRAD[kind]())
        raw_takes_it = True
    except Exception:  # noqa: BLE001 - the framework's own refusal, whatever its type
        raw_takes_it = False
    advised = _advised(GRAD[kind](), to)
    for path in SHARE_PATHS:
        verdict, predicted, error = _outcome(GRAD[kind](), to, path=path)
        assert predicted == verdict, (path, verdict, predicted, error)
        if path in advised:
            assert advised[path] == verdict, (path, advised[path], verdict, error)
        if path == "dlpack":
            # The raw from_dlpack decides: MLX's takes the tensor (its binding falls back to
            # torch's own to_dlpack), the others' export refuses it.
            assert (verdict != "failed") == raw_takes_it, (verdict, raw_takes_it, error)
            if error is not None:
                assert "requires grad" in error.reason and "detach()" in error.fix, error
        if verdict != "failed":
            values = framework(to).to_numpy(gpushare.share(GRAD[kind](), to, path=path).value)
            np.testing.assert_array_equal(np.asarray(values), np.arange(4.0, dtype=np.float32))


def test_mlx_takes_a_tensor_that_requires_grad_as_its_from_dlpack_does():
    _installed("mlx")
    x = torch.arange(4.0, requires_grad=True)
    r = gpushare.share(x, "mlx", path="dlpack")
    assert r.verdict == r.prediction["verdict"]
    assert np.asarray(r.value).tolist() == [0.0, 1.0, 2.0, 3.0]


VIEWS = {
    "neg": lambda: torch._neg_view(torch.arange(4.0)),
    "conj": lambda: torch.tensor([1 + 1j, 2 - 1j]).conj(),
    "conj().imag": lambda: torch.tensor([1 + 1j, 2 - 1j]).conj().imag,
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("to", TARGETS)
def test_negative_and_conjugate_views_moved_to_the_host_are_predicted(to, view):
    _installed(to)
    advised = _advised(VIEWS[view](), to, device="cpu")
    for path in MOVE_PATHS:
        verdict, predicted, error = _outcome(VIEWS[view](), to, path=path, device="cpu")
        assert predicted == verdict, (path, verdict, predicted, error)
        if path in advised:
            assert advised[path] == verdict, (path, advised[path], verdict, error)
    for path in SHARE_PATHS:
        verdict, predicted, error = _outcome(VIEWS[view](), to, path=path)
        assert predicted == verdict, (path, verdict, predicted, error)
