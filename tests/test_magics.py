"""The magics through a real InteractiveShell: bindings, chains, flags, help, and failures that raise
and leave the namespace as it was."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from IPython.core.error import UsageError

from gpushare.api import ShareTable
from gpushare.exceptions import ConversionError, NotAnArrayError

pytest.importorskip("torch", reason="torch not installed")
pytest.importorskip("jax", reason="jax not installed")
pytest.importorskip("tensorflow", reason="tensorflow not installed")


@pytest.fixture(autouse=True)
def frameworks(run):
    run("import torch, numpy as np, jax, tensorflow as tf")


def test_load_ext_imports_no_framework():
    import subprocess

    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance(); ip.history_manager.enabled = False\n"
        "ip.run_line_magic('load_ext', 'gpushare')\n"
        "print(sorted(m for m in ('torch','tensorflow','jax','cupy','numba','numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_cell_share_binds_every_source_array(ip, run):
    table = run(
        "%%share torch->tf -o\n"
        "x = torch.arange(6, dtype=torch.float32).reshape(2, 3)\n"
        "y, z = torch.ones(4), 'not an array'\n"
        "n = np.zeros(3)\n"
    )
    assert isinstance(table, ShareTable) and len(table) == 2
    assert {r.name for r in table} == {"x", "y"}
    assert ip.user_ns["x_tf"].shape == (2, 3)
    assert "n_tf" not in ip.user_ns and "z_tf" not in ip.user_ns
    assert table["x"].verdict == "shared"
    ip.user_ns["x"][0, 0] = 50.0
    assert float(ip.user_ns["x_tf"][0, 0]) == 50.0


def test_cell_chain_binds_every_hop_and_shows_identity(ip, run):
    table = run("%%share torch->jax->tf -o\nc = torch.arange(8, dtype=torch.float32)\n")
    assert [r.target.framework for r in table] == ["jax", "tf"]
    assert all(r.shares_origin for r in table)
    assert "c_jax" in ip.user_ns and "c_tf" in ip.user_ns


def test_line_share_infers_and_checks_source(ip, run):
    run("v = torch.ones(5)")
    run("%share v ->jax -q")
    assert ip.user_ns["v_jax"].shape == (5,)
    run("%share v torch->numpy --as vn -q")
    assert isinstance(ip.user_ns["vn"], np.ndarray)
    with pytest.raises(NotAnArrayError, match="expected a jax array"):
        run("%share v jax->numpy")


def test_flags_n_r_o_and_template(ip, run):
    run("t = torch.ones(3)")
    r = run("%share t ->numpy -n 3 -r 4 -o")
    assert r[0].timing.repeats == 4 and r[0].timing.loops == 3
    run("%%share torch->numpy --as np_{name} -q\nq = torch.zeros(2)\n")
    assert "np_q" in ip.user_ns


def test_config_traitlets(ip, run):
    run("%config GpuShare.repeat = 3")
    try:
        r = run("t2 = torch.ones(3)\n%share t2 ->numpy -o")
        assert r[0].timing.repeats == 3
    finally:
        run("%config GpuShare.repeat = 1")
    # A bad value is refused when it is set (%config reports the TraitError), and the setting keeps
    # its last good value.
    magics = ip.magics_manager.registry["GpuShare"]
    try:
        run("%config GpuShare.repeat = 0")
        assert magics.repeat == 1
        r = run("%share t2 ->numpy -o")
        assert r[0].timing.repeats == 1
    finally:
        run("%config GpuShare.repeat = None")
    r = run("%share t2 ->numpy -o")
    assert r[0].timing.repeats >= 3 and r[0].timing.warmup == 1, "timed as %timeit does, within the budget"


def test_table_displays_html(ip, run, capsys):
    from IPython.core.formatters import format_display_data

    table = run("%%share torch->tf -o\nd = torch.ones(2)\n")
    data, _ = format_display_data(table)
    assert "<table" in data["text/html"]
    assert data["application/vnd.gpushare+json"]["schema"] == "gpushare.shares/1"


def test_help_comes_from_magic_arguments(ip):
    doc = ip.find_line_magic("share").__doc__
    assert "%%share SRC->DST" in doc and "--path" in doc and "-r REPEAT" in doc


@pytest.mark.parametrize(
    "line,match",
    [
        ("%share nosuchvar ->jax", "no variable named 'nosuchvar'"),
        ("%share t3 ->tfx", "did you mean 'tf'"),
        ("%share t3", "missing route"),
        ("%share t3 ->jax -r 0", "at least 1"),
        ("%share t3 ->jax --bogus", "unrecognized"),
        ("%share t3 torch->", "expected SRC->DST"),
    ],
)
def test_bad_arguments_raise_usage_error(run, line, match):
    run("t3 = torch.ones(2)")
    with pytest.raises(UsageError, match=match):
        run(line)


def test_failed_cell_conversion_binds_nothing(ip, run):
    run("f1_tf = 'old value'")
    with pytest.raises(ConversionError):
        run("%%share torch->tf\nf1 = torch.ones(3)\nf2 = torch.ones(3, 4).t()\n")
    assert ip.user_ns["f1_tf"] == "old value"
    assert "f2_tf" not in ip.user_ns


def test_user_cell_error_propagates(run):
    with pytest.raises(ZeroDivisionError):
        run("%%share torch->tf\ne = 1 / 0\n")


def test_cell_without_source_arrays_is_a_usage_error(run):
    with pytest.raises(UsageError, match="bound no torch arrays"):
        run("%%share torch->tf\nk = np.ones(3)\n")


def test_unload_removes_the_magic(ip, run):
    run("%unload_ext gpushare")
    try:
        assert ip.find_line_magic("share") is None
        assert ip.find_line_magic("sharebench") is None and ip.find_line_magic("gpuinfo") is None
    finally:
        run("%load_ext gpushare")
    assert ip.find_line_magic("share") is not None
