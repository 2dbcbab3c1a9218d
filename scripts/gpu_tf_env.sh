# Sourced on the GPU machine by scripts/gpu_run.sh when WITH_TF names the last TensorFlow folder
# made by `scripts/prepare_gpu_run.sh --with-tf`: reassembles the wheel from the parts earlier runs
# copied (scripts/gpu_parts.sh), checks it, installs it into /tmp/tfsite and sets the environment
# TensorFlow needs to register the GPU (the CUDA 12 runtime, cuDNN 9 from the image, and the
# stand-ins for the math libraries). Returns non-zero, and says why, if a part is missing.
source scripts/gpu_parts.sh
tf_env() {
  local dir=$1 cudnn
  install_parts "$dir" /tmp/tfsite || return 1
  cudnn=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
  export LD_LIBRARY_PATH=$PWD/$dir/stubs:/tmp/tfsite/nvidia/cuda_runtime/lib:$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/tfsite
  export GPUSHARE_TF_STAND_INS=1  # recorded in the results: matmul and convolutions cannot run
}
tf_env "$WITH_TF"
