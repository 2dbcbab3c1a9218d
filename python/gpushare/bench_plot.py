"""``Benchmark.plot(ax=None)``: the sweep drawn with matplotlib, for users who restyle their plots.

matplotlib is imported here only, when a plot is asked for; the notebook's built-in plot is the
SVG the Rust core draws (crates/core/src/render/plot.rs). Colours, dashes and markers are the SVG's, so a path
looks the same in both, and lines that coincide (``dlpack`` under ``shared``) stay visible.
"""

from __future__ import annotations

from typing import Any

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


def plot_benchmark(benchmark: Any, ax: Any = None) -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # as to_pandas() says when pandas is missing
        raise ImportError(
            "Benchmark.plot() needs matplotlib: pip install matplotlib (the built-in plot needs nothing: display(b), or b.svg)"
        ) from e
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    by_path: dict[str, list[tuple[int, float]]] = {}
    for p in benchmark.points:
        timing = p.timing
        if p.verdict != "failed" and timing is not None and timing.median and timing.median > 0:
            by_path.setdefault(p.path, []).append((p.size, timing.median))
    for path, points in by_path.items():
        colour, dash, marker = STYLES.get(path, _OTHER)
        points.sort()
        ax.plot([s for s, _ in points], [t for _, t in points], color=colour, linestyle=dash, marker=marker,
                markerfacecolor="none" if marker in "osD^v" else colour, label=path)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("time per handoff (s)")
    data = benchmark.to_dict()
    ax.set_title(f"{data['source_framework']} → {data['target_framework']} · {data['dtype']} on {data['device']}")
    if by_path:
        ax.legend()
    return ax
