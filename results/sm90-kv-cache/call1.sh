#!/usr/bin/env bash
# Log 88, call 1: the KV-cache calls on the sm90 serving kernels (Hopper). The GPU tests of the
# KV-cache and chunked-prefill calls beside the four sanitizers over the sm90 serving kernels on
# those calls, then the chunked-prefill timing (default, sm80, each sm90 tile unsplit, dense) at
# D=128 and D=64, then FlashAttention-2's varlen forward on the same problems.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-540}
call_begin EXP
( step tests-cache 240 EXP/gpu-tests --test-threads=2 kv_cache:: varlen_cache:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool serving_sm90a kv_cache::every_serving_kernel_on_a_small_cache 200;
    san $tool serving_sm90a varlen_cache::every_cache_kernel_on_a_small_batch 200 ) &
done
wait
for head_dim in 128 64; do
  step timing-d$head_dim 100 EXP/flash-attn-decode-timing --chunked-only --head-dim $head_dim \
    --chunked-json "$OUT/ours-d$head_dim.json"
done
for head_dim in 128 64; do
  step peers-d$head_dim 60 python3 EXP/chunked_peers.py --ours "$OUT/ours-d$head_dim.json"
done
call_end
