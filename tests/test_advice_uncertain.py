"""Calibration a user can follow and trust (CPU): ``calibrate`` says what it measures as it goes
(a line per sweep on stderr for the CLI), says in one line when a fit is too uncertain to
recommend from and why, and ``advise`` repeats it beside a recommendation that rests on one."""

from __future__ import annotations

import pytest

import gpushare
from gpushare import advice
from gpushare.exceptions import GpushareWarning

torch = pytest.importorskip("torch", reason="torch not installed")
pytest.importorskip("numpy", reason="numpy not installed")

SIZES = ("64KiB", "1MiB", "8MiB")
MIB = 1 << 20
#: A copy whose sizes its neighbours' lines miss in two places apart, 4 MiB by 180 % and 32 MiB by
#: 1011 %: not one step in its cost (which would be stated beside it alone) but a path that did not
#: hold still.
DRIFTING = [(MIB, 100e-6), (4 * MIB, 100e-6), (16 * MIB, 1000e-6), (32 * MIB, 150e-6), (64 * MIB, 3000e-6)]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    yield
    advice.forget()


def test_calibrate_says_what_it_measures_a_line_per_sweep_and_warns_of_an_uncertain_fit(cache, capsys, monkeypatch):
    fit_points = advice._fit_points

    def with_a_drifting_path(m, kind, source, target, place, points, limits=None, link=None):
        added = fit_points(m, kind, source, target, place, points, limits, link)
        if (source, target) == ("torch", "numpy"):
            m.add("share", "dlpack", "torch", "numpy", "cpu", DRIFTING, None)
        return added

    monkeypatch.setattr(advice, "_fit_points", with_a_drifting_path)
    with pytest.warns(GpushareWarning, match=r"calibrate: \d+ of \d+ fits too uncertain to recommend from \((paths drifted|the machine was busy); e\.g\. "):
        m = gpushare.calibrate(["torch", "numpy"], sizes=SIZES, repeat=3, device="cpu", progress="lines")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("calibrate: ")]
    # Two ordered pairs at three sizes, one sweep each, counted.
    assert lines[0].startswith("calibrate: 1/6 share ") and lines[5].startswith("calibrate: 6/6 share "), lines
    assert any("torch→numpy at 1.00 MiB" in line for line in lines[:6]), lines
    # Then the copies inside the gaps wider than 4x (64 KiB to 1 MiB, 1 to 8 MiB), the count
    # growing by the sweeps added.
    assert len(lines) > 6 and lines[6].startswith("calibrate: 7/"), lines
    assert any(" at 256 KiB" in line for line in lines[6:]) and any(" at 2.83 MiB" in line for line in lines[6:]), lines
    # The drifting path among them (on a busy CPU a real copy's may be too), with why.
    assert dict(m.uncertain())["share torch->numpy dlpack @cpu"].startswith("drifting path: ")


def test_advise_repeats_the_uncertainty_beside_a_recommendation_that_rests_on_it(cache):
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    assert m.add("share", "dlpack", "torch", "numpy", "cpu", DRIFTING, None)
    advice.save(m)
    a = gpushare.advise(torch.ones(1 << 18), "numpy")
    assert a.recommended == "dlpack", repr(a)
    text = repr(a)
    assert "dlpack rests on a fit too uncertain to recommend from (drifting path" in text, text
    assert "calibrate said: 1 of 1 fits too uncertain" in text, text
    # Its row gives words, not a number.
    assert "not within 2x" in text, text
    # A steady model says nothing of the kind.
    steady = gpushare.CostModel(advice.machine_key(), 0.0)
    assert steady.add("share", "dlpack", "torch", "numpy", "cpu", [(MIB, 5e-6), (16 * MIB, 5e-6), (64 * MIB, 5e-6)], True)
    advice.save(steady)
    assert "too uncertain" not in repr(gpushare.advise(torch.ones(1 << 18), "numpy"))


def test_an_array_the_rules_say_is_shared_is_not_priced_by_a_fit_of_copies(cache):
    """A calibration whose arrays a path copied (JAX copies a NumPy array that is not 64-byte
    aligned, and shares one that is) fits that path a copy's line; an array the rules say it
    shares moves no bytes, so `compare`, `bench` and `advise` give no number for it and say why,
    rather than a copy's time (a 200 MiB share was once predicted 136x what it took)."""
    import numpy as np

    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (4 << 10, 64 << 10, MIB, 16 * MIB)
    m.add("share", "dlpack", "numpy", "torch", "cpu", [(n, 30e-6 + n / 8e9) for n in sizes], None)
    m.add("share", "capsule", "numpy", "torch", "cpu", [(n, 3e-6) for n in sizes], True)
    advice.save(m)
    x = np.ones(4 * MIB // 4, np.float32)
    rows = {
        "compare": gpushare.compare(x, "torch", paths="dlpack,capsule", repeat=2)["dlpack"].predicted,
        "bench": gpushare.bench("numpy", "torch", sizes=[4 * MIB], paths="dlpack", repeat=2, progress=False).points[0].predicted,
        "advise": next(r for r in gpushare.advise(x, "torch").to_dict()["rows"] if r["path"] == "dlpack")["prediction"],
    }
    for where, predicted in rows.items():
        assert "this array is shared" in (predicted["unpredictable"] or ""), (where, predicted)
    # The fit of shares still prices a share.
    assert gpushare.compare(x, "torch", paths="capsule", repeat=2)["capsule"].predicted.unpredictable is None
