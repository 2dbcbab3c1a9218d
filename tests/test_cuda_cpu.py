"""The CUDA layer where there may be no GPU: reports work and say why there is no CUDA, primitives
raise gpushare's CudaError (never a panic), nothing imports a framework behind the user's back.

The no-CUDA paths are also exercised on GPU machines, in subprocesses with GPUSHARE_DISABLE_CUDA=1
or CUDA_VISIBLE_DEVICES="" (the driver state is decided once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

from gpushare import _native
from gpushare.gpuinfo import FRAMEWORKS, MEMORY_SETTINGS, GpuInfo, describe_framework, gpuinfo

needs_cuda_bindings = pytest.mark.skipif(
    not hasattr(_native.cuda, "driver_status"),
    reason="gpushare._native was built without the CUDA bindings (cuda::register not wired yet)",
)


def run_python(code: str, **env: str) -> dict:
    """Runs `code` in a fresh interpreter with `env` added; the code prints one JSON object."""
    full_env = {**os.environ, **env}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"subprocess failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_gpuinfo_reports_what_is_here():
    info = gpuinfo()
    assert isinstance(info, GpuInfo)
    text = repr(info)
    assert text.startswith("gpushare.gpuinfo: ")
    assert set(info.frameworks) == set(FRAMEWORKS)
    assert set(info.memory_settings) == set(MEMORY_SETTINGS)
    d = info.to_dict()
    json.dumps(d)  # the dict form is plain data
    assert d["driver"]["available"] == info.cuda_available
    html = info._repr_html_()
    # Two tables (frameworks, memory settings), styled inline.
    assert html.startswith("<div") and html.count("<table ") == 2 and html.count("</table>") == 2
    if info.cuda_available:
        assert info.reason is None
        assert len(info.devices) == info.driver["device_count"] >= 1
        assert all(dev["uuid"].startswith("GPU-") for dev in info.devices)
    else:
        assert info.reason
        assert f"no CUDA: {info.reason}" in text
        assert "no CUDA" in html
        assert info.devices == [] and info.peer_access == [] and info.current_context is None
        assert "current context: n/a" in text


@needs_cuda_bindings
def test_without_cuda_reports_answer_none_and_primitives_raise():
    result = run_python(
        """
        import json
        from gpushare._native import cuda as n
        from gpushare.exceptions import CudaError, GpushareError
        out = {"status": n.driver_status()}
        out["reports"] = [n.pointer_attributes(4096), n.devices(), n.mem_info(0),
                          n.peer_matrix(), n.current_context(), n.primary_context(0),
                          n.same_allocation(4096, 4096, 1)]
        raised = []
        for make in (lambda: n.DeviceAllocation(16), lambda: n.PrivateContextAllocation(16),
                     lambda: n.PinnedStager(), lambda: n.EventTimer(), lambda: n.copy_dtod(8192, 4096, 16),
                     lambda: n.stage_through_pinned(4096, 8192, 16), lambda: n.synchronize(),
                     lambda: n.synchronize_context(0), lambda: n.MemoryMeter(0),
                     lambda: n.cross_context_access(0)):
            try:
                make()
                raised.append(None)
            except Exception as e:  # a pyo3 PanicException would escape this (BaseException)
                raised.append([type(e).__name__, isinstance(e, CudaError), isinstance(e, GpushareError),
                               e.kind, e.code, str(e)])
        out["raised"] = raised
        print(json.dumps(out))
        """,
        GPUSHARE_DISABLE_CUDA="1",
    )
    status = result["status"]
    assert status["available"] is False and status["state"] == "unavailable"
    assert status["version"] is None and status["device_count"] == 0
    assert status["reason"] == "disabled by GPUSHARE_DISABLE_CUDA=1"
    assert result["reports"] == [None, [], None, [], None, None, None]
    for entry in result["raised"]:
        assert entry is not None, "a primitive worked without CUDA"
        name, is_cuda_error, is_gpushare_error, kind, code, message = entry
        assert (name, is_cuda_error, is_gpushare_error, kind, code) == ("CudaError", True, True, "unavailable", None)
        assert message == "no CUDA: disabled by GPUSHARE_DISABLE_CUDA=1"


@needs_cuda_bindings
def test_empty_cuda_visible_devices_is_a_reason_not_a_crash():
    result = run_python(
        """
        import json
        from gpushare._native import cuda as n
        from gpushare.gpuinfo import gpuinfo
        info = gpuinfo()
        print(json.dumps({"status": n.driver_status(), "visible": n.visible_devices(),
                          "text": repr(info), "settings": info.memory_settings}))
        """,
        CUDA_VISIBLE_DEVICES="",
    )
    status = result["status"]
    assert status["available"] is False
    # With a driver the reason names the variable; without one, libcuda is missing first.
    assert "CUDA_VISIBLE_DEVICES" in status["reason"] or "libcuda" in status["reason"]
    assert result["visible"] == {"raw": "", "entries": [], "ignored": [], "hides_all": True}
    assert status["visible_devices"]["hides_all"] is True
    assert "no CUDA: " in result["text"]
    assert result["settings"]["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES            ''" in result["text"]


@needs_cuda_bindings
def test_visible_devices_are_read_like_the_driver(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0,-1,2")
    v = _native.cuda.visible_devices()
    assert v == {"raw": "1,0,-1,2", "entries": ["1", "0"], "ignored": ["-1", "2"], "hides_all": False}


def test_gpuinfo_imports_no_framework():
    result = run_python(
        """
        import json, sys
        before = set(sys.modules)
        from gpushare.gpuinfo import gpuinfo
        info = gpuinfo()
        heavy = ["torch", "tensorflow", "jax", "cupy", "numba", "paddle"]
        print(json.dumps({"loaded": [m for m in heavy if m in sys.modules],
                          "imported": {k: v.imported for k, v in info.frameworks.items()}}))
        """
    )
    assert result["loaded"] == []
    assert not any(v for k, v in result["imported"].items() if k != "numpy")


def test_describe_framework_probes_an_imported_framework():
    numpy = pytest.importorskip("numpy")
    info = describe_framework("numpy", [], import_it=False)
    assert info.installed and info.imported
    assert info.version == numpy.__version__
    assert info.from_dlpack is True
    assert info.dlpack_export in ("versioned", "legacy") and info.dlpack_export_source == "probed"
    assert info.gpu_devices == [] and info.memory == {}


def test_describe_framework_only_imports_when_asked():
    result = run_python(
        """
        import json, sys
        from gpushare.gpuinfo import describe_framework
        quiet = describe_framework("numpy", [], import_it=False)
        loaded_quiet = "numpy" in sys.modules
        asked = describe_framework("numpy", [], import_it=True)
        missing = describe_framework("paddle", [], import_it=True)
        print(json.dumps({"quiet": quiet.to_dict(), "loaded_quiet": loaded_quiet,
                          "asked": asked.to_dict(), "missing": missing.to_dict()}))
        """
    )
    assert result["loaded_quiet"] is False
    assert result["quiet"]["installed"] is True and result["quiet"]["imported"] is False
    assert result["quiet"]["from_dlpack"] is None and result["quiet"]["dlpack_export"] is None
    assert result["asked"]["imported"] is True and result["asked"]["from_dlpack"] is True
    if not result["missing"]["installed"]:
        assert result["missing"]["imported"] is False and result["missing"]["error"] is None


def test_a_broken_framework_is_reported_not_raised(monkeypatch):
    class Broken(types.ModuleType):
        __version__ = "14.0.0"

        def __getattr__(self, name):
            raise RuntimeError(f"broken install: {name}")

    monkeypatch.setitem(sys.modules, "cupy", Broken("cupy"))
    info = describe_framework("cupy", [0], import_it=False)
    assert info.imported is True
    assert info.error and "broken install" in info.error
    assert info.memory == {}
    text = repr(gpuinfo())
    assert "cupy" in text and "broken install" in text


def test_the_ledger_asks_the_allocators_named_in_their_order_and_a_share_names_its_pair(monkeypatch):
    from gpushare import api, ledger
    from gpushare.adapters import framework

    asked = []
    probes = {name: (lambda ordinal, name=name: asked.append(name) or {"bytes": ordinal}) for name in ("fake_a", "fake_b")}
    monkeypatch.setattr(ledger, "_probes", lambda: probes)
    for name in probes:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    figures = ledger.allocator_memory(3, frameworks=("fake_b", "fake_a", "not_imported"))
    assert list(figures) == ["fake_b", "fake_a"] and asked == ["fake_b", "fake_a"]
    assert figures["fake_a"] == {"bytes": 3}
    assert list(ledger.allocator_memory(3, ["fake_a"])) == ["fake_a"]
    # A share's probe names its two frameworks once, in the ledger's order, whichever way it goes.
    for src, dst in (("jax", "torch"), ("torch", "jax")):
        probe = api._pair_allocators(framework(src), framework(dst))
        assert probe.keywords["frameworks"] == ("torch", "jax")
    assert api._pair_allocators(framework("torch"), framework("torch")).keywords["frameworks"] == ("torch",)
    assert api._pair_allocators(framework("numpy"), framework("torch")).keywords["frameworks"] == ("torch",)


def test_gpuinfo_import_keeps_tensorflows_native_banners_out_of_the_report():
    """`gpushare doctor --import` and `%gpuinfo --import` printed TensorFlow's C++ banners (absl's
    "All log messages before absl::InitializeLog()…", oneDNN's note) into the report."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow not installed")
    code = "import gpushare; r = gpushare.gpuinfo(import_frameworks=True); print(r.to_dict()['frameworks']['tensorflow']['imported'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("True"), done.stdout
    assert "absl::InitializeLog" not in done.stderr and "oneDNN" not in done.stderr, done.stderr
