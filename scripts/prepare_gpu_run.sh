#!/usr/bin/env bash
# Prepares a run on the GPU machine, which has Python 3.12 with PyTorch, JAX, CuPy and Numba but no
# IPython, no ipykernel and no network. Everything it lacks travels in .whl/ (git-ignored):
#   - gpushare as an abi3 manylinux2014 wheel (one wheel for Python 3.9+, glibc 2.17+), built here;
#   - IPython, ipykernel, nbformat and their pure-Python dependencies, for CPython 3.12, and pyroute2
#     (the GPU image has no iproute2: the tests between two network namespaces make them with it);
#   - the cargo test binary of the CUDA layer (crates/core/tests/cuda_driver.rs), which needs no Python.
# Packages the GPU image already has are not carried: a second copy on PYTHONPATH would shadow it.
# Then run scripts/gpu_run.sh there (see the README's "Verified on a GPU" section).
#
# --with-tf also prepares TensorFlow's GPU build for that machine: its 547 MiB wheel cannot travel in one run (64 MiB a run), so it is cut into
# parts, one git-ignored folder each (.tf01 … .tf10), which consecutive runs copy to /tmp there; the
# last folder also holds TensorFlow's small pure-Python dependencies, the CUDA 12 runtime it opens
# at start, and empty stand-ins for the CUDA 12 math libraries (TensorFlow opens them at start and
# looks functions up at first use: DLPack, copies and elementwise ops never call them; matmul and
# convolutions would). scripts/gpu_tf_env.sh reassembles and installs it there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WITH_TF=0 WITH_FW=0 WHEELS=1
for arg in "$@"; do
  case "$arg" in
    --with-tf) WITH_TF=1 ;;
    --tf-only) WITH_TF=1 WHEELS=0 ;;  # .whl/ is already prepared: only TensorFlow's folders
    --with-frameworks) WITH_FW=1 ;;
    --frameworks-only) WITH_FW=1 WHEELS=0 ;;
    *) echo "usage: $0 [--with-tf | --tf-only] [--with-frameworks | --frameworks-only]" >&2; exit 2 ;;
  esac
done

# The working tree (tracked files and untracked ones git does not ignore) travels with every run:
# a part gets what is left of the 64 MiB a run may carry, less 2 MiB of margin, measured each time
# (a fixed part size stops fitting as soon as the tree grows).
default_part_mb() {
  local tree
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  echo $(( (64 * 1048576 - ${tree:-0}) / 1048576 - 2 ))
}

