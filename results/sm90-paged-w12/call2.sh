#!/usr/bin/env bash
# Log 94, call 2: EXP (the warp-specialised sm90 paged kernels from D=160 with D=256's, the
# per-row paged copies' periodic destinations) and OLD (call 1's tree, eca1be4, whose sm80 D=256
# paged kernels are main's). Timing first, alone on the GPU: the chunked prefills at D=256 (EXP:
# the new paged kernel against the 8-warp one and the contiguous call), then the decode timing
# at D=256 (the sm80 D=256 paged kernels whose PTX the copies' change moved), OLD then EXP, in
# two rounds, each cut at 60 s (past the plain decode lines, where the paged ones are). Then, side by side: the GPU
# tests of `paged` and `varlen_cache`, and the four compute-sanitizer tools over the new D=256
# paged kernels and the moved sm80 ones.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step chunked-d256 120 EXP/flash-attn-decode-timing --chunked-only --head-dim 256 \
  --chunked-json "$OUT/chunked-d256.json"
for round in 1 2; do
  step decode-OLD-r$round 60 OLD/flash-attn-decode-timing --head-dim 256
  step decode-EXP-r$round 60 EXP/flash-attn-decode-timing --decode-only --head-dim 256
done
left=$((580 - (SECONDS - T0)))
for filter in paged varlen_cache; do
  (timeout $left EXP/gpu-tests --test-threads=4 $filter > "$OUT/tests-$filter.txt" 2>&1
   echo "== tests-$filter exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for dim in d256_m128_n64_w12_s2_paged d256_m64_n16_w4_s1_qsmem_paged; do
  for tool in memcheck synccheck initcheck racecheck; do
    (FLASH_ATTN_KERNEL_FILTER=$dim timeout $left \
       compute-sanitizer --tool $tool --error-exitcode 1 EXP/gpu-tests --test-threads=1 \
       --exact paged::every_paged_kernel_on_a_small_cache \
       > "$OUT/san-$tool-$dim.log" 2>&1
     echo "== $tool $dim exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
  done
done
wait
call_end
