"""The demo notebooks: generated from notebooks/make_notebooks.py, committed unexecuted, and run top
to bottom by ``gpushare run`` against the gpushare kernel, with the same outputs (timings and
addresses aside) as nbclient, the engine of ``jupyter nbconvert --execute``.

Each notebook is executed once per runner per session (tests/_notebooks.py); kernel start-ups and
framework imports are most of the cost.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import have, require

import _notebooks as nbs

pytestmark = [require("nbformat"), require("IPython"), require("ipykernel")]

CPU_FRAMEWORKS = ("torch", "jax", "tensorflow", "numpy", "pandas")
needs_cpu_frameworks = pytest.mark.skipif(
    not all(have(m) for m in CPU_FRAMEWORKS),
    reason=f"the CPU notebooks need {', '.join(CPU_FRAMEWORKS)}",
)

#: Cells that demonstrate a failure, and the exception each one shows.
EXPECTED_ERRORS = {
    "01_tour_cpu": ["UnsafeInputError", "ConversionError"],
    "02_torch_to_tensorflow": [],
}


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_notebooks", nbs.NOTEBOOKS / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def nb_session(tmp_path_factory):
    return nbs.session(tmp_path_factory)


def _executed(nb_session, stem):
    run = nbs.run_gpushare(nb_session, stem)
    assert run.returncode == 0, f"gpushare run {stem} failed (exit {run.returncode}):\n{run.log}"
    assert run.nb is not None, f"gpushare run wrote no notebook:\n{run.log}"
    return run


# -- The committed notebooks -------------------------------------------------------------------


def test_committed_notebooks_match_their_generator(tmp_path):
    gen = _load_generator()
    assert gen.main(["--check"]) == 0, "run: python notebooks/make_notebooks.py"
    assert sorted(p.stem for p in nbs.NOTEBOOKS.glob("*.ipynb")) == sorted(gen.NOTEBOOKS)


@pytest.mark.parametrize("stem", nbs.CPU_NOTEBOOKS + nbs.GPU_NOTEBOOKS)
def test_committed_notebooks_are_unexecuted_and_valid(stem):
    import nbformat

    nb = nbformat.read(nbs.NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec == {"name": "gpushare", "display_name": "Python (gpushare)", "language": "python"}
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def test_failing_cells_are_tagged_and_parameters_are_marked():
    import nbformat

    tour = nbformat.read(nbs.NOTEBOOKS / "01_tour_cpu.ipynb", as_version=4)
    tagged = [c.source for c in tour.cells if "raises-exception" in c.metadata.get("tags", [])]
    assert len(tagged) == 2 and "rev ->torch" in tagged[0] and "t ->tf" in tagged[1]
    tf = nbformat.read(nbs.NOTEBOOKS / "02_torch_to_tensorflow.ipynb", as_version=4)
    params = [c.source for c in tf.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "size = " in params[0] and 'device = "auto"' in params[0]


# -- gpushare run ------------------------------------------------------------------------------


@needs_cpu_frameworks
@pytest.mark.parametrize("stem", nbs.CPU_NOTEBOOKS)
def test_cpu_notebook_runs_top_to_bottom_with_gpushare_run(nb_session, stem):
    import nbformat

    run = _executed(nb_session, stem)
    nbformat.validate(run.nb)
    errors = []
    for cell in run.nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"cell not run: {cell.source[:80]!r}"
        for o in cell.outputs:
            if o.output_type == "error":
                assert "raises-exception" in cell.metadata.get("tags", []), f"{o.ename}: {o.evalue}"
                errors.append(o.ename)
    # The tagged cells really fail, with the exception the markdown explains.
    assert errors == EXPECTED_ERRORS[stem]


@needs_cpu_frameworks
@pytest.mark.parametrize("stem", nbs.CPU_NOTEBOOKS)
def test_gpushare_tables_are_in_the_outputs(nb_session, stem):
    run = _executed(nb_session, stem)
    tables = [h for h in nbs.html_outputs(run.nb) if '<table class="gpushare' in h]
    assert tables, "no gpushare table in the executed notebook"
    bundles = [
        o["data"]["application/vnd.gpushare+json"]
        for c in run.nb.cells if c.cell_type == "code"
        for o in c.outputs if "data" in o and "application/vnd.gpushare+json" in o["data"]
    ]
    assert bundles and all(isinstance(b, dict) for b in bundles)
    verdicts = json.dumps(bundles)
    assert '"shared"' in verdicts
    if stem == "01_tour_cpu":
        assert '"copied"' in verdicts


@needs_cpu_frameworks
def test_the_tour_shows_what_it_says(nb_session):
    """The story the markdown tells is what the outputs show."""
    nb = _executed(nb_session, "01_tour_cpu").nb
    out = {c.id: "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in c.outputs)
           for c in nb.cells if c.cell_type == "code"}
    joined = "\n".join(out.values())
    assert "tf: 42.0 | jax: 42.0" in joined  # one write through torch, seen by the others
    assert "tf (through jax): -1.0" in joined
    assert "int64→int32" in joined and "jax_enable_x64" in joined
    assert "not 64-byte aligned" in joined
    assert "GpushareWarning" in joined and "read-only" in joined
    assert "Invalid strides array from DLPack" in joined


@needs_cpu_frameworks
def test_the_tour_shows_the_best_parts_and_nothing_unasked(nb_session):
    """`make demo`'s notebook shows a %%share copy with its reason, a chain, --path all
    and a %sharebench with its plot, and prints nothing the user did not ask for (its first cell
    said "The gpushare extension is already loaded": the kernel had loaded it)."""
    nb = _executed(nb_session, "01_tour_cpu").nb
    code = [c for c in nb.cells if c.cell_type == "code"]
    streams = [o.text for c in code for o in c.outputs if o.output_type == "stream"]
    assert not any("already loaded" in t for t in streams), streams
    assert all(o.output_type != "stream" for o in code[0].outputs), code[0].outputs

    def schemas(cell):
        return [o["data"]["application/vnd.gpushare+json"]["schema"]
                for o in cell.outputs if "application/vnd.gpushare+json" in o.get("data", {})]

    by_source = {c.source: c for c in code}
    copied = next(c for src, c in by_source.items() if src.startswith("%%share numpy->jax"))
    bundle = next(o["data"]["application/vnd.gpushare+json"] for o in copied.outputs if "data" in o)
    assert "copied" in json.dumps(bundle) and "not 64-byte aligned" in json.dumps(bundle)
    assert any("->jax->tf" in src for src in by_source), "a chain"
    compare = next(c for src, c in by_source.items() if "--path all" in src)
    assert schemas(compare) == ["gpushare.comparison/1"]
    sweep = next(c for src, c in by_source.items() if src.startswith("%sharebench"))
    assert schemas(sweep) == ["gpushare.benchmark/1"]
    assert any('class="gpushare-plot"' in h for h in nbs.html_outputs(nb)), "the sweep's plot"


@needs_cpu_frameworks
def test_parameters_are_injected_after_the_parameters_cell(nb_session):
    nb = _executed(nb_session, "02_torch_to_tensorflow").nb
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    first = next(i for i, t in enumerate(tags) if "parameters" in t)
    assert "injected-parameters" in tags[first + 1]
    assert "repeat = 5" in nb.cells[first + 1].source
    footer = [o["data"]["text/plain"] for c in nb.cells for o in c.get("outputs", [])
              if "data" in o and "torch → tf ·" in o["data"].get("text/plain", "")]
    assert any("of 5 repeats" in f for f in footer), footer


@pytest.mark.parametrize("stem", nbs.GPU_NOTEBOOKS)
def test_gpu_notebooks_run_anywhere(nb_session, stem):
    """Meant for a GPU, but they run top to bottom without one, and say what they skipped."""
    if not all(have(m) for m in ("torch", "jax")):
        pytest.skip("the GPU notebooks need torch and jax")
    run = _executed(nb_session, stem)
    assert not [o for c in run.nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    import torch

    if not torch.cuda.is_available():
        text = "".join(o.get("text", "") for c in run.nb.cells if c.cell_type == "code" for o in c.outputs)
        assert "skipped" in text or "no CUDA" in text


@pytest.mark.skipif(not have("tensorflow"), reason="tensorflow not installed")
def test_the_context_story_sets_the_claim_against_what_tensorflow_offers(nb_session):
    """Notebook 09 tells its story on a GPU with PyCUDA; its look at TensorFlow's public
    API runs wherever TensorFlow is installed: no name in it is a CUDA context handle (the document's
    claim was that TensorFlow's handle can be handed to PyCUDA), only tf.distribute's replica and
    input contexts and tf.test.is_built_with_cuda."""
    if not have("torch"):
        pytest.skip("the GPU notebooks need torch")
    nb = _executed(nb_session, "09_pycuda_tensorflow_contexts_gpu").nb
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "public names; those mentioning a context or CUDA:" in text, text
    listed = [line.strip() for line in text.splitlines() if line.startswith("    tf.")]
    assert "tf.test.is_built_with_cuda" in listed and "tf.distribute.ReplicaContext" in listed, listed
    assert all(n.startswith("tf.distribute.") or n == "tf.test.is_built_with_cuda" for n in listed), listed
    from gpushare import _native

    if not (_native.cuda.driver_status()["available"] and have("pycuda")):
        # Every part that needs PyCUDA on a GPU says it was skipped, and why.
        assert text.count("skipped: no CUDA or no PyCUDA") == 7, text


# -- The same notebooks under nbclient ---------------------------------------------------------


@needs_cpu_frameworks
@pytest.mark.skipif(not have("nbclient"), reason="nbclient not installed")
@pytest.mark.parametrize("stem", nbs.CPU_NOTEBOOKS)
def test_nbclient_gives_the_same_outputs(nb_session, stem):
    ours = nbs.signature(_executed(nb_session, stem).nb)
    theirs = nbs.signature(nbs.run_nbclient(nb_session, stem).nb)
    assert [cid for cid, _ in ours] == [cid for cid, _ in theirs]
    for (cid, a), (_, b) in zip(ours, theirs):
        assert a == b, f"cell {cid} differs:\n gpushare run: {a}\n nbclient:     {b}"


def test_normalise_equates_what_varies_between_runs():
    a = "x  torch→jax  0x559bf22fde80  shared ✓  median (µs) 447   min (µs) 2.5e-05\r 3/6 [00:01, 9.0pt/s]\rdone"
    b = "x torch→jax 0x7f00aa000000 shared ✓ median (ms) 1.2 min (ms) 0.31\rdone"
    assert nbs.normalise(a) == nbs.normalise(b)
    assert nbs.normalise("copied 4,194,304 bytes; 299x faster") == nbs.normalise("copied 1,024 bytes; 3x faster")
    assert nbs.normalise("shared") != nbs.normalise("copied")
    noisy = "copied by design; ⚠ noisy: IQR is 33% of the median; raise -n/-r or quiet the machine"
    assert nbs.normalise(noisy) == nbs.normalise("copied by design")
    assert nbs.normalise("one unit. ⚠ 8 noisy points (IQR > 25% of the median).") == nbs.normalise("one unit.")
    why = "★ fastest: copy, beyond the measured spread. auto picks dlpack: copy was faster but copies, and a copy is taken only when no path shares."
    assert nbs.normalise(why) == nbs.normalise("No ★: dlpack ≈ copy are within each other's spread (a tie). auto picks dlpack.")
    assert nbs.normalise("auto picks dlpack.") != nbs.normalise("auto picks cai.")
