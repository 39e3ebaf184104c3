#!/usr/bin/env bash
# Log 89, call 1: the paged GPU tests (filter `paged`: the sm90 paged kernels on every paged
# call they take, chunked prefill over pages at every head dim), memcheck over the sm90 paged
# kernels on the two small-problem tests, and the chunked-prefill timing at D=128 and D=64
# (contiguous and paged caches).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-570}
call_begin EXP
step tests-paged 240 EXP/gpu-tests --test-threads=4 paged
san memcheck paged_sm90a paged::every_paged_kernel_on_a_small_cache 80
san memcheck paged_sm90a varlen_cache::every_cache_kernel_on_a_small_batch 60
for head_dim in 128 64; do
  step timing-d$head_dim 75 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/ours-d$head_dim.json"
done
call_end
