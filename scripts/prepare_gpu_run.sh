#!/usr/bin/env bash
# Prepares a run on the GPU machine, which has Python 3.12 with PyTorch, JAX, CuPy and Numba but no
# IPython, no ipykernel and no network. Everything it lacks travels in .whl/ (git-ignored):
#   - gpushare as an abi3 manylinux2014 wheel (one wheel for Python 3.9+, glibc 2.17+), built here;
#   - IPython, ipykernel, nbformat and their pure-Python dependencies, for CPython 3.12;
#   - the cargo test binary of the CUDA layer (tests/cuda_driver.rs), which needs no Python.
# Packages the GPU image already has are not carried: a second copy on PYTHONPATH would shadow it.
# Then run scripts/gpu_run.sh there (see the README's "Verified on a GPU" section).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
rm -rf .whl && mkdir -p .whl
mkdir -p .git/info; grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude

# The same wheel as `make dist`: manylinux2014 (glibc 2.17) through zig, stripped (pyproject.toml).
"$PY" -c "import ziglang" 2>/dev/null || "$PY" -m pip install -q ziglang
PATH="$(cd "$(dirname "$PY")" && pwd):$PATH" .venv/bin/maturin build --release -q --zig --compatibility manylinux2014 -i "$PY" -o .whl \
  2>&1 | grep -v "^📦\|^🔗\|^🐍" || true
ls .whl/gpushare_dlpack-*-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl >/dev/null

# What the image holds (KINDS.md, 2026-11-17; tornado is NOT there): never carry these.
ON_IMAGE="numpy torch jax jaxlib cupy-cuda13x numba numba-cuda psutil packaging pygments typing-extensions
typing_extensions python-dateutil python_dateutil six pyyaml attrs jinja2 markupsafe setuptools wheel
pytest pluggy iniconfig pandas certifi idna urllib3 requests charset-normalizer charset_normalizer"
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
  -d .whl/deps ipython ipykernel nbformat jupyter_client
for w in .whl/deps/*.whl; do
  name=$(basename "$w" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
  skip=0
  for n in $ON_IMAGE; do [ "$name" = "$(echo "$n" | tr '-' '_')" ] && skip=1; done
  [ $skip = 1 ] && rm "$w" || mv "$w" .whl/
done
rm -rf .whl/deps

# The CUDA layer's cargo tests, built without pyo3 so the binary needs only libc and libcuda.
bin=$(cargo test --release --no-default-features --test cuda_driver --no-run --message-format=json 2>/dev/null \
  | "$PY" -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "cuda_driver"][-1])')
cp "$bin" .whl/cuda_driver_tests
du -sh .whl; ls .whl
