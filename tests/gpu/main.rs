//! Tests that run the kernels, under a harness that decides at run time whether they can run
//! (libtest-mimic): where `FlashAttention::new` finds no GPU, every test that needs one is
//! reported as **ignored**, after one line saying why, so the summary counts what really ran.
//! With `FLASH_ATTN_REQUIRE_GPU` set (the GPU bundle sets it) nothing is ignored, and a missing
//! GPU fails every such test.
//!
//! Each test is a plain function named in [`gpu_trials`]; one left out is dead code, which the
//! build's lints reject.

mod alibi_serving;
#[cfg(feature = "cudarc")]
mod cudarc_backend;
mod edge_cases;
mod errors;
mod forward;
mod kv_cache;
mod modifiers;
mod paged;
mod safety;
mod sm90;
mod support;
mod sweep;
mod varlen;
mod varlen_cache;

use flash_attn::{Error, FlashAttention};
use libtest_mimic::{Arguments, Trial};

/// A trial per test function, named `module::function` as libtest would.
macro_rules! trials {
    ($($module:ident :: $test:ident),* $(,)?) => {
        vec![$(Trial::test(concat!(stringify!($module), "::", stringify!($test)), || {
            $module::$test();
            Ok(())
        })),*]
    };
}

/// The tests that need a GPU.
fn gpu_trials() -> Vec<Trial> {
    trials![
        alibi_serving::each_serving_call_with_alibi_fp16,
        alibi_serving::each_serving_call_with_alibi_bf16,
        alibi_serving::each_serving_call_with_alibi_at_other_head_dims,
        alibi_serving::split_kv_decode_with_alibi_on_a_long_cache,
        alibi_serving::raw_and_safe_calls_agree_bit_for_bit,
        alibi_serving::alibi_errors_come_before_any_launch,
        alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch,
        edge_cases::scores_beyond_the_fp16_range_stay_finite_and_accurate,
        edge_cases::rows_that_see_no_key_are_zero_with_minus_infinite_logsumexp,
        edge_cases::nan_in_a_query_affects_only_its_row,
        edge_cases::infinity_in_a_query_affects_only_its_row,
        edge_cases::nan_in_a_key_affects_exactly_the_rows_that_see_it,
        edge_cases::nan_in_a_value_affects_its_column_of_the_rows_that_see_it,
        edge_cases::a_nan_in_k_past_a_query_diagonal_block_does_not_reach_it,
        edge_cases::running_maxima_that_grow_at_every_key_block,
        errors::a_short_input_is_rejected,
        errors::a_too_small_output_is_rejected,
        errors::a_too_small_logsumexp_is_rejected,
        errors::a_misaligned_buffer_is_rejected,
        errors::problem_errors_surface_through_forward_too,
        kv_cache::decode_with_grouped_heads_and_odd_cache_lengths,
        kv_cache::short_query_chunks_against_a_cache,
        kv_cache::decode_at_a_large_batch_has_no_split,
        kv_cache::split_kv_runs_are_bitwise_identical,
        kv_cache::cache_lengths_past_the_capacity_read_as_the_capacity,
        kv_cache::too_few_cache_lengths_are_rejected,
        kv_cache::every_serving_kernel_on_a_small_cache,
        kv_cache::decode_and_chunks_at_every_head_dim,
        kv_cache::split_counts_across_the_combine_chunks,
        kv_cache::padded_head_dims_write_only_their_columns,
        kv_cache::a_window_and_a_softcap_against_a_cache,
        modifiers::each_modifier_alone_and_combined_fp16,
        modifiers::each_modifier_alone_and_combined_bf16,
        modifiers::each_modifier_alone_and_combined_at_other_head_dims,
        modifiers::every_modified_kernel_on_a_small_problem,
        modifiers::every_sm90_modified_kernel_with_each_modifier,
        modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms,
        modifiers::every_alibi_kernel_with_alibi_alone,
        modifiers::every_softcap_kernel_with_the_softcap_alone,
        modifiers::a_window_of_1024_keys_at_4097_tokens,
        modifiers::key_blocks_outside_the_window_are_skipped,
        modifiers::a_window_no_wider_than_causal_is_the_dense_kernel,
        modifiers::the_alibi_calls_agree_bit_for_bit,
        modifiers::back_to_back_alibi_calls_read_their_own_slopes,
        modifiers::errors_come_before_any_launch,
        modifiers::explicit_strides_with_modifiers_are_honoured,
        paged::every_page_size_with_scrambled_tables,
        paged::split_kv_over_pages,
        paged::a_page_outside_the_cache_makes_its_sequence_nan,
        paged::a_short_block_table_is_rejected,
        paged::every_paged_kernel_on_a_small_cache,
        paged::paged_decode_at_every_head_dim,
        paged::chunked_prefill_over_pages_at_every_head_dim,
        paged::a_window_and_a_softcap_over_pages,
        forward::every_kernel_on_a_small_problem,
        forward::every_kernel_at_the_seed_shape,
        forward::every_kernel_for_sequence_lengths_128_to_4096,
        forward::every_kernel_for_batch_and_head_variations,
        forward::every_kernel_at_every_kernel_head_dim,
        forward::every_head_dim_through_the_default_api,
        forward::several_fresh_inputs_at_the_seed_shape,
        forward::a_custom_softmax_scale_is_applied,
        forward::a_thousand_runs_are_bitwise_identical,
        forward::forward_host_matches_the_device_path,
        forward::the_raw_entry_point_matches_the_safe_one,
        forward::kernels_load_from_cubins_where_built_and_from_ptx_when_forced,
        safety::the_largest_batch_the_host_accepts_is_correct,
        safety::the_most_query_heads_the_host_accepts_are_correct,
        safety::offsets_past_two_to_the_32_elements_reach_the_right_rows,
        safety::uploads_kernels_and_downloads_are_ordered,
        safety::concurrent_calls_give_the_bits_of_serial_calls,
        sweep::tails_and_causal_fp16,
        sweep::tails_and_causal_bf16,
        sweep::long_sequences_fp16_and_bf16,
        sweep::the_anchor_shapes_at_s512,
        sweep::padded_strides_are_honoured,
        sm90::every_sm90_kernel_on_odd_shapes,
        sm90::every_tma_kernel_through_other_strides,
        varlen::ragged_batches_fp16_and_bf16,
        varlen::empty_sequences_are_skipped_or_zero,
        varlen::ragged_batches_with_long_sequences,
        varlen::a_heads_first_layout_is_honoured,
        varlen::every_serving_kernel_on_a_small_ragged_batch,
        varlen::sequences_never_read_their_neighbours,
        varlen::ragged_batches_at_every_head_dim,
        varlen::the_raw_entry_point_matches_the_safe_one,
        varlen::back_to_back_calls_of_different_batches_are_ordered,
        varlen::invalid_calls_are_rejected_before_launching,
        varlen::ragged_batches_with_a_window_and_a_softcap,
        varlen_cache::chunked_prefill_over_contiguous_and_paged_caches,
        varlen_cache::the_raw_call_matches_the_reference,
        varlen_cache::a_page_outside_the_cache_makes_its_sequence_nan,
        varlen_cache::every_cache_kernel_on_a_small_batch,
        varlen_cache::chunked_prefill_at_every_head_dim,
        varlen_cache::chunked_prefill_with_a_window_and_a_softcap,
    ]
}

