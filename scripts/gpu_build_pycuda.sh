#!/usr/bin/env bash
# On the GPU machine (no network): builds PyCUDA from the sdist that `scripts/prepare_gpu_run.sh
# --with-frameworks` put in the last .fwNN folder, against the image's CUDA toolkit (nvcc on PATH,
# its Boost.Python subset shipped in the sdist, the image's setuptools, wheel and numpy), and
# installs it into /tmp/site beside its pure-Python dependencies. The wheel is copied to $OUT, so a
# later run can carry it in .whl/ instead of building again. NOT YET VERIFIED ON A GPU (docs/pycuda-on-gpu.md).
set -euo pipefail
dir=$1
OUT=${OUT:-gpu-out}
sdist=$(ls "$dir"/pycuda-*.tar.gz)
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "PyCUDA: no nvcc on PATH or in /usr/local/cuda/bin: it cannot be built here"; exit 1; }
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build && tar xzf "$sdist" -C /tmp/pycuda-build
src=$(ls -d /tmp/pycuda-build/pycuda-*)
# configure.py writes siteconf.py: the toolkit's root, and the driver library's stubs to link against.
(cd "$src" && python3 configure.py --cuda-root="$cuda_root" \
  --cudadrv-lib-dir="$cuda_root/lib64,$cuda_root/lib64/stubs,$cuda_root/targets/x86_64-linux/lib/stubs")
time python3 -m pip wheel -q --no-index --no-deps --no-build-isolation -w /tmp/pycuda-build/wheel "$src"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/pycuda-build/wheel/pycuda-*.whl
mkdir -p "$OUT" && cp /tmp/pycuda-build/wheel/pycuda-*.whl "$OUT/"
python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, 'sees', d.Device.count(), 'GPU(s), driver', d.get_driver_version())"
