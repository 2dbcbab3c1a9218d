"""What this process can see of CUDA and the array frameworks: ``gpuinfo()`` → :class:`GpuInfo`.

The CUDA part comes from the driver (through the Rust core): driver version, devices (name, UUID,
compute capability, memory, the physical device ``CUDA_VISIBLE_DEVICES`` maps each ordinal to),
primary contexts, this thread's current context, peer access. The framework part says, for each of
PyTorch, TensorFlow, JAX, CuPy, Numba, NumPy and Paddle: installed (which version), imported,
DLPack support, the GPUs it sees and what its allocator holds, plus the memory settings in force.

Nothing here imports a framework unless asked (``gpuinfo(import_frameworks=True)``), and nothing
initialises a framework's GPU runtime: JAX and TensorFlow claim most of the GPU when they start, so
they are only asked once they have started by themselves. No CUDA is a normal answer ("no CUDA:
<reason>", fields "n/a"), not an error.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from gpushare import _native
from gpushare.adapters import ADAPTERS, by_module
from gpushare.ledger import framework_memory

#: The frameworks reported (by module name), in report order: every adapter's, in gpushare's order.
FRAMEWORKS = tuple(a.module for a in ADAPTERS.values())

#: Environment variables that decide how frameworks take GPU memory (and which devices exist).
MEMORY_SETTINGS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUPY_GPU_MEMORY_LIMIT",
    "GPUSHARE_DISABLE_CUDA",
)


@dataclass
class FrameworkInfo:
    """One framework as found in this process."""

    name: str
    installed: bool
    version: Optional[str] = None
    imported: bool = False
    #: The consumer entry point exists (``from_dlpack``); None when not imported (unknown).
    from_dlpack: Optional[bool] = None
    #: What ``__dlpack__`` hands out: "versioned" (DLPack 1.x, with flags), "legacy", "none" (no
    #: producer); None when not imported.
    dlpack_export: Optional[str] = None
    #: "probed" (asked a tiny CPU array) or "documented" (probing would start the GPU runtime).
    dlpack_export_source: Optional[str] = None
    #: The framework's own names for the GPUs it sees; None when it was not asked (not imported, or
    #: asking would initialise its GPU runtime).
    gpu_devices: Optional[list[str]] = None
    #: CUDA ordinal → what the framework's allocator holds there, in its own terms.
    memory: dict[int, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Why importing or asking it failed.
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory"] = {str(k): v for k, v in self.memory.items()}
        return d


def _native_call(name: str, problems: list[str], default: Any = None) -> Any:
    """Calls ``_native.cuda.<name>`` if this build has it. Report functions answer None/[] without
    CUDA themselves; an exception here is a driver error: noted in ``problems``, the default used."""
    fn = getattr(_native.cuda, name, None)
    if fn is None:
        return default
    try:
        return fn()
    except Exception as e:
        problems.append(f"cuda.{name}: {type(e).__name__}: {e}")
        return default


def _driver_status() -> dict[str, Any]:
    fn = getattr(_native.cuda, "driver_status", None)
    if fn is None:
        return {
            "available": False,
            "state": "unavailable",
            "version": None,
            "version_string": None,
            "device_count": 0,
            "reason": "this build of gpushare has no CUDA support (gpushare._native.cuda lacks driver_status)",
            "visible_devices": None,
        }
    return fn()


def _installed_version(name: str) -> tuple[bool, Optional[str]]:
    adapter = by_module(name)
    for dist in adapter.distributions() if adapter is not None else (name,):
        try:
            return True, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        return importlib.util.find_spec(name) is not None, None
    except (ImportError, ValueError):
        return False, None


@contextlib.contextmanager
def _native_stderr_quiet(quiet: bool):
    """Sends fd 2 to /dev/null while a framework with a noisy start (``Adapter.noisy_start``) is
    imported and first asked about its devices: its C++ banners would land in the report's output.
    Python's own errors still reach the caller as exceptions."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def describe_framework(name: str, ordinals: list[int], import_it: bool = False) -> FrameworkInfo:
    """One framework: found, imported (importing it only if ``import_it``), DLPack support, GPUs
    and allocator figures for each CUDA ordinal in ``ordinals``."""
    installed, version = _installed_version(name)
    info = FrameworkInfo(name=name, installed=installed, version=version)
    module = sys.modules.get(name)
    adapter = by_module(name)
    conflict = adapter.import_conflict() if adapter is not None and module is None and import_it and installed else None
    if conflict is not None:
        info.error = conflict
    quiet = module is None and adapter is not None and adapter.noisy_start
    if adapter is None and module is None and import_it and installed:
        info.error = f"not imported: gpushare has no adapter for {name}, and imports frameworks only through one"
    elif conflict is None and module is None and import_it and installed:
        try:
            with _native_stderr_quiet(quiet):
                module = adapter.import_module()
        except Exception as e:  # a broken install must not break the report
            info.error = f"import failed: {type(e).__name__}: {e}"
    if module is None:
        return info
    info.imported = True
    info.version = getattr(module, "__version__", None) or info.version
    try:
        if adapter is not None:
            with _native_stderr_quiet(quiet):
                adapter.describe_runtime(info, module)
    except Exception as e:
        info.error = f"{type(e).__name__}: {e}"
    for ordinal in ordinals:
        figures = framework_memory(name, ordinal)
        if figures is not None:
            info.memory[ordinal] = figures
    return info


