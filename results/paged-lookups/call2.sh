#!/usr/bin/env bash
# Log 90, call 2: side by side, the GPU tests of the filters `paged` and `cache`, and the four
# compute-sanitizer tools over every paged kernel (the 34 sm80 and 14 sm90 entries whose copies
# changed) on `every_paged_kernel_on_a_small_cache`, each tool's kernels split into shards
# (FLASH_ATTN_KERNEL_SHARD; a shard that selects no kernel fails).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
left=$((570 - (SECONDS - T0)))
(timeout $left EXP/gpu-tests --test-threads=4 paged > "$OUT/tests-paged.txt" 2>&1
 echo "== tests-paged exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
(timeout $left EXP/gpu-tests --test-threads=4 cache > "$OUT/tests-cache.txt" 2>&1
 echo "== tests-cache exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
for job in memcheck:0/4 memcheck:1/4 memcheck:2/4 memcheck:3/4 synccheck:0/2 synccheck:1/2 \
    initcheck:0/2 initcheck:1/2 racecheck:0/6 racecheck:1/6 racecheck:2/6 racecheck:3/6 \
    racecheck:4/6 racecheck:5/6; do
  tool=${job%%:*} shard=${job#*:}
  (FLASH_ATTN_KERNEL_FILTER=paged FLASH_ATTN_KERNEL_SHARD=$shard timeout $left \
     compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
     --exact paged::every_paged_kernel_on_a_small_cache > "$OUT/san-$tool-${shard%/*}.log" 2>&1
   echo "== $tool shard $shard exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
