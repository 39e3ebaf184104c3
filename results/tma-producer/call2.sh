#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 76): the second form (the producer's thread 0 alone copies K and V
# by TMA, the first consumer warpgroup copies Q, the persistent kernels keep `cp.async`, the
# producer at 24 registers). The GPU tests over the build with every kernel (ALL): the
# warp-specialised sm90 dense kernels on odd shapes, the dense TMA kernels' strides test,
# modifiers:: and forward:: on the sm90 family; the four sanitizers over shipping
# warp-specialised TMA tiles (dense D=128, ALiBi D=64 three consumers, softcap D=128).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
export CALL_BUDGET=270
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=_w12_s step sm90-w12 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
  FLASH_ATTN_KERNEL_FILTER=_w16_s step sm90-w16 60 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes ) &
( step tma-strides 120 ALL/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_kv_strides
  FLASH_ATTN_KERNEL_FILTER=_w1 step running-maxima 120 ALL/gpu-tests --test-threads=1 --exact edge_cases::running_maxima_that_grow_at_every_key_block ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-modifiers 260 ALL/gpu-tests --test-threads=2 modifiers:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-forward 260 ALL/gpu-tests --test-threads=2 forward:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool d128_m128_n128_w12_s2 sm90::every_sm90_kernel_on_odd_shapes 120
    san $tool d64_m192_n128_w16_s2 modifiers::every_alibi_kernel_with_alibi_alone 80
    san $tool d128_m128_n128_w12_s2 modifiers::every_softcap_kernel_with_the_softcap_alone 80 ) &
done
wait
call_end
