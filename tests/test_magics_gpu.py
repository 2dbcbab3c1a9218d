"""The magics on a real GPU: %sharebench refuses a size larger than the device's memory before it
makes any array. Run with ``pytest -m gpu``; without a CUDA driver these skip with
"no CUDA"."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from _gpu import require_cuda

pytestmark = pytest.mark.gpu
torch = require_cuda()


def test_sharebench_refuses_a_size_beyond_the_devices_memory(ip, run, monkeypatch):
    from gpushare import _native, lab

    total = next(d["total_memory"] for d in _native.cuda.devices() if d["ordinal"] == 0)
    made = []
    monkeypatch.setattr(lab, "make_array", lambda *a, **k: made.append(a))
    with pytest.raises(UsageError, match=r"does not fit in the memory of cuda:0") as caught:
        run(f"%sharebench torch->torch --device cuda:0 --sizes 4KiB,{total + 1} -q")
    assert str(caught.value).startswith("usage: %sharebench SRC->DST")
    assert made == []
