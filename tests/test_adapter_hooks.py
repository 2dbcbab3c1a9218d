"""The hooks through which the package reaches a framework: what was written in
paths.py, devices.py, api.py and gpuinfo.py for torch, JAX, TensorFlow and CuPy by name is now
declared by their adapters, with a generic default every other framework gets."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import gpushare
from gpushare.adapters import ADAPTERS, Adapter, framework
from gpushare.adapters.host import values_lost
from gpushare.gpuinfo import describe_framework


def test_a_narrowing_that_lost_values_names_the_targets_own_fix():
    """JAX's fix (its x64 flag) comes from JAX's adapter; a target without one gets no JAX advice."""
    wide, narrow = np.array([1, 2**40], dtype=np.int64), np.array([1, 0], dtype=np.int32)
    numpy = framework("numpy")
    said = values_lost(numpy, wide, numpy, narrow)
    assert said.startswith("1 of 2 values changed (1099511627776 became 0)")
    assert said.endswith("Fix: cast the source to a dtype the target keeps first")
    assert "JAX" not in said

    class Narrowing(type(numpy)):
        keep_64_bit_fix = "let the target keep 64-bit types (JAX: jax_enable_x64)"

    said = values_lost(numpy, wide, Narrowing(), narrow)
    assert said.endswith("keeps first, or let the target keep 64-bit types (JAX: jax_enable_x64)")
    assert framework("jax").keep_64_bit_fix == Narrowing.keep_64_bit_fix
    assert values_lost(numpy, wide, numpy, wide.copy()) is None


def test_only_frameworks_that_track_gradients_detach():
    torch = pytest.importorskip("torch", reason="torch not installed")
    x = torch.ones(3, requires_grad=True)
    out = framework("torch").detached(x)
    assert not out.requires_grad and out.data_ptr() == x.data_ptr()
    plain = torch.ones(3)
    assert framework("torch").detached(plain) is plain
    a = np.ones(3)
    assert all(ADAPTERS[n].detached(a) is a for n in ("numpy", "jax", "tf", "cupy", "numba"))


def test_a_move_to_where_a_tensor_that_requires_grad_lies_hands_over_its_memory():
    """Nothing to move: the handoff gets the tensor detached by its adapter (the same memory), as
    PyTorch's own move does, instead of an export that refuses it."""
    torch = pytest.importorskip("torch", reason="torch not installed")
    x = torch.arange(4.0, requires_grad=True)
    r = gpushare.share(x, "numpy", device="cpu", path="move")
    assert r.verdict == "shared"
    np.testing.assert_array_equal(r.value, [0.0, 1.0, 2.0, 3.0])


def test_the_host_route_copies_a_host_array_and_keeps_the_others():
    numpy = framework("numpy")
    a = np.arange(3.0)
    copied = numpy.host_array(a, on_host=True)
    assert not np.shares_memory(copied, a)
    np.testing.assert_array_equal(copied, a)
    assert numpy.host_array(a, on_host=False) is a  # off the host, to_numpy itself copied


def test_who_moved_the_device_names_the_adapters_setters():
    """Without JAX (which says it moved the device), the fallback names how users do it, as the
    adapters declare: PyTorch's and CuPy's calls, in the registry's order."""
    code = "from gpushare.devices import who_moves_current_device; print(who_moves_current_device())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "another framework or the user (torch.cuda.set_device, cupy.cuda.Device(n).use()) changed it"


def test_a_source_whose_export_takes_no_stream_says_how_the_work_was_ordered():
    tf = ADAPTERS["tf"]
    assert not tf.export_takes_stream
    assert tf.export_without_stream().startswith("TensorFlow's export waits for the tensor's queued work")

    class NoStream(Adapter):
        name = "demo"

    assert NoStream().export_without_stream() == "demo's export takes no stream; gpushare passed none"


def test_the_environment_report_imports_only_through_an_adapter():
    """gpuinfo imports a framework by its adapter's import_module; a module with no adapter is not
    imported, and says why."""
    assert "tabnanny" not in sys.modules  # installed with Python, imported by nothing here
    info = describe_framework("tabnanny", [], import_it=True)
    assert not info.imported and "no adapter" in info.error and "tabnanny" not in sys.modules
    info = describe_framework("numpy", [], import_it=True)
    assert info.imported and info.error is None


def test_a_framework_whose_package_is_missing_is_not_installed_and_raises_nothing():
    """find_spec("mlx.core") imports the package "mlx" first and raises where it is missing: the
    CUDA matrix crashed on a GPU machine without MLX. installed() says False instead."""
    from gpushare.adapters import ADAPTERS

    adapter = type(ADAPTERS["numpy"])()
    adapter.module = "gpushare_no_such_package.core"
    adapter._installed = None
    assert adapter.installed() is False
