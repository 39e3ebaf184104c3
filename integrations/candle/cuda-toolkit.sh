#!/usr/bin/env bash
# Lays out the part of the CUDA 13.0 toolkit that candle's `cuda` feature builds with, from
# NVIDIA's wheels on PyPI (no installer, no GPU needed): nvcc, cicc, the headers (CCCL's too),
# and the libraries the build links against (cudart, cuBLAS, cuBLASLt, cuRAND, NVRTC).
#
#   integrations/candle/cuda-toolkit.sh DIR     # then: export CUDA_HOME=DIR PATH=DIR/bin:$PATH
#
# CUDA 13.0, not newer: candle's kernels are PTX that the driver JIT-compiles, and a 13.x
# newer than the driver refuses that PTX's ISA (a 580 driver runs CUDA 13.0).
set -euo pipefail
dir=${1:?usage: $0 DIR}
if [ -x "$dir/bin/nvcc" ] && [ -e "$dir/lib/libcublasLt.so" ]; then
    exit 0
fi
wheels="$dir.wheels"
mkdir -p "$wheels" "$dir"
python3 -m pip download -q --no-deps -d "$wheels" \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 \
    nvidia-curand==10.4.0.35 nvidia-cublas==13.0.2.14
# Every wheel installs under nvidia/cu13/ (bin, include, lib, nvvm): one toolkit root.
staging="$dir.staging"
rm -rf "$staging"
for wheel in "$wheels"/*.whl; do
    unzip -q -o "$wheel" 'nvidia/cu13/*' -d "$staging"
done
cp -a "$staging"/nvidia/cu13/. "$dir"/
rm -rf "$staging" "$wheels"
# The linker wants unversioned names (the wheels ship only the sonames); cudarc and candle
# search lib64 too.
(
    cd "$dir/lib"
    for name in cudart cublas cublasLt curand nvrtc; do
        ln -sf "$(ls "lib$name.so".* | head -n 1)" "lib$name.so"
    done
)
ln -sfn lib "$dir/lib64"
"$dir/bin/nvcc" --version | tail -n 2 | head -n 1
