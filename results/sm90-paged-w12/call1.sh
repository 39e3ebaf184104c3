#!/usr/bin/env bash
# Log 94, call 1: EXP (this tree: the warp-specialised sm90 paged kernels at D=160, 192 and 224).
# Timing first, alone on the GPU: the chunked prefills at D=160, 192 and 224 (contiguous, and
# over pages of 16 and 256 keys on the default kernel, the sm80 family's and each other sm90
# paged kernel: the 8-warp one, whose PTX is main's). Then, side by side: the GPU tests of
# `paged` and `varlen_cache`, and the four compute-sanitizer tools over the new kernels.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for head_dim in 160 192 224; do
  step chunked-d$head_dim 120 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/chunked-d$head_dim.json"
done
left=$((580 - (SECONDS - T0)))
for filter in paged varlen_cache; do
  (timeout $left EXP/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for dim in d160_m128_n128 d192_m128_n64 d224_m128_n64; do
  for tool in memcheck synccheck initcheck racecheck; do
    (FLASH_ATTN_KERNEL_FILTER=${dim}_w12_s2_paged timeout $left \
       compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
       --exact paged::every_paged_kernel_on_a_small_cache \
       > "$OUT/san-$tool-$dim.log" 2>&1
     echo "== $tool $dim exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
  done
done
wait
call_end
