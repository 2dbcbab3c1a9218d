"""The cost model this machine's calibration cached, as this process holds it.

``auto``'s policy (:mod:`gpushare.auto`), the predictors (:mod:`gpushare.verdicts`) and ``advise``
(:mod:`gpushare.advice`) all read the one model here. What is decided with the model (the moves'
``auto``, the share plans, the predictors) is kept by that model's planner (:func:`planner`), made
with it and dropped with it: :func:`forget` (a new calibration, or a test's own cache) drops every
such answer at once by dropping the planner.
"""

from __future__ import annotations

import importlib.metadata
import time
from pathlib import Path
from typing import Any

from gpushare import _native, cache_files, machine_ceilings
from gpushare.adapters import ADAPTERS

CostModel = _native.advice.CostModel

_LOADED: dict[str, Any] = {}


def cache_file() -> Path:
    """``$XDG_CACHE_HOME/gpushare/model.json`` (``~/.cache`` by default), beside the ceilings."""
    return machine_ceilings.cache_path().with_name("model.json")


def _installed_versions() -> dict[str, str]:
    """Installed framework versions by distribution metadata: read without importing anything."""
    versions = {}
    for adapter in ADAPTERS.values():
        for dist in adapter.distributions():
            try:
                versions[adapter.name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def machine_key() -> dict[str, Any]:
    """What a model is made for: the ceilings' key (host, CPU, devices, driver, gpushare) and the
    framework versions. A model made for another is stale."""
    return {**machine_ceilings.machine_key(), "frameworks": _installed_versions()}


def forget() -> None:
    """Drops the model this process holds and every route, plan and predictor chosen with it, so
    the next handoff reads the cache again (after ``calibrate``, or a test's own cache): they are
    the planner's, which goes with the model."""
    _LOADED.clear()
    _native.paths.use_planner(None)


def auto_model() -> Any:
    """The model ``auto`` consults: the cached one, read once per process (a stat per handoff
    would cost every share), replaced by :func:`save`. None without a current model."""
    if "auto" not in _LOADED:
        _LOADED["auto"] = model()
    return _LOADED["auto"]


def planner() -> Any:
    """The planner of the model ``auto`` consults (:func:`auto_model`; without one, of the rules
    alone): what ``auto`` decided with that model is kept in it, and goes with it (:func:`forget`,
    :func:`save`). The native ``gpushare.share`` plans with the one in use."""
    made = _native.paths.planner_in_use()
    if made is None:
        made = _native.paths.Planner(auto_model())
        _native.paths.use_planner(made)
    return made


def model(*, allow_stale: bool = False) -> Any:
    """The cached model of this machine, or None when there is none (or it is stale, unless
    ``allow_stale``: then ``model().stale_against(machine_key())`` says what changed)."""
    path = cache_file()
    mtime = cache_files.state(path)
    if mtime is None:
        return None
    cached = _LOADED.get("model")
    if cached is None or _LOADED.get("mtime") != mtime:
        # A file that cannot be a model (not a regular file, too large, a number no calibration
        # makes: CostModel.from_json checks them all) is named once and treated as absent: the
        # rules alone decide, as on a machine never calibrated.
        try:
            text = cache_files.read_text(path)
            if text is None:
                return None
            cached = CostModel.from_json(text)
        except (cache_files.Unusable, ValueError) as e:
            cache_files.warn_unusable(path, "cost model", str(e),
                                      "the rules alone choose paths until gpushare.calibrate() makes a new one")
            return None
        _LOADED.update(model=cached, mtime=mtime)
    if not allow_stale and cached.stale_against(machine_key()) is not None:
        return None
    return cached


def save(m: Any) -> bool:
    """Caches ``m`` for this machine; False (and a warning that says so) when it cannot be saved.
    Either way it serves this process from now on."""
    saved = cache_files.write_text(cache_file(), m.to_json(), "cost model",
                                   "it serves this process only; calibrate again where the cache directory is writable")
    forget()
    _LOADED.update(model=m, mtime=None, auto=m)
    return saved


def stale_note() -> str | None:
    """Why the cached model cannot be used here, in words; None when it can."""
    m = model(allow_stale=True)
    if m is None:
        return "no cost model of this machine: run gpushare.calibrate() (or `gpushare calibrate`)"
    why = m.stale_against(machine_key())
    return None if why is None else f"the cost model is stale ({why}): run gpushare.calibrate() again"


def made_at(created: float) -> str:
    """When a model was made, in words: its ``created`` time (seconds since the epoch) in local
    time, or "an unknown time" for 0 or one the platform cannot show (a year past 9999)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if created else "an unknown time"
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


def summary() -> str:
    """One line on what the cache holds, for ``%gpuinfo``."""
    note = stale_note()
    if note is not None:
        return f"cost model: {note}"
    m = model()
    return f"cost model: {len(m)} paths fitted, made {made_at(m.created)} ({cache_file()}); gpushare.advise(x, to) predicts"
