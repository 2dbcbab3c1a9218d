"""The host side of the process paths, through NumPy: the view of a shared-memory segment that the
``shm`` path copies into (parent) and rebuilds (worker), dtype strings of ``__cuda_array_interface__``
over an IPC mapping, and the copy a worker sends back when asked to read its array. NumPy is
imported only when one of these runs."""

from __future__ import annotations

import importlib
from typing import Any


def preload(modules: list[str]) -> None:
    """Imports the adapters' modules (a framework and the modules of its process paths) in the
    worker before anything is timed."""
    for name in modules:
        importlib.import_module(name)


def host_view(adapter: Any, obj: Any) -> Any:
    """The NumPy view of ``obj``'s host memory (its adapter's ``host_view``; NumPy's own view of an
    object no adapter knows)."""
    if adapter is not None:
        return adapter.host_view(obj)
    import numpy as np

    return np.asarray(obj)


def copy_into(buffer: Any, host: Any) -> Any:
    """A view over ``buffer`` (a segment's mapping) with ``host``'s shape and dtype, its values copied in."""
    import numpy as np

    view = np.ndarray(host.shape, dtype=host.dtype, buffer=buffer)
    view[...] = host
    return view


def segment_view(buffer: Any, layout: dict, offset: int) -> Any:
    """The source's own view over a segment: its strides (a transpose, a column, a step) and its dtype."""
    import numpy as np

    return np.ndarray(layout["shape"], dtype=layout["dtype"], buffer=buffer, offset=offset, strides=layout["strides"])


def typestr(dtype: str) -> str:
    """``__cuda_array_interface__``'s type string of a dtype name (``float32`` → ``<f4``)."""
    import numpy as np

    return np.dtype(dtype).str


def itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize


def read_back(adapter: Any, value: Any) -> Any:
    """A NumPy copy of a worker's array (sent back through the pipe)."""
    import numpy as np

    host = adapter.to_numpy(value) if adapter is not None else value
    return np.array(host, copy=True)
