"""Who can see whose memory: the links between GPUs, peer access both ways, each device's primary
context and what each framework holds there (``gpushare.topology()``, shown by ``%gpuinfo``).

The link kind comes from ``nvidia-smi topo -m`` (NVML's words: ``NV18`` is 18 bonded NVLinks, ``PIX``,
``PXB``, ``PHB``, ``NODE``, ``SYS`` are PCIe paths); peer access and the link's rank from the driver
(``cuDeviceCanAccessPeer``, ``CU_DEVICE_P2P_ATTRIBUTE_*``). Nothing here creates a CUDA context.
"""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import subprocess
from typing import Any

from gpushare import _native

# NVLink bandwidth per link and direction, by compute capability major (NVIDIA's datasheets:
# NVLink3 on A100 and NVLink4 on H100/H200 carry 25 GB/s per link per direction, so NV18 is
# 450 GB/s; NVLink5 on Blackwell 50 GB/s per link).
_NVLINK_PER_LINK_Bps = {8: 25e9, 9: 25e9, 10: 50e9}

_PCIE_WORDS = {
    "PIX": "PCIe, one PCIe bridge",
    "PXB": "PCIe, several PCIe bridges",
    "PHB": "PCIe through the CPU's host bridge",
    "NODE": "PCIe across host bridges within a NUMA node",
    "SYS": "PCIe across NUMA nodes (SMP interconnect)",
}


def parse_topo_matrix(text: str) -> dict[tuple[int, int], str]:
    """``{(i, j): "NV18"}`` from ``nvidia-smi topo -m``'s matrix (GPU rows and columns only)."""
    links: dict[tuple[int, int], str] = {}
    header: list[str] | None = None
    # nvidia-smi underlines the header row with terminal escapes (ESC[4m … ESC[0m) even when piped.
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            if header is not None and links:
                break  # the legend follows the matrix
            continue
        if header is None:
            if tokens[0].startswith("GPU"):
                header = []
                for token in tokens:
                    if not re.fullmatch(r"(GPU|NIC)\d+", token):
                        break
                    header.append(token)
            continue
        m = re.fullmatch(r"GPU(\d+)", tokens[0])
        if m is None:
            continue
        row = int(m.group(1))
        for column, value in zip(header, tokens[1:]):
            c = re.fullmatch(r"GPU(\d+)", column)
            if c is not None and int(c.group(1)) != row:
                links[(row, int(c.group(1)))] = value
    return links


def link_words(kind: str | None) -> str:
    if kind is None:
        return "unknown (nvidia-smi topo -m did not say)"
    m = re.fullmatch(r"NV(\d+)", kind)
    if m:
        return f"NVLink ×{m.group(1)} ({kind})"
    return _PCIE_WORDS.get(kind, kind)


def nvlink_limit_Bps(kind: str | None, compute_major: int | None) -> float | None:
    """Per-direction NVLink limit of a link ``NV<n>`` on GPUs of that compute capability."""
    m = re.fullmatch(r"NV(\d+)", kind or "")
    per_link = _NVLINK_PER_LINK_Bps.get(compute_major or 0)
    return None if m is None or per_link is None else int(m.group(1)) * per_link


_TOPO: dict[tuple[int, int], str] | None = None


def nvidia_smi_links() -> dict[tuple[int, int], str]:
    """The link matrix from ``nvidia-smi topo -m``, asked once per process; {} when unavailable.
    nvidia-smi counts physical GPUs: with CUDA_VISIBLE_DEVICES set the indices may differ."""
    global _TOPO
    if _TOPO is None:
        _TOPO = {}
        exe = shutil.which("nvidia-smi")
        if exe is not None:
            try:
                out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20)
                if out.returncode == 0:
                    _TOPO = parse_topo_matrix(out.stdout)
            except (OSError, subprocess.SubprocessError):
                pass
    return _TOPO


def _devices() -> list[dict]:
    try:
        return list(_native.cuda.devices())
    except Exception:
        return []


def link_for(src_ordinal: int | None, device: str, path: str) -> dict | None:
    """The link a move from ``src_ordinal`` (None: the host) to ``device`` crosses by ``path``:
    ``name``, ``limit_Bps`` (per direction, None when unknown), ``limit_source``."""
    from gpushare.devices import parse_device

    on_host, ordinal = parse_device(device)
    if path == "pinned" or on_host or src_ordinal is None:
        return {"name": "the host link (PCIe or C2C), staged through page-locked memory", "limit_Bps": None,
                "limit_source": "measure it: benchmarks/bench_devices.py"}
    if src_ordinal == ordinal:
        return None
    kind = nvidia_smi_links().get((src_ordinal, ordinal))
    majors = {d["ordinal"]: d["compute_capability"][0] for d in _devices()}
    limit = nvlink_limit_Bps(kind, majors.get(src_ordinal))
    return {"name": link_words(kind), "limit_Bps": limit,
            "limit_source": "NVLink per-link rate × links, per direction" if limit else "unknown"}


