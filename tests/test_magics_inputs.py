"""The magics under inputs users really give them: names Python
normalises, what a %%share cell bound wherever it bound it, chain templates, sizes and settings
checked before work, install hints and warnings at the user's line. Real IPython shells, as in
tests/test_magics.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from IPython.core.error import UsageError

pytest.importorskip("torch", reason="torch not installed")
pytest.importorskip("jax", reason="jax not installed")
pytest.importorskip("tensorflow", reason="tensorflow not installed")


@pytest.fixture(autouse=True)
def frameworks(run):
    run("import torch, numpy as np, jax, tensorflow as tf")


# -- names as Python reads them, what a cell bound, templates, settings ----


def test_names_are_read_and_bound_as_python_normalises_them(ip, run):
    """Python folds identifiers to NFKC (ｘ is x, ﬁ is fi): the names gpushare looks up and binds
    must be the ones the user's next line reaches."""
    for stale in ("xn", "y_numpy", "y_jax", "fi_q", "q_numpy"):
        ip.user_ns.pop(stale, None)
    run("ｙ = torch.ones(3)")  # Python binds it as y
    run("%share ｙ ->numpy -q")
    assert run("ｙ_numpy").shape == (3,) and "y_numpy" in ip.user_ns
    run("%share ｙ ->numpy --as ｘｎ -q")
    assert isinstance(run("ｘｎ"), np.ndarray) and "xn" in ip.user_ns and "ｘｎ" not in ip.user_ns
    table = run("%share ｙ ->jax -o -q")
    assert table[0].name == "y" and "y_jax" in ip.user_ns
    # Templates made of such characters bind names the user can write.
    run("%%share torch->numpy --as ﬁ_{name} -q\nq = torch.ones(2)\n")
    assert isinstance(run("ﬁ_q"), np.ndarray) and "fi_q" in ip.user_ns
    # The source, however spelt, is protected.
    with pytest.raises(UsageError, match="replace the array being converted"):
        run("%share ｙ ->numpy --as y -q")
    assert type(ip.user_ns["y"]).__module__.startswith("torch")
    with pytest.raises(UsageError, match=r"no variable named 'ｚｚ'.*Python reads it as 'zz'"):
        run("%share ｚｚ ->numpy")
    assert run("%share ｙ ->numpy --path all -o -q") is not None


@pytest.mark.parametrize(
    "body,bound",
    [
        # TensorFlow's idiom: a tensor made under a device scope.
        ('with tf.device("/CPU:0"):\n    wt = tf.ones(3)\n', ["wt"]),
        ("if True:\n    wi = torch.ones(3)\n", ["wi"]),
        ("for k in range(2):\n    wf = torch.full((3,), float(k))\n", ["wf"]),
        ("try:\n    wy = torch.ones(3)\nexcept Exception:\n    pass\n", ["wy"]),
        ("(ww := torch.ones(3))\n", ["ww"]),
        ("%time wm = torch.ones(3)\n", ["wm"]),
        ("exec('we = torch.ones(3)')\n", ["we"]),
        ("wa, wb = torch.ones(3), torch.zeros(3)\nwb2 = torch.ones(3)\n", ["wa", "wb", "wb2"]),
    ],
)
def test_cell_share_sees_every_binding_the_cell_made(ip, run, body, bound):
    """%%share converts what the cell bound, wherever the binding sits, decided from the namespace."""
    src = "tf" if body.startswith("with tf") else "torch"
    dst = "torch" if src == "tf" else "numpy"
    for n in bound:
        ip.user_ns.pop(n, None)
        ip.user_ns.pop(f"{n}_{dst}", None)
    table = run(f"%%share {src}->{dst} -o -q\n{body}")
    assert [r.name for r in table] == bound
    for n in bound:
        assert type(ip.user_ns[f"{n}_{dst}"]).__module__.startswith(dst)


def test_cell_share_takes_rebound_names_and_skips_untouched_ones(ip, run):
    run("old = torch.ones(2)\nsame = torch.ones(2)\nalias_src = torch.ones(2)")
    table = run(
        "%%share torch->numpy -o -q\n"
        "old = torch.zeros(4)\n"     # rebound: a new object under an old name
        "same.add_(1)\n"             # changed in place: not bound by the cell
        "same = same\n"              # rebound to the object it held: not bound either
        "alias = alias_src\n"        # an existing object under a new name
    )
    assert [r.name for r in table] == ["old", "alias"]
    assert ip.user_ns["old_numpy"].shape == (4,)
    with pytest.raises(UsageError, match=r"bound no torch arrays \(names bound: none\)"):
        run("%%share torch->numpy -q\nsame.add_(1)\n")


