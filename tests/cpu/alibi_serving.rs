//! ALiBi on the serving calls without a GPU: the planners' kernels (the modified serving and
//! paged ones), their slopes (per sequence for a variable-length batch), a decode step packed
//! and split as without ALiBi, and the errors, which are the dense calls'.

use flash_attn::{
    plan_kv_cache, plan_kv_cache_alibi, plan_paged_kv_cache, plan_paged_kv_cache_alibi,
    plan_varlen_alibi, plan_varlen_kv_cache_alibi, AlibiLayout, AttentionShape, Dtype, Error,
    ForwardOptions, LaunchPlan, PagedKvCache, SlidingWindow, Variant, VarlenCacheExtents,
    VarlenExtents,
};

use crate::H100_SM_COUNT;

/// A decode step: 3 sequences, 8 query heads over 2 K/V heads, caches of 1,024 keys.
const DECODE: AttentionShape = AttentionShape {
    batch: 3,
    heads_q: 8,
    heads_kv: 2,
    seq_len_q: 1,
    seq_len_kv: 1024,
    head_dim: 128,
};

const PAGED: PagedKvCache = PagedKvCache {
    num_pages: 100,
    page_size: 64,
    pages_per_sequence: 16,
};

/// 5 sequences of at most 70 queries and 300 keys, 8 query heads over 2 K/V heads.
const VARLEN: VarlenExtents = VarlenExtents {
    batch: 5,
    tokens_q: 200,
    tokens_kv: 900,
    max_seq_len_q: 70,
    max_seq_len_kv: 300,
    heads_q: 8,
    heads_kv: 2,
    head_dim: 64,
};

/// 4 sequences of at most 9 new queries against caches of 1,024 keys.
const VARLEN_CACHE: VarlenCacheExtents = VarlenCacheExtents {
    longest: AttentionShape {
        batch: 4,
        seq_len_q: 9,
        ..DECODE
    },
    tokens_q: 20,
};

const LAYOUTS: [AlibiLayout; 2] = [AlibiLayout::PerHead, AlibiLayout::PerBatchAndHead];

/// One serving planner's plan with ALiBi: the call, its plan, the variant it must run, its
/// number of sequences and its query heads.
struct ServingAlibiPlan {
    call: &'static str,
    plan: Result<LaunchPlan, Error>,
    variant: Variant,
    sequences: usize,
    heads_q: usize,
}

/// The plan of each serving planner with ALiBi in `layout`.
fn serving_alibi_plans(
    dtype: Dtype,
    options: &ForwardOptions,
    layout: AlibiLayout,
) -> Vec<ServingAlibiPlan> {
    let sm = H100_SM_COUNT;
    let cache = &VARLEN_CACHE;
    let of_cache = |call, plan, variant| ServingAlibiPlan {
        call,
        plan,
        variant,
        sequences: cache.longest.batch,
        heads_q: cache.longest.heads_q,
    };
    let of_decode = |call, plan, variant| ServingAlibiPlan {
        call,
        plan,
        variant,
        sequences: DECODE.batch,
        heads_q: DECODE.heads_q,
    };
    vec![
        of_decode(
            "kv cache",
            plan_kv_cache_alibi(dtype, &DECODE, options, layout, sm),
            Variant::ServingModified,
        ),
        of_decode(
            "paged kv cache",
            plan_paged_kv_cache_alibi(dtype, &DECODE, &PAGED, options, layout, sm),
            Variant::PagedModified,
        ),
        ServingAlibiPlan {
            call: "varlen",
            plan: plan_varlen_alibi(dtype, &VARLEN, options, layout, sm),
            variant: Variant::ServingModified,
            sequences: VARLEN.batch,
            heads_q: VARLEN.heads_q,
        },
        of_cache(
            "varlen kv cache",
            plan_varlen_kv_cache_alibi(dtype, cache, None, options, layout, sm),
            Variant::ServingModified,
        ),
        of_cache(
            "varlen paged kv cache",
            plan_varlen_kv_cache_alibi(dtype, cache, Some(&PAGED), options, layout, sm),
            Variant::PagedModified,
        ),
    ]
}

