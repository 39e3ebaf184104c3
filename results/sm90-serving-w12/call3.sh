#!/usr/bin/env bash
# Log 93, call 3: the four compute-sanitizer tools over the sm80 D=256 modified serving and
# paged kernels whose PTX the copy change moved (call 2's filter selected no plain modified
# kernel: the D=256 one, `m128_n32_w8`, copies 8 rows a pass and kept its PTX).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin ALL
export FLASH_ATTN_KERNEL_FILTER=d256_m64_n16
left=$((300 - (SECONDS - T0)))
test=alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch
for tool in memcheck synccheck initcheck racecheck; do
  (timeout $left compute-sanitizer --tool $tool --error-exitcode 1 ALL/gpu-tests \
     --test-threads=1 --exact $test > "$OUT/san-$tool-alibi_serving.log" 2>&1
   echo "== $tool $test exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
wait
call_end
