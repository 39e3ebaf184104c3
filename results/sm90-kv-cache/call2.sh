#!/usr/bin/env bash
# Log 88, call 2 (bundle 8129b90: the split rule at the sm90 tiles' one block per SM): every GPU
# test of a KV-cache call (the filter `cache`: contiguous, paged, chunked prefill, ALiBi,
# cudarc), then the chunked-prefill timing at D=128, 64, 96 and 256 and FlashAttention-2's varlen
# forward on the same problems at D=128 and 64.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-560}
call_begin EXP
step tests-cache 320 EXP/gpu-tests --test-threads=4 cache
for head_dim in 128 64 96 256; do
  step timing-d$head_dim 60 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/ours-d$head_dim.json"
done
for head_dim in 128 64; do
  step peers-d$head_dim 60 python3 EXP/chunked_peers.py --ours "$OUT/ours-d$head_dim.json"
done
call_end
