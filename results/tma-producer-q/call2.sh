#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 77): errors:: and safety:: on the sm90 family (ALL, this change
# with every kernel); the anchors of this change (EXP) against main (MAIN, 8e3542a), both built
# with every kernel, in turn, three runs each; D=256's warp-specialised tile (no longer
# spilling) against the dispatched 8-warp one; the peers once.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=570
call_begin ALL
FLASH_ATTN_KERNEL_FILTER=_sm90a step errors 60 ALL/gpu-tests --test-threads=1 errors::
FLASH_ATTN_KERNEL_FILTER=_sm90a step safety 60 ALL/gpu-tests --test-threads=1 safety::
for run in 1 2 3; do
  for build in EXP MAIN; do
    step anchors-$build-$run 60 $build/flash-attn-timing
  done
done
for dtype in f16 bf16; do
  step d256-w12-$dtype 30 EXP/flash-attn-timing --kernel flash_fwd_${dtype}_d256_m128_n64_w12_s2_sm90a --shape 4,16,2048,256
  step d256-w8-$dtype 30 EXP/flash-attn-timing --kernel flash_fwd_${dtype}_d256_m128_n64_w8_s2_sm90a --shape 4,16,2048,256
done
step ours-json 60 EXP/flash-attn-timing --json $OUT/ours.json
step peers 150 python3 EXP/peer_compare.py --ours $OUT/ours.json --out $OUT/peers.json
call_end
