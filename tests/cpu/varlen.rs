//! Variable-length batches without a GPU: the validation of their offsets and extents (one test
//! per error), their launch plan on the serving kernels, the CPU reference (which attends each
//! sequence on its own), and a property test that models every address the kernel forms for
//! random ragged batches, layouts, strides and buffer lengths.

use flash_attn::reference::{
    attention, attention_varlen, random_normal, relayout, Precision, Scoring,
};
use flash_attn::{
    kernel_by_name, plan_kv_cache, plan_varlen, plan_varlen_on, AttentionShape, BufferLengths,
    Dtype, Error, Family, ForwardOptions, ForwardStrides, LaunchPlan, Layout, TensorStrides,
    Variant, VarlenExtents, VarlenShape, MAX_SEQ_LEN, MAX_TENSOR_BYTES,
};
use half::f16;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

use crate::H100_SM_COUNT;

/// Three sequences of 7, 1 and 65 queries against 63, 1 and 5 keys.
const CU_SEQLENS_Q: &[u32] = &[0, 7, 8, 73];
const CU_SEQLENS_KV: &[u32] = &[0, 63, 64, 69];

fn shape<'a>(cu_seqlens_q: &'a [u32], cu_seqlens_kv: &'a [u32]) -> VarlenShape<'a> {
    VarlenShape {
        cu_seqlens_q,
        cu_seqlens_kv,
        heads_q: 8,
        heads_kv: 2,
        head_dim: 64,
    }
}

fn bshd() -> ForwardOptions {
    ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    }
}

/// The plan of the batch of these offsets (8 query heads over 2, D=64), or the first error.
fn plan_of(
    cu_seqlens_q: &[u32],
    cu_seqlens_kv: &[u32],
    options: &ForwardOptions,
) -> Result<LaunchPlan, Error> {
    let extents = shape(cu_seqlens_q, cu_seqlens_kv).extents()?;
    plan_varlen(Dtype::F16, &extents, options, H100_SM_COUNT)
}

/// `[tokens, heads, 64]` strides, no batch stride.
fn packed(heads: u64) -> TensorStrides {
    TensorStrides {
        batch: 0,
        head: 64,
        seq: heads * 64,
    }
}

#[test]
fn valid_offsets_give_the_batch_and_its_longest_sequences() {
    let varlen = shape(CU_SEQLENS_Q, CU_SEQLENS_KV);
    assert_eq!(varlen.batch(), 3);
    assert_eq!(
        varlen.extents(),
        Ok(VarlenExtents {
            batch: 3,
            tokens_q: 73,
            tokens_kv: 69,
            max_seq_len_q: 65,
            max_seq_len_kv: 63,
            heads_q: 8,
            heads_kv: 2,
            head_dim: 64,
        })
    );
}

#[test]
fn empty_sequences_are_valid() {
    // Sequence 1 has no query, sequence 2 no key.
    let extents = shape(&[0, 7, 7, 9], &[0, 3, 8, 8]).extents().unwrap();
    assert_eq!(
        (
            extents.batch,
            extents.tokens_q,
            extents.tokens_kv,
            extents.max_seq_len_q,
            extents.max_seq_len_kv
        ),
        (3, 9, 8, 7, 5)
    );
    assert!(plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).is_ok());
}

#[test]
fn query_and_key_offsets_of_different_batches_are_rejected() {
    assert_eq!(
        shape(CU_SEQLENS_Q, &[0, 63, 64]).extents(),
        Err(Error::SeqOffsetsBatchMismatch {
            q_offsets: 4,
            kv_offsets: 3
        })
    );
}

#[test]
fn fewer_than_two_offsets_are_an_empty_batch() {
    for offsets in [&[][..], &[0][..]] {
        assert_eq!(
            shape(offsets, offsets).extents(),
            Err(Error::ZeroSizedDimension { dimension: "batch" })
        );
    }
}

#[test]
fn offsets_that_do_not_start_at_zero_are_rejected() {
    assert_eq!(
        shape(&[1, 7, 8], &[0, 63, 64]).extents(),
        Err(Error::SeqOffsetsStart {
            offsets: "cu_seqlens_q",
            first: 1
        })
    );
    assert_eq!(
        shape(&[0, 7, 8], &[2, 63, 64]).extents(),
        Err(Error::SeqOffsetsStart {
            offsets: "cu_seqlens_kv",
            first: 2
        })
    );
}

#[test]
fn decreasing_offsets_are_rejected() {
    assert_eq!(
        shape(&[0, 7, 5, 9], &[0, 1, 2, 3]).extents(),
        Err(Error::SeqOffsetsDecrease {
            offsets: "cu_seqlens_q",
            sequence: 1,
            start: 7,
            end: 5
        })
    );
    assert_eq!(
        shape(&[0, 1, 2, 3], &[0, 9, 4, 10]).extents(),
        Err(Error::SeqOffsetsDecrease {
            offsets: "cu_seqlens_kv",
            sequence: 1,
            start: 9,
            end: 4
        })
    );
}

#[test]
fn a_batch_without_any_query_or_any_key_is_rejected() {
    assert_eq!(
        plan_of(&[0, 0, 0], &[0, 5, 9], &bshd()).map(|plan| plan.grid()),
        Err(Error::ZeroSizedDimension {
            dimension: "seq_len_q"
        })
    );
    assert_eq!(
        plan_of(&[0, 5, 9], &[0, 0, 0], &bshd()).map(|plan| plan.grid()),
        Err(Error::ZeroSizedDimension {
            dimension: "seq_len_kv"
        })
    );
}

#[test]
fn a_sequence_longer_than_the_kernels_take_is_rejected() {
    let too_long = MAX_SEQ_LEN as u32 + 1;
    for (cu_seqlens_q, cu_seqlens_kv, dimension) in [
        ([0, 1, too_long + 1], [0, 1, 2], "seq_len_q"),
        ([0, 1, 2], [0, too_long, too_long + 1], "seq_len_kv"),
    ] {
        assert_eq!(
            plan_of(&cu_seqlens_q, &cu_seqlens_kv, &bshd()).map(|plan| plan.grid()),
            Err(Error::ProblemTooLarge {
                dimension,
                value: too_long as usize,
                limit: MAX_SEQ_LEN
            })
        );
    }
    // The longest a kernel takes, in a batch of several such sequences, is fine.
    let longest = MAX_SEQ_LEN as u32;
    assert!(plan_of(&[0, longest, 2 * longest], &[0, 1, 2], &bshd()).is_ok());
}

