"""Replays a recorded bench_advice run: refits its calibration with this build's core and says
where the prediction error comes from.

A ``bench_advice.py --json F`` file holds the model the run fitted (each path's calibration
points, ``model.observations``) and every row it measured afterwards at other sizes. This script

1. checks the recorded predictions against the recorded measurements (the run's own figures);
2. refits every path from the same calibration points with the installed ``gpushare._native``
   (the fit of this build: ``CostModel.add``) and predicts the same rows again, so a change to the
   fit is judged on the GPU data without a GPU;
3. breaks the error down by path, size and kind of path (and, as bench_advice.py states it, each
   copying path's from 64 MiB up, where a copy is bound by bandwidth), and measures what no fit can remove:
   for a path that shares (its time does not depend on size), how far the calibration's level lies
   from the evaluation's, against how far the evaluation's own points lie from each other.

Run: ``PYTHONPATH=python .venv/bin/python benchmarks/replay_advice.py [F ...]`` (default: the
recorded 2× H200 and 1× H200 runs in docs/gpu-results/).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = (
    # The untuned grid, sizes past the sweep (200 MiB) and moves included.
    ROOT / "docs/gpu-results/cost-model-2026-12-01-2x-h200.json.gz",
    ROOT / "docs/gpu-results/cost-model-2026-11-28-2x-h200.json",
    ROOT / "docs/gpu-results/cost-model-2026-11-26-h200.json",
)
LARGE = 1 << 20
BANDWIDTH_BOUND = 64 << 20
GOAL_LARGE, GOAL_SMALL = 0.15, 0.30


def label(kind: str, pair: str, path: str, place: str) -> str:
    src, dst = pair.split("->")
    return f"{kind} {src}->{dst} {path} @{place}"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(x: float) -> str:
    return "   -" if x != x else f"{x * 100:4.0f}"


def refit(run: dict) -> object:
    """The run's calibration points fitted again by this build's core."""
    from gpushare import _native

    recorded = run["model"]
    model = _native.advice.CostModel(recorded.get("machine") or {}, recorded.get("created", 0.0))
    for key, points in recorded["observations"].items():
        head, place = key.rsplit(" @", 1)
        kind, pair, path = head.split(" ")
        src, dst = pair.split("->")
        shares = recorded["fits"].get(key, {}).get("shares")
        # The host's speed with each point, where the run measured it (runs since the speed scaling).
        speeds = recorded.get("host_speeds", {}).get(key)
        # The ceiling of the resources its copy crosses, as the run measured it: past the sweep a
        # copy is never cheaper per byte.
        ceiling = recorded["fits"].get(key, {}).get("ceiling")
        model.add(kind, path, src, dst, place, [(int(p["bytes"]), float(p["seconds"])) for p in points], shares, speeds, ceiling)
    # What a device switch around a handoff cost (measured apart from the sweeps).
    for label, switch in (recorded.get("device_switches") or {}).items():
        source, place = label.split("@", 1)
        model.set_device_switch(source, place, float(switch["seconds"]), switch.get("host_speed"))
    return model


def errors_of(rows: list[dict], predicted: dict[int, tuple[float, float]]) -> dict[str, dict[str, list[float]]]:
    """|predicted − measured| / measured per row, grouped by size class, path and size; and per
    kind of path whether the row lay beyond the tolerance its fit stated (``missed``)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, r in enumerate(rows):
        if i not in predicted:
            continue
        seconds, tolerance = predicted[i]
        e = abs(seconds - r["measured_s"]) / r["measured_s"]
        kind = "copying" if r["path"] in ("copy", "host", "pinned") else "sharing"
        out["missed"][kind].append(float(e > tolerance))
        out["tolerance"][kind].append(tolerance)
        big = r["size"] >= LARGE
        out["class"]["large" if big else "small"].append(e)
        out["kind"][f"{r.get('kind', 'share')} {'>=' if big else '<'}1MiB"].append(e)
        out["path"][f"{r['path']} {'>=' if big else '<'}1MiB"].append(e)
        out["size"][str(r["size"])].append(e)
    return out


