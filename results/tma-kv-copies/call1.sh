#!/usr/bin/env bash
# TMA probe call 1: the 8-warp sm90 dense tiles' K and V copied by TMA (EXP, branch tma-probe)
# against main (e303211): GPU tests, sanitizers, timing.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
FLASH_ATTN_KERNEL_FILTER=w8 step sm90-w8 120 EXP/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
san memcheck d64_m128_n64_w8 sm90::every_sm90_kernel_on_odd_shapes 120
for run in 1 2; do
  for build in EXP MAIN; do
    step d64-$build-$run 45 $build/flash-attn-timing --shape 16,16,512,64
    step d64b-$build-$run 45 $build/flash-attn-timing --shape 32,16,512,64
  done
done
for build in EXP MAIN; do
  step d256-$build 45 $build/flash-attn-timing --shape 4,16,2048,256
done
step forward 150 EXP/gpu-tests --test-threads=1 forward::
call_end
