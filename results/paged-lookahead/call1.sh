#!/usr/bin/env bash
# Log 91, call 1: the sm90 paged kernels' producer looks up each key block's pages a group
# ahead, before its wait for the slot (EXP), against main 605dae7 (OLD): the chunked-prefill
# timing at D=128 and 64, OLD, EXP, OLD, EXP; then on EXP the GPU tests of the filters
# `paged` and `cache` over the 14 sm90 paged kernels, and the four compute-sanitizer tools on
# `every_paged_kernel_on_a_small_cache` over them, sharded, side by side.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for round in 1 2; do
  for bins in OLD EXP; do
    for head_dim in 128 64; do
      step timing-$bins-d$head_dim-r$round 60 $bins/flash-attn-decode-timing --chunked-only \
        --head-dim $head_dim --chunked-json "$OUT/$bins-d$head_dim-r$round.json"
    done
  done
done
export FLASH_ATTN_KERNEL_FILTER=paged_sm90a
left=$((570 - (SECONDS - T0)))
for filter in paged cache; do
  (timeout $left EXP/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for job in memcheck:0/2 memcheck:1/2 synccheck:0/2 synccheck:1/2 initcheck:0/2 initcheck:1/2 \
    racecheck:0/4 racecheck:1/4 racecheck:2/4 racecheck:3/4; do
  tool=${job%%:*} shard=${job#*:}
  (FLASH_ATTN_KERNEL_SHARD=$shard timeout $left \
     compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
     --exact paged::every_paged_kernel_on_a_small_cache > "$OUT/san-$tool-${shard%/*}.log" 2>&1
   echo "== $tool shard $shard exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
