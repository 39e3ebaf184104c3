#!/usr/bin/env bash
# Log 93, call 2: the peers of the D=256 serving rows (FlashAttention-2's varlen forward, SDPA
# flash and cuDNN on the dense batch) in the same call as ours, then, on a build of every kernel
# (ALL, b5b59f6's tree), the GPU tests and the four compute-sanitizer tools over the D=256
# 4-warp kernels whose PTX the copy change moved (sm80 dense, serving, paged and modified ones,
# sm90 dense ones; two of these newly pass the gate).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin ALL
step varlen-d256 90 EXP/flash-attn-decode-timing --varlen-only --head-dim 256 \
  --varlen-json "$OUT/varlen-d256.json"
step varlen-peers-d256 120 python3 ../../scripts/varlen_peers.py --ours "$OUT/varlen-d256.json"
step chunked-d256 120 EXP/flash-attn-decode-timing --chunked-only --head-dim 256 \
  --chunked-json "$OUT/chunked-d256.json"
step chunked-peers-d256 120 python3 ../../scripts/chunked_peers.py --ours "$OUT/chunked-d256.json"
export FLASH_ATTN_KERNEL_FILTER=d256_m64_n
left=$((580 - (SECONDS - T0)))
for test in forward::every_kernel_at_every_kernel_head_dim \
    modifiers::every_modified_kernel_on_a_small_problem \
    alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch \
    paged::every_paged_kernel_on_a_small_cache kv_cache::every_serving_kernel_on_a_small_cache; do
  (timeout $left ALL/gpu-tests --test-threads=1 --exact $test > "$OUT/tests-${test%%::*}.txt" 2>&1
   echo "== tests $test exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
done
for test in forward::every_kernel_on_a_small_problem modifiers::every_modified_kernel_on_a_small_problem \
    paged::every_paged_kernel_on_a_small_cache; do
  for tool in memcheck synccheck initcheck racecheck; do
    (timeout $left compute-sanitizer --tool $tool --error-exitcode 1 ALL/gpu-tests \
       --test-threads=1 --exact $test > "$OUT/san-$tool-${test%%::*}.log" 2>&1
     echo "== $tool $test exit $? (t=$((SECONDS - T0)))" >> "$OUT/summary.txt") &
  done
done
wait
call_end
