#!/usr/bin/env bash
# Log 88, call 3 (bundle of the final rule: a decode step stays on the sm80 kernels): the
# chunked-prefill timing at D=128, 64, 96 and 256 first, FlashAttention-2's varlen forward on the
# same problems at D=128 and 256, then every GPU test of a KV-cache call (filter `cache`).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-560}
call_begin EXP
for head_dim in 128 64 96 256; do
  step timing-d$head_dim 60 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/ours-d$head_dim.json"
done
for head_dim in 128 256; do
  step peers-d$head_dim 60 python3 EXP/chunked_peers.py --ours "$OUT/ours-d$head_dim.json"
done
step tests-cache 320 EXP/gpu-tests --test-threads=4 cache
call_end
