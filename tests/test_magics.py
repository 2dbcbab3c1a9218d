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
        # Every framework gpushare has an adapter for (MLX, Warp, cuda.core and PyCUDA included).
        "from gpushare.adapters import ADAPTERS\n"
        "modules = {m for a in ADAPTERS.values() for m in (a.module, *a.type_modules)}\n"
        "print(sorted(m for m in modules if m in sys.modules))\n"
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


def test_config_set_before_load_ext_is_checked_at_load(ip, run):
    """IPython stores %config GpuShare.* unchecked while the extension is not loaded: a good value
    applies at %load_ext, a bad one is refused there with a warning naming it (loading still
    works, the default stays) instead of a traitlets traceback at every %load_ext."""
    from gpushare.exceptions import GpushareWarning
    from gpushare.magics import GpuShare

    run("%unload_ext gpushare")
    try:
        assert ip.find_line_magic("share") is None
        run("%config GpuShare.repeat = 0")  # no GpuShare to refuse it: IPython keeps it
        run("%config GpuShare.path = 'bogus'")
        run("%config GpuShare.number = 3")
        with pytest.warns(GpushareWarning) as caught:
            run("%load_ext gpushare")
        text = " | ".join(str(w.message) for w in caught)
        assert "GpuShare.repeat = 0" in text and "%load_ext gpushare" in text and "less than 1" in text, text
        assert "GpuShare.path = 'bogus'" in text and "unknown transfer path" in text, text
        assert "number" not in text, text
        assert ip.find_line_magic("share") is not None
        live = [c for c in ip.configurables if isinstance(c, GpuShare)]
        assert len(live) == 1, live  # no half-built instance left behind by a failed load
        assert (live[0].repeat, live[0].path, live[0].number) == (None, "auto", 3)
        assert "repeat" not in ip.config.GpuShare and "path" not in ip.config.GpuShare
    finally:
        ip.config.GpuShare.pop("number", None)
        for c in [c for c in ip.configurables if isinstance(c, GpuShare)]:
            c.number = None
        if ip.find_line_magic("share") is None:
            run("%load_ext gpushare")


# -- magics under odd inputs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line,bound",
    [
        ("%share sp torch-> tf -q", "sp_tf"),
        ("%share sp -> tf -q", "sp_tf"),
        ("%share sp torch -> jax -q", "sp_jax"),
        ("%share sp torch ->jax -q", "sp_jax"),
        ("%share sp torch-> jax ->tf -q", "sp_tf"),
        ("%share -q --as sp_out sp torch -> numpy", "sp_out"),
        ("%share -q -p dlpack sp -> numpy", "sp_numpy"),
        ("%%share torch -> tf -q\nsp2 = torch.ones(3)\n", "sp2_tf"),
        ("%%share -> tf -q\nsp2 = torch.ones(3)\n", "sp2_tf"),
        # The arrow gpushare prints reads as the typed one.
        ("%share sp torch→ jax → tf -q", "sp_tf"),
        ("%share sp → numpy -q", "sp_numpy"),
    ],
)
def test_routes_parse_with_or_without_spaces(ip, run, line, bound):
    run("sp = torch.ones(3)")
    ip.user_ns.pop(bound, None)
    run(line)
    assert ip.user_ns[bound].shape == (3,)


def test_a_variable_named_like_a_framework_is_still_the_name(ip, run):
    # The first positional of the line form is the variable, even when it reads as a framework.
    ip.user_ns["jax_arr"] = ip.user_ns["torch"].ones(2)
    run("%share jax_arr -> numpy -q")
    assert isinstance(ip.user_ns["jax_arr_numpy"], np.ndarray)


def test_sharebench_route_with_spaces(run):
    b = run("%sharebench numpy -> torch --sizes 1KiB --paths dlpack -n 1 -r 1 -q -o")
    assert b is not None
    b = run("%sharebench numpy→torch --sizes 1KiB --paths dlpack -n 1 -r 1 -q -o")
    assert b is not None and (b.to_dict()["source_framework"], b.to_dict()["target_framework"]) == ("numpy", "torch")