def memory_settings() -> dict[str, Optional[str]]:
    """The memory-related environment variables, None when unset."""
    return {name: os.environ.get(name) for name in MEMORY_SETTINGS}


def _bytes(n: Optional[int]) -> str:
    if n is None:
        return "n/a"
    return _native.text.format_bytes(n)


def _hex(n: Optional[int]) -> str:
    return "n/a" if n is None else f"{n:#x}"


def _figures(figures: dict[str, int]) -> str:
    return ", ".join(f"{key} {_bytes(value)}" for key, value in figures.items())


class GpuInfo:
    """The report of :func:`gpuinfo`. Plain text as ``repr``, a table in notebooks, ``to_dict()``."""

    def __init__(
        self,
        driver: dict[str, Any],
        devices: list[dict[str, Any]],
        current_context: Optional[dict[str, Any]],
        peer_access: list[list[bool]],
        frameworks: dict[str, FrameworkInfo],
        settings: dict[str, Optional[str]],
        problems: Optional[list[str]] = None,
    ) -> None:
        self.driver = driver
        self.devices = devices
        self.current_context = current_context
        self.peer_access = peer_access
        self.frameworks = frameworks
        self.memory_settings = settings
        #: Driver calls that failed while the report was made (the report shows n/a there).
        self.problems = list(problems or [])
        #: Links, peer access both ways, primary contexts and framework holdings per device
        #: (gpushare.topology); None when not asked for.
        self.topology: Any = None
        #: What the cost model cache holds (gpushare.advice.summary), one line.
        self.cost_model: str = "cost model: not read"

    @property
    def cuda_available(self) -> bool:
        return bool(self.driver.get("available"))

    @property
    def reason(self) -> Optional[str]:
        """Why there is no CUDA (None when there is)."""
        return None if self.cuda_available else self.driver.get("reason")

    def to_dict(self) -> dict[str, Any]:
        return {
            "driver": dict(self.driver),
            "devices": [dict(d) for d in self.devices],
            "current_context": self.current_context,
            "peer_access": self.peer_access,
            "topology": None if self.topology is None else self.topology.to_dict(),
            "frameworks": {name: info.to_dict() for name, info in self.frameworks.items()},
            "memory_settings": dict(self.memory_settings),
            "problems": list(self.problems),
            "cost_model": self.cost_model,
        }

    # -- rendering -------------------------------------------------------------------------

    def _cuda_headline(self) -> str:
        if not self.cuda_available:
            return f"no CUDA: {self.reason}"
        count = self.driver.get("device_count", 0)
        return f"CUDA driver {self.driver.get('version_string')}, {count} device{'s' if count != 1 else ''}"

    def _device_lines(self, d: dict[str, Any]) -> list[str]:
        cc = d.get("compute_capability") or ("?", "?")
        physical = d.get("visible_as")
        mapped = f", physical {physical} via CUDA_VISIBLE_DEVICES" if physical is not None else ""
        total, free = d.get("total_memory"), d.get("free_memory")
        used = None if free is None or total is None else total - free
        memory = (
            f"{_bytes(used)} used of {_bytes(total)} ({_bytes(free)} free)"
            if free is not None
            else f"{_bytes(total)} total, free n/a (no context on this device yet)"
        )
        primary = d.get("primary_context") or {}
        state = (
            f"active {_hex(primary.get('handle'))}, flags {_hex(primary.get('flags'))}"
            if primary.get("active")
            else "inactive"
        )
        return [
            f"cuda:{d['ordinal']}  {d.get('name')}  (CC {cc[0]}.{cc[1]}, {d.get('multiprocessor_count')} SMs{mapped})",
            f"        UUID {d.get('uuid')}  PCI {d.get('pci_bus_id') or 'n/a'}",
            f"        memory {memory}",
            f"        primary context {state}",
        ]

    def _context_line(self) -> str:
        c = self.current_context
        if not self.cuda_available:
            return "current context: n/a"
        if c is None:
            return "this thread's current context: none"
        kind = "primary" if c.get("is_primary") else "NOT the primary context"
        return f"this thread's current context: {_hex(c.get('handle'))} on cuda:{c.get('device')} ({kind})"

    def _peer_lines(self) -> list[str]:
        n = len(self.peer_access)
        if n < 2:
            return []
        lines = ["peer access (row can access column):", "        " + " ".join(f"cuda:{j:<2}" for j in range(n))]
        for i, row in enumerate(self.peer_access):
            lines.append(f"cuda:{i:<3} " + " ".join(f"{'yes' if ok else 'no':<7}" for ok in row))
        return lines

    def _framework_rows(self) -> list[list[str]]:
        rows = []
        for info in self.frameworks.values():
            if info.imported:
                export = info.dlpack_export or "n/a"
                if info.dlpack_export_source == "documented":
                    export += " (doc)"
                from_dlpack = "yes" if info.from_dlpack else "no"
                gpus = ", ".join(info.gpu_devices) if info.gpu_devices else ("none" if info.gpu_devices == [] else "n/a")
            else:
                export = from_dlpack = gpus = "n/a"
            memory = "; ".join(f"cuda:{o} {_figures(f)}" for o, f in info.memory.items()) or "n/a"
            rows.append([
                info.name,
                info.version or ("n/a" if info.installed else "not installed"),
                "yes" if info.imported else "no",
                from_dlpack,
                export,
                gpus,
                memory,
            ])
        return rows

    _FRAMEWORK_HEADER = ["framework", "version", "imported", "from_dlpack", "exports", "GPUs", "allocator holds"]

    def _framework_notes(self) -> list[str]:
        lines = []
        for info in self.frameworks.values():
            for note in ([info.error] if info.error else []) + info.notes:
                lines.append(f"  {info.name}: {note}")
        return lines

    def __repr__(self) -> str:
        lines = [f"gpushare.gpuinfo: {self._cuda_headline()}"]
        for d in self.devices:
            lines += self._device_lines(d)
        lines.append(self._context_line())
        lines += self._peer_lines()
        if self.topology is not None and len(self.devices) > 1:
            lines += repr(self.topology).splitlines()
        lines += [f"driver call failed: {p}" for p in self.problems]
        lines.append(self.cost_model)
        lines.append("")
        rows = [self._FRAMEWORK_HEADER] + self._framework_rows()
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        notes = self._framework_notes()
        if notes:
            lines.append("notes ((doc) = documented behaviour, not probed):")
            lines += notes
        lines.append("")
        lines.append("memory settings:")
        width = max(len(name) for name in self.memory_settings)
        for name, value in self.memory_settings.items():
            lines.append(f"  {name.ljust(width)}  {'(unset)' if value is None else repr(value)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from gpushare import html_cells

        e = html.escape
        parts = [f"<div class='gpushare-gpuinfo'><p><b>gpushare.gpuinfo</b>: {e(self._cuda_headline())}</p>"]
        if self.devices:
            device_rows, device_details = [], []
            for d in self.devices:
                cc = d.get("compute_capability") or ("?", "?")
                total, free = d.get("total_memory"), d.get("free_memory")
                used = None if free is None or total is None else total - free
                primary = d.get("primary_context") or {}
                state = f"active {_hex(primary.get('handle'))}" if primary.get("active") else "inactive"
                device_rows.append([
                    f"cuda:{d['ordinal']}", str(d.get("name")), f"{cc[0]}.{cc[1]}", _bytes(used), _bytes(free), _bytes(total), state,
                ])
                physical = d.get("visible_as") if d.get("visible_as") is not None else "n/a"
                device_details.append([("UUID", str(d.get("uuid"))), ("physical", str(physical))])
            # Eight columns at most, the UUID on a detail line; alignment inline (html_cells).
            parts.append(html_cells.table(
                ["device", "name", "CC", "used", "free", "total", "primary context"], device_rows,
                numeric=("used", "free", "total"), details=device_details, classes="gpushare gpushare-gpuinfo-devices",
            ))
        parts.append(f"<p>{e(self._context_line())}</p>")
        for problem in self.problems:
            parts.append(f"<p>driver call failed: {e(problem)}</p>")
        parts.append(f"<p>{e(self.cost_model)}</p>")
        peers = self._peer_lines()
        if peers:
            parts.append("<pre>" + e("\n".join(peers)) + "</pre>")
        if self.topology is not None and len(self.devices) > 1:
            parts.append(self.topology._repr_html_())
        parts.append(html_cells.table(self._FRAMEWORK_HEADER, self._framework_rows(), classes="gpushare gpushare-gpuinfo-frameworks"))
        notes = self._framework_notes()
        if notes:
            parts.append("<ul>" + "".join(f"<li>{e(n.strip())}</li>" for n in notes) + "</ul>")
        settings = [[name, "(unset)" if value is None else repr(value)] for name, value in self.memory_settings.items()]
        parts.append(html_cells.table(["memory setting", "value"], settings, classes="gpushare gpushare-gpuinfo-memory"))
        parts.append("</div>")
        return "".join(parts)


def gpuinfo(import_frameworks: bool = False) -> GpuInfo:
    """Report CUDA and the frameworks as this process sees them (see the module docstring).

    ``import_frameworks=True`` imports every installed framework first (their GPU runtimes still
    start only when used). The first call initialises the CUDA driver (``cuInit``), as any CUDA
    framework does on first use.
    """
    problems: list[str] = []
    driver = _driver_status()
    available = bool(driver.get("available"))
    devices = _native_call("devices", problems, default=[]) if available else []
    current = _native_call("current_context", problems) if available else None
    peers = _native_call("peer_matrix", problems, default=[]) if available else []
    ordinals = [d["ordinal"] for d in devices or []]
    frameworks = {name: describe_framework(name, ordinals, import_frameworks) for name in FRAMEWORKS}
    info = GpuInfo(driver, devices or [], current, peers or [], frameworks, memory_settings(), problems)
    from gpushare import advice

    info.cost_model = advice.summary()
    if available:
        from gpushare.topology import topology

        try:
            info.topology = topology()
        except Exception as e:  # a report never fails for one section
            problems.append(f"topology: {type(e).__name__}: {e}")
    return info


__all__ = ["FRAMEWORKS", "MEMORY_SETTINGS", "FrameworkInfo", "GpuInfo", "describe_framework", "gpuinfo", "memory_settings"]
