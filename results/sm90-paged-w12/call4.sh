#!/usr/bin/env bash
# Log 94, call 4: the peers of the paged chunked prefills from D=160, in the same call as ours:
# `flash-attn-decode-timing --chunked-only` (d7c1ceb's kernels, whose PTX HEAD keeps) at D=160,
# 192, 224 and 256, each followed by `chunked_peers.py` (FlashAttention-2's varlen forward on
# the same chunks, contiguous: PyTorch carries no paged form of it).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for head_dim in 256 224 192 160; do
  step chunked-d$head_dim 120 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/chunked-d$head_dim.json"
  step chunked-peers-d$head_dim 120 python3 ../../scripts/chunked_peers.py \
    --ours "$OUT/chunked-d$head_dim.json"
done
call_end
