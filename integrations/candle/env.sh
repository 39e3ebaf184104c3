# Sourced by the build commands here and by .ci/run: the CUDA toolkit laid out from PyPI's
# wheels by cuda-toolkit.sh, for candle's `cuda` feature.
: "${CANDLE_CUDA_HOME:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/tools/cuda-13.0}"
export CUDA_HOME="$CANDLE_CUDA_HOME"
export PATH="$CUDA_HOME/bin:$PATH"
# candle-kernels asks nvidia-smi for the GPU to compile for, unless this says: sm_80's PTX,
# which the driver JIT-compiles for any GPU from the A100 on (flash-attn needs sm_80 too).
# candle's MoE/GGUF matmuls (not used here) are machine code for that one architecture: a
# build for an H100 only can say CUDA_COMPUTE_CAP=90.
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-80}"
