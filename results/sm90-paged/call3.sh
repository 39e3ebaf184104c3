#!/usr/bin/env bash
# Log 89, call 3: racecheck over the 14 sm90 paged kernels on `every_paged_kernel_on_a_small_cache`,
# which call 2's 70-second cut stopped: four compute-sanitizer processes side by side, each
# with a quarter of the kernels (FLASH_ATTN_KERNEL_SHARD), so that all of them fit the call.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for i in 0 1 2 3; do
  (FLASH_ATTN_KERNEL_FILTER=paged_sm90a FLASH_ATTN_KERNEL_SHARD=$i/4 timeout 540 \
     compute-sanitizer --tool racecheck --error-exitcode 1 "$BINS/gpu-tests" --test-threads=1 \
     --exact paged::every_paged_kernel_on_a_small_cache > "$OUT/san-racecheck-shard$i.log" 2>&1
   echo "== racecheck shard $i/4 exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
