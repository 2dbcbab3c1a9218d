"""The Python halves of `gpushare doctor` and `gpushare calibrate` (gpushare._cli), called as the
command calls them, in this process. The command's own checks (crates/runner/tests) stop most bad
arguments before these run; what is left is judged here."""

from __future__ import annotations

import json

import gpushare
from gpushare import _cli, advice


def test_doctor_verdict_is_ready_where_a_cpu_share_works_and_names_what_it_found_of_cuda(monkeypatch):
    monkeypatch.delenv("GPUSHARE_CLI_VERSION", raising=False)
    info = gpushare.gpuinfo()
    ready, line = _cli.doctor_verdict(info)
    assert ready, line
    assert line.startswith("ready: sharing works on the CPU; ")
    assert "CUDA" in line and "\n" not in line


def test_doctor_verdict_is_not_ready_when_the_command_and_this_python_differ(monkeypatch):
    monkeypatch.setenv("GPUSHARE_CLI_VERSION", "0.0.0-other")
    ready, line = _cli.doctor_verdict(gpushare.gpuinfo())
    assert not ready
    assert line.startswith("not ready: ") and "0.0.0-other" in line and gpushare.__version__ in line


def test_calibrate_command_fails_when_the_run_fitted_no_path(monkeypatch, tmp_path, capsys):
    """One framework and nothing else to time sweeps nothing: before, the command printed the model
    it carried over and exited 0."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = {"frameworks": ["numpy"], "sizes": ["4KiB", "8KiB", "16KiB"], "device": "cpu", "to_device": None,
            "processes": False, "worker_device": None, "repeat": 1}
    monkeypatch.setenv("GPUSHARE_CALIBRATE_ARGS", json.dumps(args))
    advice.forget()
    try:
        assert _cli.calibrate_command() == 1
    finally:
        advice.forget()
    err = capsys.readouterr().err
    assert "calibrate fitted no path (no sweep ran)" in err, err
