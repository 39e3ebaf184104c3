#!/usr/bin/env bash
# Call 6 (log 53): PS4's whole GPU suite, two tests at a time (correctness only: nothing in it
# is timed), within the call's limit; what it cuts off is named in the output.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf bins.tar.xz PS4
source ../scripts/device-call-lib.sh
BINS=PS4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
step tests-PS4 560 PS4/gpu-tests --test-threads=2
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
