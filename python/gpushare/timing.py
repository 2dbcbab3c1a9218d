"""Timing done right, for handoffs between frameworks.

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

import gc
import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from gpushare import _native
from gpushare.exceptions import GpushareWarning

_now = time.perf_counter

#: Most calls per sample the automatic choice of ``number`` makes.
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
            device = _native.Timing(self.device_samples, self.number).median
        return _native.Timing(self.samples, self.number, device)

    @property
    def warning(self) -> str | None:
        return self.timing.warning


class _DeviceClock:
    """CUDA events on the source framework's current stream: device time of what each sample queued."""

    def __init__(self, ordinal: int, stream: int):
        self.timer = _native.EventTimer(ordinal, stream)

    @classmethod
    def for_source(cls, src: Any, obj: Any, dlpack_device: tuple[int, int]) -> _DeviceClock | None:
        if dlpack_device[0] != 2 or getattr(_native, "EventTimer", None) is None:
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
    value: Any = None
    for _ in range(max(warmup, 0)):
        # The last result goes before the next call, here as in the samples: two alive at once
        # would change what the allocator keeps (glibc trims the heap when a second 1 MiB block is
        # freed, and the first call of the next sample pays for fresh pages).
        value = None
        value = fn(arg)
        synchronize(value)

    def sample(n: int, clock: _DeviceClock | None) -> tuple[float, float | None]:
        """Seconds (host, device) that ``n`` calls took, synchronised at both ends."""
        nonlocal value
        gc_was_enabled = disable_gc and gc.isenabled()
        if gc_was_enabled:
            gc.disable()
        try:
            synchronize(value)
            value = None
            if clock is not None:
                clock.start()
            t0 = _now()
            # Results are dropped as they come, as %timeit and torch.utils.benchmark do: holding one
            # alive across the next call changes what allocators hand out (fresh pages instead of the
            # block just freed) and would be timed too. The last one is kept for synchronisation.
            if n > 0:
                for _ in range(n - 1):
                    fn(arg)
                value = fn(arg)
            if clock is not None:
                clock.stop()
            synchronize(value)
            elapsed = _now() - t0
        finally:
            if gc_was_enabled:
                gc.enable()
        return elapsed, (clock.seconds() if clock is not None else None)

    if number is None:
        number = _autorange(sample, min_sample_time, max_overhead)
    samples: list[float] = []
    device: list[float] | None = [] if device_clock is not None else None
    for _ in range(repeat):
        host, dev = sample(number, device_clock)
        samples.append(host / number)
        if device is not None and dev is not None:
            device.append(dev / number)
    m = Measurement(samples, number, max(warmup, 0), device or None, value)
    if warn and m.warning:
        warnings.warn(m.warning, GpushareWarning, stacklevel=2)
    return m


def _autorange(sample: Callable[[int, Any], tuple[float, float | None]], min_sample_time: float,
               max_overhead: float) -> int:
    """Calls per sample: torch.utils.benchmark's rule (``Timer._estimate_block_size``) with a floor.

    The fixed cost of a sample is the median of five empty ones (synchronisation and clock reads,
    no call), as torch measures it. The sample must last ``min_sample_time`` and that cost must be
    at most ``max_overhead`` of it, within ten times ``min_sample_time``.
    """
    overhead = statistics.median(sample(0, None)[0] for _ in range(5))
    goal = max(min_sample_time, min(overhead / max(max_overhead, 1e-12), 10 * min_sample_time))
    number = 1
    while number < MAX_AUTO_NUMBER:
        total, _ = sample(number, None)
        if total >= goal:
            break
        # Aim straight for the goal, at most x10 per step, so a noisy first sample can't make
        # one calibration run last seconds.
        per_loop = max(total / number, 1e-9)
        want = int(goal / per_loop) + 1
        number = min(MAX_AUTO_NUMBER, max(number * 2, min(want, number * 10)))
    return number


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
