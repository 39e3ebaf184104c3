#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 76): the first form (the producer threads arriving for Q with
# `cp.async.mbarrier.arrive`, the producer at 32 registers): K and V by TMA in the producer, and
# the producer's 32 registers. The GPU tests over the build with every kernel (ALL, cudarc
# feature): the warp-specialised sm90 dense kernels on odd shapes, the dense TMA kernels'
# strides test, modifiers:: and forward:: on the sm90 family, the edge cases, errors, safety;
# the four sanitizers over the shipping warp-specialised tiles (dense, modified persistent,
# ALiBi, softcap).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
export CALL_BUDGET=470
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=_w12_s step sm90-w12 300 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
  FLASH_ATTN_KERNEL_FILTER=_w16_s step sm90-w16 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes ) &
( step tma-strides 200 ALL/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_kv_strides
  FLASH_ATTN_KERNEL_FILTER=_w1 step running-maxima 200 ALL/gpu-tests --test-threads=1 --exact edge_cases::running_maxima_that_grow_at_every_key_block
  FLASH_ATTN_KERNEL_FILTER=sm90a step errors-safety 100 ALL/gpu-tests --test-threads=1 errors:: safety:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-modifiers 460 ALL/gpu-tests --test-threads=2 modifiers:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-forward 460 ALL/gpu-tests --test-threads=2 forward:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool d128_m128_n128_w12_s2 modifiers::every_sm90_modified_kernel_with_each_modifier 300
    san $tool _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 200
    san $tool d128_m128_n128_w12_s2 sm90::every_sm90_kernel_on_odd_shapes 200
    san $tool d64_m192_n128_w16_s2 sm90::every_sm90_kernel_on_odd_shapes 200
    san $tool d64_m192_n128_w16_s2 modifiers::every_alibi_kernel_with_alibi_alone 200
    san $tool d64_m128_n128_w12_s2 modifiers::every_softcap_kernel_with_the_softcap_alone 200 ) &
done
wait
call_end
