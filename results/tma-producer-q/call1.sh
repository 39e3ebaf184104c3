#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 77): Q, K and V by TMA in the warp-specialised tiles' producer and Q
# by TMA in the 8-warp tiles (branch tma-producer-q). The GPU tests over the build with every
# kernel (ALL): the warp-specialised and 8-warp sm90 kernels on odd shapes, the dense TMA
# kernels' strides test (Q padded now), the running maxima, modifiers:: and forward:: on the
# sm90 family, errors:: and safety::; the four sanitizers over changed shipping kernels.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=560
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=_w12_s step sm90-w12 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
  FLASH_ATTN_KERNEL_FILTER=_w16_s step sm90-w16 60 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
  FLASH_ATTN_KERNEL_FILTER=_w8_s step sm90-w8 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes ) &
( step tma-strides 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_strides
  FLASH_ATTN_KERNEL_FILTER=_sm90a step running-maxima 150 ALL/gpu-tests --test-threads=1 --exact edge_cases::running_maxima_that_grow_at_every_key_block
  FLASH_ATTN_KERNEL_FILTER=_sm90a step errors-safety 100 ALL/gpu-tests --test-threads=1 errors:: safety:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-modifiers 330 ALL/gpu-tests --test-threads=2 modifiers:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-forward 260 ALL/gpu-tests --test-threads=2 forward:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool d128_m128_n128_w12_s2_sm90a sm90::every_sm90_kernel_on_odd_shapes 150
    san $tool d64_m192_n128_w16_s2 modifiers::every_alibi_kernel_with_alibi_alone 100
    san $tool d128_m128_n128_w12_s2 modifiers::every_softcap_kernel_with_the_softcap_alone 100
    san $tool d64_m128_n64_w8_s2_sm90a sm90::every_tma_kernel_through_other_strides 100 ) &
done
wait
call_end