def flat_path_drift(run: dict, place: str) -> dict[str, float]:
    """For paths that shared at every calibration size: the calibration's level against the
    evaluation's (same path, same pair, other sizes, later), and the evaluation's own spread."""
    fits, obs = run["model"]["fits"], run["model"]["observations"]
    by_path: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in run["rows"]:
        by_path[(r["pair"], r["path"])].append(r["measured_s"])
    ratios, within, first_cold = [], [], []
    for (pair, path), measured in by_path.items():
        key = label("share", pair, path, place)
        if not fits.get(key, {}).get("shares"):
            continue
        calibration = [p["seconds"] for p in obs[key]]
        level = median(measured)
        ratios.append(median(calibration) / level)
        within += [abs(m - level) / m for m in measured]
        first_cold.append(calibration[0] > 1.2 * median(calibration[1:]))
    logs = [abs(math.log(r)) for r in ratios]
    return {
        "paths": len(ratios),
        "within_evaluation": median(within),
        "calibration_vs_evaluation": median(logs),
        "apart_over_20pct": sum(x > math.log(1.2) for x in logs) / max(len(logs), 1),
        "first_size_cold": sum(first_cold) / max(len(first_cold), 1),
        "ratios": sorted(ratios),
    }


def speed_exponent(run: dict) -> tuple[float, float, int] | None:
    """How a sharing path's time followed the host's speed during the calibration alone: the slope
    of log(time) on log(host speed) over each share path's sweep points (one intercept per path),
    its standard error, and how many paths; None where the run measured no speeds."""
    fits, obs, speeds = run["model"]["fits"], run["model"]["observations"], run["model"].get("host_speeds", {})
    groups = []
    for key, fit in fits.items():
        if not key.startswith("share ") or not fit.get("shares") or key not in speeds:
            continue
        xs, ys = [math.log(v) for v in speeds[key]], [math.log(p["seconds"]) for p in obs[key]]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        groups.append(([x - mx for x in xs], [y - my for y in ys]))
    sxx = sum(x * x for xs, _ in groups for x in xs)
    if not groups or sxx <= 0:
        return None
    slope = sum(x * y for xs, ys in groups for x, y in zip(xs, ys)) / sxx
    rss = sum((y - slope * x) ** 2 for xs, ys in groups for x, y in zip(xs, ys))
    dof = max(sum(len(xs) - 1 for xs, _ in groups) - 1, 1)
    return slope, math.sqrt(rss / dof / sxx), len(groups)


def copying_paths(run: dict) -> list[tuple[str, float, list[float]]]:
    """Each copying path's stated error (the one line's error on its own sweep, or for a fit made
    of segments the error on sizes left out), and its cost per byte between each two calibration
    sizes (GB/s): where the rate changes with size, one line cannot hold."""
    out = []
    for key, fit in run["model"]["fits"].items():
        if fit.get("shares") or key not in run["model"]["observations"]:
            continue
        pts = sorted((p["bytes"], p["seconds"]) for p in run["model"]["observations"][key])
        rates = [((n1 - n0) / (t1 - t0) / 1e9 if t1 > t0 else float("inf")) for (n0, t0), (n1, t1) in zip(pts, pts[1:])]
        out.append((key, fit["error"], rates))
    return out


def promise(rows: list[tuple[float, float, float, str | None, str]]) -> dict:
    """Of `(measured, predicted, tolerance, words, row)` rows: how many gave a number, the share of
    those within their stated error, the worst ratio either way (and which row), how many lie
    beyond 2x, and how many gave words instead of a number."""
    numbered = [(m, p, t, row) for m, p, t, w, row in rows if not w and m and m > 0 and p and p > 0]
    ratios = [(max(m / p, p / m), row) for m, p, _, row in numbered]
    within = sum(abs(p - m) / m <= t for m, p, t, _ in numbered)
    worst = max(ratios, default=(1.0, None))
    return {
        "numbers": len(numbered),
        "within": within / len(numbered) if numbered else 0.0,
        "worst": worst[0],
        "worst_row": worst[1],
        "beyond_2x": sum(r > 2.0 for r, _ in ratios),
        "words": len(rows) - len(numbered),
    }


def row_name(r: dict) -> str:
    """A measured row in words: its kind, pair, path, size and dtype."""
    return f"{r.get('kind', 'share')} {r['pair']} {r['path']} {int(r['size']) >> 10} KiB {r.get('dtype', '')}".strip()


