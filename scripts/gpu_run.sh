#!/usr/bin/env bash
# Runs on the GPU machine (no network) after scripts/prepare_gpu_run.sh carried .whl/ there.
# Everything it prints and writes lands in $OUT (default ./gpu-out).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false TF_FORCE_GPU_ALLOW_GROWTH=true TF_CPP_MIN_LOG_LEVEL=3
# Several GPUs (nvidia-h200-x2 and larger): NVLink multicast stays off, here and in every child.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# WITH_TF=.tfNN: TensorFlow's GPU build, carried in parts (scripts/prepare_gpu_run.sh --with-tf).
if [ -n "${WITH_TF:-}" ]; then
  source scripts/gpu_tf_env.sh || exit 1
fi
# WITH_FRAMEWORKS=.fwNN: Warp, MLX (CUDA 13) and PyCUDA, built here from its sdist
# (scripts/prepare_gpu_run.sh --with-frameworks, docs/pycuda-on-gpu.md).
if [ -n "${WITH_FRAMEWORKS:-}" ]; then
  source scripts/gpu_parts.sh && install_parts "$WITH_FRAMEWORKS" /tmp/site || exit 1
  python3 -c "import pycuda" 2>/dev/null || bash scripts/gpu_build_pycuda.sh "$WITH_FRAMEWORKS" \
    || echo "PyCUDA was not built (above: why); its CUDA matrix rows are skipped by name"
fi
step() { echo "=== $1 ($(date -u +%H:%M:%S))"; }
{
  step versions
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch, jax, cupy, numba, numpy, gpushare; print(sys.version.split()[0], 'torch', torch.__version__, 'jax', jax.__version__, 'cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'gpushare', gpushare.__version__)"
  [ -n "${WITH_TF:-}" ] && python3 -c "import tensorflow as tf; print('tensorflow', tf.__version__, tf.config.list_physical_devices('GPU'), 'built for CUDA', tf.sysconfig.get_build_info().get('cuda_version'))"
  step "cargo tests of the CUDA layer"
  ./.whl/cuda_driver_tests --nocapture --test-threads=1 2>&1 | tail -40
  # One pytest process per file: a framework that aborts the process takes only its own file down.
  # GPU_SUITES=0 skips them (a second run on the same machine that only benchmarks).
  [ "${GPU_SUITES:-1}" = 0 ] || for f in tests/test_*.py; do
    grep -q "mark.gpu\|pytestmark = pytest.mark.gpu" "$f" || continue
    step "pytest -m gpu $f"
    python3 -X faulthandler -m pytest -q -m gpu -p no:cacheprovider -o addopts="" --disable-warnings "$f" -rfs 2>&1 | tail -60
  done
  step gpuinfo
  python3 -c "import torch, jax, cupy; torch.ones(1, device='cuda'); import jax.numpy as jnp; jnp.ones(1).block_until_ready(); cupy.ones(1); import gpushare; print(repr(gpushare.gpuinfo(import_frameworks=True)))"
  for extra in "$@"; do step "$extra"; bash -c "$extra" 2>&1 | tail -"${EXTRA_TAIL:-80}"; done
} 2>&1 | tee "$OUT/gpu_run.log"
