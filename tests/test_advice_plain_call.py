"""``advise`` hands over the code (CPU): beside its pick, the plain framework call that performs it
without gpushare, declared by each adapter for its own framework, and what keeps it ordered. Every
declared call is run here for every installed pair and must give the verdict gpushare reports for
that path: shared where gpushare shares, a copy where it copies."""

from __future__ import annotations

import importlib
import itertools

import pytest

import gpushare
from gpushare import advice, lab, paths
from gpushare.adapters import framework
from gpushare.exceptions import GpushareError

np = pytest.importorskip("numpy", reason="numpy not installed")

#: The frameworks calibrate sweeps on a CPU, and the module each call names.
FRAMEWORKS = ("torch", "jax", "tf", "numpy")
MODULES = {"np": "numpy", "torch": "torch", "jax": "jax", "tf": "tensorflow"}


def installed() -> list[str]:
    return [n for n in FRAMEWORKS if framework(n).installed()]


def namespace() -> dict:
    ns = {}
    for name, module in MODULES.items():
        try:
            ns[name] = importlib.import_module(module)
        except ImportError:
            continue
        if name == "jax":
            importlib.import_module("jax.dlpack")
            importlib.import_module("jax.numpy")
    return ns


def cases():
    names = installed()
    for src, dst in itertools.permutations(names, 2):
        for path in paths.names_of("share"):
            if advice.plain_call("share", path, src, dst, "cpu") is not None:
                yield src, dst, path


@pytest.mark.parametrize(("src", "dst", "path"), list(cases()))
def test_every_declared_call_gives_the_verdict_gpushare_reports(src, dst, path):
    x = lab.make_array(framework(src), 1 << 18, "float32", "cpu")
    try:
        reported = gpushare.share(x, dst, path=path)
    except GpushareError as e:
        pytest.skip(f"{path} does not apply to {src}→{dst} here ({type(e).__name__}): nothing to hand over")
    if reported.verdict == "failed":
        pytest.skip(f"{path} fails for {src}→{dst} here: nothing to hand over")
    call, ordered_by = advice.plain_call("share", path, src, dst, "cpu")
    y = eval(call, namespace(), {"x": x})  # noqa: S307 (the adapters' own declared calls)
    assert type(y).__module__.split(".")[0] == type(reported.value).__module__.split(".")[0], (call, type(y))
    shares = gpushare.inspect(y).data_ptr == gpushare.inspect(x).data_ptr
    assert shares == (reported.verdict == "shared"), f"{call}: shares={shares}, gpushare said {reported.verdict}"
    assert np.array_equal(np.asarray(gpushare.share(y, "numpy", path="host").value), np.asarray(gpushare.share(x, "numpy", path="host").value))
    assert ordered_by == "host memory: nothing to order"


def test_advise_shows_the_plain_call_of_its_pick(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch", reason="torch not installed")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    try:
        a = gpushare.advise(torch.ones(1 << 10), "numpy")
        assert a.recommended == "dlpack", repr(a)
        assert a.code == ("np.from_dlpack(x)", "host memory: nothing to order")
        assert "dlpack without gpushare: np.from_dlpack(x) (host memory: nothing to order)" in repr(a)
        assert a.to_dict()["code"] == {"call": "np.from_dlpack(x)", "ordered_by": "host memory: nothing to order"}
    finally:
        advice.forget()


def test_a_move_and_a_device_share_say_what_keeps_them_ordered():
    # Read from the declarations and the core's orderings (no GPU needed to read them).
    assert advice.plain_call("move", "move", "torch", "torch", "cuda:0->cuda:1", "cuda:1") == (
        "x.to('cuda:1', non_blocking=True)",
        "the producer's own call waits for its queued work; synchronise before reading the result on another stream")
    if framework("cupy").name == "cupy":
        call, ordered_by = advice.plain_call("share", "cai", "numba", "cupy", "cuda:0")
        assert call == "cupy.asarray(x)" and "__cuda_array_interface__" in ordered_by
    call, ordered_by = advice.plain_call("share", "dlpack", "torch", "jax", "cuda:0")
    assert call == "jax.dlpack.from_dlpack(x)" and "synchronise" in ordered_by, ordered_by
    assert advice.plain_call("share", "copy", "torch", "jax", "cpu") is None
