"""gpushare: see what really happens when arrays move between PyTorch, TensorFlow, JAX, CuPy, Numba
and NumPy through DLPack — shared or copied, on which device and CUDA context, how fast, and why.

In a notebook::

    %load_ext gpushare
    %%share torch->tf
    x = torch.randn(4096, 4096)

From Python: :func:`share`, :func:`inspect`, :func:`share_chain`. Loading the extension imports no
framework: frameworks are found through ``sys.modules`` and the type of the object at hand.
"""

from __future__ import annotations

from typing import Any

from gpushare import _native
from gpushare.api import ShareResult, ShareTable, TensorInfo, inspect, share, share_chain
from gpushare.exceptions import GpushareError, GpushareWarning
from gpushare.lab import Benchmark, Comparison, SharedBuffer, bench, compare
from gpushare.machine_ceilings import Ceilings, ceilings
from gpushare.advice import Advice, CostModel, advise, calibrate
from gpushare.context_access import CrossContextAccess, cross_context_access
from gpushare.context_costs import ContextMeter
from gpushare.contexts import separate_context_report, working_contexts
from gpushare.gpuinfo import GpuInfo, gpuinfo
from gpushare.processes import Worker
from gpushare.vocabulary import PathKind, Verdict

__version__: str = _native.__version__
Timing = _native.share.Timing
PathRow = _native.lab.PathRow
#: What a share was predicted to do (``ShareResult.prediction`` within a process, ``gpushare.explain``).
Prediction = _native.paths.Prediction
#: A predicted time and its stated error (``advise``, a handoff to a worker's ``prediction``).
CostPrediction = _native.advice.CostPrediction

_loaded: dict[int, Any] = {}


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext gpushare``: registers the magics and the ``GpuShare`` configurable."""
    from gpushare import magics

    _loaded[id(ip)] = magics.load(ip)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext gpushare``: removes every magic it registered and its configurable."""
    for instance in _loaded.pop(id(ip), []):
        for kind, names in instance.magics.items():
            for name in names:
                ip.magics_manager.magics[kind].pop(name, None)
        if instance in ip.configurables:
            ip.configurables.remove(instance)


__all__ = [
    "Advice",
    "Benchmark",
    "Ceilings",
    "Comparison",
    "ContextMeter",
    "CostModel",
    "CostPrediction",
    "CrossContextAccess",
    "GpushareError",
    "GpuInfo",
    "GpushareWarning",
    "PathRow",
    "Prediction",
    "ShareResult",
    "ShareTable",
    "SharedBuffer",
    "TensorInfo",
    "Timing",
    "PathKind",
    "Verdict",
    "advise",
    "bench",
    "calibrate",
    "ceilings",
    "compare",
    "cross_context_access",
    "gpuinfo",
    "inspect",
    "load_ipython_extension",
    "separate_context_report",
    "share",
    "share_chain",
    "unload_ipython_extension",
    "working_contexts",
    "Worker",
]
