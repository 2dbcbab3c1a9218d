"""The one path table (crates/core/src/paths.rs) and the one ``auto`` (crates/core/src/auto.rs): every part of gpushare reads the same
paths and takes the same ``auto``: ``share``, ``compare``, ``bench`` (what ``gpushare bench`` runs
in its kernel), the predictor and the CLI's argument checks."""

from __future__ import annotations

import json
import os
import warnings
import subprocess
import sys
from pathlib import Path

import pytest

import gpushare
from gpushare import _native, auto, devices, lab, paths, verdicts
from gpushare.adapters import ADAPTERS

ROOT = Path(__file__).resolve().parents[1]


def test_every_path_is_declared_once_in_the_table():
    table = _native.paths.path_table()
    assert table[-1]["name"] == "auto" and table[-1]["kind"] == "any"
    keys = [(p["kind"], p["name"]) for p in table]
    assert len(keys) == len(set(keys))
    for p in table:
        assert set(p) == {"name", "kind", "description", "copies_by_design", "colour", "modelled", "applies"}
        assert p["description"] and p["applies"] and p["colour"].startswith("#")
    # Python's names are the table's.
    assert paths.PATH_NAMES == ("dlpack", "capsule", "cai", "host", "pinned", "copy", "shared")
    assert devices.MOVE_PATHS == ("p2p", "pinned", "dlpack", "move")
    assert verdicts.MODELLED_PATHS == ("auto", "dlpack", "capsule", "cai", "host", "pinned", "copy")
    # The process paths gpushare.processes lists are the table's.
    from gpushare import processes

    assert tuple(processes.PROCESS_PATHS) == paths.names_of("process")


def test_the_rules_keep_no_copy_of_what_the_adapters_declare():
    """``auto`` and every prediction decide from the facts the adapters declare, read once per
    pair (``Pair.of``): the binding has no names-only fallback, and a Predictor cannot be made
    without the pair's facts."""
    assert not any(hasattr(m, "known_endpoints") for m in (_native, *vars(_native).values()))
    with pytest.raises(TypeError, match="pair"):
        _native.paths.Predictor("jax", "", "auto", "")
    numba, torch_ = ADAPTERS["numba"], ADAPTERS["torch"]
    # The facts come from the adapters themselves: Numba's arrays have no __dlpack__.
    assert auto.pair(numba, torch_).endpoints[0] is False and auto.pair(torch_, numba).endpoints[0] is True


def test_auto_decides_from_facts():
    plain = _native.paths.Pair()
    assert plain.auto(_native.paths.HandoffFacts((1, 0))) == ("dlpack", "share", None)
    # Into a framework that cannot address device memory, from device memory: the host route, and why.
    into_numpy = _native.paths.Pair("torch", "numpy", accepts_capsules=False, addresses_device=False)
    path, kind, why = into_numpy.auto(_native.paths.HandoffFacts((2, 0)))
    assert (path, kind) == ("host", "share") and "numpy cannot address device memory" in why
    assert into_numpy.auto(_native.paths.HandoffFacts((1, 0)))[0] == "dlpack"
    assert _native.paths.Pair(accepts_objects=False).auto(_native.paths.HandoffFacts((2, 0)))[0] == "capsule"
    assert _native.paths.Pair(exports_dlpack=False).auto(_native.paths.HandoffFacts((2, 0)))[0] == "cai"
    # Moves: a peer copy only between two GPUs that reach each other; nothing to move when already there.
    assert plain.auto(_native.paths.HandoffFacts((2, 0), (2, 1), peer_access=True))[:2] == ("p2p", "move")
    assert plain.auto(_native.paths.HandoffFacts((2, 0), (2, 1), peer_access=False))[0] == "move"
    assert plain.auto(_native.paths.HandoffFacts((2, 0), (1, 0), peer_access=True))[0] == "move"
    path, kind, why = plain.auto(_native.paths.HandoffFacts((1, 0), (1, 0)))
    assert (path, kind) == ("move", "move") and "already on cpu" in why


def test_a_pair_reads_what_the_two_adapters_declare_once():
    torch_adapter, jax_adapter = ADAPTERS["torch"], ADAPTERS["jax"]
    into_jax = auto.pair(torch_adapter, jax_adapter)
    assert (into_jax.source, into_jax.target) == ("torch", "jax")
    assert into_jax == _native.paths.Pair("torch", "jax", accepts_capsules=jax_adapter.accepts_capsules,
                                    import_waits=jax_adapter.dlpack_import_waits,
                                    cai_unordered=not jax_adapter.cai_import_orders,
                                    shares_host_across=torch_adapter.shares_host_memory_across_processes)
    assert into_jax != _native.paths.Pair("torch", "jax")


