"""What users install: the wheel and sdist that `make dist` builds, checked by `make test-dist`.

Skipped unless GPUSHARE_DIST names the folder they were built into (an old dist/ lying around must
not pass for the current one). Checks: the distribution name, tags and metadata; the extension's
glibc floor (manylinux2014 is glibc 2.17), that it does not link libcuda (the CUDA layer loads the
driver at run time) and carries no symbol table; and that the sdist builds a wheel that imports.
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

DIST = os.environ.get("GPUSHARE_DIST")
pytestmark = pytest.mark.skipif(not DIST, reason="GPUSHARE_DIST not set: `make test-dist` builds and checks the distribution")

NAME = "gpushare-dlpack"
# What a manylinux2014 extension may link: glibc's own libraries and libgcc_s (PEP 599).
ALLOWED_NEEDED = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
}


def only(pattern: str) -> Path:
    found = sorted(Path(DIST).glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {DIST}, found {found}"
    return found[0]


def version() -> str:
    text = Path(__file__).resolve().parents[1].joinpath("Cargo.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


@pytest.fixture(scope="module")
def wheel() -> Path:
    return only("*.whl")


@pytest.fixture(scope="module")
def sdist() -> Path:
    return only("*.tar.gz")


def extension(wheel: Path, tmp_path_factory) -> Path:
    with zipfile.ZipFile(wheel) as z:
        [so] = [n for n in z.namelist() if n.endswith(".so")]
        out = tmp_path_factory.mktemp("so")
        return Path(z.extract(so, out))


def test_wheel_is_abi3_manylinux2014_under_our_name(wheel):
    v = version()
    assert wheel.name == f"gpushare_dlpack-{v}-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel) as z:
        tags = email.message_from_bytes(z.read(f"gpushare_dlpack-{v}.dist-info/WHEEL")).get_all("Tag")
        names = z.namelist()
    assert sorted(tags) == ["cp39-abi3-manylinux2014_x86_64", "cp39-abi3-manylinux_2_17_x86_64"]
    # The import name stays gpushare; the extension is abi3.
    assert "gpushare/__init__.py" in names and "gpushare/_native.abi3.so" in names
    assert "gpushare/py.typed" in names
    # The conformance matrix is a developer tool at the repository root (tools/), not shipped.
    assert not [n for n in names if "conformance" in n], names


def test_wheel_metadata_is_complete(wheel):
    v = version()
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(f"gpushare_dlpack-{v}.dist-info/METADATA"))
        names = z.namelist()
    assert meta["Name"] == NAME and meta["Version"] == v
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["License-Expression"] == "MIT OR Apache-2.0"
    assert sorted(meta.get_all("License-File")) == ["LICENSE-APACHE", "LICENSE-MIT"]
    for f in ("LICENSE-APACHE", "LICENSE-MIT"):
        assert f"gpushare_dlpack-{v}.dist-info/licenses/{f}" in names
    assert meta["Description-Content-Type"].startswith("text/markdown")
    assert "%load_ext gpushare" in meta.get_payload()  # the user's README is the long description
    assert set(meta.get_all("Provides-Extra")) >= {"kernel", "pandas", "test"}
    requires = [r.replace("'", '"') for r in meta.get_all("Requires-Dist")]
    assert any(r.startswith("ipykernel") and 'extra == "kernel"' in r for r in requires), requires
    assert any(r.startswith("pandas") and 'extra == "pandas"' in r for r in requires), requires
    classifiers = meta.get_all("Classifier")
    assert "Framework :: IPython" in classifiers and "Programming Language :: Python :: 3.9" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the expression says it (PEP 639)
    assert "dlpack" in meta["Keywords"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert all(u.startswith("https://") for u in urls.values()), urls
    # No self-references: a link from the PyPI page to the PyPI page leads nowhere. The
    # source has no public address yet, so there are none; a repository's URL is welcome.
    assert not [u for u in urls.values() if "pypi.org" in u], urls
    summary = meta["Summary"]
    for framework in ("PyTorch", "TensorFlow", "JAX", "CuPy", "Numba", "NumPy", "PaddlePaddle"):
        assert framework in summary, f"{framework} missing from the summary: {summary}"
    # The JSON Schemas of every result kind ship with the package.
    for kind in ("tensor", "share", "shares", "comparison", "benchmark", "advice"):
        assert f"gpushare/schemas/{kind}.schema.json" in names


def test_the_package_page_is_for_users(wheel):
    """The long description is a user's README: install, an example, what each magic
    shows; no developer-machine notes, no links that break off the repository."""
    v = version()
    with zipfile.ZipFile(wheel) as z:
        page = email.message_from_bytes(z.read(f"gpushare_dlpack-{v}.dist-info/METADATA")).get_payload()
    assert 'pip install "gpushare-dlpack' in page
    for magic in ("%%share", "%share NAME ->DST --path all", "%sharebench", "%gpuinfo"):
        assert magic in page, magic
    for developer_note in ("make demo", "make test", ".venv", ".tf01", "64 MiB", "Verified on a GPU"):
        assert developer_note not in page, developer_note
    links = re.findall(r"\]\(([^)]+)\)", page) + re.findall(r'(?:href|src)="([^"]+)"', page)
    assert [u for u in links if not u.startswith("https://")] == [], "relative links break on PyPI"


def elf_facts(so: Path) -> tuple[set[str], set[str], set[str]]:
    """DT_NEEDED libraries, required symbol versions and section names of a shared object."""
    elffile = pytest.importorskip("elftools.elf.elffile", reason="pyelftools (with auditwheel) not installed")
    with open(so, "rb") as f:
        elf = elffile.ELFFile(f)
        dynamic = elf.get_section_by_name(".dynamic")
        needed = {t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
        versions = set()
        for _, auxes in elf.get_section_by_name(".gnu.version_r").iter_versions():
            versions |= {a.name for a in auxes}
        sections = {s.name for s in elf.iter_sections()}
    return needed, versions, sections


def stripped(sections: set[str]) -> bool:
    return ".symtab" not in sections and not any(s.startswith(".debug") for s in sections)


def test_extension_runs_on_glibc_2_17_links_no_cuda_and_is_stripped(wheel, tmp_path_factory):
    needed, versions, sections = elf_facts(extension(wheel, tmp_path_factory))
    assert needed <= ALLOWED_NEEDED, needed - ALLOWED_NEEDED
    assert not any("cuda" in n for n in needed)
    glibc = [tuple(int(p) for p in v[len("GLIBC_"):].split(".")) for v in versions if v.startswith("GLIBC_2")]
    assert glibc and max(glibc) <= (2, 17), sorted(glibc)[-3:]
    assert stripped(sections), sorted(sections)


def test_auditwheel_finds_it_manylinux2014(wheel):
    pytest.importorskip("auditwheel", reason="auditwheel not installed")
    out = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r'consistent with the following platform tag:\s*"manylinux_2_17_x86_64"', out), out


def test_sdist_holds_what_a_build_needs_and_nothing_else(sdist):
    v = version()
    root = f"gpushare_dlpack-{v}"
    with tarfile.open(sdist) as t:
        names = {n[len(root) + 1:] for n in t.getnames()}
        meta = email.message_from_bytes(t.extractfile(f"{root}/PKG-INFO").read())
    assert sdist.name == f"{root}.tar.gz" and meta["Name"] == NAME
    for needed in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "README.md", "LICENSE-MIT", "LICENSE-APACHE",
                   "crates/core/src/lib.rs", "crates/python/src/lib.rs", "crates/python/src/binding/mod.rs",
                   "crates/runner/src/lib.rs", "kernelspec/kernel.json", "python/gpushare/__init__.py", "python/gpushare/_native/__init__.pyi",
                   "python/gpushare/_native/cuda.pyi"):
        assert needed in names, needed
    assert not any(n.startswith((".venv", "target/", "dist/", ".git/")) or n.endswith(".so") for n in names)


def test_sdist_builds_a_wheel_that_imports(sdist, tmp_path):
    pytest.importorskip("maturin", reason="maturin (the build backend) not installed")
    # Unpacked here with every file dated now, so that cargo compiles gpushare from the sdist's own
    # sources (the archive's dates would let it take target/'s build of the checkout for fresh).
    # No build isolation (this environment's maturin) and CARGO_TARGET_DIR at target/ (set by the
    # Makefile): the dependencies are not compiled a second time.
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path / "src")
    [root] = (tmp_path / "src").iterdir()
    for f in root.rglob("*"):
        os.utime(f)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(root)],
        check=True,
    )
    [built] = list(tmp_path.glob("gpushare_dlpack-*.whl"))
    site = tmp_path / "site"
    zipfile.ZipFile(built).extractall(site)
    out = subprocess.run(
        [sys.executable, "-c", "import gpushare, gpushare._native as n; print(gpushare.__file__, gpushare.__version__)"],
        env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.split()
    assert out == [str(site / "gpushare" / "__init__.py"), version()]
    # A source build is stripped too (pyproject.toml's strip), whatever its platform tag.
    assert stripped(elf_facts(site / "gpushare" / "_native.abi3.so")[2])