# carry_in_parts TAG FILE...: cuts FILEs into PART_MB-MiB parts (default_part_mb by default, so each run
# stays under the 64 MiB a run may carry), one part per git-ignored folder .TAG01, .TAG02, …, and
# one folder more, the last, with no part: SHA256 (one line per FILE) and PARTS (how many parts in
# all), which scripts/gpu_parts.sh reads there. Sets LAST to the last folder's name.
carry_in_parts() {
  local tag=$1 f part n=0 tmp
  shift
  grep -qx "/.$tag*/" .git/info/exclude 2>/dev/null || echo "/.$tag*/" >> .git/info/exclude
  rm -rf ".$tag"[0-9]*
  tmp=$(mktemp -d)
  local part_mb=${PART_MB:-$(default_part_mb)}
  for f in "$@"; do split -b "${part_mb}M" -d -a 2 "$f" "$tmp/$(basename "$f").part."; done
  for part in $(ls -S "$tmp"/*.part.*); do
    n=$((n + 1))
    mkdir -p "$(printf '.%s%02d' "$tag" "$n")" && mv "$part" "$(printf '.%s%02d' "$tag" "$n")/"
  done
  # The last folder holds no part: it travels with .whl (about 20 MiB), the working tree and the
  # other last folders, and a part beside them made that run too big to carry.
  LAST=$(printf '.%s%02d' "$tag" "$((n + 1))")
  mkdir -p "$LAST"
  for f in "$@"; do (cd "$(dirname "$f")" && sha256sum "$(basename "$f")"); done > "$LAST/SHA256"
  echo "$n" > "$LAST/PARTS"
  rm -rf "$tmp"
  echo "$tag in $n parts: runs 1..$n each carry [.${tag}NN] and run" \
       "'source scripts/gpu_parts.sh && copy_parts .${tag}NN'; run $((n + 1)) carries [$LAST, .whl]"
}
if [ $WHEELS = 1 ]; then
rm -rf .whl && mkdir -p .whl
mkdir -p .git/info; grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude

# The same wheel as `make dist`: manylinux2014 (glibc 2.17) through zig, stripped (pyproject.toml).
"$PY" -c "import ziglang" 2>/dev/null || "$PY" -m pip install -q ziglang
PATH="$(cd "$(dirname "$PY")" && pwd):$PATH" .venv/bin/maturin build --release -q --zig --compatibility manylinux2014 -i "$PY" -o .whl \
  2>&1 | grep -v "^📦\|^🔗\|^🐍" || true
ls .whl/gpushare_dlpack-*-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl >/dev/null

# What the GPU image already holds (tornado is NOT there): never carry these.
ON_IMAGE="numpy torch jax jaxlib cupy-cuda13x numba numba-cuda psutil packaging pygments typing-extensions
typing_extensions python-dateutil python_dateutil six pyyaml attrs jinja2 markupsafe setuptools wheel
pytest pluggy iniconfig pandas certifi idna urllib3 requests charset-normalizer charset_normalizer"
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
  -d .whl/deps ipython ipykernel nbformat jupyter_client pyroute2
for w in .whl/deps/*.whl; do
  name=$(basename "$w" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
  skip=0
  for n in $ON_IMAGE; do [ "$name" = "$(echo "$n" | tr '-' '_')" ] && skip=1; done
  [ $skip = 1 ] && rm "$w" || mv "$w" .whl/
done
rm -rf .whl/deps

# The CUDA layer's cargo tests, the core has no pyo3, so the binary needs only libc and libcuda.
bin=$(cargo test --release -p gpushare-core --test cuda_driver --no-run --message-format=json 2>/dev/null \
  | "$PY" -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "cuda_driver"][-1])')
cp "$bin" .whl/cuda_driver_tests
du -sh .whl; ls .whl
fi

if [ $WITH_TF = 1 ]; then
  TF_WHEEL=tensorflow-2.21.0-cp312-cp312-manylinux_2_27_x86_64.whl
  grep -qx '/.tf\*/' .git/info/exclude 2>/dev/null || echo '/.tf*/' >> .git/info/exclude
  cache=${TF_CACHE:-$HOME/.cache/gpushare-tf}
  mkdir -p "$cache"
  # Pinned to what was verified there: TF 2.21's wheel is built for CUDA 12.5 and holds sm_90 kernels.
  [ -f "$cache/$TF_WHEEL" ] || "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_27_x86_64 -d "$cache" tensorflow==2.21.0
  carry_in_parts tf "$cache/$TF_WHEEL"
  last=$LAST
  mkdir -p "$last/whl" "$last/stubs"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$last/whl" \
    nvidia-cuda-runtime-cu12 astunparse gast google-pasta termcolor
  for name in libcublas.so.12 libcublasLt.so.12 libcufft.so.11 libcusolver.so.11 libcusparse.so.12; do
    echo 'void gpushare_stand_in(void) {}' > "$last/stubs/s.c"
    cc -shared -fPIC -Wl,-soname,$name -o "$last/stubs/$name" "$last/stubs/s.c"
  done
  rm "$last/stubs/s.c"
  du -sh .tf[0-9]*
  echo "the last TensorFlow run: 'WITH_TF=$last bash scripts/gpu_run.sh ...'"
fi

# --with-frameworks: MLX, Warp and PyCUDA for the CUDA matrix (docs/pycuda-on-gpu.md). The image
# has cuda-core, cuda-bindings and every nvidia-* CUDA 13 library mlx-cuda-13 opens; it lacks Warp
# (149 MB) and MLX (0.8 + 90 MB), which travel in parts, and PyCUDA, whose sdist travels with its
# pure-Python dependencies (pytools, platformdirs, mako, siphash24) and is built there with nvcc.
if [ $WITH_FW = 1 ]; then
  cache=${FW_CACHE:-$HOME/.cache/gpushare-frameworks}
  mkdir -p "$cache/whl"
  fetch() { "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$@"; }
  fetch "$cache" warp-lang==1.19.0 mlx==0.32.4 mlx-cuda-13==0.32.4
  fetch "$cache/whl" pytools platformdirs mako siphash24
  [ -f "$cache/pycuda-2026.1.tar.gz" ] || "$PY" -m pip download -q --no-deps --no-build-isolation -d "$cache" pycuda==2026.1
  carry_in_parts fw "$cache"/warp_lang-1.19.0-*.whl "$cache"/mlx_cuda_13-0.32.4-*.whl "$cache"/mlx-0.32.4-cp312-*.whl
  mkdir -p "$LAST/whl" && cp "$cache"/whl/*.whl "$LAST/whl/" && cp "$cache/pycuda-2026.1.tar.gz" "$LAST/"
  # PYCUDA_WHEEL=path: the wheel an earlier run built there from this sdist (scripts/gpu_build_pycuda.sh
  # leaves it in $OUT); installed with the others, so that run skips the build.
  if [ -n "${PYCUDA_WHEEL:-}" ]; then cp "$PYCUDA_WHEEL" "$LAST/whl/"; fi
  du -sh .fw[0-9]*
  echo "the last frameworks run: 'WITH_FRAMEWORKS=$LAST bash scripts/gpu_run.sh ...' (docs/pycuda-on-gpu.md)"
fi
