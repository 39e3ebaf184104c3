#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 75): K and V by TMA in the modified, ALiBi and softcap sm90 kernels
# without a producer. The GPU tests over the build with every kernel (ALL, cudarc feature):
# modifiers:: on the sm90 family, the running-maxima edge case and the strides test on the
# dense TMA tiles; memcheck, synccheck and initcheck over the new TMA kernels (8-warp tiles).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-modifiers 480 ALL/gpu-tests --test-threads=2 modifiers:: ) &
( FLASH_ATTN_KERNEL_FILTER=m128_n64_w8_s2_sm90a step running-maxima 200 ALL/gpu-tests --test-threads=1 --exact edge_cases::running_maxima_that_grow_at_every_key_block
  step tma-strides 120 ALL/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_kv_strides ) &
for tool in memcheck synccheck initcheck; do
  ( san $tool d64_m128_n64_w8_s2 modifiers::every_sm90_modified_kernel_with_each_modifier 300
    san $tool d64_m128_n64_w8_s2 modifiers::every_alibi_kernel_with_alibi_alone 200
    san $tool d64_m128_n64_w8_s2 modifiers::every_softcap_kernel_with_the_softcap_alone 200 ) &
  ( san $tool d192_m128_n64_w8 modifiers::every_sm90_modified_kernel_with_each_modifier 300
    san $tool d256_m128_n64_w8 modifiers::every_sm90_modified_kernel_with_each_modifier 300 ) &
done
wait
call_end
