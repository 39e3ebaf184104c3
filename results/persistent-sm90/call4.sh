#!/usr/bin/env bash
# Call 4 (log 52): the seven tests of PS3's suite that call 3's 360 s cut off (run beside the
# sanitizers there), each alone.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf bins.tar.xz PS3
source ../scripts/device-call-lib.sh
BINS=PS3 CALL_BUDGET=380
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
for t in modifiers::every_sm90_modified_kernel_with_each_modifier sm90::every_sm90_kernel_on_odd_shapes \
    forward::every_kernel_for_sequence_lengths_128_to_4096 forward::every_kernel_for_batch_and_head_variations \
    forward::a_thousand_runs_are_bitwise_identical edge_cases::running_maxima_that_grow_at_every_key_block \
    varlen_cache::chunked_prefill_over_contiguous_and_paged_caches; do
  step "test-${t##*::}" 200 PS3/gpu-tests --test-threads=1 --exact "$t"
done
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