def test_the_host_only_auto_is_decided_per_array():
    """The same type of array and target: a CPU tensor shares into NumPy by DLPack, and ``auto``
    is keyed on where the array lies (the GPU side is tests/test_gpu.py's)."""
    torch = pytest.importorskip("torch")
    torch_adapter, numpy_adapter = ADAPTERS["torch"], ADAPTERS["numpy"]
    assert auto.path_for(torch_adapter, numpy_adapter, (1, 0)) == "dlpack"
    assert auto.path_for(torch_adapter, numpy_adapter, (2, 0)) == "host"
    assert auto.path_for(torch_adapter, ADAPTERS["jax"], (2, 0)) == "dlpack"
    r = gpushare.share(torch.arange(4.0), "numpy")
    assert (r.path, r.verdict) == ("dlpack", "shared")


def test_the_process_auto_is_the_one_auto():
    """gpushare.processes can call auto.across_processes: the one auto's word for a handoff across processes."""
    np = pytest.importorskip("numpy")
    assert auto.across_processes(np.ones(4)) == "shm"
    assert _native.paths.Pair().auto(_native.paths.HandoffFacts((2, 0), across=True))[:2] == ("ipc", "process")
    from gpushare import processes

    assert auto.across_processes(np.ones(4)) == processes.resolve_auto(np.ones(4))[0]


def test_the_process_auto_takes_the_path_that_shares_host_memory_and_advise_says_shm_copies():
    """A torch tensor already in shared memory: torch.multiprocessing hands the worker the tensor
    itself (shared), where shm copies it into a segment of its own; advise predicts shm's copy, as
    the handoff measures it."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    # torch_mp would move a private tensor's storage and free the memory its views read.
    assert auto.across_processes(torch.ones(4)) == "shm"
    assert auto.across_processes(torch.ones(4).share_memory_()) == "torch_mp"
    assert auto.across_processes(np.ones(4)) == "shm"  # NumPy has no transport of its own
    from gpushare import advice

    rows = {r["path"]: r for r in advice.advise(np.ones(1024), "numpy", across="process").to_dict()["rows"]}
    assert rows["shm"]["verdict"] == "copied", rows["shm"]
    # advise says what torch_mp would do to a private tensor, and never recommends it; for a tensor
    # already in shared memory it is the path that shares.
    private = advice.advise(torch.ones(1024), "torch", across="process")
    rows = {r["path"]: r for r in private.to_dict()["rows"]}
    assert rows["torch_mp"]["moves_source"] and "frees the memory its views read" in rows["torch_mp"]["reason"]
    assert private.recommended == "shm"
    shared = advice.advise(torch.ones(1024).share_memory_(), "torch", across="process")
    assert shared.recommended == "torch_mp" and "moves_source" not in {r["path"]: r for r in shared.to_dict()["rows"]}["torch_mp"]


# -- the walk: every pair × layout of the CPU conformance matrix --------------------------------------


def walk(frameworks: list[str]) -> list[str]:
    """For every ordered pair of ``frameworks`` and every layout the CPU conformance matrix builds,
    with and without ``device="cpu"``: compare's auto row is the path ``share(path="auto")`` takes,
    and the predictor resolved ``auto`` the same way; per pair, ``bench``'s auto (what
    ``gpushare bench`` runs in its kernel) is the path share takes for the sweep's array. Returns
    the disagreements, in words, and how many cells it walked."""
    from tools import conformance as C

    env = C.prepare(frameworks, "cpu")
    warnings.simplefilter("ignore")  # a writable view of read-only memory warns; not the point here
    problems: list[str] = []
    walked = 0
    for src, dst in C.pairs(env.frameworks):
        for layout in C.LAYOUTS:
            try:
                x = C.build(src, "float32", layout)
            except Exception:  # NotConstructible: the matrix has no such cell either
                continue
            for device in (None, "cpu"):
                walked += 1
                where = f"{src}→{dst} {layout} device={device}"
                c = lab.compare(x, dst, repeat=1, number=1, warmup=1, min_sample_time=0.0, device=device)
                autos = [r["path"] for r in c.rows if r["auto"]]
                taken = _path_share_takes(x, dst, device)
                if autos != [taken]:
                    problems.append(f"{where}: compare marks {autos} as auto, share took {taken}")
        s_adapter, d_adapter = C.framework(src), C.framework(dst)
        b = lab.bench(src, dst, sizes=[64], paths="auto", repeat=1, warmup=1, min_sample_time=0.0,
                      progress=False, device="cpu")
        sweep_array = lab.make_array(s_adapter, 16, "float32", "cpu")
        taken = _path_share_takes(sweep_array, dst, None)
        if b.to_dict()["paths"] != [taken]:
            problems.append(f"{src}→{dst}: bench's auto is {b.to_dict()['paths']}, share took {taken}")
        if auto.path_for(s_adapter, d_adapter) != taken:
            problems.append(f"{src}→{dst}: auto.path_for disagrees with share ({taken})")
    return [*problems, f"walked {walked}"]


def _path_share_takes(x, dst: str, device: str | None) -> str:
    """The path ``share(x, dst, device=device)`` takes, whether the share works or is refused: the
    path of the plan it made (a refusal comes after the plan, from the pipeline it runs)."""
    from gpushare import model_cache

    plans = model_cache.planner().plans
    plans.clear()
    try:
        r = gpushare.share(x, dst, device=device)
    except gpushare.GpushareError:
        r = None
    (plan,) = plans.values()
    assert r is None or r.path == plan.path
    return plan.path


def _walk_in_child(frameworks: list[str]) -> list[str]:
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import test_paths\n"
        f"print('WALK' + json.dumps(test_paths.walk({frameworks!r})))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("WALK")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    return json.loads(lines[-1][4:])


def _installed(names: list[str]) -> list[str]:
    return [n for n in names if ADAPTERS[n].installed()]


@pytest.mark.parametrize("group", [["torch", "jax", "numpy", "tf"], ["torch", "jax", "numpy", "paddle"]],
                         ids=["with-tf", "with-paddle"])
def test_compare_share_bench_and_the_predictor_take_the_same_auto_on_every_cpu_cell(group):
    """PaddlePaddle and TensorFlow crash in one process (Adapter.crashes_beside), so the CPU
    matrix's pairs are walked in two children, as the matrix runs them."""
    frameworks = _installed(group)
    if len(frameworks) < 2:
        pytest.skip(f"fewer than two of {group} installed")
    result = _walk_in_child(frameworks)
    problems, walked = result[:-1], int(result[-1].split()[-1])
    assert walked > 0
    assert problems == []


