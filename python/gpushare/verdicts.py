"""Predictions made before a conversion, checked against what happened afterwards.

``predict`` returns ``(verdict, reason)`` for a planned handoff, or None where gpushare makes no
prediction; ``share`` stores it on the result, which shows an outcome that differs from it as
"UNEXPECTED" rather than hiding it. The rules live in the Rust core (``src/explain.rs``); this module
only gathers the facts they need: the target's version, and settings such as JAX's x64 flag, read
from frameworks that are already imported (a prediction never imports a framework).

The rules are checked against the installed frameworks by ``python -m gpushare.conformance``
(``docs/compatibility.md``; on a GPU ``--device cuda``, ``docs/compatibility-cuda.md``) and
``tests/test_conformance.py``, which also replays what a GPU run observed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gpushare import _native

#: Paths the Rust rules model; for any other path gpushare makes no prediction.
MODELLED_PATHS = ("auto", "dlpack", "capsule", "cai", "host", "pinned", "copy")


class Prediction(tuple):
    """``(verdict, reason, fix, expected_error)``: ``fix`` for a predicted failure and
    ``expected_error``, the words the framework is expected to use in its error message (a
    substring), when known. A plain tuple subclass without instance attributes, because ``share``
    makes one per conversion."""

    __slots__ = ()

    def __new__(
        cls, verdict: str, reason: str | None = None, fix: str | None = None, expected_error: str | None = None
    ) -> "Prediction":
        return tuple.__new__(cls, (verdict, reason, fix, expected_error))

    @property
    def verdict(self) -> str:
        return self[0]

    @property
    def reason(self) -> str | None:
        return self[1]

    @property
    def fix(self) -> str | None:
        return self[2]

    @property
    def expected_error(self) -> str | None:
        return self[3]

    def __repr__(self) -> str:
        return f"Prediction(verdict={self[0]!r}, reason={self[1]!r}, fix={self[2]!r})"


def jax_x64() -> bool:
    """``jax.config.jax_enable_x64`` when JAX is already imported; False otherwise (JAX's default),
    or when the ``JAX_ENABLE_X64`` environment variable says so for a JAX not imported yet."""
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            return bool(jax.config.jax_enable_x64)
        except AttributeError:
            return False
    return os.environ.get("JAX_ENABLE_X64", "").strip().lower() in ("1", "true", "yes", "on")


_PTDS: list[bool] = []


def _cupy_ptds() -> bool:
    # CuPy reads CUPY_CUDA_PER_THREAD_DEFAULT_STREAM once, at import; so do we (os.environ costs ~1 µs).
    if not _PTDS:
        _PTDS.append(os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "").strip() not in ("", "0"))
    return _PTDS[0]


def _current_device(src: Any, src_info: Any) -> int | None:
    """PyTorch exports only from its current CUDA device: the device it would export from."""
    if src.name != "torch" or src_info.dlpack_device[0] != 2:
        return None
    torch = sys.modules.get("torch")
    try:
        return int(torch.cuda.current_device()) if torch is not None else None
    except Exception:  # no CUDA initialised: nothing to predict from
        return None


def _cuda_available() -> bool | None:
    status = getattr(_native, "cuda_driver_status", None)
    if status is None:
        return False
    try:
        return bool(status().get("available"))
    except Exception:  # a driver that cannot even say: unknown
        return None


def predict(src: Any, dst: Any, src_info: Any, path: str, device_type: int | None = None) -> Prediction | None:
    """The predicted verdict and reason for converting ``src_info`` (a ``TensorInfo`` of an array of
    adapter ``src``) to adapter ``dst`` by ``path``; None for a path gpushare does not model.
    ``device_type``, the source's DLPack device type when the caller already has it, saves a lookup."""
    if path not in MODELLED_PATHS:
        return None
    # Positional arguments, and each fact gathered only where a rule reads it: this runs on every share.
    target, source = dst.name, src.name
    return tuple.__new__(
        Prediction,
        _native.predict(
            src_info,
            target,
            dst.version() or "",
            jax_x64() if target == "jax" else False,  # rule 1 reads x64 only for JAX targets
            path,
            src.version() or "",
            _cupy_ptds() if target == "cupy" else False,  # torch refuses stream=2 from CuPy only
            # Only a torch CUDA source needs torch's current device (its DLPack device type is 2).
            _current_device(src, src_info) if source == "torch" and device_type in (2, None) else None,
            _cuda_available() if path == "pinned" else None,
        ),
    )
