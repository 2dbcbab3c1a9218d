"""Predictions made before a conversion, checked against what happened afterwards.

``predict`` returns a ``Prediction`` ``(verdict, reason, fix, expected_error)`` for a planned
handoff, or None where gpushare makes no prediction; ``share`` stores it on the result, which shows
an outcome that differs from it as "UNEXPECTED" rather than hiding it. The rules live in the Rust core
(``src/explain.rs``); this module only gathers the facts they need: the target's version, and
settings such as JAX's x64 flag, read from frameworks that are already imported (a prediction never
imports a framework).

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


#: ``(verdict, reason, fix, expected_error)``, a 4-tuple with named fields (``src/python/explain.rs``).
Prediction = _native.Prediction


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


def _torch_current_device() -> int | None:
    """PyTorch exports only from its current CUDA device: the device it would export from."""
    torch = sys.modules.get("torch")
    try:
        return int(torch.cuda.current_device()) if torch is not None else None
    except Exception:  # no CUDA initialised: nothing to predict from
        return None


_PREDICTORS: dict[tuple[str, str, str, str, str], Any] = {}


def predictor(src: Any, dst: Any, path: str) -> Any:
    """The ``_native.Predictor`` for handing arrays of adapter ``src`` to adapter ``dst`` by
    ``path``, or None for a path gpushare does not model. Made once per pair, path and versions: the
    facts it holds (versions, CuPy's stream setting) do not change once the frameworks are imported;
    the ones that can (JAX's x64 flag, PyTorch's current device) it reads when a rule needs them."""
    if path not in MODELLED_PATHS:
        return None
    # The versions are part of the key: one read before the framework was imported is unknown ("").
    key = (src.name, dst.name, path, dst.version() or "", src.version() or "")
    made = _PREDICTORS.get(key)
    if made is None:
        made = _PREDICTORS[key] = _native.Predictor(
            dst.name,
            key[3],
            path,
            key[4],
            _cupy_ptds() if dst.name == "cupy" else False,  # torch refuses stream=2 from CuPy only
            jax_x64 if dst.name == "jax" else None,  # rule 1 reads x64 only for JAX targets
            _torch_current_device if src.name == "torch" else None,
        )
    return made


def predict(src: Any, dst: Any, src_info: Any, path: str) -> Prediction | None:
    """The predicted verdict and reason for converting ``src_info`` (a ``TensorInfo`` of an array of
    adapter ``src``) to adapter ``dst`` by ``path``; None for a path gpushare does not model."""
    made = predictor(src, dst, path)
    return None if made is None else made(src_info)
