"""``Benchmark.plot(ax=None)``: the sweep drawn with matplotlib, for users who restyle their plots.

matplotlib is imported here only, when a plot is asked for; the notebook's built-in plot is the
SVG the Rust core draws (crates/core/src/render/plot.rs). Colours, dashes and markers are the SVG's, so a path
looks the same in both, and lines that coincide (``dlpack`` under ``shared``) stay visible.
"""

from __future__ import annotations

from typing import Any

from gpushare import _native

#: Per path: colour (matplotlib's tab10, as the SVG), dash pattern and marker.
STYLES: dict[str, tuple[str, Any, str]] = {
    "dlpack": ("#1f77b4", "solid", "o"),
    "capsule": ("#ff7f0e", (0, (6, 3)), "s"),
    "cai": ("#2ca02c", (0, (2, 2)), "^"),
    "host": ("#d62728", (0, (8, 3, 2, 3)), "D"),
    "pinned": ("#9467bd", (0, (4, 4)), "v"),
    "copy": ("#8c564b", (0, (1, 3)), "P"),
    "shared": ("#e377c2", (0, (10, 4)), "x"),
    "auto": ("#17becf", (0, (6, 2, 2, 2)), "*"),
}
_OTHER = ("#7f7f7f", (0, (3, 1)), ".")


def seconds_label(seconds: float, _pos: Any = None) -> str:
    """A tick's time in the unit a person reads it in: ``500 ns``, ``20 µs``, ``1.5 ms``, ``2 s``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale * 0.999 or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover - the loop always returns


def bytes_label(nbytes: float, _pos: Any = None) -> str:
    """A tick's size in binary units: ``512 B``, ``4 KiB``, ``1 MiB``, ``2 GiB`` (the core's labels)."""
    return _native.size_label(max(round(nbytes), 0))


def plot_benchmark(benchmark: Any, ax: Any = None) -> Any:
    """The sweep on ``ax`` (or a new figure), time in µs/ms and sizes in KiB/MiB on the axes;
    returns the Figure. A new figure is not registered with pyplot, so a notebook shows it once
    (as the cell's value), and nothing but the figure is echoed."""
    try:
        import matplotlib.figure
        import matplotlib.ticker
    except ImportError as e:  # as to_pandas() says when pandas is missing
        raise ImportError(
            "Benchmark.plot() needs matplotlib: pip install matplotlib (the built-in plot needs nothing: display(b), or b.svg)"
        ) from e
    try:  # the notebook's backend registers how a Figure is shown; a script has none to load
        import matplotlib.pyplot  # noqa: F401
    except Exception:  # pragma: no cover - a backend that cannot load still draws into a Figure
        pass
    if ax is None:
        ax = matplotlib.figure.Figure(figsize=(6.4, 4.0), layout="constrained").subplots()
    by_path: dict[str, list[tuple[int, float]]] = {}
    for p in benchmark.points:
        timing = p.timing
        if p.verdict in ("shared", "copied") and timing is not None and timing.median and timing.median > 0:
            by_path.setdefault(p.path, []).append((p.size, timing.median))
    for path, points in by_path.items():
        colour, dash, marker = STYLES.get(path, _OTHER)
        points.sort()
        ax.plot([s for s, _ in points], [t for _, t in points], color=colour, linestyle=dash, marker=marker,
                markerfacecolor="none" if marker in "osD^v" else colour, label=path)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({p.size for p in benchmark.points})
    if sizes:
        ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(bytes_label))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(seconds_label))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("size")
    ax.set_ylabel("time per handoff (median)")
    data = benchmark.to_dict()
    ax.set_title(f"{data['source_framework']} → {data['target_framework']} · {data['dtype']} on {data['device']}")
    if by_path:
        ax.legend()
    return ax.figure
