"""cuda.core's sources: ``StridedMemoryView`` over another framework's memory, which is how its
users meet arrays (cuda.core allocates Buffers, not arrays): NumPy's 64-byte aligned examples on
the host, PyTorch's tensors on a GPU. The view keeps its exporter alive (``exporting_obj``)."""

from __future__ import annotations

from typing import Any

from gpushare.adapters import Adapter, framework

from ..examples import NotConstructible, example as framework_example, numpy_example


def example(adapter: Adapter, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
    adapter.load()
    from cuda.core.utils import StridedMemoryView

    if dtype == "bfloat16":
        raise NotConstructible("cuda_core (cuda.core) views NumPy's memory, and NumPy's bfloat16 (ml_dtypes) has no DLPack export")
    if on_host:
        source = numpy_example(dtype, layout)
        return StridedMemoryView.from_dlpack(source, stream_ptr=-1)
    source = framework_example(framework("torch"), dtype, layout, on_host, ordinal)
    return StridedMemoryView.from_dlpack(source, stream_ptr=1)