/// Every serving planner with ALiBi runs the modified serving or paged kernel, reads a slope
/// per query head or per (sequence, query head) — a variable-length batch's sequences, not its
/// one longest sequence — and every slope index its grid forms lies among them.
#[test]
fn the_serving_planners_run_alibi_on_the_modified_serving_kernels() {
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for layout in LAYOUTS {
            let plans = serving_alibi_plans(dtype, &ForwardOptions::default(), layout);
            for ServingAlibiPlan {
                call,
                plan,
                variant,
                sequences,
                heads_q,
            } in plans
            {
                let plan = plan.unwrap_or_else(|error| panic!("{call}: {error}"));
                assert_eq!(plan.kernel().spec.variant, variant, "{call}");
                assert_eq!(plan.kernel().spec.dtype, dtype, "{call}");
                let expected = match layout {
                    AlibiLayout::PerHead => heads_q,
                    AlibiLayout::PerBatchAndHead => sequences * heads_q,
                };
                assert_eq!(plan.alibi_slopes_len(), expected, "{call} {layout:?}");
                let modifiers = plan.modifiers().unwrap();
                // The address comes at launch.
                assert_eq!(modifiers.alibi_slopes, 0, "{call}");
                assert!(modifiers.alibi_slope_scale > 0.0, "{call}");
                // The kernel reads `alibi_slopes[batch * stride + head]` for the grid's
                // (batch, head), a packed decode block's row `r` of K/V head `k` being head
                // `k * seq_len_q + r`: the last of them is the last slope.
                let (_, grid_heads, grid_batch) = plan.grid();
                let rows_per_head = if modifiers.rows_share_one_query != 0 {
                    plan.params().seq_len_q
                } else {
                    1
                };
                let grid_heads = grid_heads * rows_per_head;
                assert_eq!(grid_batch as usize, sequences, "{call}");
                assert_eq!(grid_heads as usize, heads_q, "{call}");
                let stride = modifiers.alibi_batch_stride as usize;
                let largest = (grid_batch as usize - 1) * stride + grid_heads as usize - 1;
                assert_eq!(largest + 1, expected, "{call} {layout:?}");
            }
        }
    }
}

/// A decode step with grouped heads packs the query heads of a K/V head into one tile's rows
/// with ALiBi as without it (the kernel reads each packed row's own head's slope): the same
/// kernel, grid, rows and buffers as the softcapped problem's, the slopes' batch stride that of
/// the query heads.
#[test]
fn alibi_packs_a_decode_step_as_without_it() {
    let softcap = ForwardOptions {
        softcap: Some(30.0),
        ..ForwardOptions::default()
    };
    let group = (DECODE.heads_q / DECODE.heads_kv) as u32;
    for layout in LAYOUTS {
        for (plain, alibi) in [
            (
                plan_kv_cache(Dtype::F16, &DECODE, &softcap, H100_SM_COUNT),
                plan_kv_cache_alibi(Dtype::F16, &DECODE, &softcap, layout, H100_SM_COUNT),
            ),
            (
                plan_paged_kv_cache(Dtype::F16, &DECODE, &PAGED, &softcap, H100_SM_COUNT),
                plan_paged_kv_cache_alibi(
                    Dtype::F16,
                    &DECODE,
                    &PAGED,
                    &softcap,
                    layout,
                    H100_SM_COUNT,
                ),
            ),
        ] {
            let (plain, alibi) = (plain.unwrap(), alibi.unwrap());
            assert_eq!(plain.kernel(), alibi.kernel());
            for plan in [&plain, &alibi] {
                let params = plan.params();
                assert_eq!(
                    (params.seq_len_q, params.heads_q, plan.grid().1),
                    (group, DECODE.heads_kv as u32, DECODE.heads_kv as u32)
                );
                assert_eq!(plan.modifiers().unwrap().rows_share_one_query, 1);
            }
            let batch_stride = match layout {
                AlibiLayout::PerHead => 0,
                AlibiLayout::PerBatchAndHead => DECODE.heads_q as u32,
            };
            assert_eq!(alibi.modifiers().unwrap().alibi_batch_stride, batch_stride);
            assert_eq!(plain.splits(), alibi.splits());
            assert_eq!(plain.required(), alibi.required());
        }
    }
}

