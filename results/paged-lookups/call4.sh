#!/usr/bin/env bash
# Log 90, call 4: the four sm90 paged kernels whose producer now takes 80 registers (D=64 and
# D=128, f16 and bf16; their PTX the only ones changed): the GPU tests of the filters `paged`
# and `cache` on them, and the four compute-sanitizer tools on
# `every_paged_kernel_on_a_small_cache`, side by side.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
export FLASH_ATTN_KERNEL_FILTER=m128_n128_w12_s2_paged_sm90a
left=$((280 - (SECONDS - T0)))
for filter in paged cache; do
  (timeout $left EXP/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for job in memcheck:0/1 synccheck:0/1 initcheck:0/1 racecheck:0/2 racecheck:1/2; do
  tool=${job%%:*} shard=${job#*:}
  (FLASH_ATTN_KERNEL_SHARD=$shard timeout $left \
     compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
     --exact paged::every_paged_kernel_on_a_small_cache > "$OUT/san-$tool-${shard%/*}.log" 2>&1
   echo "== $tool shard $shard exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