/// The tests of the cudarc backend, which need a GPU.
#[cfg(feature = "cudarc")]
fn cudarc_trials() -> Vec<Trial> {
    trials![
        cudarc_backend::dense_fp16_on_a_second_stream,
        cudarc_backend::dense_bf16_on_a_second_stream,
        cudarc_backend::serving_calls_give_the_cust_bits_fp16,
        cudarc_backend::serving_calls_give_the_cust_bits_bf16,
        cudarc_backend::other_contexts_and_short_buffers_are_rejected,
        cudarc_backend::alibi_calls_give_the_cust_bits_fp16,
        cudarc_backend::alibi_calls_give_the_cust_bits_bf16,
        cudarc_backend::alibi_errors_come_before_any_launch,
        cudarc_backend::alibi_serving_calls_give_the_cust_bits_fp16,
        cudarc_backend::alibi_serving_calls_give_the_cust_bits_bf16,
    ]
}

/// The tests that run with or without a GPU.
fn anywhere_trials() -> Vec<Trial> {
    trials![errors::without_a_gpu_construction_is_an_error_not_a_panic]
}

fn main() {
    let arguments = Arguments::from_args();
    let required = std::env::var_os("FLASH_ATTN_REQUIRE_GPU").is_some();
    // Asked only when a test will run: `--list` must work anywhere, quickly.
    let missing_gpu = if arguments.list {
        None
    } else {
        // Only a missing GPU ignores the tests: any other failure (an old driver, say) must
        // fail them where they run.
        match FlashAttention::with_options(&support::load_options()) {
            Err(Error::NoGpu(error)) if !required => Some(error),
            _ => None,
        }
    };
    if let Some(reason) = &missing_gpu {
        eprintln!(
            "GPU tests ignored: no CUDA GPU ({reason}); set FLASH_ATTN_REQUIRE_GPU=1 to fail instead"
        );
    }
    #[cfg_attr(not(feature = "cudarc"), allow(unused_mut))]
    let mut needs_gpu = gpu_trials();
    #[cfg(feature = "cudarc")]
    needs_gpu.extend(cudarc_trials());
    let mut trials: Vec<Trial> = needs_gpu
        .into_iter()
        .map(|trial| trial.with_ignored_flag(missing_gpu.is_some()))
        .collect();
    trials.extend(anywhere_trials());
    libtest_mimic::run(&arguments, trials).exit();
}
