"""Predictions made before a conversion, checked against what happened afterwards.

``predict`` returns a ``Prediction`` ``(verdict, reason, fix, expected_error)`` for a planned
handoff, or None where gpushare makes no prediction; ``share`` stores it on the result, which shows
an outcome that differs from it as "UNEXPECTED" rather than hiding it. The rules live in the Rust core
(``crates/core/src/explain.rs``); this module only gathers the facts they need: the target's version, and
settings such as JAX's x64 flag, read from frameworks that are already imported (a prediction never
imports a framework). Each adapter says which of these facts its framework has.

The rules are checked against the installed frameworks by ``python -m tools.conformance``
(``docs/compatibility.md``; on a GPU ``--device cuda``, ``docs/compatibility-cuda.md``) and
``tests/test_conformance.py``, which also replays what a GPU run observed.
"""

from __future__ import annotations

from typing import Any

from gpushare import _native, auto, model_cache

#: Paths the Rust rules model (the path table's word, crates/core/src/paths.rs); for any other path gpushare
#: makes no prediction.
MODELLED_PATHS = ("auto", *(p["name"] for p in _native.paths.path_table() if p["kind"] == "share" and p["modelled"]))


#: ``(verdict, reason, fix, expected_error)``, a 4-tuple with named fields (``crates/python/src/binding/explain.rs``).
Prediction = _native.paths.Prediction


def predictor(src: Any, dst: Any, path: str) -> Any:
    """The ``_native.paths.Predictor`` for handing arrays of adapter ``src`` to adapter ``dst`` by
    ``path``, or None for a path gpushare does not model. Made once per pair, path and versions: the
    facts it holds (versions, the adapters' constant rule facts such as CuPy's stream setting) do not
    change once the frameworks are imported; the ones that can (JAX's x64 flag, PyTorch's current
    device, PyCUDA's current context) it reads through the adapters' ``rule_facts`` functions, when a
    rule needs them."""
    if path not in MODELLED_PATHS:
        return None
    # `auto` is predicted as the path it takes, which the cost model may choose: the predictors
    # are kept by the model's planner, and a new model comes with a new one.
    planner = model_cache.planner()
    model = planner.model if path == "auto" else None
    # The versions are part of the key: one read before the framework was imported is unknown ("").
    key = (src.name, dst.name, path, dst.version() or "", src.version() or "")
    made = planner.predictors.get(key)
    if made is None:
        made = planner.predictors[key] = _native.paths.Predictor(
            dst.name,
            key[3],
            path,
            key[4],
            # The adapters' facts hook: constants read now, functions where a rule needs them.
            target_facts=dst.rule_facts(),
            source_facts=src.rule_facts(),
            # `auto` is resolved by the one function, from the adapters' facts (crates/core/src/auto.rs).
            pair=auto.pair(src, dst),
            model=model,
        )
    return made


#: Move paths the Rust rules model (crates/core/src/explain/moves.rs).
MODELLED_MOVES = tuple(p["name"] for p in _native.paths.path_table() if p["kind"] == "move" and p["modelled"])

def move_predictor(src: Any, dst: Any, path: str, destination: tuple[int, int]) -> Any:
    """The ``_native.paths.Predictor`` of a move (``device=``) of ``src``'s arrays by move path ``path``
    to ``destination`` (DLPack's ``(device_type, id)``), handed to ``dst``; None for a path the
    rules do not model. Made once per pair, path, destination and versions."""
    if path not in MODELLED_MOVES:
        return None
    # Kept beside the shares' (a move's key is longer: it names the destination).
    key = (src.name, dst.name, path, tuple(destination), dst.version() or "", src.version() or "")
    predictors = model_cache.planner().predictors
    made = predictors.get(key)
    if made is None:
        made = predictors[key] = _native.paths.Predictor(
            dst.name, key[4], path, key[5], target_facts=dst.rule_facts(), source_facts=src.rule_facts(),
            pair=auto.pair(src, dst), destination=tuple(destination),
        )
    return made


def predict(src: Any, dst: Any, src_info: Any, path: str) -> Prediction | None:
    """The predicted verdict and reason for converting ``src_info`` (a ``TensorInfo`` of an array of
    adapter ``src``) to adapter ``dst`` by ``path``; None for a path gpushare does not model."""
    made = predictor(src, dst, path)
    return None if made is None else made(src_info)
