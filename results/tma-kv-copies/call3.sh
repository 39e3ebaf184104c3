#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 74): timing of the landed form (EXP, shipping build) against main
# (MAIN, e303211) in turn, and the peers (SDPA flash and cuDNN) at the anchors.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
for run in 1 2; do
  for build in EXP MAIN; do
    step anchors-$build-$run 60 $build/flash-attn-timing
    step d256-$build-$run 30 $build/flash-attn-timing --shape 4,16,2048,256
  done
done
step ours-json 60 EXP/flash-attn-timing --json $OUT/ours.json
step peers 200 python3 ../scripts/peer_compare.py --ours $OUT/ours.json --out $OUT/peers.json
call_end