#[test]
fn more_sequences_than_the_grid_holds_are_rejected() {
    let offsets: Vec<u32> = (0..=65_536).collect();
    assert_eq!(
        plan_of(&offsets, &offsets, &bshd()).map(|plan| plan.grid()),
        Err(Error::ProblemTooLarge {
            dimension: "batch",
            value: 65_536,
            limit: 65_535
        })
    );
    let offsets: Vec<u32> = (0..=65_535).collect();
    assert_eq!(
        plan_of(&offsets, &offsets, &bshd()).map(|plan| plan.grid()),
        Ok((1, 8, 65_535))
    );
}

/// Extents as a raw caller might state them.
fn raw_extents() -> VarlenExtents {
    shape(CU_SEQLENS_Q, CU_SEQLENS_KV).extents().unwrap()
}

#[test]
fn raw_extents_of_no_sequence_are_rejected() {
    let extents = VarlenExtents {
        batch: 0,
        ..raw_extents()
    };
    assert_eq!(
        plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).map(|plan| plan.grid()),
        Err(Error::ZeroSizedDimension { dimension: "batch" })
    );
}

#[test]
fn raw_extents_with_more_tokens_than_u32_offsets_reach_are_rejected() {
    for (extents, dimension) in [
        (
            VarlenExtents {
                tokens_q: 1 << 32,
                ..raw_extents()
            },
            "tokens_q",
        ),
        (
            VarlenExtents {
                tokens_kv: 1 << 32,
                ..raw_extents()
            },
            "tokens_kv",
        ),
    ] {
        assert_eq!(
            plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).map(|plan| plan.grid()),
            Err(Error::ProblemTooLarge {
                dimension,
                value: 1 << 32,
                limit: u32::MAX as usize
            })
        );
    }
}

#[test]
fn raw_extents_whose_longest_sequence_passes_the_tokens_are_rejected() {
    let extents = VarlenExtents {
        max_seq_len_q: 74,
        ..raw_extents()
    };
    assert_eq!(
        plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).map(|plan| plan.grid()),
        Err(Error::VarlenExtentsMismatch {
            longest: "max_seq_len_q",
            value: 74,
            tokens: 73
        })
    );
    let extents = VarlenExtents {
        max_seq_len_kv: 70,
        ..raw_extents()
    };
    assert_eq!(
        plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).map(|plan| plan.grid()),
        Err(Error::VarlenExtentsMismatch {
            longest: "max_seq_len_kv",
            value: 70,
            tokens: 69
        })
    );
}

#[test]
fn the_plan_runs_a_serving_kernel_over_the_longest_sequence_with_packed_tensors() {
    let plan = plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &bshd()).unwrap();
    let kernel = plan.kernel();
    // `serving_kernel`'s choice: the 3-stage m64 tile at D=64.
    assert_eq!(kernel.entry, "flash_fwd_f16_d64_m64_n64_w4_s3_serving");
    assert_eq!(kernel.spec.variant, Variant::Serving);
    let block_m = kernel.spec.tile.block_m;
    assert_eq!(plan.grid(), (65usize.div_ceil(block_m) as u32, 8, 3));
    let params = plan.params();
    assert_eq!((params.seq_len_q, params.seq_len_kv), (65, 63));
    assert_eq!((params.heads_q, params.kv_group_size), (8, 4));
    // `[tokens, heads, head_dim]`, no batch stride.
    assert_eq!(
        (
            params.q_strides,
            params.k_strides,
            params.v_strides,
            params.o_strides
        ),
        (packed(8), packed(2), packed(2), packed(8))
    );
    let sequences = plan.sequences().unwrap();
    // The logsumexp is `[heads_q, tokens_q]`: a row's is at its token of its head.
    assert_eq!(
        sequences.lse_strides,
        TensorStrides {
            batch: 0,
            head: 73,
            seq: 1
        }
    );
    // One split that covers the longest key sequence; no workspace.
    assert_eq!(plan.splits(), 1);
    assert_eq!(sequences.keys_per_split, 64);
    assert_eq!((plan.workspace_bytes(), plan.counters()), (0, 0));
    assert_eq!(
        (sequences.partial_rows, sequences.query_blocks),
        (73, 65u32.div_ceil(block_m as u32))
    );
    // The device addresses come at launch.
    assert_eq!(
        (
            sequences.cu_seqlens_q,
            sequences.cu_seqlens_kv,
            sequences.seq_used_kv
        ),
        (0, 0, 0)
    );
    assert_eq!(
        plan.required(),
        BufferLengths {
            q: 73 * 8 * 64,
            k: 69 * 2 * 64,
            v: 69 * 2 * 64,
            o: 73 * 8 * 64,
            lse: Some(8 * 73),
        }
    );
}

#[test]
fn the_heads_first_layout_packs_tokens_within_each_head() {
    let plan = plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &ForwardOptions::default()).unwrap();
    let params = plan.params();
    let heads_first = |tokens: u64| TensorStrides {
        batch: 0,
        head: tokens * 64,
        seq: 64,
    };
    assert_eq!(params.q_strides, heads_first(73));
    assert_eq!(params.k_strides, heads_first(69));
    assert_eq!(plan.required().q, 8 * 73 * 64);
    assert_eq!(plan.required().k, 2 * 69 * 64);
}

#[test]
fn explicit_batch_strides_are_not_used() {
    let with_batch = |heads| TensorStrides {
        batch: 1 << 40,
        ..packed(heads)
    };
    let options = ForwardOptions {
        strides: Some(ForwardStrides {
            q: with_batch(8),
            k: with_batch(2),
            v: with_batch(2),
            o: with_batch(8),
        }),
        ..ForwardOptions::default()
    };
    let plan = plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &options).unwrap();
    assert_eq!(plan.params().q_strides, packed(8));
    assert_eq!(plan.params().o_strides, packed(8));
    assert_eq!(
        plan.required(),
        plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &bshd())
            .unwrap()
            .required()
    );
}

