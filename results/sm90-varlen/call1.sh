#!/usr/bin/env bash
# Log 85, call 1: the sm90 serving kernels (variable-length batches on compute capability 9.0).
# Bundle ce4ac53's gpu-tests, flash-attn-decode-timing and varlen_peers.py in bins.tar.xz (EXP/).
# First the timing alone (the 16-sequence prefill on both families' kernels and the dense batch
# of the mean length, then PyTorch's peers on the same batch), then the GPU tests of the
# variable-length calls and the two cache tests whose kernel lists changed, beside the four
# sanitizers over the sm90 serving kernels.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step timing 150 EXP/flash-attn-decode-timing --varlen-json "$OUT/ours.json"
step peers 120 python3 EXP/varlen_peers.py --ours "$OUT/ours.json"
( step tests-varlen 280 EXP/gpu-tests --test-threads=2 varlen:: ) &
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
call_end