def test_help_shows_the_route_and_every_default(ip):
    from gpushare.magics import GpuShare

    magic = ip.find_line_magic("share")
    usage = magic.parser.format_usage()
    assert "%share NAME [SRC]->DST" in usage and "%%share SRC->DST" in usage
    doc = magic.__doc__
    assert doc.splitlines()[0:4] == magic.parser.format_help().splitlines()[0:4]
    for name, trait in GpuShare.class_own_traits(config=True).items():
        assert f"GpuShare.{name} = {trait.default_value!r}" in doc, name
    assert "None: auto" in doc and "time_budget" in doc
    # The flags that default to a %config setting say so.
    for flag in ("-n NUMBER", "-r REPEAT", "--path PATH", "--as <NEW|TEMPLATE>"):
        assert flag in doc
    assert "GpuShare.number (None: auto" in " ".join(doc.split())
    assert "GpuShare.repeat (None:" in " ".join(doc.split())
    # What %share? prints.
    text = ip.object_inspect_text("%share")
    assert "%share NAME [SRC]->DST" in text and "GpuShare.time_budget = 0.05" in text
    assert "%sharebench SRC->DST" in ip.find_line_magic("sharebench").parser.format_usage()


def test_table_says_what_was_bound(ip, run, capsys):
    run("bd = torch.ones(2)")
    capsys.readouterr()
    run("%share bd ->numpy")
    assert "bound: bd_numpy" in capsys.readouterr().out
    run("%%share torch->jax->tf\nb1 = torch.ones(2)\nb2 = torch.zeros(2)\n")
    assert "bound: b1_jax, b1_tf, b2_jax, b2_tf" in capsys.readouterr().out
    run("%share bd ->numpy -o")
    assert "bound: bd_numpy" in capsys.readouterr().out
    run("%share bd ->numpy -q")
    assert "bound" not in capsys.readouterr().out


def test_replacing_the_source_needs_force(ip, run):
    run("ow = torch.ones(2)")
    with pytest.raises(UsageError, match="replace the array being converted.*-f"):
        run("%share ow ->numpy --as ow -q")
    assert type(ip.user_ns["ow"]).__module__.startswith("torch")
    with pytest.raises(UsageError, match="replace the array being converted"):
        run("%%share torch->numpy --as {name} -q\now2 = torch.ones(2)\n")
    assert type(ip.user_ns["ow2"]).__module__.startswith("torch")
    run("%share ow ->numpy --as ow -q -f")
    assert isinstance(ip.user_ns["ow"], np.ndarray)
    run("%%share torch->numpy --as {name} -q --force\now2 = torch.ones(2)\n")
    assert isinstance(ip.user_ns["ow2"], np.ndarray)


def test_replacing_an_existing_variable_warns(ip, run, capsys):
    import warnings

    from gpushare.exceptions import GpushareWarning

    run("ex1 = torch.ones(2)\nkeep = 'a string the user made'")
    with pytest.warns(GpushareWarning, match=r"replaces existing variables: keep \(a str\).*-f"):
        run("%share ex1 ->numpy --as keep")
    assert "bound: keep (replaced)" in capsys.readouterr().out
    assert isinstance(ip.user_ns["keep"], np.ndarray)
    # Rebinding what %share itself bound (a rerun cell) is silent; so is -f.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run("%share ex1 ->numpy --as keep -q")
        run("%%share torch->numpy -q\nex2 = torch.ones(2)\n")
        run("%%share torch->numpy -q\nex2 = torch.ones(2)\n")
        run("keep2 = 1")
        run("%share ex1 ->numpy --as keep2 -q -f")
    # Every replacement warns, not only the first from this place.
    for _ in range(2):
        run("ex3_numpy = 'user value'")
        with pytest.warns(GpushareWarning, match="ex3_numpy"):
            run("%%share torch->numpy -q\nex3 = torch.ones(2)\n")


@pytest.mark.parametrize("name", ["1bad", "1 bad name", "", "class", "x-y", "None"])
def test_bad_names_are_refused_before_anything_runs(ip, run, name):
    run("nb = torch.ones(2)")
    before = set(ip.user_ns)
    with pytest.raises(UsageError, match="not a valid Python variable name"):
        run(f"%share nb ->numpy --as {name!r}")
    assert set(ip.user_ns) == before


@pytest.mark.parametrize(
    "template",
    ["{name}_{dst}_{bogus}", "{name}}", "{name}{0}", "{name}{}", "{dst}", "{name}-{dst}", "{name!r}", "{name.real}"],
)
def test_bad_cell_templates_are_refused_before_the_cell_runs(ip, run, template):
    ip.user_ns.pop("cell_ran", None)
    with pytest.raises(UsageError, match="template"):
        run(f"%%share torch->tf --as {template!r}\ncell_ran = True\ntt = torch.ones(2)\n")
    assert "cell_ran" not in ip.user_ns


def test_chain_template_without_dst_is_refused(ip, run):
    ip.user_ns.pop("cell_ran", None)
    with pytest.raises(UsageError, match="needs {dst}"):
        run("%%share torch->jax->tf --as out_{name}\ncell_ran = True\ntt = torch.ones(2)\n")
    assert "cell_ran" not in ip.user_ns


