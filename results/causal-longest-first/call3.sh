#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 81): the sm90 kernels of one tile per block take it longest first
# under a causal mask (branch causal-longest-first, EXP, 9142378). The GPU tests over the sm90
# family (forward, sm90, modifiers, edge cases) and the default API's sweeps; the four
# sanitizers over the odd-shape test on an 8-warp and a warp-specialised dense kernel; then
# the anchors' timing of EXP and main (MAIN, 4deb16d: the same PTX as main 22b71ae) in turns,
# three rounds, and the peers beside EXP's last.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin EXP
export FLASH_ATTN_KERNEL_FILTER=_sm90a
( step forward 300 EXP/gpu-tests --test-threads=2 forward:: ) &
( step sm90 300 EXP/gpu-tests --test-threads=2 sm90:: ) &
( step modifiers 300 EXP/gpu-tests --test-threads=2 modifiers:: ) &
( step edge 300 EXP/gpu-tests --test-threads=2 edge_cases:: ) &
( FLASH_ATTN_KERNEL_FILTER= step sweep 300 EXP/gpu-tests --test-threads=2 sweep:: ) &
for filter in f16_d64_m128_n64_w8_s2_sm90a f16_d128_m128_n128_w12_s2_sm90a; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter sm90::every_sm90_kernel_on_odd_shapes 300 ) &
  done
done
wait
unset FLASH_ATTN_KERNEL_FILTER
for round in 1 2 3; do
  for build in EXP MAIN; do
    step timing-$build-$round 60 $build/flash-attn-timing --json $OUT/timing-$build-$round.json
  done
done
step peers 120 python3 peer_compare.py --ours $OUT/timing-EXP-3.json --out $OUT/peers-EXP.json
call_end
