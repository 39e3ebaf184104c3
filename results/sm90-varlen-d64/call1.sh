#!/usr/bin/env bash
# Log 86, call 1: D=64's three-consumer serving kernel (m192_n128_w16_s2_serving_sm90a) on
# Hopper. First the timing alone (the 16-sequence prefill on every sm90 serving tile of the
# head dim and on the sm80 kernel, the dense batch of the mean length, then PyTorch's peers), at
# D=64 and D=128 (the m128 serving kernels' PTX changed too), then the GPU tests of the
# variable-length calls beside the four sanitizers over the sm90 serving kernels, then
# criterion's serving benchmark.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step timing-d64 120 EXP/flash-attn-decode-timing --head-dim 64 --varlen-json "$OUT/ours-d64.json"
step peers-d64 100 python3 EXP/varlen_peers.py --ours "$OUT/ours-d64.json"
step timing-d128 150 EXP/flash-attn-decode-timing --varlen-json "$OUT/ours-d128.json"
step peers-d128 100 python3 EXP/varlen_peers.py --ours "$OUT/ours-d128.json"
( step tests-varlen 200 EXP/gpu-tests --test-threads=2 varlen:: ) &
( step tests-kv-cache 140 EXP/gpu-tests --exact kv_cache::every_serving_kernel_on_a_small_cache
  step tests-varlen-cache 140 EXP/gpu-tests --exact varlen_cache::every_cache_kernel_on_a_small_batch ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool serving_sm90a varlen::every_serving_kernel_on_a_small_ragged_batch 200 ) &
done
wait
for tool in memcheck racecheck; do
  ( san $tool serving_sm90a varlen::sequences_never_read_their_neighbours 100 ) &
done
wait
step serving-bench 200 EXP/serving-bench --bench
call_end
