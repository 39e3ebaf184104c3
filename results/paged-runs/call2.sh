#!/usr/bin/env bash
# Log 92, call 2: EXP2, the sm90 paged kernels of D=64 and D=128 with a third path for a tile
# whose rows all exist within one page (one lookup, one pointer over the whole tile) beside
# the runs of 16 rows, against OLD (main cb1e576) and EXP (call 1's runs; its D=128 kernels
# are b9eabf6's): the chunked-prefill timing at D=128 and 64, OLD, EXP, EXP2 twice; ncu's
# instruction counts of the D=128 paged kernel on EXP2; then on EXP2 the GPU tests of the
# filters `paged` and `cache` over the sm90 paged kernels, and the four compute-sanitizer
# tools on `every_paged_kernel_on_a_small_cache` over them, sharded, side by side.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP2
for round in 1 2; do
  for bins in OLD EXP EXP2; do
    for head_dim in 128 64; do
      step timing-$bins-d$head_dim-r$round 60 $bins/flash-attn-decode-timing --chunked-only \
        --head-dim $head_dim --chunked-json "$OUT/$bins-d$head_dim-r$round.json"
    done
  done
done
prof() {
  local bins=$1 name=$2 regex=$3 skip=$4
  step ncu-$bins-$name 60 ncu --clock-control none \
    --metrics smsp__inst_executed.sum,sm__cycles_elapsed.max,gpu__time_duration.sum \
    --kernel-name "regex:$regex" --launch-skip $skip --launch-count 1 \
    $bins/flash-attn-decode-timing --chunked-only --head-dim 128
}
prof EXP2 paged16 'd128_m128_n128_w12_s2_paged_sm90a' 10
prof EXP2 paged256 'd128_m128_n128_w12_s2_paged_sm90a' 63
export FLASH_ATTN_KERNEL_FILTER=paged_sm90a
left=$((575 - (SECONDS - T0)))
for filter in paged cache; do
  (timeout $left EXP2/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for job in memcheck:0/2 memcheck:1/2 synccheck:0/2 synccheck:1/2 initcheck:0/2 initcheck:1/2 \
    racecheck:0/4 racecheck:1/4 racecheck:2/4 racecheck:3/4; do
  tool=${job%%:*} shard=${job#*:}
  (FLASH_ATTN_KERNEL_SHARD=$shard timeout $left \
     compute-sanitizer --tool $tool --error-exitcode 1 EXP2/gpu-tests --test-threads=1 \
     --exact paged::every_paged_kernel_on_a_small_cache > "$OUT/san-$tool-${shard%/*}.log" 2>&1
   echo "== $tool shard $shard exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
