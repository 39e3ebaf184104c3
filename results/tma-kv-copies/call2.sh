#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 74): the landed form's GPU tests over every sm90 kernel of the
# search space (ALL: FLASH_ATTN_KERNELS=all, cudarc feature), the TMA kernels' new strides
# test, and the four sanitizers over the shipping TMA kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ALL
step tma-strides 150 ALL/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_kv_strides
FLASH_ATTN_KERNEL_FILTER=_sm90a step sm90 150 ALL/gpu-tests --test-threads=1 sm90::
FLASH_ATTN_KERNEL_FILTER=_sm90a step forward 150 ALL/gpu-tests --test-threads=1 forward::
FLASH_ATTN_KERNEL_FILTER=_sm90a step errors-safety 60 ALL/gpu-tests --test-threads=1 errors:: safety::
for tool in memcheck racecheck synccheck initcheck; do
  for tile in d64_m128_n64_w8 d256_m128_n64_w8; do
    san $tool $tile sm90::every_tma_kernel_through_other_kv_strides 120
  done
done
call_end
