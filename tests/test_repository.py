"""The repository holds the product: its READMEs' examples paste into notebook cells as written, and
no tracked text speaks of how the work was organised (working sessions, device leases, issue
numbers, dated runs cited as sources) instead of stating the fact."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.md", "README-pypi.md")


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("readme", READMES)
def test_readme_examples_paste_into_cells_as_written(readme):
    blocks = python_blocks((ROOT / readme).read_text(encoding="utf-8"))
    assert blocks, f"{readme} has no python example"
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip()]
        # A cell magic works only as a cell's first line: pasted below anything else, IPython
        # answers "Line magic function `%%share` not found".
        later = [line for line in lines[1:] if line.lstrip().startswith("%%")]
        assert not later, f"{readme}: a cell magic after the first line of a block:\n{block}"


def test_the_package_page_shows_calibrate_and_advise():
    page = (ROOT / "README-pypi.md").read_text(encoding="utf-8")
    assert "gpushare.calibrate()" in page and "gpushare.advise(" in page


# -- words about how the work was organised -----------------------------------------------------
#
# A comment states the fact and why; a citation of a ticket, a working session, a device lease or a
# dated run says nothing to a reader who was not there. Each pattern below is precise enough that
# the product's own vocabulary passes: a Jupyter or kernel session, a test session, an SSH session,
# `release`, upstream references such as ``ml-explore/mlx#3531``.
ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
            "thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth")
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues? ?#?[0-9]|(?:\b|_)ISSUE_[0-9]", re.I),
    "a working session": re.compile(
        rf"\b(?:{ORDINALS}|[0-9]+(?:st|nd|rd|th)|this|that|previous|next|earlier|later|working|development|"
        rf"dev|coding|lab) sessions?\b|\b(?:{ORDINALS})-session\b|\bsessions? of work\b", re.I),
    "a device lease": re.compile(r"\bleas(?:e|es|ed|ing)\b", re.I),
    "a dated run": re.compile(r"(?<![\"'/\w-])20[0-9]{2}-[01][0-9]-[0-3][0-9](?![\"'\w])"),
}
#: Where dates are the content: the record of GPU runs (and its JSON), the conformance reports'
#: generated run line, and third-party notebooks kept unchanged.
DATES_ALLOWED = ("docs/gpu-results.md", "docs/gpu-results/", "docs/compatibility", "tests/foreign_notebooks/")
#: Third-party files kept byte for byte, and this file (its patterns name the words).
NOT_SCANNED = ("tests/foreign_notebooks/", "tests/test_repository.py")
#: Hits left in files whose owner rewords them (path -> the text of each line still to change).
#: Only shrinks: test_the_pending_hits_are_still_there fails once one is gone.
PENDING: dict[str, list[str]] = {}


def tracked_text_files() -> list[tuple[str, str]]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in names.decode("utf-8").split("\0"):
        if not name or name.startswith(NOT_SCANNED) or not (ROOT / name).is_file():
            continue
        data = (ROOT / name).read_bytes()
        if b"\0" in data[:8192] or name.endswith(".gz"):
            continue
        try:
            files.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return files


def hits(name: str, text: str) -> list[str]:
    found = []
    pending = PENDING.get(name, [])
    for number, line in enumerate(text.splitlines(), 1):
        if any(p in line for p in pending):
            continue
        for what, pattern in FORBIDDEN.items():
            if what == "a dated run" and name.startswith(DATES_ALLOWED):
                continue
            if pattern.search(line):
                found.append(f"{name}:{number}: {what}: {line.strip()[:160]}")
    return found


@pytest.fixture(scope="module")
def files():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist has no `git ls-files`)")
    return tracked_text_files()


def test_no_tracked_text_speaks_of_how_the_work_was_organised(files):
    assert len(files) > 100
    found = [h for name, text in files for h in hits(name, text)]
    assert not found, "state the fact instead of the citation:\n" + "\n".join(found)


def test_no_file_or_folder_is_named_after_a_session_or_a_lease(files):
    named = [name for name, _ in files if re.search(r"session|lease", name, re.I)
             and not re.search(r"(?:^|/)session\.rs$", name)]  # the runner's Jupyter session
    assert not named, named


def test_the_patterns_catch_what_they_are_for():
    """Not vacuous: each pattern finds the wording it forbids and passes the product's own words."""
    bad = ["Path advice (issue 26)", "see issues 24.12-24.15", "the thirteenth session's figures",
           "docs/gpu-runs/2026-11-28-fourteenth-session/", "in this session", "a second lease",
           "the 2x H200 run of 2026-11-26", "PENDING_ISSUE_22_1"]
    good = ["a Jupyter session", "the kernel's session", "once per test session", "a closed SSH session",
            "released", "release notes", "ml-explore/mlx#3531", 'np.array(["2024-01-01"])',
            "docs/gpu-results/cost-model-2026-11-28-2x-h200.json", "issued a warning"]
    assert all(hits("x.py", line) for line in bad), [line for line in bad if not hits("x.py", line)]
    assert not [line for line in good if hits("x.py", line)]