/// Where no packing is at stake (a chunk of several queries), ALiBi changes nothing of a
/// modified serving plan but its slopes: the kernel, grid, split-KV, workspace and buffers of
/// the softcapped problem, and its modifiers but the slopes' scale and batch stride.
#[test]
fn alibi_changes_nothing_of_a_serving_plan_but_the_slopes() {
    let chunk = AttentionShape {
        seq_len_q: 7,
        ..DECODE
    };
    let options = ForwardOptions {
        softcap: Some(20.0),
        window: Some(SlidingWindow {
            left: Some(100),
            right: Some(0),
        }),
        causal: true,
        ..ForwardOptions::default()
    };
    for num_splits in [None, Some(1), Some(3)] {
        let options = ForwardOptions {
            num_splits,
            ..options
        };
        let plain = plan_kv_cache(Dtype::Bf16, &chunk, &options, H100_SM_COUNT).unwrap();
        let alibi = plan_kv_cache_alibi(
            Dtype::Bf16,
            &chunk,
            &options,
            AlibiLayout::PerBatchAndHead,
            H100_SM_COUNT,
        )
        .unwrap();
        assert_eq!(alibi.kernel(), plain.kernel());
        assert_eq!(alibi.grid(), plain.grid());
        assert_eq!(alibi.splits(), plain.splits());
        assert_eq!(alibi.workspace_bytes(), plain.workspace_bytes());
        assert_eq!(alibi.counters(), plain.counters());
        assert_eq!(alibi.required(), plain.required());
        assert_eq!(alibi.params(), plain.params());
        assert_eq!(alibi.sequences(), plain.sequences());
        let (with, without) = (alibi.modifiers().unwrap(), plain.modifiers().unwrap());
        assert_eq!(with.alibi_slope_scale, 1.0 / 20.0);
        assert_eq!(with.alibi_batch_stride, chunk.heads_q as u32);
        assert_eq!(
            flash_attn::ModifierParams {
                alibi_slope_scale: 0.0,
                alibi_batch_stride: 0,
                ..*with
            },
            *without
        );
        if num_splits == Some(3) {
            assert_eq!(alibi.splits(), 3);
        }
    }
}

/// A decode step of one sequence over a long cache splits its key range with ALiBi as without:
/// the grid would leave the GPU idle.
#[test]
fn alibi_decode_on_a_long_cache_splits_the_keys() {
    let long = AttentionShape {
        batch: 1,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: 32768,
        head_dim: 128,
    };
    let paged = PagedKvCache {
        num_pages: 512,
        page_size: 64,
        pages_per_sequence: 512,
    };
    let options = ForwardOptions::default();
    for plan in [
        plan_kv_cache_alibi(
            Dtype::F16,
            &long,
            &options,
            AlibiLayout::PerHead,
            H100_SM_COUNT,
        ),
        plan_paged_kv_cache_alibi(
            Dtype::F16,
            &long,
            &paged,
            &options,
            AlibiLayout::PerHead,
            H100_SM_COUNT,
        ),
    ] {
        let plan = plan.unwrap();
        assert!(plan.splits() > 1, "{} splits", plan.splits());
        assert!(plan.workspace_bytes() > 0 && plan.counters() > 0);
        assert_eq!(plan.alibi_slopes_len(), 32);
    }
}