def test_the_cli_checks_paths_against_the_table():
    """``gpushare bench --paths`` takes the table's names (its list is built from crates/core/src/paths.rs)."""
    code = _native.cli_main(["gpushare", "bench", "torch->numpy", "--paths", "bogus"])
    assert code == 2


def test_cai_from_a_framework_whose_interface_is_read_only_into_one_that_refuses_it_is_not_applicable():
    """Every calibration on 2x H200 ran jax → torch via cai, reported applicable, and it failed with
    torch's TypeError ("the read only flag is not supported"): JAX marks its interface read-only.
    The route says so before touching an array, whichever adapters declare it."""
    from gpushare.exceptions import PathNotApplicableError

    jax, torch = ADAPTERS["jax"], ADAPTERS["torch"]
    assert jax.immutable and jax.exports_cai and not torch.imports_readonly_cai
    with pytest.raises(PathNotApplicableError, match="read-only") as raised:
        paths.route(jax, torch, "cai")
    assert "path='dlpack'" in str(raised.value)
    # A consumer that takes read-only interfaces (CuPy), and a writable source (CuPy into torch), build.
    assert paths.route(jax, ADAPTERS["cupy"], "cai")[0] == "cai"
    assert paths.route(ADAPTERS["cupy"], torch, "cai")[0] == "cai"