#[test]
fn a_named_serving_kernel_runs_and_others_are_rejected() {
    let with = |name| ForwardOptions {
        kernel: Some(kernel_by_name(name).unwrap()),
        ..bshd()
    };
    let serving = "flash_fwd_f16_d64_m64_n64_w4_s2_serving";
    assert_eq!(
        plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &with(serving))
            .unwrap()
            .kernel()
            .entry,
        serving
    );
    assert!(matches!(
        plan_of(
            CU_SEQLENS_Q,
            CU_SEQLENS_KV,
            &with("flash_fwd_f16_d64_m64_n64_w4_s3")
        ),
        Err(Error::KernelVariantMismatch {
            needed: Variant::Serving,
            ..
        })
    ));
    assert!(matches!(
        plan_of(
            CU_SEQLENS_Q,
            CU_SEQLENS_KV,
            &with("flash_fwd_bf16_d64_m64_n64_w4_s2_serving")
        ),
        Err(Error::KernelDtypeMismatch { .. })
    ));
    assert!(matches!(
        plan_of(
            CU_SEQLENS_Q,
            CU_SEQLENS_KV,
            &with("flash_fwd_f16_d128_m64_n64_w4_s2_serving")
        ),
        Err(Error::KernelHeadDimMismatch { .. })
    ));
    // Every multiple of 8 up to 256 runs: a kernel head dim on its own kernel (unpadded at 64
    // and 128 only), another padded on the next kernel head dim whose kernels pad; the head
    // dims that are not multiples of 8 are invalid, not unsupported.
    for (head_dim, kernel_head_dim) in [(96, 96), (160, 160), (80, 96), (200, 224), (8, 32)] {
        let extents = VarlenExtents {
            head_dim,
            ..raw_extents()
        };
        let kernel = plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT)
            .unwrap()
            .kernel();
        assert_eq!(kernel.spec.variant, Variant::Serving);
        assert_eq!(kernel.spec.tile.head_dim, kernel_head_dim);
        assert!(kernel.spec.pads_head_dim());
    }
    for head_dim in [12, 264] {
        let extents = VarlenExtents {
            head_dim,
            ..raw_extents()
        };
        assert_eq!(
            plan_varlen(Dtype::F16, &extents, &bshd(), H100_SM_COUNT).err(),
            Some(Error::InvalidHeadDim { head_dim })
        );
    }
    // A named serving kernel of a smaller head dim cannot hold the rows; one of a larger head
    // dim that pads runs them padded.
    let padded = VarlenExtents {
        head_dim: 72,
        ..raw_extents()
    };
    assert!(matches!(
        plan_varlen(
            Dtype::F16,
            &padded,
            &with("flash_fwd_f16_d64_m64_n64_w4_s3_serving"),
            H100_SM_COUNT
        ),
        Err(Error::KernelHeadDimMismatch { .. })
    ));
    let d96 = "flash_fwd_f16_d96_m64_n64_w4_s3_pad_serving";
    assert_eq!(
        plan_varlen(Dtype::F16, &padded, &with(d96), H100_SM_COUNT)
            .unwrap()
            .kernel()
            .entry,
        d96
    );
    // The sm90 warp-specialised serving kernels from D=160 run their own head dim only: named
    // for a smaller one (which the 8-warp kernel beside them pads), the call is rejected.
    let warp_specialised = "flash_fwd_f16_d256_m128_n64_w12_s2_serving_sm90a";
    let exact = VarlenExtents {
        head_dim: 256,
        ..raw_extents()
    };
    let padded = VarlenExtents {
        head_dim: 248,
        ..raw_extents()
    };
    let on_hopper = |extents: &VarlenExtents, kernel| {
        plan_varlen_on(Dtype::F16, extents, &with(kernel), H100_SM_COUNT, (9, 0))
    };
    assert_eq!(
        on_hopper(&exact, warp_specialised).unwrap().kernel().entry,
        warp_specialised
    );
    assert!(matches!(
        on_hopper(&padded, warp_specialised),
        Err(Error::KernelHeadDimMismatch {
            kernel_head_dim: 256,
            head_dim: 248,
            ..
        })
    ));
    let eight_warps = "flash_fwd_f16_d256_m128_n64_w8_s1_serving_sm90a";
    assert_eq!(
        on_hopper(&padded, eight_warps).unwrap().kernel().entry,
        eight_warps
    );
}

#[test]
fn buffers_too_small_for_the_tokens_are_rejected() {
    let plan = plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &bshd()).unwrap();
    let required = plan.required();
    assert_eq!(plan.check_buffers(&required), Ok(()));
    let short = |tensor: &'static str| {
        let mut lengths = required;
        match tensor {
            "q" => lengths.q -= 1,
            "k" => lengths.k -= 1,
            "v" => lengths.v -= 1,
            "o" => lengths.o -= 1,
            _ => lengths.lse = required.lse.map(|lse| lse - 1),
        }
        lengths
    };
    for tensor in ["q", "k", "v", "o", "lse"] {
        assert!(
            matches!(
                plan.check_buffers(&short(tensor)),
                Err(Error::BufferTooSmall { tensor: named, .. }) if named == tensor
            ),
            "{tensor}"
        );
    }
}

