#!/usr/bin/env bash
# Log 89, call 2: synccheck, initcheck and racecheck over the sm90 paged kernels on the two
# small-problem tests, every GPU test of a KV-cache call (filter `cache`), and the
# chunked-prefill timing at D=256.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-580}
call_begin EXP
for tool in synccheck initcheck racecheck; do
  san $tool paged_sm90a paged::every_paged_kernel_on_a_small_cache 70
done
san racecheck paged_sm90a varlen_cache::every_cache_kernel_on_a_small_batch 50
step tests-cache 240 EXP/gpu-tests --test-threads=4 cache
step timing-d256 60 EXP/flash-attn-decode-timing --chunked-only --head-dim 256 \
  --chunked-json "$OUT/ours-d256.json"
call_end
