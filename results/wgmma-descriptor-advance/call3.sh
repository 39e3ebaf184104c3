#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 72): racecheck over the shipping build's sm90 kernels, one process
# per tile for the dense odd shapes and the modified kernels with each modifier, and over the
# single-modifier and the persistent modified kernels; the edge-case tests, which call 1 cut at
# 300 s.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SHIP
for group in "d64_m128_n64_w8 d96_m128_n64_w8" "d64_m128_n128_w12 d64_m192" \
    "d128_m128_n128_w12 d160_m128" "d192_m128 d224_m128 d256_m128"; do
  ( for tile in $group; do
      san racecheck ${tile}_s sm90::every_sm90_kernel_on_odd_shapes 500
      san racecheck ${tile}_s modifiers::every_sm90_modified_kernel_with_each_modifier 500
    done ) &
done
( san racecheck sm90a modifiers::every_alibi_kernel_with_alibi_alone 500
  san racecheck sm90a modifiers::every_softcap_kernel_with_the_softcap_alone 500 ) &
( san racecheck _mod_sm90a modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 500 ) &
( step tests-edge_cases 500 SHIP/gpu-tests --test-threads=2 edge_cases:: ) &
wait
call_end