#[test]
fn the_dense_problem_checks_apply_to_a_varlen_batch() {
    let gqa = VarlenShape {
        heads_kv: 3,
        ..shape(CU_SEQLENS_Q, CU_SEQLENS_KV)
    };
    assert_eq!(
        plan_varlen(Dtype::F16, &gqa.extents().unwrap(), &bshd(), H100_SM_COUNT)
            .map(|plan| plan.grid()),
        Err(Error::InvalidGqaRatio {
            heads_q: 8,
            heads_kv: 3
        })
    );
    let scale = ForwardOptions {
        softmax_scale: Some(-1.0),
        ..bshd()
    };
    assert_eq!(
        plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &scale).map(|plan| plan.grid()),
        Err(Error::InvalidSoftmaxScale { scale: -1.0 })
    );
    let with_strides = |q: TensorStrides, o: TensorStrides| ForwardOptions {
        strides: Some(ForwardStrides {
            q,
            k: packed(2),
            v: packed(2),
            o,
        }),
        ..ForwardOptions::default()
    };
    let unaligned = TensorStrides {
        seq: 8 * 64 + 4,
        ..packed(8)
    };
    assert_eq!(
        plan_of(
            CU_SEQLENS_Q,
            CU_SEQLENS_KV,
            &with_strides(unaligned, packed(8))
        )
        .map(|plan| plan.grid()),
        Err(Error::MisalignedStride {
            tensor: "q",
            stride: "seq",
            value: 8 * 64 + 4
        })
    );
    // Tokens 64 elements apart, each 8 heads of 64 wide: distinct rows overlap.
    let overlapping = TensorStrides {
        seq: 64,
        ..packed(8)
    };
    assert_eq!(
        plan_of(
            CU_SEQLENS_Q,
            CU_SEQLENS_KV,
            &with_strides(packed(8), overlapping)
        )
        .map(|plan| plan.grid()),
        Err(Error::OverlappingOutput {
            strides: overlapping
        })
    );
}

#[test]
fn output_rows_overlap_is_checked_over_every_token_not_the_longest_sequence() {
    // Heads 65 tokens apart: disjoint over the longest sequence (65 queries), not over the 73
    // tokens of the batch.
    let heads_first = TensorStrides {
        batch: 0,
        head: 65 * 64,
        seq: 64,
    };
    let options = ForwardOptions {
        strides: Some(ForwardStrides {
            q: heads_first,
            k: packed(2),
            v: packed(2),
            o: heads_first,
        }),
        ..ForwardOptions::default()
    };
    assert_eq!(
        plan_of(CU_SEQLENS_Q, CU_SEQLENS_KV, &options).map(|plan| plan.grid()),
        Err(Error::OverlappingOutput {
            strides: heads_first
        })
    );
}

#[test]
fn the_padding_rows_past_the_last_token_count_toward_the_offset_limit() {
    // One query token; the tile's other 63 rows at this stride pass 2^63 bytes.
    let far = TensorStrides {
        batch: 0,
        head: 64,
        seq: 1 << 57,
    };
    let options = ForwardOptions {
        strides: Some(ForwardStrides {
            q: far,
            k: packed(1),
            v: packed(1),
            o: packed(8),
        }),
        ..ForwardOptions::default()
    };
    let varlen = VarlenShape {
        heads_kv: 1,
        ..shape(&[0, 1], &[0, 5])
    };
    assert_eq!(
        plan_varlen(
            Dtype::F16,
            &varlen.extents().unwrap(),
            &options,
            H100_SM_COUNT
        )
        .map(|plan| plan.grid()),
        Err(Error::TensorTooLarge {
            tensor: "q",
            dimension: "seq"
        })
    );
}

#[test]
fn flops_count_each_sequence_s_own_work() {
    let varlen = shape(CU_SEQLENS_Q, CU_SEQLENS_KV);
    let pairs = (7 * 63 + 1 + 65 * 5) as f64;
    assert_eq!(varlen.flops(false), 4.0 * 8.0 * pairs * 64.0);
    assert_eq!(varlen.flops(true), 2.0 * 8.0 * pairs * 64.0);
}

/// Packed `[tokens, heads, head_dim]` inputs: Q of `tokens_q` tokens and 2 heads, K and V of
/// `tokens_kv` tokens and one head, head dim 16.
fn inputs(tokens_q: usize, tokens_kv: usize, seed: u64) -> [Vec<f16>; 3] {
    [
        random_normal(tokens_q * 2 * 16, 0.5, 1.0, seed),
        random_normal(tokens_kv * 16, 0.5, 1.0, seed ^ 1),
        random_normal(tokens_kv * 16, 0.5, 1.0, seed ^ 2),
    ]
}

fn small_shape<'a>(cu_seqlens_q: &'a [u32], cu_seqlens_kv: &'a [u32]) -> VarlenShape<'a> {
    VarlenShape {
        heads_q: 2,
        heads_kv: 1,
        head_dim: 16,
        ..shape(cu_seqlens_q, cu_seqlens_kv)
    }
}

#[test]
fn the_varlen_reference_of_equal_lengths_is_the_dense_reference() {
    let (batch, seq_len_q, seq_len_kv) = (3, 5, 9);
    let [q, k, v] = inputs(batch * seq_len_q, batch * seq_len_kv, 7);
    let cu_seqlens_q: Vec<u32> = (0..=batch as u32).map(|b| b * seq_len_q as u32).collect();
    let cu_seqlens_kv: Vec<u32> = (0..=batch as u32).map(|b| b * seq_len_kv as u32).collect();
    let dense_shape = AttentionShape {
        batch,
        heads_q: 2,
        heads_kv: 1,
        seq_len_q,
        seq_len_kv,
        head_dim: 16,
    };
    for causal in [false, true] {
        let varlen = attention_varlen(
            &q,
            &k,
            &v,
            &small_shape(&cu_seqlens_q, &cu_seqlens_kv),
            &Scoring::plain(0.25, causal),
            Precision::F64,
        );
        // Packed `[batch * seq_len, heads, head_dim]` is dense `[batch, seq_len, heads, head_dim]`.
        let to_bhsd = |data: &[f16], heads, seq_len| {
            relayout(
                data,
                (batch, heads, seq_len, 16),
                Layout::Bshd,
                Layout::Bhsd,
            )
        };
        let dense = attention(
            &to_bhsd(&q, 2, seq_len_q),
            &to_bhsd(&k, 1, seq_len_kv),
            &to_bhsd(&v, 1, seq_len_kv),
            dense_shape,
            0.25,
            causal,
            Precision::F64,
        );
        let dims = (batch, 2, seq_len_q, 16);
        assert_eq!(
            varlen.output,
            relayout(&dense.output, dims, Layout::Bhsd, Layout::Bshd)
        );
        // The dense logsumexp is `[batch, heads, seq_len]`, the varlen one `[heads, tokens]`.
        for b in 0..batch {
            for head in 0..2 {
                for query in 0..seq_len_q {
                    assert_eq!(
                        varlen.logsumexp[head * batch * seq_len_q + b * seq_len_q + query],
                        dense.logsumexp[(b * 2 + head) * seq_len_q + query]
                    );
                }
            }
        }
    }
}

