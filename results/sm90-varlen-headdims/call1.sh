#!/usr/bin/env bash
# Log 87, call 1: the sm90 serving kernels of head dims 96 to 256 (8-warp m128_n64 tiles) on
# Hopper. First the GPU tests of the variable-length calls (every head dim, padded ones
# included) beside the four sanitizers over every sm90 serving kernel, then the timing alone
# (--varlen-only: the 16-sequence prefill on the sm90 and the sm80 kernel and the dense batch of
# the mean length) at each new head dim, then PyTorch's peers at D=256.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=${CALL_BUDGET:-400}
call_begin EXP
( step tests-varlen 200 EXP/gpu-tests --test-threads=2 varlen:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool serving_sm90a varlen::every_serving_kernel_on_a_small_ragged_batch 200 ) &
done
wait
for tool in memcheck racecheck; do
  ( san $tool serving_sm90a varlen::sequences_never_read_their_neighbours 100 ) &
done
wait
for head_dim in 96 160 192 224 256; do
  step timing-d$head_dim 90 EXP/flash-attn-decode-timing --varlen-only --head-dim $head_dim \
    --varlen-json "$OUT/ours-d$head_dim.json"
done
step peers-d256 60 python3 EXP/varlen_peers.py --ours "$OUT/ours-d256.json"
call_end
