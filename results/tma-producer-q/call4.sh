#!/usr/bin/env bash
# Call 4 (BENCHMARKS.md log 77): D=256's warp-specialised tile (`d256_m128_n64_w12_s2`, which
# no longer spills with the producer's copies by TMA) against the dispatched 8-warp tile at
# 512 to 4096 keys, f16 and bf16 (call 2's builds); the odd-shapes test and the four
# sanitizers over it.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=330
call_begin ALL
for shape in 4,16,512,256 4,16,1024,256 4,16,2048,256 2,16,4096,256; do
  for dtype in f16 bf16; do
    for tile in w12 w8; do
      step d256-$tile-$dtype-${shape//,/_} 30 EXP/flash-attn-timing --kernel flash_fwd_${dtype}_d256_m128_n64_${tile}_s2_sm90a --shape $shape
    done
  done
done
FLASH_ATTN_KERNEL_FILTER=d256_m128_n64_w12 step odd-shapes 60 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool d256_m128_n64_w12 sm90::every_sm90_kernel_on_odd_shapes 120 ) &
done
wait
call_end
