"""A path that cannot run for a pair is named in one sentence: ``compare``'s row and ``advise``'s
row read the same reason, the prediction rules' (crates/core/src/explain/), for every path of
several pairs, within the array's device and for moves to the host."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import gpushare
from gpushare.adapters import framework

torch = pytest.importorskip("torch", reason="torch not installed")

os.environ.setdefault("JAX_PLATFORMS", "cpu")

PAIRS = [
    ("torch", "numpy", {}),
    ("numpy", "jax", {}),
    ("numpy", "torch", {}),
    ("torch", "mlx", {}),
    ("torch", "numpy", {"device": "cpu"}),
    ("torch", "mlx", {"device": "cpu"}),
]


def _array(source: str):
    return torch.arange(64.0) if source == "torch" else np.arange(64.0)


@pytest.mark.parametrize("source,to,where", PAIRS, ids=[f"{s}->{t}{'@' + w['device'] if w else ''}" for s, t, w in PAIRS])
def test_compare_and_advise_give_one_reason_for_a_path_that_cannot_run(source, to, where):
    if not framework(to).installed():
        pytest.skip(f"{framework(to).module} not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compared = {r["path"]: r for r in gpushare.compare(_array(source), to, repeat=1, **where).rows}
        advised = {r["path"]: r for r in gpushare.advise(_array(source), to, **where).rows}
    checked = 0
    for path, row in compared.items():
        if row["applicable"] or path not in advised:
            continue
        # Not applicable in both, in the same words.
        assert advised[path]["verdict"] == "failed", (path, row["reason"], advised[path])
        assert row["reason"] == advised[path]["reason"], (path, row["reason"], advised[path]["reason"])
        checked += 1
    assert checked, f"no path of {source} → {to} {where} is out of reach here: the pair checks nothing"
