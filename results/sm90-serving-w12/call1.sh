#!/usr/bin/env bash
# Log 93, call 1: EXP (this tree: the unpadded warp-specialised sm90 serving kernels from D=160,
# the copies' periodic destinations). Timing first, alone on the GPU: the variable-length
# prefill at D=256, 224, 192 and 160 and the chunked prefill at D=256 (each times the 8-warp
# serving kernel beside the default, whose PTX is main's). Then, side by side: the GPU tests of
# `varlen` and `cache`, the dense and serving sm80 D=256 kernels whose PTX the copy change
# moved, and the four compute-sanitizer tools over the new kernels and those sm80 ones.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for head_dim in 256 224 192 160; do
  step varlen-d$head_dim 90 EXP/flash-attn-decode-timing --varlen-only --head-dim $head_dim
done
step chunked-d256 120 EXP/flash-attn-decode-timing --chunked-only --head-dim 256
step chunked-d192 120 EXP/flash-attn-decode-timing --chunked-only --head-dim 192
left=$((580 - (SECONDS - T0)))
for filter in varlen cache; do
  (timeout $left EXP/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
(FLASH_ATTN_KERNEL_FILTER=d256_m64_n timeout $left EXP/gpu-tests --test-threads=4 \
   forward::every_kernel_at_every_kernel_head_dim forward::every_kernel_on_a_small_problem \
   > "$OUT/tests-sm80-d256.txt" 2>&1
 echo "== tests-sm80-d256 exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
for dim in d160_m128_n128 d192_m128_n64 d224_m128_n64 d256_m128_n64; do
  for tool in memcheck synccheck initcheck racecheck; do
    (FLASH_ATTN_KERNEL_FILTER=${dim}_w12_s2_serving timeout $left \
       compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
       --exact varlen::every_serving_kernel_on_a_small_ragged_batch \
       > "$OUT/san-$tool-$dim.log" 2>&1
     echo "== $tool $dim exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
  done
done
for tool in memcheck synccheck initcheck racecheck; do
  (FLASH_ATTN_KERNEL_FILTER=d256_m64_n timeout $left \
     compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
     --exact kv_cache::every_serving_kernel_on_a_small_cache \
     > "$OUT/san-$tool-sm80-d256-cache.log" 2>&1
   echo "== $tool sm80-d256-cache exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
