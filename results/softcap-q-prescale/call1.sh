#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 79): the softcap kernels multiply Q by the softcap's input scale
# once (branch softcap-q-prescale, EXP) instead of every score. Their GPU tests and the four
# sanitizers on the 8-warp and the three-consumer softcap kernels; then the modifiers' timing
# of EXP and of main (MAIN, 4deb16d) twice each, in turns; then main's criterion benchmark.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin EXP
( FLASH_ATTN_KERNEL_FILTER=_softcap step softcap-alone 160 EXP/gpu-tests --test-threads=1 --exact modifiers::every_softcap_kernel_with_the_softcap_alone ) &
( FLASH_ATTN_KERNEL_FILTER=_softcap step softcap-edges 160 EXP/gpu-tests --test-threads=1 --exact modifiers::every_softcap_kernel_at_the_edges_of_its_q_scaling ) &
( FLASH_ATTN_KERNEL_FILTER=_softcap step odd-shapes 160 EXP/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes ) &
( FLASH_ATTN_KERNEL_FILTER=_softcap step strides 160 EXP/gpu-tests --test-threads=1 --exact sm90::every_tma_kernel_through_other_strides ) &
for filter in f16_d64_m128_n64_w8_s2_softcap bf16_d64_m192_n128_w16_s2_softcap; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter modifiers::every_softcap_kernel_with_the_softcap_alone 160 ) &
  done
done
wait
for round in 1 2; do
  for build in EXP MAIN; do
    step mods-$build-$round 65 $build/flash-attn-modifier-timing
  done
done
step criterion-MAIN 150 MAIN/forward-bench --bench
call_end
