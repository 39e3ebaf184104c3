#!/usr/bin/env bash
# Call 4 (BENCHMARKS.md log 82): in the sm90 dense loop a warpgroup stops after the last key
# block its own rows see (branch dense-own-end, EXP, aef3222). The GPU tests over the sm90
# family and the default API's sweeps; the four sanitizers over the odd-shape test on the
# D=64 three-consumer and 8-warp dense kernels; then the anchors' timing of EXP and main
# (MAIN, the call-3 build of 9142378: main f7df545's PTX) in turns, two rounds.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=470
call_begin EXP
export FLASH_ATTN_KERNEL_FILTER=_sm90a
( step forward 280 EXP/gpu-tests --test-threads=2 forward:: ) &
( step sm90 290 EXP/gpu-tests --test-threads=2 sm90:: ) &
( step softcap 280 EXP/gpu-tests --test-threads=2 modifiers::every_softcap_kernel_with_the_softcap_alone ) &
( step edge 280 EXP/gpu-tests --test-threads=2 edge_cases:: ) &
( FLASH_ATTN_KERNEL_FILTER= step sweep 280 EXP/gpu-tests --test-threads=2 sweep:: ) &
for filter in d64_m192_n128_w16_s2_sm90a f16_d64_m128_n64_w8_s2_sm90a; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter sm90::every_sm90_kernel_on_odd_shapes 280 ) &
  done
done
wait
unset FLASH_ATTN_KERNEL_FILTER
for round in 1 2; do
  for build in EXP MAIN; do
    step timing-$build-$round 45 $build/flash-attn-timing
  done
done
call_end