class Topology:
    """Devices, the link and peer access between each pair, each device's primary context, and
    what each framework's allocator holds on each device. Text, HTML and JSON forms."""

    def __init__(self, data: dict):
        self.data = data

    def to_dict(self) -> dict:
        return self.data

    def to_json(self) -> str:
        return json.dumps({"schema": "gpushare.topology/1", "data": self.data})

    def _pair_lines(self) -> list[str]:
        lines = []
        for p in self.data["pairs"]:
            limit = f", {p['limit_Bps'] / 1e9:.0f} GB/s per direction" if p.get("limit_Bps") else ""
            lines.append(
                f"cuda:{p['a']} ↔ cuda:{p['b']}: {p['link']}{limit}; peer access "
                f"{p['a']}→{p['b']} {'yes' if p['a_to_b'] else 'no'}, {p['b']}→{p['a']} {'yes' if p['b_to_a'] else 'no'}"
                + (f", rank {p['performance_rank']}" if p.get("performance_rank") is not None else "")
                + (", native atomics" if p.get("native_atomics") else "")
            )
        return lines

    def __repr__(self) -> str:
        d = self.data
        if not d["devices"]:
            return f"Topology: no CUDA devices ({d.get('reason') or 'none visible'})"
        lines = [f"Topology: {len(d['devices'])} CUDA device(s); current device: "
                 f"{'none' if d['current_device'] is None else 'cuda:%d' % d['current_device']}"]
        for dev in d["devices"]:
            held = "; ".join(f"{fw} {figs}" for fw, figs in dev["frameworks"].items()) or "nothing reported"
            lines.append(f"  cuda:{dev['ordinal']} {dev['name']}: primary context "
                         f"{'active' if dev['primary_context_active'] else 'inactive'}; frameworks: {held}")
        lines += ["  " + line for line in self._pair_lines()] or ["  one device: no links"]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        d = self.data
        if not d["devices"]:
            return f"<p>Topology: no CUDA devices ({e(str(d.get('reason') or 'none visible'))})</p>"
        rows = "".join(
            f"<tr><td>cuda:{dev['ordinal']}</td><td>{e(dev['name'])}</td>"
            f"<td>{'active' if dev['primary_context_active'] else 'inactive'}</td>"
            f"<td>{e('; '.join(f'{fw} {figs}' for fw, figs in dev['frameworks'].items()) or '—')}</td></tr>"
            for dev in d["devices"]
        )
        pairs = "".join(f"<li>{e(line)}</li>" for line in self._pair_lines()) or "<li>one device: no links</li>"
        return (f"<table><tr><th>device</th><th>name</th><th>primary context</th><th>frameworks hold</th></tr>"
                f"{rows}</table><ul>{pairs}</ul>")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return {"text/plain": repr(self), "text/html": self._repr_html_(),
                "application/vnd.gpushare+json": {"schema": "gpushare.topology/1", "data": copy.deepcopy(self.data)}}


def topology() -> Topology:
    """The several-GPU picture now (see :class:`Topology`). Creates no context."""
    from gpushare.devices import current_device
    from gpushare.ledger import allocator_memory

    status = _native.cuda.driver_status()
    devices = _devices()
    data: dict[str, Any] = {"reason": status.get("reason"), "devices": [], "pairs": [],
                            "current_device": current_device() if devices else None}
    for dev in devices:
        i = dev["ordinal"]
        data["devices"].append({
            "ordinal": i, "name": dev["name"], "uuid": dev["uuid"],
            "primary_context_active": bool(dev["primary_context"]["active"]),
            "frameworks": allocator_memory(i),
        })
    if len(devices) > 1:
        links, majors = nvidia_smi_links(), {d["ordinal"]: d["compute_capability"][0] for d in devices}
        for a in range(len(devices)):
            for b in range(a + 1, len(devices)):
                ab, ba = _native.cuda.peer_link(a, b) or {}, _native.cuda.peer_link(b, a) or {}
                kind = links.get((a, b))
                data["pairs"].append({
                    "a": a, "b": b, "link": link_words(kind), "nvidia_smi": kind,
                    "limit_Bps": nvlink_limit_Bps(kind, majors.get(a)),
                    "a_to_b": bool(ab.get("can_access")), "b_to_a": bool(ba.get("can_access")),
                    "performance_rank": ab.get("performance_rank"), "native_atomics": ab.get("native_atomics"),
                })
    return Topology(data)
