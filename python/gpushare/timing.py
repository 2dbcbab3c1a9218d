"""Timing done right, for handoffs between frameworks: ``measure`` over any callable. The loop is
the Rust core's (``crates/core/src/share/timing.rs``), the same one every share, comparison and sweep runs.

What ``%timeit`` leaves out and GPU users trip over (cupy#7185, ipython#14512):

- **warm-up**: the first handoff pays one-time costs (imports, allocator pools, page-locking), so
  ``warmup`` runs are made and thrown away first;
- **loops and repeats**: ``number`` handoffs per sample (``-n``; when None, chosen so a sample
  lasts at least ``min_sample_time`` and its fixed cost is at most 0.1 % of it, as
  ``torch.utils.benchmark`` chooses its block size) and ``repeat`` samples (``-r``);
- **synchronisation**: every framework involved is synchronised at the boundaries of each sample
  and never between its calls (the source on its array, the target on the last result), so queued
  GPU work is inside the sample it belongs to and not in the next one, as torch's timer does;
- **garbage collection** is off during a sample, as ``timeit`` (and so torch's Timer) does;
- **two clocks**: host wall time (what the user waits for) and, when the source lives on a CUDA
  device and its framework names its current stream, device time by CUDA events on that stream;
- **statistics**: median, minimum and IQR (``gpushare.Timing``), and a warning when the spread says
  the figure is noisy.

``api.share`` and the lab (``compare``, ``bench``) measure through :func:`measure`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from gpushare import _native
from gpushare.exceptions import GpushareWarning

#: Most calls per sample the automatic choice of ``number`` makes (the core's constant).
MAX_AUTO_NUMBER = 100_000

#: Largest share of a sample its fixed cost (synchronisation, clock reads) may take when ``number``
#: is chosen automatically: torch.utils.benchmark's documented 0.1 %.
MAX_OVERHEAD = 1e-3


@dataclass
class Measurement:
    """Raw timings of one operation: seconds per loop, one entry per repeat."""

    samples: list[float]
    number: int
    warmup: int
    device_samples: list[float] | None = None
    value: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def timing(self) -> Any:
        """``gpushare.Timing``: median, min, max, mean, IQR, the noise warning, device median."""
        device = None
        if self.device_samples:
            device = _native.share.Timing(self.device_samples, self.number).median
        return _native.share.Timing(self.samples, self.number, device)

    @property
    def warning(self) -> str | None:
        return self.timing.warning


class _DeviceClock:
    """CUDA events on the source framework's current stream: device time of what each sample queued."""

    def __init__(self, ordinal: int, stream: int):
        self.timer = _native.cuda.EventTimer(ordinal, stream)

    @classmethod
    def for_source(cls, src: Any, obj: Any, dlpack_device: tuple[int, int]) -> _DeviceClock | None:
        if dlpack_device[0] != 2 or getattr(_native.cuda, "EventTimer", None) is None:
            return None
        current_stream = getattr(src, "current_stream", None)
        if current_stream is None:
            return None
        try:
            stream = current_stream(obj)
            if stream is None:
                return None
            return cls(int(dlpack_device[1]), int(stream))
        except Exception:  # no device clock is an answer ("n/a"), not a failure of the measurement
            return None

    def start(self) -> None:
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def seconds(self) -> float:
        return float(self.timer.elapsed_seconds())


def measure(
    fn: Callable[[Any], Any],
    arg: Any,
    *,
    synchronize: Callable[[Any], None] = lambda value: None,
    repeat: int = 7,
    number: int | None = None,
    warmup: int = 1,
    min_sample_time: float = 0.01,
    device_clock: _DeviceClock | None = None,
    warn: bool = False,
    disable_gc: bool = True,
    max_overhead: float = MAX_OVERHEAD,
) -> Measurement:
    """Times ``fn(arg)``: ``warmup`` untimed runs, then ``repeat`` samples of ``number`` calls each.

    Where it changes the figure the method is ``torch.utils.benchmark.Timer``'s
    (``blocked_autorange``), so the two agree on the same operation (benchmarks/bench_paths.py
    checks it within 10 %):

    - ``synchronize(value)`` waits for every framework involved (called with the latest result, or
      None before the first) at the boundaries of a sample only, never between its calls: before
      the clock starts and before it stops, as torch's timer synchronises CUDA when it reads the
      clock;
    - the garbage collector is off during a sample (``disable_gc``), as ``timeit`` does, so a
      collection triggered by one operation is not billed to it;
    - with ``number=None`` the number of calls per sample grows until a sample lasts
      ``min_sample_time`` and the fixed cost of a sample (synchronisation and clocks, measured on
      empty samples as torch does) is at most ``max_overhead`` of it (0.1 %: torch's documented
      goal), stretching a sample to at most ten times ``min_sample_time`` for that;
    - results are dropped as they come; the median is taken over the samples' per-call times.

    The last result is kept in ``.value``. With ``warn=True`` a noisy figure also raises a
    :class:`GpushareWarning`.
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if number is not None and number < 1:
        raise ValueError("number must be at least 1")
    # The loop itself is the core's, the one every share runs (crates/core/src/share/timing.rs).
    samples, device, number, warmup, value = _native.share.measure(
        fn, arg, synchronize, repeat, number, max(warmup, 0), min_sample_time, max_overhead, disable_gc, device_clock,
    )
    m = Measurement(samples, number, warmup, device or None, value)
    if warn and m.warning:
        warnings.warn(m.warning, GpushareWarning, stacklevel=2)
    return m


def synchronizer(src: Any, obj: Any, dst: Any) -> Callable[[Any], None]:
    """A ``synchronize(value)`` for a handoff: the source on its array, the target on the result.
    Adapters' ``synchronize`` are no-ops on the host."""

    def sync(value: Any) -> None:
        src.synchronize(obj)
        if value is not None:
            try:
                dst.synchronize(value)
            except AttributeError:
                pass  # a result that is not the target's array (e.g. None from a failed route)

    return sync


__all__ = ["MAX_AUTO_NUMBER", "MAX_OVERHEAD", "Measurement", "measure", "synchronizer"]