def test_a_chain_giving_two_hops_one_name_is_refused_before_the_cell_runs(ip, run):
    """A chain that visits a framework twice names both visits alike under {name}_{dst}: known from
    the template and the route, so refused before the cell runs (it ran, then failed, before)."""
    ip.user_ns.pop("cell_ran", None)
    with pytest.raises(UsageError, match=r"names hops 1 and 3 \(both to numpy\) alike.*'x_numpy'"):
        run("%%share torch->numpy->torch->numpy\ncell_ran = True\nhc = torch.ones(2)\n")
    assert "cell_ran" not in ip.user_ns and "hc" not in ip.user_ns
    run("hl = torch.ones(2)")
    before = set(ip.user_ns)
    with pytest.raises(UsageError, match=r"names hops 1 and 2 \(both to jax\) alike"):
        run("%share hl ->jax->jax")
    assert set(ip.user_ns) == before


@pytest.mark.parametrize(
    "sizes,match",
    [
        ("1" * 400, "cannot read size `1{400}`: it is beyond any memory"),
        ("1KiB," + "9" * 400 + "MiB", r"--sizes\[1\]: cannot read size `9{400}MiB`"),
        (str(2**64), "cannot read size `18446744073709551616`: it is beyond any memory"),
        ("4KiB,1000000TiB", "does not fit in the host memory"),
    ],
)
def test_sharebench_sizes_beyond_memory_are_usage_errors_before_any_array(ip, run, monkeypatch, sizes, match):
    from gpushare import lab

    made = []
    monkeypatch.setattr(lab, "make_array", lambda *a, **k: made.append(a))
    with pytest.raises(UsageError, match=match) as caught:
        run(f"%sharebench torch->numpy --device cpu --sizes {sizes} -q")
    assert str(caught.value).startswith("usage: %sharebench SRC->DST"), str(caught.value)
    assert made == []


# -- install hints that work, warnings at the user's line --------------------------


@pytest.mark.parametrize(
    "framework,hint",
    [
        ("paddle", "pip install paddlepaddle ("),
        ("cupy", "pip install cupy-cuda12x or cupy-cuda13x"),
    ],
)
def test_a_missing_framework_names_the_distribution_that_installs_it(ip, run, monkeypatch, framework, hint):
    """`pip install paddle` installs an unrelated project and `pip install cupy` builds from
    source: the hint names what works, once."""
    from gpushare.adapters import ADAPTERS
    from gpushare.exceptions import FrameworkNotInstalledError

    adapter = ADAPTERS[framework]
    monkeypatch.delitem(sys.modules, adapter.module, raising=False)  # as in a Python without it
    monkeypatch.setattr(adapter, "_installed", False)
    run("mh = np.ones(3)")
    with pytest.raises(FrameworkNotInstalledError) as caught:
        run(f"%share mh ->{framework}")
    text = str(caught.value)
    assert hint in text and text.count("pip install") == 1, text


def _cell_file(ip, code: str) -> str:
    """The file name IPython compiles ``code`` under when it runs as the next cell."""
    return ip.compile.get_code_name(code, ip.transform_cell(code), ip.execution_count)


def test_warnings_point_at_the_users_line(ip, run):
    from gpushare.exceptions import GpushareWarning

    code = "wro = np.arange(4.0)\nwro.flags.writeable = False\n%share wro ->torch -q\n"
    with pytest.warns(GpushareWarning, match="read-only") as caught:
        run(code)
    w = caught[0]
    assert "interactiveshell" not in w.filename and "gpushare" not in w.filename, w.filename
    assert (w.filename, w.lineno) == (_cell_file(ip, code), 3)
    # The cell form: the %%share line.
    code = "%%share numpy->torch -q\nwro2 = np.arange(4.0)\nwro2.flags.writeable = False\n"
    with pytest.warns(GpushareWarning, match="read-only") as caught:
        run(code)
    assert (caught[0].filename, caught[0].lineno) == (_cell_file(ip, code), 1)
    # gpushare's own warning about a replaced variable, every time, at the line that replaced it.
    run("wk = 'the user made this'")
    code = "wsrc = torch.ones(2)\n%share wsrc ->numpy --as wk -q\n"
    with pytest.warns(GpushareWarning, match="replaces existing variables") as caught:
        run(code)
    assert (caught[0].filename, caught[0].lineno) == (_cell_file(ip, code), 2)


def test_an_interrupted_sharebench_warns_at_the_users_line(ip, run, monkeypatch):
    from gpushare import lab
    from gpushare.exceptions import GpushareWarning

    calls = {"n": 0}
    real = lab._path_route

    def interrupting(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "_path_route", interrupting)
    code = "%sharebench torch->numpy --device cpu --sizes 1KiB --paths dlpack,copy -r 1 -q\n"
    with pytest.warns(GpushareWarning, match="interrupted: 1 of 2 points") as caught, pytest.raises(KeyboardInterrupt):
        run(code)
    assert (caught[0].filename, caught[0].lineno) == (_cell_file(ip, code), 1), caught[0].filename