@pytest.mark.parametrize(
    "setting,bad",
    [
        ("name_template", "'{nm}'"),
        ("name_template", "'{name}_{dst}_{bogus}'"),
        ("name_template", "'{name}}'"),
        ("name_template", "'{name}{0}'"),
        ("path", "'bogus'"),
        ("repeat", "0"),
        ("repeat", "18446744073709551616"),
        ("number", "1180591620717411303424"),
        # NaN passed the bounds and failed at the next share with a bare ValueError; 1e12 hung.
        ("time_budget", "float('nan')"),
        ("time_budget", "float('inf')"),
        ("time_budget", "1e12"),
        ("time_budget", "0"),
        ("time_budget", "-1.0"),
    ],
)
def test_config_values_are_validated_when_set(ip, run, caplog, setting, bad):
    magics = ip.magics_manager.registry["GpuShare"]
    good = getattr(magics, setting)
    try:
        run(f"%config GpuShare.{setting} = {bad}")
        assert getattr(magics, setting) == good
        assert setting in caplog.text  # %config logs the TraitError, naming the setting
        ip.user_ns.pop("cfg_ran", None)
        run("%%share torch->numpy -q\ncfg_ran = True\ncf = torch.ones(2)\n")
        assert ip.user_ns["cfg_ran"] and isinstance(ip.user_ns["cf_numpy"], np.ndarray)
    finally:
        magics.set_trait(setting, good)  # on a build that accepted the bad value, later tests still run


def test_config_accepts_good_values(ip, run):
    magics = ip.magics_manager.registry["GpuShare"]
    try:
        run("%config GpuShare.name_template = 'g_{dst}_{name}'")
        run("%config GpuShare.path = 'dlpack'")
        run("%%share torch->numpy -q\ngv = torch.ones(2)\n")
        assert "g_numpy_gv" in ip.user_ns
    finally:
        magics.name_template = "{name}_{dst}"
        magics.path = "auto"


def test_unknown_path_is_refused_before_the_cell_runs(ip, run):
    ip.user_ns.pop("cell_ran", None)
    with pytest.raises(UsageError, match="unknown transfer path 'bogus'"):
        run("%%share torch->tf --path bogus\ncell_ran = True\ntt = torch.ones(2)\n")
    assert "cell_ran" not in ip.user_ns


@pytest.mark.parametrize(
    "line",
    [
        "%share big ->numpy -r 18446744073709551616",
        "%share big ->numpy -n 1180591620717411303424",
        "%share big ->numpy -n 1000000001 -r 1",
        "%sharebench torch->numpy --sizes 1KiB -r 18446744073709551616",
        "%sharebench torch->numpy --sizes 1KiB -n 1180591620717411303424",
    ],
)
def test_huge_counts_are_usage_errors(run, line):
    run("big = torch.ones(2)")
    with pytest.raises(UsageError, match="at most 1_000_000_000"):
        run(line)


def test_cell_error_shows_the_users_line(ip, capsys):
    import re

    capsys.readouterr()
    result = ip.run_cell("%%share torch->tf\nfine = torch.ones(2)\nboom = 1 / 0  # the user's line\n")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "boom = 1 / 0  # the user's line" in text
    assert "magics.py" not in text and "Could not get source" not in text
    assert re.search(r"line 3\b", text), text  # numbered as in the cell, whose line 1 is %%share


def test_cell_error_in_a_function_the_cell_defines(ip, capsys):
    import re

    capsys.readouterr()
    result = ip.run_cell("%%share torch->tf\ndef f():\n    return undefined_name_xyz\nff = f()\n")
    assert isinstance(result.error_in_exec, NameError)
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "return undefined_name_xyz" in text and "ff = f()" in text
    assert "magics.py" not in text and "Could not get source" not in text


def test_a_remembered_line_parse_raises_again_and_is_not_shared(ip, run):
    """Lines' parses are remembered (a notebook re-runs the same lines): a bad line fails every
    time, and each run gets its own arguments."""
    from gpushare.magics import parse_magic_line

    ip.user_ns["x"] = np.arange(3.0)
    for _ in range(2):
        with pytest.raises(UsageError, match="unrecognized arguments"):
            run("%share x ->numpy --bogus")
    parser = ip.magics_manager.registry["GpuShare"].share.parser
    first, route = parse_magic_line(parser, "x ->numpy -r 3", name_first=True)
    first.repeat = 99
    again, route_again = parse_magic_line(parser, "x ->numpy -r 3", name_first=True)
    assert (again.repeat, route, route_again) == (3, "->numpy", "->numpy")