def bandwidth_bound(rows: list[dict], predicted: dict[int, float], words: dict[int, str | None]) -> dict[str, float]:
    """bench_advice.py's figure for the sizes a copy is bound by bandwidth: the median error of each
    path that copies by design (every move copies), over its rows of 64 MiB and up that were given a
    number, by ``kind path``."""
    from gpushare import _native

    errors: dict[str, list[float]] = defaultdict(list)
    for i, seconds in predicted.items():
        r = rows[i]
        kind = r.get("kind", "share")
        copies = kind == "move" or _native.paths.copied_by_design(kind, r["path"]) is not None
        if int(r["size"]) >= BANDWIDTH_BOUND and not words.get(i) and copies:
            errors[f"{kind} {r['path']}"].append(abs(seconds - r["measured_s"]) / r["measured_s"])
    return {label: statistics.median(e) for label, e in sorted(errors.items())}


def report(path: Path, show_paths: bool) -> dict:
    # A run written by bench_advice.py --json may be gzipped.
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    run = json.loads(raw.decode("utf-8"))
    place = run.get("device", "cuda:0")
    rows = run["rows"]
    print(f"== {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(rows)} rows, "
          f"{len(run['model']['fits'])} paths fitted on {place}")
    recorded = errors_of(rows, {i: (r["predicted_s"], r["tolerance"]) for i, r in enumerate(rows)})
    model = refit(run)
    replayed: dict[int, tuple[float, float]] = {}
    words: dict[int, str | None] = {}
    for i, r in enumerate(rows):
        src, dst = r["pair"].split("->")
        # Each row as the run predicted it: its own kind and place, and the host's speed measured
        # before it ran (the recorded slowdown times the speed the run's fit was stated at).
        kind, where = r.get("kind", "share"), r.get("place", place)
        stated = run["model"]["fits"].get(label(kind, r["pair"], r["path"], where), {}).get("host_speed")
        speed = r["host_slowdown"] * stated if r.get("host_slowdown") and stated else None
        p = model.predict(kind, r["path"], src, dst, where, int(r["size"]), host_speed=speed)
        # The run added a device switch where another device was current as the row ran; the row
        # does not say so, so the replay takes the prediction, with or without one, nearer to the
        # one the run recorded.
        switched = model.predict(kind, r["path"], src, dst, where, int(r["size"]), host_speed=speed, switches_device=True)
        if p is not None and switched is not None and r.get("predicted_s"):
            p = min((p, switched), key=lambda q: abs(q.seconds - r["predicted_s"]))
        if p is not None:
            replayed[i] = (p.seconds, p.tolerance)
            words[i] = p.unpredictable
    refitted = errors_of(rows, replayed)
    result = {}
    for name, errs in (("recorded model", recorded), ("refitted by this build", refitted)):
        large, small = median(errs["class"]["large"]), median(errs["class"]["small"])
        result[name] = {"large": large, "small": small}
        print(f"  {name:24} median error >= 1 MiB {large * 100:5.1f} % (goal {GOAL_LARGE * 100:.0f}), "
              f"< 1 MiB {small * 100:5.1f} % (goal {GOAL_SMALL * 100:.0f})")
        print(" " * 28 + "rows beyond their stated tolerance: " + ", ".join(
            f"{k} paths {sum(v) / len(v) * 100:.0f} % (median tolerance {median(errs['tolerance'][k]) * 100:.0f} %)"
            for k, v in sorted(errs["missed"].items())))
    # The promise a user holds a prediction to: the rows given a number lie within its stated
    # error, and none further than 2x; a row that cannot be held to that gives words instead.
    recorded_promise = promise([(r["measured_s"], r["predicted_s"], r["tolerance"], r.get("unpredictable"), row_name(r))
                                for r in rows if r.get("predicted_s") is not None])
    refitted_promise = promise([(rows[i]["measured_s"], seconds, tolerance, words.get(i), row_name(rows[i]))
                                for i, (seconds, tolerance) in replayed.items()])
    for name, kept in (("recorded model", recorded_promise), ("refitted by this build", refitted_promise)):
        result[name]["promise"] = kept
        print(f"  {name:24} with a number {kept['numbers']} rows: within the stated error {kept['within'] * 100:.0f} % "
              f"(goal >= 90 %), worst ratio {kept['worst']:.2f}x (goal <= 2x; {kept['worst_row']}), {kept['beyond_2x']} beyond 2x; "
              f"{kept['words']} rows gave words instead")
    print("  by kind, median % (recorded -> refitted): " + ", ".join(
        f"{k} {pct(median(recorded['kind'][k])).strip()}->{pct(median(refitted['kind'].get(k, []))).strip()}"
        for k in sorted(recorded["kind"])))
    exponent = speed_exponent(run)
    if exponent is not None:
        print(f"  the calibration's own share paths followed the host's speed to the power {exponent[0]:.2f} "
              f"(± {exponent[1]:.2f}, {exponent[2]} paths)")
    print("  by path, median % (recorded -> refitted):")
    for key in sorted(recorded["path"]):
        print(f"    {key:18} n={len(recorded['path'][key]):3}  {pct(median(recorded['path'][key]))} -> "
              f"{pct(median(refitted['path'].get(key, [])))}")
    print("  by size, median % (recorded -> refitted): " + ", ".join(
        f"{int(s) >> 10} KiB {pct(median(recorded['size'][s])).strip()}->{pct(median(refitted['size'].get(s, []))).strip()}"
        for s in sorted(recorded["size"], key=int)))
    bound = {name: bandwidth_bound(rows, predicted, said) for name, predicted, said in (
        ("recorded model", {i: r["predicted_s"] for i, r in enumerate(rows) if r.get("predicted_s")},
         {i: r.get("unpredictable") for i, r in enumerate(rows)}),
        ("refitted by this build", {i: seconds for i, (seconds, _) in replayed.items()}, words),
    )}
    if bound["recorded model"] or bound["refitted by this build"]:
        result["bandwidth_bound"] = bound
        print(f"  from {BANDWIDTH_BOUND >> 20} MiB up, each path that copies, median % (goal <= 5 each; recorded -> refitted): "
              + ", ".join(f"{k} {pct(bound['recorded model'].get(k, float('nan'))).strip()}->"
                          f"{pct(bound['refitted by this build'].get(k, float('nan'))).strip()}"
                          for k in sorted(set(bound["recorded model"]) | set(bound["refitted by this build"]))))
    drift = flat_path_drift(run, place)
    print(f"  paths that share ({drift['paths']}): the evaluation's points lie a median "
          f"{drift['within_evaluation'] * 100:.1f} % from their own level, but the calibration's level lies a median "
          f"{drift['calibration_vs_evaluation'] * 100:.0f} % (log) from the evaluation's, more than 20 % apart for "
          f"{drift['apart_over_20pct'] * 100:.0f} % of them; the first calibration size >1.2x the rest for "
          f"{drift['first_size_cold'] * 100:.0f} %")
    print("    calibration/evaluation level per path: " + " ".join(f"{r:.2f}" for r in drift["ratios"]))
    copies = copying_paths(run)
    if copies:
        worst = sorted(copies, key=lambda c: -c[1])
        print(f"  paths that copy ({len(copies)}): the error the run's fit stated, median "
              f"{median([c[1] for c in copies]) * 100:.0f} %, worst {worst[0][1] * 100:.0f} % ({worst[0][0]})")
        if show_paths:
            for key, err, rates in worst:
                print(f"    {key:40} own error {err * 100:4.0f} %  GB/s between sizes: "
                      + " ".join("flat" if r == float("inf") else f"{r:.3g}" for r in rates))
    if "calibration" in run:
        # (a process path's timing keeps its samples, not their IQR)
        spreads = [p["timing"]["iqr"] / p["timing"]["median"] for sweep in run["calibration"]
                   for p in sweep["points"] if p.get("timing") and p["timing"].get("median") and "iqr" in p["timing"]]
        print(f"  calibration samples recorded: {len(spreads)} points, IQR/median median {median(spreads) * 100:.1f} %")
    result["drift"] = {k: v for k, v in drift.items() if k != "ratios"}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=list(RECORDED), help="bench_advice --json files (.json or .json.gz)")
    parser.add_argument("--paths", action="store_true", help="list every copying path's rates between sizes")
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()
    results = {str(p): report(p.resolve(), args.paths) for p in args.runs}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