#[test]
fn each_sequence_sees_only_its_own_keys_under_its_own_causal_alignment() {
    // Sequence 0: 3 queries, 1 key; sequence 1: 1 query, 2 keys.
    let (cu_seqlens_q, cu_seqlens_kv) = ([0, 3, 4], [0, 1, 3]);
    let varlen = small_shape(&cu_seqlens_q, &cu_seqlens_kv);
    let [q, k, v] = inputs(4, 3, 11);
    let result = attention_varlen(
        &q,
        &k,
        &v,
        &varlen,
        &Scoring::plain(0.25, true),
        Precision::F64,
    );
    let lse = |head: usize, token: usize| result.logsumexp[head * 4 + token];
    let output = |token: usize, head: usize| &result.output[(token * 2 + head) * 16..][..16];
    for head in 0..2 {
        // Aligned to the bottom right of sequence 0: only its last query sees its one key.
        for token in 0..2 {
            assert_eq!(lse(head, token), f64::NEG_INFINITY);
            assert!(output(token, head).iter().all(|&x| x == 0.0));
        }
        let value: Vec<f64> = v[..16].iter().map(|x| x.to_f64()).collect();
        for (got, want) in output(2, head).iter().zip(&value) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        // The query of sequence 1 sees both of its keys, and sequence 0's key not at all.
        assert!(lse(head, 3).is_finite());
    }
    let mut other_key = k.clone();
    let mut other_value = v.clone();
    other_key[..16].fill(f16::from_f64(9.0));
    other_value[..16].fill(f16::from_f64(-9.0));
    let changed = attention_varlen(
        &q,
        &other_key,
        &other_value,
        &varlen,
        &Scoring::plain(0.25, true),
        Precision::F64,
    );
    assert_eq!(changed.output[3 * 32..], result.output[3 * 32..]);
    assert_ne!(
        changed.output[2 * 32..3 * 32],
        result.output[2 * 32..3 * 32]
    );
}

#[test]
fn the_reference_skips_sequences_without_queries_and_zeroes_those_without_keys() {
    // Sequence 0: 2 queries, 3 keys; sequence 1: no query, 2 keys; sequence 2: 2 queries, no
    // key.
    let (cu_seqlens_q, cu_seqlens_kv) = ([0, 2, 2, 4], [0, 3, 5, 5]);
    let varlen = small_shape(&cu_seqlens_q, &cu_seqlens_kv);
    let [q, k, v] = inputs(4, 5, 3);
    for causal in [false, true] {
        let result = attention_varlen(
            &q,
            &k,
            &v,
            &varlen,
            &Scoring::plain(0.25, causal),
            Precision::F64,
        );
        // Sequence 0 alone gives its rows.
        let alone = attention_varlen(
            &q[..2 * 2 * 16],
            &k[..3 * 16],
            &v[..3 * 16],
            &small_shape(&[0, 2], &[0, 3]),
            &Scoring::plain(0.25, causal),
            Precision::F64,
        );
        assert_eq!(result.output[..2 * 32], alone.output[..]);
        for head in 0..2 {
            assert_eq!(
                result.logsumexp[head * 4..head * 4 + 2],
                alone.logsumexp[head * 2..head * 2 + 2]
            );
            assert_eq!(
                result.logsumexp[head * 4 + 2..head * 4 + 4],
                [f64::NEG_INFINITY; 2]
            );
        }
        assert!(result.output[2 * 32..].iter().all(|&x| x == 0.0));
    }
}

// A model of the kernel's addresses for accepted launches, as `safety.rs` has for dense ones.

/// Sequence lengths: empty, short, around the tile sizes, and long.
fn sequence_length() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => 0u32..=3,
        4 => 1u32..=200,
        2 => prop::sample::select(vec![63u32, 64, 65, 127, 128, 129, 4097]),
        1 => prop::sample::select(vec![
            1u32 << 20, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, u32::MAX / 3, u32::MAX,
        ]),
    ]
}

/// Element strides: dense-ish multiples of 8, powers of two, and anything.
fn stride() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..=2048).prop_map(|chunks| chunks * 8),
        3 => (3u32..=63).prop_map(|power| 1u64 << power),
        1 => any::<u64>(),
    ]
}

fn tensor_strides() -> impl Strategy<Value = TensorStrides> {
    (stride(), stride(), stride()).prop_map(|(batch, head, seq)| TensorStrides { batch, head, seq })
}

/// How a buffer's length relates to what the plan requires.
fn length_change() -> impl Strategy<Value = i64> {
    prop_oneof![12 => Just(0i64), 1 => Just(-1i64), 2 => 1i64..=1024]
}

#[derive(Clone, Debug)]
struct Case {
    dtype: Dtype,
    lengths: Vec<(u32, u32)>,
    heads_kv: usize,
    group: usize,
    head_dim: usize,
    options: ForwardOptions,
    changes: [i64; 5],
    /// Planned for a device of compute capability 9.0 (the sm90 family's serving kernels at
    /// head dims 64 and 128), else 8.9.
    hopper: bool,
}

