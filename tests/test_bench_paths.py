"""benchmarks/bench_paths.py runs on a CPU: every row measured or skipped for a named reason, gpushare's
paths timed through ``gpushare.share`` with their checked verdicts, and the A/B rows paired. No
figure is asserted: the benchmark's numbers are for a quiet machine, not for a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch not installed")

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_paths.py"


def test_bench_paths_quick_run_measures_every_row_through_share_and_the_reference_timer(tmp_path):
    out = tmp_path / "paths.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--device", "cpu", "--budget", "600", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["errors"] == [], data["errors"]
    rows = data["measurements"]
    failed = [r for r in rows if "error" in r and not r["error"].startswith("not applicable")]
    assert not failed, failed
    measured = [r for r in rows if "median_s" in r]
    assert {r["tool"] for r in measured} == {"gpushare.share", "torch.utils.benchmark"}
    # gpushare's own paths carry the verdict the share checked; the zero-copy ones share.
    zero_copy = [r for r in measured if r["tool"] == "gpushare.share" and r["name"].split(" ")[0] in ("dlpack", "shared")
                 and r.get("section") != "agreement"]
    assert zero_copy and all(r["verdict"] == "shared" for r in zero_copy), zero_copy
    copies = [r for r in measured if r["name"] in ("gpushare copy", "gpushare host") and r.get("section") != "agreement"]
    assert copies and all(r["verdict"] == "copied" and r["bandwidth_GBps"] > 0 for r in copies), copies
    # Each A/B route has one row per timer, with the same number of blocks of the same calls.
    ab = [r for r in measured if r.get("section") == "agreement"]
    by_route: dict[tuple[str, int], dict[str, dict]] = {}
    for r in ab:
        by_route.setdefault((r["name"], r["size"]), {})[r["tool"]] = r
    assert by_route and all(set(pair) == {"gpushare.share", "torch.utils.benchmark"} for pair in by_route.values())
    for pair in by_route.values():
        ours, theirs = pair["gpushare.share"], pair["torch.utils.benchmark"]
        assert (ours["repeats"], ours["loops"]) == (theirs["repeats"], theirs["loops"])
        assert theirs["ratio_gpushare_over_torch"] > 0
