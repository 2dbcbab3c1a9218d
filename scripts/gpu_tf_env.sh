# Sourced on the GPU machine by scripts/gpu_run.sh when WITH_TF names the last TensorFlow folder
# made by `scripts/prepare_gpu_run.sh --with-tf`: reassembles the wheel from the parts earlier runs
# copied to /tmp/tfparts, checks it, installs it into /tmp/tfsite and sets the environment
# TensorFlow needs to register the GPU (the CUDA 12 runtime, cuDNN 9 from the image, and the
# stand-ins for the math libraries). Returns non-zero, and says why, if a part is missing.
tf_env() {
  local dir=$1 parts wheel
  parts=$(cat "$dir/PARTS")
  wheel=/tmp/$(awk '{print $2}' "$dir/SHA256")
  mkdir -p /tmp/tfparts && cp "$dir"/tf.part.* /tmp/tfparts/
  if [ "$(ls /tmp/tfparts | wc -l)" != "$parts" ]; then
    echo "TensorFlow: $(ls /tmp/tfparts | wc -l) of $parts parts in /tmp/tfparts: the machine went back between runs; start again from run 1"
    return 1
  fi
  if [ ! -d /tmp/tfsite/tensorflow ]; then
    cat /tmp/tfparts/tf.part.* > "$wheel"
    (cd /tmp && sha256sum -c "$OLDPWD/$dir/SHA256") || return 1
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tfsite "$wheel" "$dir"/whl/*.whl || return 1
    rm -f "$wheel"
  fi
  local cudnn
  cudnn=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
  export LD_LIBRARY_PATH=$PWD/$dir/stubs:/tmp/tfsite/nvidia/cuda_runtime/lib:$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/tfsite
  export GPUSHARE_TF_STAND_INS=1  # recorded in the results: matmul and convolutions cannot run
}
tf_env "$WITH_TF"