def test_a_calibrated_auto_makes_no_cut_past_the_largest_size_it_measured(tmp_path, monkeypatch):
    """Two paths of torch→torch the model says copied, measured up to 1 MiB, whose lines carried on would cross at
    4 MiB: past the sweep's sizes nothing was measured, so there is no cut there (on 2x H200 the
    moves' near-equal bandwidths "crossed" at 641 MB by noise), and a 16 MiB array takes the path
    that was fastest at 1 MiB, in share and in the one auto."""
    import torch
    from gpushare import advice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 10, 1 << 16, 1 << 20)
    m.add("share", "dlpack", "torch", "torch", "cpu", [(n, 1e-6 + 1e-9 * n) for n in sizes], False)
    # Equal to dlpack at 4 MiB: 1e-6 + 1e-9 n = c + 0.99e-9 n there.
    m.add("share", "capsule", "torch", "torch", "cpu", [(n, 1e-6 + 1e-11 * (4 << 20) + 0.99e-9 * n) for n in sizes], False)
    advice.save(m)
    try:
        src = dst = gpushare.adapters.framework("torch")
        assert auto.size_breaks(src, dst) == ()
        for nbytes in (4096, 1 << 20, 16 << 20, 1 << 30):
            assert auto.choice(src, dst, (1, 0), nbytes=nbytes)[0] == "dlpack", nbytes
        big = torch.ones((16 << 20) // 4)
        r = gpushare.share(big, "torch")
        assert r.path == "dlpack" and not r.unexpected
    finally:
        advice.cache_file().unlink()
        advice.forget()


def test_a_model_whose_fits_cannot_price_these_arrays_leaves_auto_to_the_rules_everywhere(tmp_path, monkeypatch):
    """A model whose sweep of torch→torch says DLPack and the legacy capsule copied, with lines that
    cross at 10 000 bytes (a fast start against a fast stream): the rules say both share a float32
    tensor, which moves no bytes, so neither line prices it, and ``share``, ``compare``'s auto row,
    ``bench``'s auto per size and the predictor all keep the rules' DLPack at 4 KiB and at 64 KiB,
    with no unexpected verdict (a line fitted to copies once made auto change path with the size of
    arrays that shared). Where a calibrated auto does change with size (copies: moves between GPUs,
    or an int64 tensor into JAX) the core's tests and the GPU run hold it."""
    import torch
    from gpushare import advice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 10, 1 << 16, 1 << 20)
    m.add("share", "dlpack", "torch", "torch", "cpu", [(n, 1e-6 + 1e-9 * n) for n in sizes], False)
    m.add("share", "capsule", "torch", "torch", "cpu", [(n, 1e-5 + 1e-10 * n) for n in sizes], False)
    advice.save(m)
    try:
        small, large = torch.ones(1024), torch.ones(16384)  # 4 KiB, 64 KiB
        for _ in range(2):
            for x in (small, large):
                r = gpushare.share(x, "torch")
                assert r.path == "dlpack" and r.verdict == "shared" and not r.unexpected, (x.nbytes, r.path)
        for x in (small, large):
            c = gpushare.compare(x, "torch", paths="dlpack,capsule", repeat=1, number=1, min_sample_time=0.0)
            assert [row.path for row in c.rows if row.auto] == ["dlpack"]
            assert all("this array is shared" in row.predicted.unpredictable for row in c.rows), c
            assert gpushare.advise(x, "torch").recommended == "dlpack"
        b = gpushare.bench("torch", "torch", sizes=[4096, 65536], paths="auto", repeat=1, min_sample_time=0.0,
                           progress=False, device="cpu")
        assert {(p["size"], p["path"]) for p in b.to_dict()["points"] if p["auto"]} == {(4096, "dlpack"), (65536, "dlpack")}
    finally:
        advice.cache_file().unlink()
        advice.forget()


def test_advise_says_where_autos_ranges_are_a_tie_within_the_models_error(tmp_path, monkeypatch):
    """Two paths of torch→torch the model says copied (zero-copy by design both) whose lines cross at 10 000 bytes but lie within a few
    percent of each other everywhere (as `move` and `p2p` between two H200s below 14 MiB, notebook
    08): `auto` still changes path at the crossing, and `advise` says both ranges are a tie the
    model cannot break, in its footer and its JSON (`close`); `auto.ranges` gives the same."""
    import torch
    from gpushare import advice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    advice.forget()
    m = gpushare.CostModel(advice.machine_key(), 0.0)
    sizes = (1 << 10, 1 << 16, 1 << 20)
    m.add("share", "dlpack", "torch", "torch", "cpu", [(n, 1e-6 + 1e-9 * n) for n in sizes], False)
    m.add("share", "capsule", "torch", "torch", "cpu", [(n, 1.5e-6 + 0.95e-9 * n) for n in sizes], False)
    advice.save(m)
    try:
        src = dst = gpushare.adapters.framework("torch")
        assert auto.size_breaks(src, dst) == (10_000,)
        assert auto.ranges(src, dst) == [(0, 10_000, "dlpack", "capsule"), (10_000, None, "capsule", "dlpack")]
        a = gpushare.advise(torch.ones(1024), "torch")
        assert a.to_dict()["auto_by_size"] == [{"from": 0, "below": 10_000, "path": "dlpack", "close": "capsule"},
                                               {"from": 10_000, "below": None, "path": "capsule", "close": "dlpack"}]
        text = " ".join(repr(a).split())  # the notes wrap at 100 columns
        assert "auto by size for this pair: dlpack below 9.77 KiB, capsule from 9.77 KiB up" in text, text
        assert "a tie it cannot break (the ranges there may change with the next calibration): capsule and dlpack at every size" in text, text
    finally:
        advice.cache_file().unlink()
        advice.forget()


def test_the_table_of_paths_knows_no_policy_and_no_model():
    """paths.py is the data (each path's route); auto's policy over the model is auto.py's, and the
    model is model_cache.py's: the table imports neither, so the two never import each other."""
    import ast

    import gpushare.paths as table

    tree = ast.parse(open(table.__file__).read())
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "gpushare"
                for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"advice", "auto", "model_cache", "gpushare.advice", "gpushare.auto", "gpushare.model_cache"}
    with pytest.raises(gpushare.GpushareError, match="unknown transfer path 'auto'"):
        table.route(ADAPTERS["numpy"], ADAPTERS["torch"], "auto")  # auto's pick is auto.route's