fn case() -> impl Strategy<Value = Case> {
    let strides = prop::option::weighted(
        0.4,
        (
            tensor_strides(),
            tensor_strides(),
            tensor_strides(),
            tensor_strides(),
        )
            .prop_map(|(q, k, v, o)| ForwardStrides { q, k, v, o }),
    );
    let options = (any::<bool>(), any::<bool>(), strides).prop_map(|(causal, bshd, strides)| {
        ForwardOptions {
            causal,
            layout: if bshd { Layout::Bshd } else { Layout::Bhsd },
            strides,
            ..ForwardOptions::default()
        }
    });
    (
        any::<bool>(),
        prop::collection::vec((sequence_length(), sequence_length()), 1..=5),
        1usize..=4,
        prop_oneof![1usize..=4, Just(1 << 14)],
        prop_oneof![
            8 => Just(64usize),
            8 => Just(128),
            1 => Just(96),
            1 => Just(80),
            1 => Just(200),
            1 => Just(256)
        ],
        options,
        [
            length_change(),
            length_change(),
            length_change(),
            length_change(),
            length_change(),
        ],
        any::<bool>(),
    )
        .prop_map(
            |(bf16, lengths, heads_kv, group, head_dim, options, changes, hopper)| Case {
                dtype: if bf16 { Dtype::Bf16 } else { Dtype::F16 },
                lengths,
                heads_kv,
                group,
                head_dim,
                options,
                changes,
                hopper,
            },
        )
}

/// The offsets of these lengths, or `None` where a total passes u32.
fn offsets(lengths: impl Iterator<Item = u32>) -> Option<Vec<u32>> {
    let mut offsets = vec![0u32];
    for length in lengths {
        offsets.push(offsets.last()?.checked_add(length)?);
    }
    Some(offsets)
}

/// An element offset as the kernel forms it (`token_offset` plus a column): no 64-bit product
/// wraps and the byte offset stays below 2^63.
fn kernel_offset(strides: &TensorStrides, head: u64, token: u64, column: u64) -> u128 {
    // The batch stride is 0: the token places the sequence.
    assert_eq!(strides.batch, 0);
    let products = [
        head as u128 * strides.head as u128,
        token as u128 * strides.seq as u128,
    ];
    for product in products {
        assert!(product <= u64::MAX as u128, "a 64-bit product wraps");
    }
    let offset = products.iter().sum::<u128>() + column as u128;
    assert!(offset * 2 <= MAX_TENSOR_BYTES as u128, "offset passes 2^63");
    offset
}

/// Checks an accepted launch against the model of the serving kernel (`fwd/sm80.rs`, or
/// `fwd/sm90.rs` on compute capability 9.0, with `block_info.rs`: both copy with `cp.async`,
/// each row of a tile past its sequence's end zero-filled): each sequence's corner blocks read and write inside the buffers, the one
/// split covers every key a block needs, and the per-sequence row arithmetic stays in its types.
fn check_accepted(
    case: &Case,
    cu_seqlens_q: &[u32],
    cu_seqlens_kv: &[u32],
    plan: &LaunchPlan,
    buffers: &BufferLengths,
) {
    let params = plan.params();
    let sequences = plan.sequences().expect("a serving plan");
    let tile = plan.kernel().spec.tile;
    let (block_m, block_n) = (tile.block_m as u64, tile.block_n as u64);
    let heads_q = (case.heads_kv * case.group) as u64;
    let head_dim = case.head_dim as u64;
    let tokens_q = *cu_seqlens_q.last().unwrap() as u64;
    let longest_q = case.lengths.iter().map(|l| l.0).max().unwrap() as u64;
    assert_eq!(plan.kernel().spec.variant, Variant::Serving);
    assert_eq!(plan.splits(), 1);
    assert_eq!(
        plan.grid(),
        (
            longest_q.div_ceil(block_m) as u32,
            heads_q as u32,
            case.lengths.len() as u32
        )
    );
    for (b, &(length_q, length_kv)) in case.lengths.iter().enumerate() {
        let (seq_q, seq_kv) = (length_q as u64, length_kv as u64);
        assert!(seq_q as usize <= MAX_SEQ_LEN && seq_kv as usize <= MAX_SEQ_LEN);
        if seq_q == 0 {
            continue; // Every block of the sequence returns at once.
        }
        let (first_q, first_kv) = (cu_seqlens_q[b] as u64, cu_seqlens_kv[b] as u64);
        for block_x in [0, seq_q.div_ceil(block_m) - 1] {
            let first_query = block_x * block_m;
            let last_query = (first_query + block_m).min(seq_q) - 1;
            let key_end = if case.options.causal {
                (last_query + 1 + seq_kv).saturating_sub(seq_q).min(seq_kv)
            } else {
                seq_kv
            };
            let key_blocks = key_end.div_ceil(block_n);
            assert!(
                key_blocks * block_n <= sequences.keys_per_split as u64,
                "the split leaves out keys"
            );
            for head in [0, heads_q - 1] {
                let kv_head = head / params.kv_group_size as u64;
                let q_end = kernel_offset(&params.q_strides, head, first_q + last_query, head_dim);
                assert!(q_end <= buffers.q as u128, "q read past its buffer");
                let o_end = kernel_offset(&params.o_strides, head, first_q + last_query, head_dim);
                assert!(o_end <= buffers.o as u128, "o written past its buffer");
                // The tile's padding rows: formed, never dereferenced.
                kernel_offset(
                    &params.o_strides,
                    head,
                    first_q + first_query + block_m - 1,
                    head_dim,
                );
                kernel_offset(
                    &params.q_strides,
                    head,
                    first_q + first_query + block_m - 1,
                    head_dim,
                );
                if key_blocks > 0 {
                    let last_key = (key_blocks * block_n).min(seq_kv) - 1;
                    for (tensor, strides, length) in [
                        ("k", &params.k_strides, buffers.k),
                        ("v", &params.v_strides, buffers.v),
                    ] {
                        let end = kernel_offset(strides, kv_head, first_kv + last_key, head_dim);
                        assert!(end <= length as u128, "{tensor} read past its buffer");
                        kernel_offset(
                            strides,
                            kv_head,
                            first_kv + key_blocks * block_n - 1,
                            head_dim,
                        );
                    }
                }
                if let Some(lse) = buffers.lse {
                    let lse_strides = &sequences.lse_strides;
                    let end = head as u128 * lse_strides.head as u128
                        + (first_q + last_query) as u128 * lse_strides.seq as u128
                        + 1;
                    assert!(end <= lse as u128, "lse written past its buffer");
                    assert_eq!(lse_strides.head, tokens_q);
                }
            }
        }
    }
    // Distinct (head, token) output rows share no element: sorted starts, when few enough.
    let o = &params.o_strides;
    if heads_q * tokens_q <= 4096 {
        let mut starts: Vec<u128> = (0..heads_q)
            .flat_map(|h| {
                (0..tokens_q).map(move |t| h as u128 * o.head as u128 + t as u128 * o.seq as u128)
            })
            .collect();
        starts.sort_unstable();
        for pair in starts.windows(2) {
            assert!(pair[1] >= pair[0] + head_dim as u128, "output rows alias");
        }
    }
}

