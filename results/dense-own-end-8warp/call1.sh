#!/usr/bin/env bash
# The GPU run this branch needs before it lands (BENCHMARKS.md log 82): the own-end stop in
# the 8-warp tiles of 64-key blocks, their block barrier `barrier.sync 0`. Put it in an
# excluded folder beside bins.tar.xz holding EXP/ (this branch's gpu-tests and
# flash-attn-timing) and MAIN/ (main's flash-attn-timing) and peer_compare.py; carry that
# folder. The odd-shape test under the four sanitizers on the 8-warp D=64 tile (the form
# synccheck rejected in call 4) and on the landed 128-row tiles of 64-key blocks (D=128 and
# D=256, not sanitizer-run in call 4), and a three-stage one of each; the sm90 family's tests; the anchors' timing in turns
# and the peers beside this build's last round.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin EXP
export FLASH_ATTN_KERNEL_FILTER=_sm90a
( step sm90 330 EXP/gpu-tests --test-threads=3 sm90:: ) &
( step forward 300 EXP/gpu-tests --test-threads=2 forward:: ) &
( step edge 300 EXP/gpu-tests --test-threads=2 edge_cases:: ) &
for filter in d64_m128_n64_w8_s2_sm90a d192_m128_n64_w8_s3_sm90a d64_m128_n64_w12_s3_sm90a \
    d128_m128_n64_w12_s2_sm90a d256_m128_n64_w12_s2_sm90a; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter sm90::every_sm90_kernel_on_odd_shapes 300 ) &
  done
done
wait
unset FLASH_ATTN_KERNEL_FILTER
for round in 1 2; do
  for build in EXP MAIN; do
    step timing-$build-$round 45 $build/flash-attn-timing --json $OUT/timing-$build-$round.json
  done
done
step peers 100 python3 peer_compare.py --ours $OUT/timing-EXP-2.json --out $OUT/peers-EXP.json
call_end