/// The slopes of a serving plan are checked as a dense plan's: too few for the layout (for a
/// variable-length batch, one per sequence and head), one that is not finite, or one whose bias
/// over the longest sequence overflows f32, each named; extra slopes are not read.
#[test]
fn serving_alibi_slopes_that_are_too_few_or_not_finite_are_rejected() {
    for layout in LAYOUTS {
        for ServingAlibiPlan { call, plan, .. } in
            serving_alibi_plans(Dtype::F16, &ForwardOptions::default(), layout)
        {
            let plan = plan.unwrap();
            let required = plan.alibi_slopes_len();
            let slopes = vec![0.125f32; required + 1];
            assert_eq!(plan.check_alibi_slopes(&slopes), Ok(()), "{call}");
            assert_eq!(
                plan.check_alibi_slopes(&slopes[..required - 1]),
                Err(Error::AlibiSlopesTooShort {
                    length: required - 1,
                    required
                }),
                "{call} {layout:?}"
            );
            assert_eq!(
                plan.check_alibi_slopes_len(required - 1),
                Err(Error::AlibiSlopesTooShort {
                    length: required - 1,
                    required
                }),
                "{call}"
            );
            for bad in [f32::NAN, f32::NEG_INFINITY, f32::MAX / 2.0] {
                let mut slopes = vec![0.125f32; required];
                slopes[required - 1] = bad;
                match plan.check_alibi_slopes(&slopes) {
                    Err(Error::InvalidAlibiSlope { index, slope }) => {
                        assert_eq!(index, required - 1, "{call}");
                        assert_eq!(slope.to_bits(), bad.to_bits(), "{call}");
                    }
                    other => panic!("{call}: slope {bad}: {other:?}"),
                }
            }
        }
    }
}

/// The serving ALiBi planners reject what the plain ones reject (an empty window, a softcap
/// that is not finite, a kernel of another variant), and a softmax scale so small that a slope
/// in the scores' units (`slope / scale`) is infinite, which only ALiBi reads.
#[test]
fn the_serving_alibi_planners_reject_what_the_calls_reject() {
    let empty = ForwardOptions {
        window: Some(SlidingWindow {
            left: Some(-2),
            right: Some(1),
        }),
        ..ForwardOptions::default()
    };
    let nan_softcap = ForwardOptions {
        softcap: Some(f32::NAN),
        ..ForwardOptions::default()
    };
    let tiny_scale = ForwardOptions {
        softmax_scale: Some(1e-39),
        ..ForwardOptions::default()
    };
    let plain_kernel = plan_kv_cache(
        Dtype::F16,
        &DECODE,
        &ForwardOptions::default(),
        H100_SM_COUNT,
    )
    .unwrap()
    .kernel();
    let named = ForwardOptions {
        kernel: Some(plain_kernel),
        ..ForwardOptions::default()
    };
    // Without ALiBi the tiny scale is a valid (if useless) problem.
    assert!(plan_kv_cache(Dtype::F16, &DECODE, &tiny_scale, H100_SM_COUNT).is_ok());
    for layout in LAYOUTS {
        for ServingAlibiPlan { call, plan, .. } in serving_alibi_plans(Dtype::F16, &empty, layout) {
            assert_eq!(
                plan.unwrap_err(),
                Error::EmptyWindow { left: -2, right: 1 },
                "{call}"
            );
        }
        for ServingAlibiPlan { call, plan, .. } in
            serving_alibi_plans(Dtype::F16, &nan_softcap, layout)
        {
            assert!(
                matches!(plan, Err(Error::InvalidSoftcap { softcap }) if softcap.is_nan()),
                "{call}"
            );
        }
        for ServingAlibiPlan { call, plan, .. } in
            serving_alibi_plans(Dtype::F16, &tiny_scale, layout)
        {
            assert_eq!(
                plan.unwrap_err(),
                Error::InvalidSoftmaxScale { scale: 1e-39 },
                "{call}"
            );
        }
        for ServingAlibiPlan {
            call,
            plan,
            variant,
            ..
        } in serving_alibi_plans(Dtype::F16, &named, layout)
        {
            assert_eq!(
                plan.unwrap_err(),
                Error::KernelVariantMismatch {
                    kernel: plain_kernel.entry,
                    needed: variant,
                },
                "{call}"
            );
        }
    }
}