/// What validation made of a case.
enum Outcome {
    /// A total passes u32: no offsets to build.
    Unbuilt,
    /// A specific error from the plan or the buffer check.
    Rejected,
    /// An accepted launch, checked against the model; whether its Q passes 2^32 elements, and
    /// whether it runs an sm90 kernel.
    Accepted { large: bool, sm90: bool },
}

/// Runs what `forward_varlen` runs before launching and checks an accepted launch.
fn validate(case: &Case) -> Outcome {
    let (Some(cu_seqlens_q), Some(cu_seqlens_kv)) = (
        offsets(case.lengths.iter().map(|l| l.0)),
        offsets(case.lengths.iter().map(|l| l.1)),
    ) else {
        return Outcome::Unbuilt;
    };
    let varlen = VarlenShape {
        cu_seqlens_q: &cu_seqlens_q,
        cu_seqlens_kv: &cu_seqlens_kv,
        heads_q: case.heads_kv * case.group,
        heads_kv: case.heads_kv,
        head_dim: case.head_dim,
    };
    let extents = varlen
        .extents()
        .expect("offsets built from lengths are valid");
    let compute_capability = if case.hopper { (9, 0) } else { (8, 9) };
    let planned = plan_varlen_on(
        case.dtype,
        &extents,
        &case.options,
        H100_SM_COUNT,
        compute_capability,
    );
    let plan = match planned {
        Ok(plan) => plan,
        Err(error) => {
            assert!(
                matches!(
                    error,
                    Error::ZeroSizedDimension { .. }
                        | Error::UnsupportedHeadDim { .. }
                        | Error::ProblemTooLarge { .. }
                        | Error::TensorTooLarge { .. }
                        | Error::MisalignedStride { .. }
                        | Error::OverlappingOutput { .. }
                ),
                "{error:?}"
            );
            return Outcome::Rejected;
        }
    };
    let required = plan.required();
    let change = |length: usize, change: i64| length.saturating_add_signed(change as isize);
    let buffers = BufferLengths {
        q: change(required.q, case.changes[0]),
        k: change(required.k, case.changes[1]),
        v: change(required.v, case.changes[2]),
        o: change(required.o, case.changes[3]),
        lse: required.lse.map(|lse| change(lse, case.changes[4])),
    };
    match plan.check_buffers(&buffers) {
        Ok(()) => {
            check_accepted(case, &cu_seqlens_q, &cu_seqlens_kv, &plan, &buffers);
            Outcome::Accepted {
                large: required.q as u64 > u32::MAX as u64,
                sm90: plan.kernel().spec.family == Family::Sm90,
            }
        }
        Err(error) => {
            assert!(matches!(error, Error::BufferTooSmall { .. }), "{error:?}");
            Outcome::Rejected
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: 3000, ..Config::default() })]

    #[test]
    fn accepted_varlen_launches_stay_inside_their_buffers(case in case()) {
        validate(&case);
    }
}

/// The property above is only as strong as its cases: the generator must reach accepted
/// launches (some past 2^32 elements, some of the sm90 family's kernels) and rejected ones.
#[test]
fn the_varlen_generator_reaches_accepted_rejected_and_large_cases() {
    let mut runner = TestRunner::deterministic();
    let (mut accepted, mut rejected, mut large, mut sm90) = (0, 0, 0, 0);
    for _ in 0..3000 {
        match validate(&case().new_tree(&mut runner).unwrap().current()) {
            Outcome::Accepted {
                large: is_large,
                sm90: on_sm90,
            } => {
                accepted += 1;
                large += is_large as usize;
                sm90 += on_sm90 as usize;
            }
            Outcome::Rejected => rejected += 1,
            Outcome::Unbuilt => {}
        }
    }
    let counts = format!(
        "{accepted} accepted ({large} past 2^32 elements, {sm90} on sm90 kernels), \
         {rejected} rejected"
    );
    eprintln!("{counts}");
    assert!(
        accepted >= 500 && rejected >= 200 && large >= 20 && sm90 >= 100,
        "{counts}"
    );
}

