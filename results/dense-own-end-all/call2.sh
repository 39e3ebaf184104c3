#!/usr/bin/env bash
# The GPU run of branch dense-own-end-all (BENCHMARKS.md log 84): the dense loop's own-end stop
# in every overlapped sm90 tile (one loop for all), `barrier.sync` in every overlapped 8-warp
# tile. Put it in an excluded folder beside bins.tar.xz holding EXP/ (this branch's gpu-tests
# and flash-attn-timing) and MAIN/ (main's flash-attn-timing); carry that
# folder. The sm90 family's tests; the odd-shape test under the four sanitizers on changed
# tiles (its (100, 257) problem takes the stop in the 128-row tiles of 128-key blocks); the
# anchors and three shapes of 64 more keys than queries, in turns.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin EXP
export FLASH_ATTN_KERNEL_FILTER=_sm90a
( step sm90 280 EXP/gpu-tests --test-threads=3 sm90:: ) &
( step forward 280 EXP/gpu-tests --test-threads=2 forward:: ) &
( step edge 280 EXP/gpu-tests --test-threads=2 edge_cases:: ) &
( FLASH_ATTN_KERNEL_FILTER=_softcap_sm90a step softcap 280 EXP/gpu-tests --test-threads=1 --exact modifiers::every_softcap_kernel_with_the_softcap_alone ) &
for filter in d64_m128_n128_w12_s2_sm90a d128_m128_n128_w12_s2_sm90a d160_m128_n128_w12_s2_sm90a \
    d128_m128_n128_w8_s2_sm90a d224_m64_n64_w4_s3_sm90a; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter sm90::every_sm90_kernel_on_odd_shapes 280 ) &
  done
done
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool d128_m128_n128_w12_s2_softcap_sm90a modifiers::every_softcap_kernel_with_the_softcap_alone 280 ) &
done
wait
unset FLASH_ATTN_KERNEL_FILTER
for round in 1 2; do
  for build in EXP MAIN; do
    step timing-$build-$round 45 $build/flash-attn-timing --json $OUT/timing-$build-$round.json
    for case in 2,16,4032,128:4096 16,16,448,128:512 4,8,448,64:512; do
      step kv64-$build-$round-${case%%:*} 25 $build/flash-attn-timing --shape ${case%%:*} --seq-len-kv ${case##*:}
    done
  done
done
call_end