def test_the_pending_hits_are_still_there(files):
    text = dict(files)
    gone = [(name, p) for name, pending in PENDING.items() for p in pending if p not in text.get(name, "")]
    assert not gone, f"reworded: take these out of PENDING: {gone}"


def test_the_readme_gpu_section_speaks_of_results_not_of_the_machine_it_was_reached_by():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Verified on a GPU"):]
    section = section[: section.index("\n## ", 1)]
    for word in ("64 MiB", "parts", "carry", "travels", "/tmp"):
        assert word not in section, word


# -- a newcomer's first ten minutes: `make demo` and `make lab` --------------------------------------
def _make(*args: str) -> str:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MAKE")}
    proc = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _make_variable(name: str) -> list[str]:
    import shlex

    for line in _make("-pn", "lab").splitlines():
        if line.startswith(f"{name} := "):
            return shlex.split(line.split(":=", 1)[1])
    raise AssertionError(f"{name} not in the Makefile")


@pytest.fixture(scope="module")
def demo_deps():
    import shutil

    if shutil.which("make") is None:
        pytest.skip("make not installed")
    return _make_variable("DEMO_DEPS")


def test_make_demo_installs_what_the_tour_imports_and_nothing_only_the_tests_need(demo_deps):
    import json

    tour = json.loads((ROOT / "notebooks" / "01_tour_cpu.ipynb").read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in tour["cells"] if c["cell_type"] == "code")
    imported = set(re.findall(r"^\s*(?:import|from) (\w+)", code, flags=re.M))
    pip_name = {"numpy": "numpy", "torch": "torch", "jax": "jax[cpu]", "tensorflow": "tensorflow-cpu"}
    for module in imported - {"os", "sys", "gpushare"}:
        assert pip_name.get(module) in demo_deps, f"the tour imports {module}: add it to DEMO_DEPS"
    # What the tour shows needs more than it imports: a data frame, a sweep's plot, and the kernel.
    assert "to_pandas()" in code and "pandas" in demo_deps
    assert "%sharebench" in code and "matplotlib" in demo_deps
    assert {"ipython", "ipykernel", "maturin"} <= set(demo_deps)
    only_tests = {"pytest", "paddlepaddle", "mlx[cpu]", "warp-lang", "cuda-core", "nbclient", "jupyterlab"}
    assert not only_tests & set(demo_deps), only_tests & set(demo_deps)


def test_make_lab_roots_jupyterlab_where_the_executed_tour_is_reachable(demo_deps):
    commands = _make("-n", "lab").splitlines()
    lab = [c for c in commands if " lab " in f"{c} " and "jupyter" in c]
    assert lab, commands
    assert f'--ServerApp.root_dir="{ROOT}"' in lab[-1] and "notebooks/" not in lab[-1], lab[-1]


def test_make_demo_ends_naming_how_to_open_the_executed_tour(demo_deps):
    demo = _make("-n", "demo")
    assert "out/01_tour_cpu.ipynb" in demo and "make lab opens it" in demo