/// On compute capability 9.0 a batch of a head dim above 32 without a score modifier runs
/// the sm90 family's serving kernel; smaller head dims, a score modifier, ALiBi and other
/// devices run the sm80 family's, as [`plan_varlen`] does.
#[test]
fn hopper_runs_the_sm90_serving_kernels_where_they_exist() {
    let (cu_q, cu_kv) = ([0, 129, 130, 1130], [0, 1, 700, 1700]);
    let plan = |head_dim, options: &ForwardOptions, capability| {
        let extents = VarlenShape {
            head_dim,
            ..shape(&cu_q, &cu_kv)
        }
        .extents()
        .unwrap();
        plan_varlen_on(Dtype::Bf16, &extents, options, H100_SM_COUNT, capability).unwrap()
    };
    for head_dim in [64, 128] {
        for causal in [false, true] {
            let options = ForwardOptions { causal, ..bshd() };
            let hopper = plan(head_dim, &options, (9, 0));
            let kernel = hopper.kernel();
            assert_eq!(kernel.spec.family, Family::Sm90);
            assert_eq!(kernel.spec.variant, Variant::Serving);
            assert_eq!(kernel.spec.tile.head_dim, head_dim);
            assert_eq!(hopper.grid(), (1000u32.div_ceil(128), 8, 3));
            assert!(
                !kernel.spec.copies_by_tma(),
                "cp.async zero-fills past each sequence"
            );
            for capability in [(8, 0), (8, 9), (10, 0)] {
                let other = plan(head_dim, &options, capability);
                assert_eq!(other.kernel().spec.family, Family::Sm80);
            }
        }
    }
    // The other kernel head dims from 64 have sm90 serving kernels: from D=160 the dense
    // table's warp-specialised tiles for their own head dim, the 8-warp tiles (which pad) for
    // the head dims that pad to it; D=96's 8-warp tile for both.
    for (head_dim, kernel_head_dim, tile) in [
        (96, 96, (64, 8)),
        (80, 96, (64, 8)),
        (160, 160, (128, 12)),
        (152, 160, (64, 8)),
        (192, 192, (64, 12)),
        (200, 224, (64, 8)),
        (224, 224, (64, 12)),
        (248, 256, (64, 8)),
        (256, 256, (64, 12)),
    ] {
        let spec = plan(head_dim, &bshd(), (9, 0)).kernel().spec;
        assert_eq!(
            (spec.family, spec.variant),
            (Family::Sm90, Variant::Serving)
        );
        assert_eq!(spec.tile.head_dim, kernel_head_dim, "head dim {head_dim}");
        assert_eq!(spec.pads_head_dim(), tile.1 == 8, "head dim {head_dim}");
        assert_eq!(
            (spec.tile.block_n, spec.tile.warps),
            tile,
            "head dim {head_dim}"
        );
        assert_eq!(
            plan(head_dim, &bshd(), (8, 0)).kernel().spec.family,
            Family::Sm80
        );
    }
    // No sm90 serving kernel: head dim 32, a window.
    assert_eq!(plan(32, &bshd(), (9, 0)).kernel().spec.family, Family::Sm80);
    let window = ForwardOptions {
        window: Some(flash_attn::SlidingWindow {
            left: Some(64),
            right: Some(0),
        }),
        ..bshd()
    };
    let modified = plan(128, &window, (9, 0));
    assert_eq!(modified.kernel().spec.family, Family::Sm80);
    assert_eq!(modified.kernel().spec.variant, Variant::ServingModified);
}

/// On Hopper a variable-length batch runs the serving kernel of the tile the sm_90a table gives
/// the dense problem of its mean lengths, where there is one: at D=64 the three-consumer
/// `m192_n128` for long sequences on a large grid, the `m128_n128` on a small grid; where the
/// table's tile has no serving kernel (the 8-warp `m128_n64` of short sequences on a large
/// grid), the head dim's first.
#[test]
fn hopper_serving_kernels_follow_the_dense_tile_of_the_mean_lengths() {
    // Offsets of `count` sequences of `length` tokens each (queries and keys alike).
    let offsets = |count: u32, length: u32| (0..=count).map(|i| i * length).collect::<Vec<_>>();
    let plan = |cu: &[u32], heads_q, dtype| {
        let extents = VarlenShape {
            heads_q,
            heads_kv: heads_q / 4,
            ..shape(cu, cu)
        }
        .extents()
        .unwrap();
        plan_varlen_on(dtype, &extents, &bshd(), H100_SM_COUNT, (9, 0)).unwrap()
    };
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for (count, length, heads_q, block_m) in
            [(16, 2000, 32, 192), (2, 3000, 4, 128), (64, 300, 32, 128)]
        {
            let batch = plan(&offsets(count, length), heads_q, dtype);
            let tile = batch.kernel().spec.tile;
            assert_eq!(batch.kernel().spec.family, Family::Sm90);
            assert_eq!(batch.kernel().spec.variant, Variant::Serving);
            assert_eq!((tile.block_m, tile.block_n), (block_m, 128));
            let rows = length.div_ceil(block_m as u32);
            assert_eq!(batch.grid(), (rows, heads_q as u32, count));
        }
    }
}

/// The sm90 family's serving kernels have no split-KV and no packed heads: named for a
/// KV-cache call that needs either, they are a specific error; unsplit, they run it.
#[test]
fn an_sm90_serving_kernel_named_for_a_split_or_packed_kv_cache_call_is_rejected() {
    for head_dim in [64, 128] {
        let name = format!("flash_fwd_f16_d{head_dim}_m128_n128_w12_s2_serving_sm90a");
        let kernel = kernel_by_name(&name).expect("an exposed sm90 serving kernel");
        let options = ForwardOptions {
            kernel: Some(kernel),
            ..ForwardOptions::default()
        };
        let rejected = Some(Error::KernelNotForKvCache {
            kernel: kernel.entry,
        });
        // 16 blocks split the key range.
        let decode = AttentionShape {
            seq_len_q: 1,
            ..AttentionShape::new(2, 8, 4096, head_dim)
        };
        let plan = |shape: &AttentionShape, options: &ForwardOptions| {
            plan_kv_cache(Dtype::F16, shape, options, H100_SM_COUNT)
        };
        assert_eq!(plan(&decode, &options).err(), rejected);
        let split = ForwardOptions {
            num_splits: Some(2),
            ..options
        };
        let prefill = AttentionShape {
            seq_len_q: 1024,
            ..decode
        };
        assert_eq!(plan(&prefill, &split).err(), rejected);
        // Grouped heads packed into the rows of a decode tile, unsplit.
        let unsplit = ForwardOptions {
            num_splits: Some(1),
            ..options
        };
        let grouped = AttentionShape {
            heads_kv: 2,
            ..decode
        };
        assert_eq!(plan(&grouped, &unsplit).err(), rejected);
        for shape in [decode, prefill] {
            let accepted = plan(&shape, &unsplit).unwrap();
            assert_eq!((accepted.kernel(), accepted.splits()), (kernel, 1));
        }
        // Its variable-length batch runs on it.
        let (cu_q, cu_kv) = ([0, 5, 300], [0, 7, 9]);
        let extents = VarlenShape {
            head_dim,
            ..shape(&cu_q, &cu_kv)
        }
        .extents()
        .unwrap();
        let plan = plan_varlen(Dtype::F16, &extents, &options, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel(), kernel);
    }
}
