"""Sources of no known framework, taken as the array API's from_dlpack takes them: any object with
``__dlpack__`` and ``__dlpack_device__`` (framework "unknown", described from its capsule, its
capsule consumed once), and a bare DLPack capsule (framework "capsule") where the target's raw call
takes one, refused with a reason where it does not."""

from __future__ import annotations

import numpy as np
import pytest

import gpushare
from gpushare.exceptions import GpushareError


class OneShotProducer:
    """A producer whose ``__dlpack__`` works once, as the frameworks' own test producers do."""

    def __init__(self, array):
        self.array = array
        self.exports = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.exports += 1
        if self.exports > 1:
            raise BufferError("this producer exports once")
        if max_version is None:
            return self.array.__dlpack__()
        return self.array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _torch():
    return pytest.importorskip("torch", reason="framework not installed: torch")


def test_a_producer_of_no_known_framework_is_a_source_exported_once():
    torch = _torch()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    producer = OneShotProducer(x)
    r = gpushare.share(producer, "torch")
    assert r.source.framework == "unknown" and r.source.dtype == "float32" and list(r.source.shape) == [3, 4]
    assert r.verdict == "shared" and r.value.data_ptr() == x.ctypes.data, r
    assert r.prediction["verdict"] == "shared" and not r.unexpected
    assert producer.exports == 1
    assert torch.equal(r.value, torch.from_numpy(x))


@pytest.mark.parametrize("target", ["numpy", "jax"])
def test_a_producer_goes_to_consumers_that_ask_for_legacy_or_versioned_capsules(target):
    if target == "jax":
        pytest.importorskip("jax", reason="framework not installed: jax")
    x = np.arange(64, dtype=np.float32)
    producer = OneShotProducer(x)
    r = gpushare.share(producer, target)
    assert r.source.framework == "unknown"
    assert r.verdict == r.prediction["verdict"] and not r.unexpected, r
    assert np.asarray(r.value).tolist() == x.tolist()
    assert producer.exports == 1


def test_a_bare_capsule_goes_where_the_raw_call_takes_one():
    torch = _torch()
    x = np.arange(6, dtype=np.float32)
    for capsule in (x.__dlpack__(), x.__dlpack__(max_version=(1, 0))):
        r = gpushare.share(capsule, "torch")
        assert r.source.framework == "capsule" and r.verdict == "shared" and not r.unexpected, r
        assert r.value.data_ptr() == x.ctypes.data
        assert torch.equal(r.value, torch.from_numpy(x))


def test_a_bare_capsule_is_refused_with_a_reason_where_the_raw_call_refuses_it():
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(AttributeError):
        np.from_dlpack(x.__dlpack__())  # the raw call
    with pytest.raises(GpushareError) as raised:
        gpushare.share(x.__dlpack__(), "numpy")
    err = raised.value
    assert "bare DLPack capsule" in (err.reason or ""), err
    assert err.predicted is not None and err.predicted.verdict == "failed"
