#!/usr/bin/env bash
# Call 7 (log 53): the 30 tests of PS4's suite that call 6's 560 s did not reach, three at a
# time (correctness only), each alone in its process, the longest (sm90 odd shapes) first.
set -u
cd "$(dirname "$0")"
T0=$(date +%s)
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf bins.tar.xz PS4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
one() { local s=$(date +%s); local left=$((570 - (s - T0))); [ $left -lt 5 ] && { echo "== $1 skipped (no time)" >> $OUT/summary.txt; return; }; timeout $left PS4/gpu-tests --test-threads=1 --exact "$1" > "$OUT/test-${1//::/-}.txt" 2>&1; local rc=$?; local e=$(date +%s); echo "== $1 exit $rc ($((e - s)) s, t=$((e - T0)))" >> $OUT/summary.txt; }
export -f one; export T0 OUT
printf '%s\n' sm90::every_sm90_kernel_on_odd_shapes errors::without_a_gpu_construction_is_an_error_not_a_panic forward::a_thousand_runs_are_bitwise_identical forward::kernels_load_from_cubins_where_built_and_from_ptx_when_forced safety::concurrent_calls_give_the_bits_of_serial_calls safety::offsets_past_two_to_the_32_elements_reach_the_right_rows safety::the_largest_batch_the_host_accepts_is_correct safety::the_most_query_heads_the_host_accepts_are_correct safety::uploads_kernels_and_downloads_are_ordered sweep::long_sequences_fp16_and_bf16 sweep::padded_strides_are_honoured sweep::tails_and_causal_bf16 sweep::tails_and_causal_fp16 sweep::the_anchor_shapes_at_s512 varlen::a_heads_first_layout_is_honoured varlen::back_to_back_calls_of_different_batches_are_ordered varlen::empty_sequences_are_skipped_or_zero varlen::every_serving_kernel_on_a_small_ragged_batch varlen::invalid_calls_are_rejected_before_launching varlen::ragged_batches_at_every_head_dim varlen::ragged_batches_fp16_and_bf16 varlen::ragged_batches_with_a_window_and_a_softcap varlen::ragged_batches_with_long_sequences varlen::the_raw_entry_point_matches_the_safe_one varlen_cache::a_page_outside_the_cache_makes_its_sequence_nan varlen_cache::chunked_prefill_at_every_head_dim varlen_cache::chunked_prefill_over_contiguous_and_paged_caches varlen_cache::chunked_prefill_with_a_window_and_a_softcap varlen_cache::every_cache_kernel_on_a_small_batch varlen_cache::the_raw_call_matches_the_reference  | xargs -P3 -I{} bash -c 'one {}'
cat $OUT/summary.txt
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
