"""A sweep's progress shows only where someone watches, and saved results keep only results:
no ``\\r`` frames in a script's redirected stderr, a bar on a terminal (none with ``NO_COLOR``), a
notebook's progress display emptied when the sweep ends, and Ctrl-C gives the partial table."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap

import pytest

import _notebooks as nbs

pytest.importorskip("torch")

SWEEP = "gpushare.bench('numpy', 'torch', sizes=[256, 512], paths='dlpack,copy', repeat=1)"


def _python(code: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **(env or {})}, timeout=120, **kwargs)


def test_a_script_with_redirected_stderr_gets_no_progress_frames():
    proc = _python(f"import gpushare\nb = {SWEEP}\nprint(len(b.points))", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "4"
    assert "\r" not in proc.stderr and "sharebench" not in proc.stderr, repr(proc.stderr[:500])


def _on_a_terminal(env: dict) -> str:
    """stderr of the sweep with stderr on a pseudo-terminal, read while it runs (Linux may drop what
    is left unread once the terminal's last writer closes)."""
    import threading

    leader, follower = pty.openpty()
    # A new pseudo-terminal is 0 columns wide, where tqdm draws nothing; a real one has a size.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other side is closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen([sys.executable, "-c", f"import gpushare\n{SWEEP}"], env={**os.environ, **env},
                                stderr=follower, stdout=subprocess.DEVNULL)
        os.close(follower)
        assert proc.wait(timeout=120) == 0
        reader.join(timeout=10)
    finally:
        os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_bar_counting_points_and_no_color_silences_it():
    shown = _on_a_terminal({"NO_COLOR": ""})
    assert "sharebench numpy→torch" in shown and "/4 " in shown, repr(shown[-500:])
    assert _on_a_terminal({"NO_COLOR": "1"}).strip() == ""


def test_ctrl_c_returns_the_partial_table():
    code = textwrap.dedent(
        """
        import os, signal, threading, warnings
        import numpy, torch  # imported before the timer starts: Ctrl-C lands in the sweep
        import gpushare
        warnings.simplefilter("ignore")
        threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        b = gpushare.bench("numpy", "torch", sizes=[4096 * 2**i for i in range(12)], paths="dlpack,copy,host",
                           repeat=20, min_sample_time=0.02)
        print("points", len(b.points), b.interrupted)
        print(repr(b))
        """
    )
    proc = _python(code, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, _, table = proc.stdout.partition("\n")
    _, n, interrupted = first.split()
    assert interrupted == "True" and 0 < int(n) < 36, proc.stdout
    assert "Interrupted: partial results" in table and "4 KiB" in table, table


def test_a_saved_notebook_keeps_results_not_progress(tmp_path_factory):
    import nbformat

    session = nbs.session(tmp_path_factory)
    base = tmp_path_factory.mktemp("progress")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": nbs.KERNEL, "display_name": "Python (gpushare)", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext gpushare"),
        nbformat.v4.new_code_cell("%sharebench numpy->torch --sizes 4KiB,64KiB --paths dlpack,copy --device cpu -r 2"),
        nbformat.v4.new_code_cell(f"import gpushare\nb = {SWEEP}\nb"),
    ]
    source, out = base / "in.ipynb", base / "out.ipynb"
    nbformat.write(nb, source)
    proc = subprocess.run(
        [str(nbs.gpushare_bin()), "run", str(source), "-o", str(out), "--timeout", str(nbs.CELL_TIMEOUT_S)],
        capture_output=True, text=True, env=session.env, timeout=nbs.NOTEBOOK_TIMEOUT_S,
    )
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    saved = json.loads(out.read_text())
    for cell in saved["cells"][1:]:
        visible = [o for o in cell["outputs"] if o.get("output_type") == "stream" or o.get("data")]
        assert [o.get("output_type") for o in visible] in (["display_data"], ["execute_result"]), (
            f"{cell['source']!r} keeps more than its result: {json.dumps(cell['outputs'])[:1500]}"
        )
        assert '<table class="gpushare' in "".join(visible[0]["data"]["text/html"])
        assert "sharebench numpy" not in json.dumps(cell["outputs"]), "a progress line was kept"
