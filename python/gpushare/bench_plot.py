"""``Benchmark.plot(ax=None)``: the sweep drawn with matplotlib, for users who restyle their plots.

matplotlib is imported here only, when a plot is asked for; the notebook's built-in plot is the
SVG the Rust core draws (crates/core/src/render/plot.rs). Colours, dashes and markers are the SVG's, so a path
looks the same in both, and lines that coincide (``dlpack`` under ``shared``) stay visible.
"""

from __future__ import annotations

from typing import Any

from gpushare import _native

#: matplotlib's markers for the share paths, in the path table's order (the SVG draws rings and
#: dots instead); ``auto`` a star, any other path a point.
_MARKERS = ("o", "s", "^", "D", "v", "P", "x")


def style(path: str) -> tuple[str, Any, str]:
    """A path's colour, matplotlib dash pattern and marker: the colour and dashes the core's SVG
    draws it with (``_native.lab.plot_style``)."""
    from gpushare.paths import names_of

    colour, dash = _native.lab.plot_style(path)
    pattern: Any = (0, tuple(int(x) for x in dash.split())) if dash else "solid"
    share = names_of("share")
    at = share.index(path) if path in share else len(_MARKERS)
    return colour, pattern, "*" if path == "auto" else _MARKERS[at] if at < len(_MARKERS) else "."


def seconds_label(seconds: float, _pos: Any = None) -> str:
    """A tick's time in the unit a person reads it in: ``500 ns``, ``20 µs``, ``1.5 ms``, ``2 s``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale * 0.999 or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover - the loop always returns


def bytes_label(nbytes: float, _pos: Any = None) -> str:
    """A tick's size in binary units: ``512 B``, ``4 KiB``, ``1 MiB``, ``2 GiB`` (the core's labels)."""
    return _native.text.size_label(max(round(nbytes), 0))


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
        colour, dash, marker = style(path)
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
    ax.set_title(f"{_native.text.route_label(data['source_framework'], data['target_framework'])} · {data['dtype']} on {data['device']}")
    if by_path:
        ax.legend()
    return ax.figure
