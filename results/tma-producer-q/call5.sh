#!/usr/bin/env bash
# Call 5 (BENCHMARKS.md log 77): main as landed (1987c4b, every kernel): forward:: and sweep::
# on the sm90 family (the default API now runs D=256's warp-specialised tile), then the
# default API at 4,16,2048,256 against the peers.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=420
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=_sm90a step forward 300 ALL/gpu-tests --test-threads=2 forward:: ) &
( FLASH_ATTN_KERNEL_FILTER=_sm90a step sweep 300 ALL/gpu-tests --test-threads=2 sweep:: ) &
wait
step d256-json 40 ALL/flash-attn-timing --shape 4,16,2048,256 --json $OUT/d256.json
step d256-peers 90 python3 ALL/peer_compare.py --ours $OUT/d256.json --out $OUT/d256-peers.json
call_end
