#!/usr/bin/env bash
# Call 4 (data for the next table change, BENCHMARKS.md log 71): D=64's small grids beyond 2048
# keys, which log 70 did not measure: the two-consumer tile (what their rows run) against the
# three-consumer one, each named, f16 and bf16, non-causal and causal, ABAB.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NEW
for shape in 1,8,4096,64 1,4,8192,64 2,4,4096,64 1,2,16384,64; do
  for dt in f16 bf16; do
    for round in 1 2; do
      for tile in m128_n128_w12_s2 m192_n128_w16_s2; do
        step t-$shape-$dt-$tile-$round 40 NEW/flash-attn-timing --kernel flash_fwd_${dt}_d64_${tile}_sm90a --shape $shape
      done
    done
  done
done
call_end
