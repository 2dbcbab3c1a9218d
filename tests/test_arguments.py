"""Odd arguments get gpushare's own words, naming the argument (gpushare.arguments, used by every
entry point), not Python's or pyo3's from deep inside; the names the magics bind never replace a
builtin or IPython's own names without -f; warnings from a script driving the magics do not raise;
and /dev/shm that is read-only or too small is said so, not found out by os.open or a SIGBUS."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from importlib import resources

import pytest
from IPython.core.error import UsageError

import gpushare
from gpushare import advice, auto, paths, processes
from gpushare.processes import rules as process_rules
from gpushare.exceptions import PathNotApplicableError, UnknownFrameworkError

np = pytest.importorskip("numpy", reason="numpy not installed")
torch = pytest.importorskip("torch", reason="torch not installed")


@pytest.mark.parametrize("kwargs, error, words", [
    ({"repeat": 1.5}, TypeError, "repeat is a whole number"),
    ({"repeat": "2"}, TypeError, "repeat is a whole number"),
    ({"repeat": 2**64}, ValueError, "repeat must be at most"),
    ({"repeat": True}, TypeError, "repeat is a whole number"),
    ({"number": math.nan}, TypeError, "number is a whole number"),
    ({"warmup": -1}, ValueError, "warmup must be at least 0"),
    ({"budget": math.inf}, ValueError, "budget is a finite number of seconds"),
    ({"budget": "1s"}, TypeError, "budget is a number of seconds"),
])
def test_share_refuses_odd_timing_arguments_in_its_own_words(kwargs, error, words):
    with pytest.raises(error, match=words):
        gpushare.share(np.ones(4), "torch", **kwargs)


def test_share_takes_integral_timing_arguments_of_any_integer_type():
    r = gpushare.share(np.ones(4), "torch", repeat=np.int64(2), number=1, warmup=np.int32(1))
    assert r.verdict == "shared" and len(r.timing.samples) == 2


@pytest.mark.parametrize("kwargs, error, words", [
    ({"queued": "2ms"}, TypeError, "queued is a number of seconds.*2e-3"),
    ({"queued": math.nan}, ValueError, "queued is a finite number"),
    ({"queued": -1.0}, ValueError, "queued must be at least 0"),
    ({"across": "bogus"}, ValueError, "across is a gpushare.Worker, 'process' or 'HOST:PORT'"),
    ({"across": "10.0.0.2:0"}, ValueError, "across: port 0 is not in 1..65535"),
])
def test_advise_refuses_odd_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        gpushare.advise(np.ones(4), "torch", **kwargs)


def test_advice_has_a_json_form_valid_against_its_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    a = gpushare.advise(np.ones(4), "torch")
    payload = json.loads(a.to_json())
    assert payload["schema"].startswith("gpushare.advice/")
    schema = json.loads(resources.files("gpushare").joinpath("schemas", "advice.schema.json").read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(payload))
    assert not errors, errors[:3]
    assert payload["data"] == {k: v for k, v in a.to_dict().items() if k != "schema"}


@pytest.mark.parametrize("kwargs, error, words", [
    ({"sizes": [2**64, 1, 2]}, ValueError, r"sizes\[0\] must be at most"),
    ({"sizes": [1.5, 2, 3]}, TypeError, r"sizes\[0\] is a size in bytes"),
    ({"sizes": ["4KiB", "nonsense", "1MiB"]}, ValueError, r"sizes\[1\]: cannot read size"),
    ({"repeat": 0}, ValueError, "repeat must be at least 1"),
    ({"sizes": [0, 0, 0]}, ValueError, "at least three sizes"),
    ({"across": "nowhere"}, ValueError, "across is 'processes' .* or 'HOST:PORT'"),
])
def test_calibrate_refuses_odd_sizes_and_counts_before_measuring(kwargs, error, words):
    with pytest.raises(error, match=words):
        gpushare.calibrate(["numpy", "torch"], device="cpu", save=False, **kwargs)


def test_calibrate_reads_a_comma_separated_string_as_framework_names(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    try:
        with pytest.raises(UnknownFrameworkError, match="bogus"):
            gpushare.calibrate("numpy,bogus", device="cpu", save=False)
        with pytest.raises(TypeError, match="frameworks is a list of framework names"):
            gpushare.calibrate(42, device="cpu", save=False)
    finally:
        advice.forget()


def test_ceilings_take_a_size_as_text_and_refuse_nan():
    limits = gpushare.Ceilings({"key": {}, "resources": {"host_memory": {"points": [[4096, 5e9], [1 << 20, 9e9]]}}})
    assert limits.ceiling("host_memory", "4KiB") == limits.ceiling("host_memory", 4096)
    with pytest.raises(TypeError, match="nbytes is a size in bytes"):
        limits.ceiling("host_memory", math.nan)
    with pytest.raises(ValueError, match="nbytes: cannot read size"):
        limits.bound("share", "copy", (1, 0), (1, 0), "lots")


def test_auto_ranges_names_what_it_takes():
    from gpushare import arguments

    # auto.ranges itself takes adapters; the helper every entry point uses turns a name into one.
    assert arguments.adapter("src", "torch") is gpushare.adapters.framework("torch")
    with pytest.raises(TypeError, match="src is a framework's name or adapter"):
        arguments.adapter("src", 3)
    src, dst = arguments.adapter("src", "torch"), arguments.adapter("dst", "numpy")
    assert auto.ranges(src, dst)


# -- the names the magics bind --------------------------------------------------------------------

@pytest.fixture
def ip():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(history_load_length=0)
    shell.history_manager.enabled = False
    shell.run_line_magic("load_ext", "gpushare")
    return shell


@pytest.mark.parametrize("name", ["print", "get_ipython", "__builtins__", "In", "len"])
def test_as_refuses_a_builtin_or_ipythons_own_name_without_force(ip, name):
    ip.user_ns["xa"] = np.ones(3)
    before = ip.user_ns.get(name, "absent")
    with pytest.raises(UsageError, match=f"cannot bind .* to '{name}'.*pass -f"):
        ip.run_line_magic("share", f"xa ->numpy --as {name} -q")
    assert ip.user_ns.get(name, "absent") is before
    ip.run_cell("print(1)").raise_error()  # the next cell still works


def test_as_replaces_a_builtin_with_force(ip):
    ip.user_ns["xa"] = np.ones(3)
    try:
        ip.run_line_magic("share", "xa ->numpy --as len -f -q")
        assert ip.user_ns["len"] is not len
    finally:
        ip.user_ns.pop("len", None)


def test_warnings_from_a_script_driving_the_magics_do_not_raise():
    """``python -c`` runs ``__main__`` under the built-in importer, which cannot give its source:
    warn_explicit with its globals raised ImportError out of the warning."""
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import numpy as np\n"
        "ip = InteractiveShell.instance()\n"
        "ip.user_ns['x'] = np.ones(3); ip.user_ns['y'] = 1\n"
        "ip.run_line_magic('config', 'GpuShare.repeat = 0')\n"  # refused at load, with a warning
        "ip.run_line_magic('load_ext', 'gpushare')\n"
        "ip.run_line_magic('share', 'x ->numpy --as y -q')\n"
        "print('bound', type(ip.user_ns['y']).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "always"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bound ndarray" in done.stdout
    assert "replaces existing variables: y" in done.stderr
    assert "GpuShare.repeat = 0" in done.stderr


# -- /dev/shm ----------------------------------------------------------------------------------------

def test_a_segment_in_an_unwritable_shm_directory_is_a_gpushare_error(monkeypatch):
    from gpushare.processes.segment import Segment

    # /proc takes no new files, whoever asks (root included): a stand-in for a read-only /dev/shm.
    monkeypatch.setattr(process_rules, "SHM_DIR", "/proc")
    with pytest.raises(PathNotApplicableError, match="shm: /proc .*cannot make the shared memory segment") as caught:
        Segment(4096, "shm")
    assert caught.value.fix and "another path" in caught.value.fix


def test_advise_does_not_recommend_shm_where_dev_shm_is_read_only(monkeypatch):
    """A container's --read-only without a tmpfs for /dev/shm: the handoff is refused
    (unwritable_error), so advise says so instead of recommending shm."""
    import os
    import types

    x = np.ones(1 << 10)
    real = os.statvfs

    def statvfs(path):
        st = real(path)
        if str(path) != process_rules.SHM_DIR:
            return st
        return types.SimpleNamespace(f_flag=st.f_flag | os.ST_RDONLY, f_bavail=st.f_bavail, f_frsize=st.f_frsize)

    monkeypatch.setattr(os, "statvfs", statvfs)
    a = gpushare.advise(x, "numpy", across="process")
    row = next(r for r in a.rows if r["path"] == "shm")
    assert row["verdict"] == "failed" and "read-only" in row["reason"], row
    assert a.recommended != "shm"


def test_advise_does_not_recommend_shm_for_an_array_that_does_not_fit(monkeypatch):
    x = np.ones(1 << 21)  # 16 MiB
    assert processes.shm_copies(x)
    # A /dev/shm with 4 MiB free (Docker's default is 64 MiB; a full one has less).
    monkeypatch.setattr(process_rules, "free_bytes", lambda directory=process_rules.SHM_DIR: 4 << 20)
    a = gpushare.advise(x, "numpy", across="process")
    row = next(r for r in a.rows if r["path"] == "shm")
    assert row["verdict"] == "failed" and "4.00 MiB free" in row["reason"], row
    assert a.recommended != "shm"


@pytest.mark.parametrize("repeat, error, words", [
    (1.5, TypeError, "repeat is a whole number"),
    ("3", TypeError, "repeat is a whole number"),
    (True, TypeError, "repeat is a whole number"),
    (0, ValueError, "repeat must be at least 1"),
])
def test_compare_and_bench_name_a_repeat_that_is_not_a_count(repeat, error, words):
    with pytest.raises(error, match=words):
        gpushare.compare(np.ones(4), "torch", repeat=repeat)
    with pytest.raises(error, match=words):
        gpushare.bench("numpy", "torch", sizes=["4KiB"], repeat=repeat)
    with pytest.raises(error, match=words):
        gpushare.compare(np.ones(4), "numpy", across="process", repeat=repeat)


def test_a_sweep_across_processes_names_a_device_it_cannot_use():
    with pytest.raises(ValueError, match="junk"):
        gpushare.bench("torch", "torch", sizes=["4KiB"], paths="shm", across="processes", device="junk")
