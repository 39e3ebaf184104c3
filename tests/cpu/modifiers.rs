//! The score modifiers without a GPU: which kernel a problem with a window, a softcap or ALiBi
//! runs and with which parameters, one test per error they add, the ALiBi slopes' checks, and
//! the CPU reference against a naive definition written here independently.

use flash_attn::reference::{
    attention, attention_kv_cache, attention_rows_with, attention_varlen, attention_with,
    random_normal, Precision, QueryRow, Scoring,
};
use flash_attn::{
    dispatch_kernel_on, kernel_by_name, modified_kernel, modified_kernel_on, plan, plan_alibi,
    plan_alibi_on, plan_kv_cache, plan_on, plan_paged_kv_cache, plan_varlen, supports, AlibiLayout,
    AlibiSlopes, AttentionShape, Dtype, Error, Family, ForwardOptions, Layout, Mask, PagedKvCache,
    SlidingWindow, Variant, VarlenExtents, VarlenShape, FORWARD_KERNELS, MODIFIED_TILES,
    SM90_MODIFIED_TILES, SM90_ONE_MODIFIER_TILES,
};
use half::f16;

use crate::H100_SM_COUNT;

const SHAPE: AttentionShape = AttentionShape {
    batch: 2,
    heads_q: 8,
    heads_kv: 2,
    seq_len_q: 777,
    seq_len_kv: 1000,
    head_dim: 128,
};

fn window(left: Option<i64>, right: Option<i64>) -> Option<SlidingWindow> {
    Some(SlidingWindow { left, right })
}

fn with_window(left: Option<i64>, right: Option<i64>) -> ForwardOptions {
    ForwardOptions {
        window: window(left, right),
        ..ForwardOptions::default()
    }
}

#[test]
fn every_modified_tile_is_built_for_both_element_types_and_runs_by_default() {
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for tile in MODIFIED_TILES {
            let kernel = FORWARD_KERNELS
                .iter()
                .find(|kernel| {
                    let spec = kernel.spec;
                    spec.variant == Variant::Modified && spec.dtype == dtype && spec.tile == tile
                })
                .unwrap_or_else(|| panic!("no exposed modified kernel {dtype:?} {tile:?}"));
            let head_dim = tile.head_dim;
            assert!(kernel.entry.ends_with("_mod"), "{}", kernel.entry);
            let shape = AttentionShape { head_dim, ..SHAPE };
            let chosen = modified_kernel(dtype, &shape, true, H100_SM_COUNT).unwrap();
            assert_eq!(chosen.spec.variant, Variant::Modified);
            assert_eq!(
                (chosen.spec.dtype, chosen.spec.tile.head_dim),
                (dtype, head_dim)
            );
        }
    }
}

#[test]
fn a_modifier_runs_a_modified_kernel_and_a_plain_problem_a_dense_one() {
    for options in [
        with_window(Some(256), Some(0)),
        with_window(None, Some(5)),
        with_window(Some(0), None),
        ForwardOptions {
            softcap: Some(30.0),
            ..ForwardOptions::default()
        },
        ForwardOptions {
            causal: true,
            softcap: Some(50.0),
            window: window(Some(100), None),
            ..ForwardOptions::default()
        },
    ] {
        let plan = plan(Dtype::F16, &SHAPE, &options, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::Modified, "{options:?}");
        assert!(plan.modifiers().is_some());
        assert_eq!(plan.alibi_slopes_len(), 0);
    }
    // Windows that bound no more than causal masking (or nothing): the dense kernels, with the
    // causal flag the window means.
    for (options, causal) in [
        (ForwardOptions::default(), false),
        (with_window(None, None), false),
        (with_window(None, Some(0)), true),
        (with_window(Some(999), Some(776)), false),
        (with_window(Some(5000), None), false),
        (
            ForwardOptions {
                causal: true,
                window: window(Some(10_000), Some(40)),
                ..ForwardOptions::default()
            },
            true,
        ),
    ] {
        let plan = plan(Dtype::Bf16, &SHAPE, &options, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::Dense, "{options:?}");
        assert_eq!(plan.params().causal != 0, causal, "{options:?}");
        assert!(plan.modifiers().is_none());
        let dense = plan_without_window(&options);
        assert_eq!(plan.kernel(), dense.kernel());
    }
    let alibi = plan_alibi(
        Dtype::F16,
        &SHAPE,
        &ForwardOptions::default(),
        AlibiLayout::PerHead,
        H100_SM_COUNT,
    )
    .unwrap();
    assert_eq!(alibi.kernel().spec.variant, Variant::Modified);
}

/// The plan of the causal or plain problem that `options`' window amounts to.
fn plan_without_window(options: &ForwardOptions) -> flash_attn::LaunchPlan {
    let causal = plan(Dtype::Bf16, &SHAPE, options, H100_SM_COUNT)
        .unwrap()
        .params()
        .causal
        != 0;
    let plain = ForwardOptions {
        causal,
        ..ForwardOptions::default()
    };
    plan(Dtype::Bf16, &SHAPE, &plain, H100_SM_COUNT).unwrap()
}

#[test]
fn the_modified_parameters_fold_the_window_the_softcap_and_the_slopes_units() {
    let scale = SHAPE.default_softmax_scale();
    // A window, normalised: each unbounded side becomes the offset that bounds nothing.
    let windowed = plan(
        Dtype::F16,
        &SHAPE,
        &ForwardOptions {
            causal: true,
            window: window(Some(64), Some(9)),
            ..ForwardOptions::default()
        },
        H100_SM_COUNT,
    )
    .unwrap();
    let modifiers = *windowed.modifiers().unwrap();
    assert_eq!((modifiers.window_left, modifiers.window_right), (64, 0));
    assert_eq!(modifiers.softcap_input_scale, 0.0);
    assert_eq!(modifiers.alibi_slopes, 0);
    assert_eq!(
        windowed.params().scale_log2,
        scale * std::f32::consts::LOG2_E
    );
    let left_only = plan(
        Dtype::F16,
        &SHAPE,
        &with_window(Some(3), None),
        H100_SM_COUNT,
    )
    .unwrap();
    let modifiers = *left_only.modifiers().unwrap();
    assert_eq!(
        (modifiers.window_left, modifiers.window_right),
        (3, SHAPE.seq_len_q as i32 - 1)
    );
    let right_only = plan(
        Dtype::F16,
        &SHAPE,
        &with_window(None, Some(-7)),
        H100_SM_COUNT,
    )
    .unwrap();
    let modifiers = *right_only.modifiers().unwrap();
    assert_eq!(
        (modifiers.window_left, modifiers.window_right),
        (SHAPE.seq_len_kv as i32 - 1, -7)
    );
    // A softcap: scores in units of the cap, the scale folded into the tanh's input.
    let softcap = 50.0;
    let capped = ForwardOptions {
        softcap: Some(softcap),
        softmax_scale: Some(0.125),
        ..ForwardOptions::default()
    };
    let plan_capped = plan_alibi(
        Dtype::Bf16,
        &SHAPE,
        &capped,
        AlibiLayout::PerBatchAndHead,
        H100_SM_COUNT,
    )
    .unwrap();
    let modifiers = *plan_capped.modifiers().unwrap();
    assert_eq!(modifiers.softcap_input_scale, 0.125 / softcap);
    assert_eq!(
        plan_capped.params().scale_log2,
        softcap * std::f32::consts::LOG2_E
    );
    assert_eq!(modifiers.alibi_slope_scale, 1.0 / softcap);
    assert_eq!(modifiers.alibi_batch_stride, SHAPE.heads_q as u32);
    assert_eq!(plan_capped.alibi_slopes_len(), SHAPE.batch * SHAPE.heads_q);
    // No window: the offsets that bound nothing.
    assert_eq!(
        (modifiers.window_left, modifiers.window_right),
        (SHAPE.seq_len_kv as i32 - 1, SHAPE.seq_len_q as i32 - 1)
    );
    let per_head = plan_alibi(
        Dtype::Bf16,
        &SHAPE,
        &ForwardOptions::default(),
        AlibiLayout::PerHead,
        H100_SM_COUNT,
    )
    .unwrap();
    let modifiers = *per_head.modifiers().unwrap();
    assert_eq!(modifiers.alibi_batch_stride, 0);
    assert_eq!(modifiers.alibi_slope_scale, 1.0 / scale);
    assert_eq!(per_head.alibi_slopes_len(), SHAPE.heads_q);
}

#[test]
fn every_slope_index_the_kernel_forms_lies_in_the_slopes() {
    for layout in [AlibiLayout::PerHead, AlibiLayout::PerBatchAndHead] {
        let plan = plan_alibi(
            Dtype::F16,
            &SHAPE,
            &ForwardOptions::default(),
            layout,
            H100_SM_COUNT,
        )
        .unwrap();
        let stride = plan.modifiers().unwrap().alibi_batch_stride as usize;
        let (_, heads, batch) = plan.grid();
        // The kernel reads `alibi_slopes[batch * stride + head]` for every block of the grid.
        let largest = (batch as usize - 1) * stride + heads as usize - 1;
        assert_eq!(largest + 1, plan.alibi_slopes_len(), "{layout:?}");
    }
}

#[test]
fn an_invalid_softcap_is_rejected() {
    for softcap in [
        0.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-45,
        f32::MAX,
    ] {
        let options = ForwardOptions {
            softcap: Some(softcap),
            ..ForwardOptions::default()
        };
        let error = supports(Dtype::F16, &SHAPE, &options, H100_SM_COUNT).unwrap_err();
        match error {
            Error::InvalidSoftcap { softcap: got } => {
                assert!(got.to_bits() == softcap.to_bits(), "{got} != {softcap}")
            }
            other => panic!("softcap {softcap}: {other}"),
        }
    }
}

#[test]
fn an_empty_window_is_rejected() {
    for (left, right, reported) in [
        (Some(3), Some(-4), (3, -4)),
        (Some(-1), Some(0), (-1, 0)),
        (Some(-10), None, (-10, i64::MAX)),
        (Some(i64::MIN), Some(i64::MAX), (i64::MIN, i64::MAX)),
    ] {
        let options = ForwardOptions {
            window: window(left, right),
            ..ForwardOptions::default()
        };
        let result = supports(Dtype::F16, &SHAPE, &options, H100_SM_COUNT);
        match (left, right) {
            // An unbounded right side never makes a window empty; the causal flag below does.
            (_, None) => {
                let causal = ForwardOptions {
                    causal: true,
                    ..options
                };
                assert_eq!(
                    supports(Dtype::F16, &SHAPE, &causal, H100_SM_COUNT),
                    Err(Error::EmptyWindow {
                        left: reported.0,
                        right: 0
                    })
                );
            }
            _ => assert_eq!(
                result,
                Err(Error::EmptyWindow {
                    left: reported.0,
                    right: reported.1
                }),
                "{options:?}"
            ),
        }
    }
    let error = Error::EmptyWindow { left: 3, right: -4 };
    assert!(error.to_string().contains("(3, -4)"), "{error}");
}

#[test]
fn a_window_that_leaves_every_query_without_a_key_is_rejected() {
    let (seq_len_q, seq_len_kv) = (SHAPE.seq_len_q as i64, SHAPE.seq_len_kv as i64);
    // The last query's window ends before key 0; the first query's starts past the last key.
    for (left, right) in [
        (None, Some(-seq_len_kv)),
        (Some(seq_len_kv + 5), Some(-seq_len_kv)),
        (Some(-seq_len_q), None),
        (Some(-seq_len_q - 3), Some(seq_len_q + 10)),
    ] {
        let options = with_window(left, right);
        assert_eq!(
            supports(Dtype::F16, &SHAPE, &options, H100_SM_COUNT),
            Err(Error::WindowExcludesEveryKey {
                left,
                right,
                seq_len_q: SHAPE.seq_len_q,
                seq_len_kv: SHAPE.seq_len_kv
            }),
            "{options:?}"
        );
        assert!(options.mask(&SHAPE).is_err());
    }
    // One key short of that, some query sees a key, and the window is accepted: the last query
    // (whose diagonal key is the last key) sees the first key, or the first query the last key.
    let last_query = SHAPE.seq_len_q as u32 - 1;
    for (left, right, query, key) in [
        (None, Some(1 - seq_len_kv), last_query, 0),
        (Some(1 - seq_len_q), None, 0, SHAPE.seq_len_kv as u32 - 1),
    ] {
        let options = with_window(left, right);
        let kernel = supports(Dtype::F16, &SHAPE, &options, H100_SM_COUNT).unwrap();
        assert_eq!(kernel.spec.variant, Variant::Modified);
        let mask = options.mask(&SHAPE).unwrap();
        let seen: Vec<(u32, u32)> = (0..SHAPE.seq_len_q as u32)
            .filter(|&query| mask.key_start(query) < mask.key_end(query))
            .map(|query| (query, mask.key_start(query)))
            .collect();
        assert_eq!(seen, vec![(query, key)], "{options:?}");
    }
}

#[test]
fn the_options_mask_is_the_window_intersected_with_causal_masking() {
    let lengths = (SHAPE.seq_len_q as u32, SHAPE.seq_len_kv as u32);
    for (causal, left, right, expected) in [
        (false, None, None, Mask::new(lengths.0, lengths.1, false)),
        (true, None, None, Mask::new(lengths.0, lengths.1, true)),
        (false, None, Some(0), Mask::new(lengths.0, lengths.1, true)),
        (true, None, Some(9), Mask::new(lengths.0, lengths.1, true)),
        (
            true,
            Some(5000),
            Some(-2),
            Mask::windowed(lengths.0, lengths.1, None, Some(-2)),
        ),
        (
            false,
            Some(30),
            Some(4),
            Mask::windowed(lengths.0, lengths.1, Some(30), Some(4)),
        ),
        // Offsets past every key bound nothing.
        (
            false,
            Some(999),
            Some(776),
            Mask::new(lengths.0, lengths.1, false),
        ),
        (
            false,
            Some(998),
            Some(775),
            Mask::windowed(lengths.0, lengths.1, Some(998), Some(775)),
        ),
    ] {
        let options = ForwardOptions {
            causal,
            window: window(left, right),
            ..ForwardOptions::default()
        };
        let mask = options.mask(&SHAPE).unwrap();
        assert_eq!(mask, expected, "{options:?}");
        // Whatever the form, the same keys for every query.
        for query in [0, 1, 400, 776] {
            assert_eq!(
                (mask.key_start(query), mask.key_end(query)),
                (expected.key_start(query), expected.key_end(query))
            );
        }
    }
    assert_eq!(
        ForwardOptions::default().mask(&AttentionShape {
            seq_len_q: 0,
            ..SHAPE
        }),
        Err(Error::ZeroSizedDimension {
            dimension: "seq_len_q"
        })
    );
}

#[test]
fn the_serving_calls_run_their_modifiers_on_the_modified_serving_kernels() {
    let decode = AttentionShape {
        seq_len_q: 1,
        seq_len_kv: 1024,
        ..SHAPE
    };
    let group = (decode.heads_q / decode.heads_kv) as u32;
    let softcap = ForwardOptions {
        softcap: Some(30.0),
        ..ForwardOptions::default()
    };
    let window = with_window(Some(64), Some(0));
    let paged = PagedKvCache {
        num_pages: 64,
        page_size: 64,
        pages_per_sequence: decode.seq_len_kv / 64,
    };
    for dtype in [Dtype::F16, Dtype::Bf16] {
        // Decode packs the query heads of a K/V head into one tile's rows, each the sequence's
        // one query, under a softcap and under a window alike.
        for plan in [
            plan_kv_cache(dtype, &decode, &softcap, H100_SM_COUNT).unwrap(),
            plan_paged_kv_cache(dtype, &decode, &paged, &softcap, H100_SM_COUNT).unwrap(),
        ] {
            assert!(plan.kernel().spec.variant.is_modified());
            assert_eq!(plan.params().seq_len_q, group, "{}", plan.kernel().entry);
            let modifiers = plan.modifiers().unwrap();
            assert!(modifiers.softcap_input_scale > 0.0);
            assert_eq!(modifiers.rows_share_one_query, 1);
            // The offsets that bound nothing for a sequence of one query.
            assert_eq!(modifiers.window_left, decode.seq_len_kv as i32 - 1);
            assert_eq!(modifiers.window_right, 0);
        }
        let plan = plan_kv_cache(dtype, &decode, &window, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::ServingModified);
        assert_eq!(plan.params().seq_len_q, group);
        assert_eq!(plan.grid().1, decode.heads_kv as u32);
        let modifiers = plan.modifiers().unwrap();
        assert_eq!(
            (
                modifiers.window_left,
                modifiers.window_right,
                modifiers.rows_share_one_query
            ),
            (64, 0, 1)
        );

        let plan = plan_paged_kv_cache(dtype, &decode, &paged, &window, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::PagedModified);
        // A window that bounds nothing is no modifier: the plain serving kernels.
        let plan = plan_kv_cache(dtype, &decode, &with_window(None, None), H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::Serving);
        assert!(plan.modifiers().is_none());
        let extents = VarlenExtents {
            batch: 2,
            tokens_q: 10,
            tokens_kv: 20,
            max_seq_len_q: 5,
            max_seq_len_kv: 10,
            heads_q: 8,
            heads_kv: 2,
            head_dim: 64,
        };
        // (Keys 3 left of the diagonal: the window of 64 bounds none of these 10 keys.)
        let plan = plan_varlen(
            dtype,
            &extents,
            &with_window(Some(3), Some(0)),
            H100_SM_COUNT,
        )
        .unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::ServingModified);
        let plan = plan_varlen(dtype, &extents, &window, H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::Serving);
        assert_eq!(plan.kernel().spec.dtype, dtype);
        let plan = plan_varlen(dtype, &extents, &ForwardOptions::default(), H100_SM_COUNT).unwrap();
        assert_eq!(plan.kernel().spec.variant, Variant::Serving);
    }
    // The checks of the dense calls hold: an empty window, a bad softcap, a plain kernel named
    // for a modified problem.
    assert_eq!(
        plan_kv_cache(
            Dtype::F16,
            &decode,
            &with_window(Some(-2), Some(1)),
            H100_SM_COUNT
        )
        .unwrap_err(),
        Error::EmptyWindow { left: -2, right: 1 }
    );
    let bad_softcap = ForwardOptions {
        softcap: Some(f32::NAN),
        ..ForwardOptions::default()
    };
    assert!(matches!(
        plan_kv_cache(Dtype::F16, &decode, &bad_softcap, H100_SM_COUNT),
        Err(Error::InvalidSoftcap { .. })
    ));
    let plain = plan_kv_cache(
        Dtype::F16,
        &decode,
        &ForwardOptions::default(),
        H100_SM_COUNT,
    )
    .unwrap()
    .kernel();
    let named = ForwardOptions {
        kernel: Some(plain),
        ..window
    };
    assert_eq!(
        plan_kv_cache(Dtype::F16, &decode, &named, H100_SM_COUNT).unwrap_err(),
        Error::KernelVariantMismatch {
            kernel: plain.entry,
            needed: Variant::ServingModified
        }
    );
}

#[test]
fn a_kernel_of_the_other_variant_is_rejected() {
    let dense = kernel_by_name("flash_fwd_f16_d128_m64_n64_w4_s2").unwrap();
    let modified = kernel_by_name("flash_fwd_f16_d128_m64_n64_w4_s2_mod").unwrap();
    let capped = ForwardOptions {
        softcap: Some(20.0),
        kernel: Some(dense),
        ..ForwardOptions::default()
    };
    // The softcap alone: a softcap kernel's problem, which a modified kernel runs too.
    assert_eq!(
        supports(Dtype::F16, &SHAPE, &capped, H100_SM_COUNT),
        Err(Error::KernelVariantMismatch {
            kernel: dense.entry,
            needed: Variant::Softcap
        })
    );
    let capped = ForwardOptions {
        kernel: Some(modified),
        ..capped
    };
    assert_eq!(
        supports(Dtype::F16, &SHAPE, &capped, H100_SM_COUNT),
        Ok(modified)
    );
    let plain = ForwardOptions {
        kernel: Some(modified),
        ..ForwardOptions::default()
    };
    assert_eq!(
        supports(Dtype::F16, &SHAPE, &plain, H100_SM_COUNT),
        Err(Error::KernelVariantMismatch {
            kernel: modified.entry,
            needed: Variant::Dense
        })
    );
}

#[test]
fn alibi_slopes_that_are_too_few_or_not_finite_are_rejected() {
    let plan = plan_alibi(
        Dtype::F16,
        &SHAPE,
        &ForwardOptions::default(),
        AlibiLayout::PerBatchAndHead,
        H100_SM_COUNT,
    )
    .unwrap();
    let slopes = vec![0.25f32; 16];
    assert_eq!(plan.check_alibi_slopes(&slopes), Ok(()));
    // Extra slopes are not read.
    assert_eq!(plan.check_alibi_slopes(&[0.25f32; 17]), Ok(()));
    assert_eq!(
        plan.check_alibi_slopes(&slopes[..15]),
        Err(Error::AlibiSlopesTooShort {
            length: 15,
            required: 16
        })
    );
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -1e36] {
        let mut slopes = slopes.clone();
        slopes[9] = bad;
        match plan.check_alibi_slopes(&slopes) {
            Err(Error::InvalidAlibiSlope { index: 9, slope }) => {
                assert_eq!(slope.to_bits(), bad.to_bits())
            }
            other => panic!("slope {bad}: {other:?}"),
        }
    }
    // The count alone, for slopes on the device: the same rule, and the same error, as the
    // full check's first step; a plan without ALiBi needs none.
    for length in [0, 15, 16, 17] {
        let full = plan.check_alibi_slopes(&vec![0.25f32; length]);
        assert_eq!(plan.check_alibi_slopes_len(length), full, "{length} slopes");
    }
    let plain = flash_attn::plan(
        Dtype::F16,
        &SHAPE,
        &ForwardOptions::default(),
        H100_SM_COUNT,
    );
    assert_eq!(plain.unwrap().check_alibi_slopes_len(0), Ok(()));
    // Negative and zero slopes are biases like any other.
    let mut slopes = slopes.clone();
    slopes[0] = -0.5;
    slopes[1] = 0.0;
    assert_eq!(plan.check_alibi_slopes(&slopes), Ok(()));
    let error = Error::AlibiSlopesTooShort {
        length: 15,
        required: 16,
    };
    assert!(error.to_string().contains("15"), "{error}");
}

/// The naive definition, written without the crate's rule or reference: every key of every
/// query's K/V head, visibility tested key by key (`diagonal - left <= j <= diagonal + right`,
/// causal intersecting `right` with 0), the score scaled, capped, biased, then a two-pass
/// softmax in f64. `q`, `k`, `v` dense `[B, H, S, D]`.
#[allow(clippy::too_many_arguments)]
fn naive_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    shape: AttentionShape,
    scale: f64,
    causal: bool,
    window: (Option<i64>, Option<i64>),
    softcap: Option<f64>,
    slopes: Option<(&[f32], AlibiLayout)>,
) -> (Vec<f64>, Vec<f64>) {
    let AttentionShape {
        batch,
        heads_q,
        heads_kv,
        seq_len_q,
        seq_len_kv,
        head_dim: d,
    } = shape;
    let mut output = vec![0.0; batch * heads_q * seq_len_q * d];
    let mut logsumexp = vec![0.0; batch * heads_q * seq_len_q];
    for b in 0..batch {
        for h in 0..heads_q {
            let kv_head = h / (heads_q / heads_kv);
            let slope = slopes.map_or(0.0, |(slopes, layout)| match layout {
                AlibiLayout::PerHead => slopes[h] as f64,
                AlibiLayout::PerBatchAndHead => slopes[b * heads_q + h] as f64,
            });
            for i in 0..seq_len_q {
                let row = (b * heads_q + h) * seq_len_q + i;
                let query = &q[row * d..(row + 1) * d];
                let diagonal = i as i64 + seq_len_kv as i64 - seq_len_q as i64;
                let mut scored = Vec::new();
                for j in 0..seq_len_kv {
                    let j_signed = j as i64;
                    let after_left = window.0.is_none_or(|left| j_signed >= diagonal - left);
                    let before_right = window.1.is_none_or(|right| j_signed <= diagonal + right)
                        && (!causal || j_signed <= diagonal);
                    if !(after_left && before_right) {
                        continue;
                    }
                    let key_row = ((b * heads_kv + kv_head) * seq_len_kv + j) * d;
                    let product: f64 = (0..d).map(|x| query[x] * k[key_row + x]).sum();
                    let mut score = product * scale;
                    if let Some(cap) = softcap {
                        score = cap * (score / cap).tanh();
                    }
                    score -= slope * (diagonal - j_signed).abs() as f64;
                    scored.push((key_row, score));
                }
                if scored.is_empty() {
                    logsumexp[row] = f64::NEG_INFINITY;
                    continue;
                }
                let max = scored
                    .iter()
                    .map(|&(_, s)| s)
                    .fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scored.iter().map(|&(_, s)| (s - max).exp()).sum();
                logsumexp[row] = max + sum.ln();
                for &(key_row, score) in &scored {
                    let weight = (score - max).exp() / sum;
                    for x in 0..d {
                        output[row * d + x] += weight * v[key_row + x];
                    }
                }
            }
        }
    }
    (output, logsumexp)
}

#[test]
fn the_reference_computes_each_modifier_alone_and_combined_as_defined() {
    let shapes = [
        AttentionShape {
            batch: 2,
            heads_q: 4,
            heads_kv: 2,
            seq_len_q: 7,
            seq_len_kv: 13,
            head_dim: 8,
        },
        AttentionShape {
            batch: 1,
            heads_q: 3,
            heads_kv: 1,
            seq_len_q: 17,
            seq_len_kv: 5,
            head_dim: 16,
        },
    ];
    let windows = [
        (None, None),
        (Some(3), Some(0)),
        (Some(2), Some(4)),
        (None, Some(-2)),
        (Some(-1), Some(6)),
        (Some(0), None),
    ];
    for (seed, shape) in shapes.into_iter().enumerate() {
        let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, seed as u64);
        let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 100 + seed as u64);
        let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 200 + seed as u64);
        let wide = |x: &[f16]| x.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
        let slopes: Vec<f32> = (0..shape.batch * shape.heads_q)
            .map(|index| 0.5f32.powi(index as i32 + 1))
            .collect();
        for causal in [false, true] {
            for window in windows {
                for softcap in [None, Some(1.5)] {
                    for alibi in [
                        None,
                        Some(AlibiLayout::PerHead),
                        Some(AlibiLayout::PerBatchAndHead),
                    ] {
                        let options = ForwardOptions {
                            causal,
                            window: Some(SlidingWindow {
                                left: window.0,
                                right: window.1,
                            }),
                            ..ForwardOptions::default()
                        };
                        if options.mask(&shape).is_err() {
                            continue;
                        }
                        let scoring = Scoring {
                            softmax_scale: 0.3,
                            causal,
                            window: options.window,
                            softcap,
                            alibi: alibi.map(|layout| AlibiSlopes {
                                slopes: &slopes,
                                layout,
                            }),
                        };
                        let result = attention_with(&q, &k, &v, shape, &scoring, Precision::F64);
                        let (output, logsumexp) = naive_attention(
                            &wide(&q),
                            &wide(&k),
                            &wide(&v),
                            shape,
                            0.3,
                            causal,
                            window,
                            softcap,
                            alibi.map(|layout| (&slopes[..], layout)),
                        );
                        let context = format!(
                            "{shape:?} causal {causal} window {window:?} softcap {softcap:?} \
                             alibi {alibi:?}"
                        );
                        for (got, want) in result.output.iter().zip(&output) {
                            assert!((got - want).abs() < 1e-12, "{context}: {got} vs {want}");
                        }
                        for (got, want) in result.logsumexp.iter().zip(&logsumexp) {
                            assert!(
                                got == want || (got - want).abs() < 1e-12,
                                "{context}: logsumexp {got} vs {want}"
                            );
                        }
                        // The sampled rows are the same rows, bit for bit.
                        let rows = [
                            QueryRow {
                                batch: shape.batch - 1,
                                head: shape.heads_q - 1,
                                query: shape.seq_len_q - 1,
                            },
                            QueryRow {
                                batch: 0,
                                head: 1,
                                query: 2,
                            },
                        ];
                        let sampled =
                            attention_rows_with(&q, &k, &v, shape, &scoring, Precision::F64, &rows);
                        for (n, row) in rows.iter().enumerate() {
                            let index = row.index(&shape);
                            let d = shape.head_dim;
                            assert_eq!(
                                sampled.output[n * d..(n + 1) * d],
                                result.output[index * d..(index + 1) * d]
                            );
                            assert_eq!(
                                sampled.logsumexp[n].to_bits(),
                                result.logsumexp[index].to_bits()
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_reference_without_modifiers_is_the_plain_one() {
    let shape = AttentionShape {
        batch: 1,
        heads_q: 2,
        heads_kv: 1,
        seq_len_q: 9,
        seq_len_kv: 6,
        head_dim: 8,
    };
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 1);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 2);
    for causal in [false, true] {
        for precision in [Precision::F64, Precision::Plain(Dtype::F16)] {
            let plain = attention(&q, &k, &k, shape, 0.4, causal, precision);
            // Causal masking as the window (None, Some(0)) is the same problem.
            let scoring = Scoring {
                window: causal.then_some(SlidingWindow {
                    left: None,
                    right: Some(0),
                }),
                ..Scoring::plain(0.4, false)
            };
            let windowed = attention_with(&q, &k, &k, shape, &scoring, precision);
            assert_eq!(plain, windowed);
        }
    }
}

#[test]
fn softcap_and_alibi_match_hand_computed_scores() {
    // One query [1, 0] against keys [3, 0] and [0, 0] (scores 3 and 0), scale 1: capped at 2,
    // the scores are 2 tanh(1.5) and 0; ALiBi with slope 0.5 on 1 query and 2 keys (the query
    // sits on key 1) adds -0.5 to key 0 and 0 to key 1.
    let shape = AttentionShape {
        batch: 1,
        heads_q: 1,
        heads_kv: 1,
        seq_len_q: 1,
        seq_len_kv: 2,
        head_dim: 2,
    };
    let q = [f16::from_f64(1.0), f16::ZERO];
    let k = [f16::from_f64(3.0), f16::ZERO, f16::ZERO, f16::ZERO];
    let v = [f16::from_f64(1.0), f16::ZERO, f16::ZERO, f16::from_f64(1.0)];
    let slopes = [0.5f32];
    let scoring = Scoring {
        softcap: Some(2.0),
        alibi: Some(AlibiSlopes {
            slopes: &slopes,
            layout: AlibiLayout::PerHead,
        }),
        ..Scoring::plain(1.0, false)
    };
    let result = attention_with(&q, &k, &v, shape, &scoring, Precision::F64);
    let scores = [2.0 * 1.5f64.tanh() - 0.5, 0.0];
    let sum: f64 = scores.iter().map(|s| s.exp()).sum();
    assert!((result.output[0] - scores[0].exp() / sum).abs() < 1e-14);
    assert!((result.output[1] - scores[1].exp() / sum).abs() < 1e-14);
    assert!((result.logsumexp[0] - sum.ln()).abs() < 1e-14);
}

/// The modifier bars compare a modifier with the plain kernel at the anchor shapes: the
/// modifiers' own cost only where the modified kernel runs the plain kernel's tile. So
/// `MODIFIED_TILES` holds the dispatch table's tile at every anchor shape, and a re-tune that
/// moves an anchor to another tile fails here until that tile is added (log 40 moved
/// 2,16,4096,128 non-causal to `m128_n64_w4_s1_qsmem`). The exception is `MODIFIED_TILES`'
/// own: the D=64 tiles of 128-key blocks (the seed shape's small-grid picks), whose modified
/// entries LLVM cannot compile into linkable PTX.
#[test]
fn every_anchor_shapes_dense_tile_has_its_modified_kernel() {
    for (batch, heads, seq_len, head_dim) in flash_attn_tools::timing::ANCHOR_SHAPES {
        let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for causal in [false, true] {
                let dense =
                    flash_attn::dispatch_kernel(dtype, &shape, causal, H100_SM_COUNT).unwrap();
                let tile = dense.spec.tile;
                if tile.head_dim == 64 && tile.block_n == 128 {
                    continue;
                }
                let modified = modified_kernel(dtype, &shape, causal, H100_SM_COUNT).unwrap();
                assert_eq!(
                    modified.spec.tile, tile,
                    "{shape:?} {dtype:?} causal={causal}: the dispatch table runs {}, which has \
                     no modified kernel (add its tile to MODIFIED_TILES)",
                    dense.entry
                );
            }
        }
    }
}

#[test]
fn the_modified_kernel_follows_the_dispatch_tables_tile_where_one_is_built() {
    for head_dim in [64, 128] {
        for causal in [false, true] {
            for seq_len in [128, 512, 4096, 8192] {
                let shape = AttentionShape::new(2, 16, seq_len, head_dim);
                let dense =
                    flash_attn::dispatch_kernel(Dtype::F16, &shape, causal, H100_SM_COUNT).unwrap();
                let modified = modified_kernel(Dtype::F16, &shape, causal, H100_SM_COUNT).unwrap();
                let built = FORWARD_KERNELS.iter().any(|kernel| {
                    kernel.spec.variant == Variant::Modified
                        && kernel.spec.dtype == Dtype::F16
                        && kernel.spec.tile == dense.spec.tile
                });
                assert_eq!(built, modified.spec.tile == dense.spec.tile, "{shape:?}");
            }
        }
    }
    // The sliding-window shape runs the dense causal kernel's tile.
    let shape = AttentionShape::new(2, 16, 8192, 128);
    let dense = flash_attn::dispatch_kernel(Dtype::F16, &shape, true, H100_SM_COUNT).unwrap();
    let options = ForwardOptions {
        causal: true,
        window: window(Some(1024), Some(0)),
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let windowed = supports(Dtype::F16, &shape, &options, H100_SM_COUNT).unwrap();
    assert_eq!(windowed.spec.tile, dense.spec.tile);
}

/// A modified launch reads and writes what the plain launch of the same tile does (the window
/// only skips key blocks, never reaching past the plain problem's rows): the same buffer
/// lengths and grid, whatever the layout or strides.
#[test]
fn a_modified_plan_reaches_exactly_the_buffers_of_its_plain_problem() {
    let strided = flash_attn::ForwardStrides {
        q: flash_attn::TensorStrides {
            batch: 1 << 20,
            head: 100_000,
            seq: 136,
        },
        k: flash_attn::TensorStrides {
            batch: 0,
            head: 8,
            seq: 512,
        },
        v: flash_attn::TensorStrides {
            batch: 1 << 21,
            head: 128,
            seq: 1024,
        },
        o: flash_attn::TensorStrides {
            batch: 1 << 20,
            head: 100_000,
            seq: 128,
        },
    };
    for kernel in FORWARD_KERNELS
        .iter()
        .filter(|kernel| kernel.spec.variant == Variant::Modified)
    {
        let Some(dense) = FORWARD_KERNELS.iter().find(|dense| {
            dense.spec.variant == Variant::Dense
                && dense.spec.family == kernel.spec.family
                && dense.spec.dtype == kernel.spec.dtype
                && dense.spec.tile == kernel.spec.tile
        }) else {
            // The modified tiles of head dims 96 and 256 are not their fallbacks' (the fallback
            // tile spilled as a modified kernel at 256, the modified tile as a dense one at 96),
            // nor are the sm90 family's 64-key D=128 tile (the window's) and one-stage D=224
            // and D=256 tiles (the table's two-stage ones spilled as modified kernels): no
            // dense twin in the shipping set to compare with.
            assert!(
                matches!(kernel.spec.tile.head_dim, 96 | 256) || kernel.spec.family == Family::Sm90,
                "{} has no dense kernel of its tile in the shipping set",
                kernel.entry
            );
            continue;
        };
        let shape = AttentionShape {
            head_dim: kernel.spec.tile.head_dim,
            ..SHAPE
        };
        for (layout, strides) in [
            (Layout::Bhsd, None),
            (Layout::Bshd, None),
            (Layout::Bhsd, Some(strided)),
        ] {
            // The explicit strides hold rows of at most 136 elements.
            if strides.is_some() && shape.head_dim > 136 {
                continue;
            }
            let plain = ForwardOptions {
                causal: true,
                layout,
                strides,
                kernel: Some(dense),
                ..ForwardOptions::default()
            };
            let modified = ForwardOptions {
                window: window(Some(77), Some(-2)),
                softcap: Some(10.0),
                kernel: Some(kernel),
                ..plain
            };
            let plain = plan(kernel.spec.dtype, &shape, &plain, H100_SM_COUNT).unwrap();
            let modified = plan_alibi(
                kernel.spec.dtype,
                &shape,
                &modified,
                AlibiLayout::PerBatchAndHead,
                H100_SM_COUNT,
            )
            .unwrap();
            assert_eq!(modified.required(), plain.required(), "{}", kernel.entry);
            if kernel.spec.is_persistent() {
                // Its blocks walk the plain grid's tiles: as many blocks as tiles, or fewer.
                let (x, y, z) = plain.grid();
                let (blocks, one, also_one) = modified.grid();
                assert!(
                    (one, also_one) == (1, 1) && blocks <= x * y * z,
                    "{}",
                    kernel.entry
                );
            } else {
                assert_eq!(modified.grid(), plain.grid());
            }
            let (mut params, plain_params) = (*modified.params(), *plain.params());
            // The modified kernels take the window instead of the causal flag, and the scale in
            // the softcap's units.
            (params.causal, params.scale_log2) = (plain_params.causal, plain_params.scale_log2);
            assert_eq!(params, plain_params);
        }
    }
}

/// The serving references apply the modifiers per sequence: with every cache full, the KV-cache
/// reference is the dense one (each sequence's ALiBi slopes its own), and a varlen batch whose
/// window leaves one short sequence's queries without a key gives that sequence output 0 and
/// logsumexp -inf where the dense reference (which validates the window) would refuse it.
#[test]
fn the_serving_references_apply_the_modifiers_per_sequence() {
    let shape = AttentionShape {
        batch: 3,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 5,
        seq_len_kv: 40,
        head_dim: 16,
    };
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 11);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 12);
    let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 13);
    let slopes: Vec<f32> = (0..12).map(|i| 0.05 * (i + 1) as f32).collect();
    let scoring = Scoring {
        softmax_scale: 0.25,
        causal: true,
        window: window(Some(9), Some(0)),
        softcap: Some(3.0),
        alibi: Some(AlibiSlopes {
            slopes: &slopes,
            layout: AlibiLayout::PerBatchAndHead,
        }),
    };
    let dense = attention_with(&q, &k, &v, shape, &scoring, Precision::F64);
    let cache = attention_kv_cache(&q, &k, &v, &[40; 3], shape, &scoring, Precision::F64);
    assert_eq!(cache, dense);
    // A window of keys 1..=5 right of each query's diagonal (non-causal): in sequence 0 (4
    // queries, 40 keys) it leaves the last query without a key, in sequence 1 (1 query, 30
    // keys) every query.
    let cu_seqlens_q = [0, 4, 5];
    let cu_seqlens_kv = [0, 40, 70];
    let varlen = VarlenShape {
        cu_seqlens_q: &cu_seqlens_q,
        cu_seqlens_kv: &cu_seqlens_kv,
        heads_q: 2,
        heads_kv: 1,
        head_dim: 16,
    };
    let scoring = Scoring {
        softmax_scale: 0.25,
        causal: false,
        window: window(Some(-1), Some(5)),
        softcap: None,
        alibi: None,
    };
    let result = attention_varlen(
        &q[..5 * 2 * 16],
        &k[..70 * 16],
        &v[..70 * 16],
        &varlen,
        &scoring,
        Precision::F64,
    );
    for head in 0..2 {
        let lse = &result.logsumexp[head * 5..(head + 1) * 5];
        assert!(lse[..3].iter().all(|x| x.is_finite()), "{lse:?}");
        assert_eq!(lse[3..], [f64::NEG_INFINITY; 2]);
    }
    for token in 3..5 {
        assert!(result.output[token * 32..(token + 1) * 32]
            .iter()
            .all(|&x| x == 0.0));
    }
}

/// Split-KV spreads a window's key blocks over the splits: a decode step of one sequence over
/// 32,768 keys with a window of 4,096 splits those 4,096 keys (and a few blocks of alignment),
/// not the whole cache, of which most splits would see nothing.
#[test]
fn split_kv_spreads_the_keys_a_window_leaves() {
    let decode = AttentionShape {
        batch: 1,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: 32768,
        head_dim: 128,
    };
    let options = with_window(Some(4095), Some(0));
    let plan = plan_kv_cache(Dtype::F16, &decode, &options, H100_SM_COUNT).unwrap();
    let sequences = plan.sequences().unwrap();
    let block_n = plan.kernel().spec.tile.block_n as u32;
    let covered = sequences.splits * sequences.keys_per_split;
    assert!(plan.splits() > 1);
    // Every key the window leaves (4,096 of them, from anywhere in a key block), and no more
    // than a split's rounding beyond that.
    assert!(covered >= 4096 + block_n, "{covered}");
    assert!(
        covered < 4096 + 3 * block_n + sequences.keys_per_split,
        "{covered}"
    );
    // Without a window the splits cover the whole cache.
    let plain = plan_kv_cache(
        Dtype::F16,
        &decode,
        &ForwardOptions::default(),
        H100_SM_COUNT,
    )
    .unwrap();
    let sequences = plain.sequences().unwrap();
    assert!(sequences.splits * sequences.keys_per_split >= 32768);
}

/// Decode packs a K/V head's query heads as the rows of one query, so the splits are sized for
/// the window of that one query: sized for `group` queries, they took up to `group` keys more,
/// and with them splits that had nothing to read (the CI's safety property test found one: 28
/// heads on one K/V head, a 5-key window, key blocks of 16).
#[test]
fn packed_query_heads_size_the_splits_for_one_query() {
    let decode = AttentionShape {
        batch: 1,
        heads_q: 64,
        heads_kv: 1,
        seq_len_q: 1,
        seq_len_kv: 4096,
        head_dim: 128,
    };
    let window_keys = 61;
    let options = with_window(Some(window_keys - 1), Some(0));
    let plan = plan_kv_cache(Dtype::F16, &decode, &options, H100_SM_COUNT).unwrap();
    let sequences = plan.sequences().unwrap();
    let block_n = plan.kernel().spec.tile.block_n as u32;
    assert_eq!(plan.params().seq_len_q, 64, "the heads are packed");
    // The window's keys from anywhere in a key block: its blocks, one more for alignment, and
    // no split past them.
    let (splits, per_split) = (sequences.splits, sequences.keys_per_split);
    assert!(
        splits * per_split >= window_keys as u32,
        "{splits} x {per_split}"
    );
    assert!(
        (splits - 1) * per_split < window_keys as u32 + block_n,
        "{splits} x {per_split}, key blocks of {block_n}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 2000, ..Default::default() })]

    /// Split-KV covers every key block that any query block sees, for any window, softcap,
    /// causal flag, GQA packing, split count and used cache length: the kernel's range for a
    /// query block (`BlockInfo::key_blocks`: from the block holding its first query's first
    /// key to the one after its last query's last key, split `s` taking `keys_per_split` keys
    /// from the first) never holds more blocks than the splits together.
    #[test]
    fn split_kv_covers_every_key_block_a_query_block_sees(
        (group, heads_kv) in (proptest::sample::select(vec![1usize, 2, 4, 8]), 1usize..4),
        seq_len_q in 1usize..300,
        capacity in 1usize..20_000,
        left in proptest::option::of(-40i64..6000),
        right in proptest::option::of(-40i64..400),
        (causal, softcap) in (proptest::bool::ANY, proptest::bool::ANY),
        used_per_mille in 0usize..=1000,
        num_splits in proptest::option::of(1usize..=16),
    ) {
        let shape = AttentionShape {
            batch: 2,
            heads_q: group * heads_kv,
            heads_kv,
            seq_len_q,
            seq_len_kv: capacity,
            head_dim: 128,
        };
        let options = ForwardOptions {
            causal,
            window: window(left, right),
            softcap: softcap.then_some(30.0),
            num_splits,
            ..ForwardOptions::default()
        };
        // Invalid windows are errors, tested elsewhere.
        let Ok(plan) = plan_kv_cache(Dtype::F16, &shape, &options, H100_SM_COUNT) else {
            return Ok(());
        };
        let (params, sequences) = (plan.params(), plan.sequences().unwrap());
        let (block_m, block_n) = (plan.kernel().spec.tile.block_m as u32, plan.kernel().spec.tile.block_n as u32);
        let used = (capacity * used_per_mille / 1000).max(1) as u32;
        // The kernel's rule for a sequence with `used` keys, and the query positions of a block.
        let (mask, one_query) = match plan.modifiers() {
            Some(modifiers) => {
                let one_query = modifiers.rows_share_one_query != 0;
                let rows = if one_query { 1 } else { params.seq_len_q };
                let windowed = Mask::windowed(
                    rows,
                    used,
                    Some(modifiers.window_left),
                    Some(modifiers.window_right),
                );
                (windowed, one_query)
            }
            None => (Mask::new(params.seq_len_q, used, params.causal != 0), false),
        };
        let blocks_per_split = sequences.keys_per_split / block_n;
        for query_block in 0..sequences.query_blocks {
            let first = query_block * block_m;
            let last = (first + block_m).min(params.seq_len_q) - 1;
            let (first, last) = if one_query { (0, 0) } else { (first, last) };
            let start = if plan.modifiers().is_some() { mask.key_start(first) } else { 0 } / block_n;
            let end = mask.key_end(last).div_ceil(block_n);
            proptest::prop_assert!(
                end.saturating_sub(start) <= sequences.splits * blocks_per_split,
                "query block {query_block}: blocks {start}..{end}, {} splits of {blocks_per_split}",
                sequences.splits
            );
        }
    }
}

/// On compute capability 9.0 a modified problem runs the sm90 family's modified kernel of the
/// dense problem's tile wherever the sm_90a table runs the dense problem on the sm90 family (the
/// issue's modifier bars compare the two) and the family has that modified kernel, else the
/// family's first at the head dim, and the sm80 rule where the sm90 family has none at the head
/// dim; on 8.9 it is the device-unaware pick.
#[test]
fn a_modified_problem_runs_the_family_and_tile_of_its_dense_kernel_on_the_device() {
    let mut on_sm90 = 0;
    for head_dim in [64, 96, 128, 160, 192, 224, 256] {
        // 4,8,512: a grid of 128 blocks of 128 rows, fewer than the H100's multiprocessors.
        let shapes = [(4, 8, 512), (4, 16, 512), (4, 16, 2048), (4, 16, 8192)];
        for (batch, heads, seq_len) in shapes {
            let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
            for dtype in [Dtype::F16, Dtype::Bf16] {
                for causal in [false, true] {
                    let dense =
                        dispatch_kernel_on(dtype, &shape, causal, H100_SM_COUNT, (9, 0)).unwrap();
                    let modified =
                        modified_kernel_on(dtype, &shape, causal, H100_SM_COUNT, (9, 0)).unwrap();
                    let context = format!(
                        "{shape:?} {dtype:?} causal={causal}: {} for {}",
                        modified.entry, dense.entry
                    );
                    assert_eq!(modified.spec.variant, Variant::Modified, "{context}");
                    let sm90_modified_at_head_dim = SM90_MODIFIED_TILES
                        .iter()
                        .any(|tile| tile.head_dim == modified.spec.tile.head_dim);
                    // The dense kernel's tile where it has a modified twin (at D=64, 96 and
                    // 128; `SM90_MODIFIED_TILES` says why not beyond).
                    let twin = FORWARD_KERNELS.iter().any(|kernel| {
                        kernel.spec.variant == Variant::Modified
                            && kernel.spec.family == Family::Sm90
                            && kernel.spec.dtype == dtype
                            && kernel.spec.tile == dense.spec.tile
                    });
                    assert!(
                        twin || dense.spec.family == Family::Sm80 || head_dim > 128,
                        "{context}"
                    );
                    match dense.spec.family {
                        Family::Sm90 if sm90_modified_at_head_dim => {
                            assert_eq!(modified.spec.family, Family::Sm90, "{context}");
                            assert_eq!(twin, modified.spec.tile == dense.spec.tile, "{context}");
                            assert_ne!(modified.spec.tile.block_m, 64, "{context}");
                            on_sm90 += 1;
                        }
                        Family::Sm90 | Family::Sm80 => assert_eq!(
                            modified,
                            modified_kernel(dtype, &shape, causal, H100_SM_COUNT).unwrap(),
                            "{context}"
                        ),
                    }
                    assert_eq!(
                        modified_kernel_on(dtype, &shape, causal, 58, (8, 9)).unwrap(),
                        modified_kernel(dtype, &shape, causal, 58).unwrap()
                    );
                }
            }
        }
    }
    assert!(on_sm90 > 0, "no modified problem ran on the sm90 family");
}

#[test]
fn one_modifier_alone_runs_its_kernel_of_the_dense_tile_where_one_is_built() {
    // ALiBi alone and the softcap alone, and how many problems ran each's kernel.
    let mut alone = [(Variant::Alibi, 0), (Variant::Softcap, 0)];
    for head_dim in [64, 96, 128] {
        let shapes = [(4, 8, 512), (16, 16, 512), (8, 16, 2048), (2, 16, 4096)];
        for (batch, heads, seq_len) in shapes {
            let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
            for dtype in [Dtype::F16, Dtype::Bf16] {
                for causal in [false, true] {
                    for (variant, on_its_kernels) in &mut alone {
                        let alibi = *variant == Variant::Alibi;
                        let options = ForwardOptions {
                            causal,
                            softcap: (!alibi).then_some(30.0),
                            ..ForwardOptions::default()
                        };
                        let planned = |options: &ForwardOptions, compute_capability| {
                            let plan = if alibi {
                                let layout = AlibiLayout::PerHead;
                                let sm_count = H100_SM_COUNT;
                                plan_alibi_on(
                                    dtype,
                                    &shape,
                                    options,
                                    layout,
                                    sm_count,
                                    compute_capability,
                                )
                            } else {
                                plan_on(dtype, &shape, options, H100_SM_COUNT, compute_capability)
                            };
                            plan.unwrap().kernel()
                        };
                        let dense =
                            dispatch_kernel_on(dtype, &shape, causal, H100_SM_COUNT, (9, 0));
                        let dense = dense.unwrap();
                        let kernel = planned(&options, (9, 0));
                        let context =
                            format!("{shape:?} {dtype:?} causal={causal}: {}", kernel.entry);
                        if dense.spec.family == Family::Sm90
                            && SM90_ONE_MODIFIER_TILES.contains(&dense.spec.tile)
                        {
                            assert_eq!(kernel.spec.variant, *variant, "{context}");
                            assert_eq!(kernel.spec.family, Family::Sm90, "{context}");
                            assert_eq!(kernel.spec.tile, dense.spec.tile, "{context}");
                            *on_its_kernels += 1;
                        } else {
                            let modified =
                                modified_kernel_on(dtype, &shape, causal, H100_SM_COUNT, (9, 0));
                            assert_eq!(kernel, modified.unwrap(), "{context}");
                        }
                        // Another modifier besides (the softcap with ALiBi, a window with
                        // either), or a device without the sm90 family: the modified kernels,
                        // which run every combination.
                        let both = ForwardOptions {
                            softcap: Some(30.0),
                            ..options
                        };
                        let windowed = ForwardOptions {
                            window: window(Some(255), Some(0)),
                            ..options
                        };
                        let others: &[ForwardOptions] = if alibi {
                            &[both, windowed]
                        } else {
                            &[windowed]
                        };
                        for other in others {
                            assert_eq!(
                                planned(other, (9, 0)).spec.variant,
                                Variant::Modified,
                                "{context}"
                            );
                        }
                        assert_eq!(
                            planned(&options, (8, 9)),
                            modified_kernel_on(dtype, &shape, causal, H100_SM_COUNT, (8, 9))
                                .unwrap(),
                            "{context}"
                        );
                    }
                }
            }
        }
    }
    // D=64 and D=128 at each shape, dtype and mask, where the sm_90a table runs the sm90 family.
    for (variant, on_its_kernels) in alone {
        assert!(
            on_its_kernels >= 2 * 4 * 2 * 2,
            "{variant:?}: {on_its_kernels}"
        );
    }
}

#[test]
fn an_alibi_problem_takes_a_named_alibi_or_modified_kernel_and_no_other() {
    let shape = AttentionShape::new(2, 16, 4096, 128);
    let alibi = kernel_by_name("flash_fwd_f16_d128_m128_n128_w12_s2_alibi_sm90a").unwrap();
    let modified = kernel_by_name("flash_fwd_f16_d128_m128_n128_w12_s2_mod_sm90a").unwrap();
    let dense = kernel_by_name("flash_fwd_f16_d128_m128_n128_w12_s2_sm90a").unwrap();
    let named = |kernel, softcap| ForwardOptions {
        kernel: Some(kernel),
        softcap,
        ..ForwardOptions::default()
    };
    let planned = |options: ForwardOptions| {
        plan_alibi_on(
            Dtype::F16,
            &shape,
            &options,
            AlibiLayout::PerHead,
            H100_SM_COUNT,
            (9, 0),
        )
        .map(|plan| plan.kernel())
    };
    assert_eq!(planned(named(alibi, None)), Ok(alibi));
    assert_eq!(planned(named(modified, None)), Ok(modified));
    let needs_alibi = Error::KernelVariantMismatch {
        kernel: dense.entry,
        needed: Variant::Alibi,
    };
    assert_eq!(planned(named(dense, None)), Err(needs_alibi.clone()));
    assert_eq!(
        needs_alibi.to_string(),
        "flash_fwd_f16_d128_m128_n128_w12_s2_sm90a is neither an Alibi nor a Modified kernel, \
         one of which this call needs"
    );
    // With a softcap too, only a modified kernel.
    assert_eq!(
        planned(named(alibi, Some(30.0))),
        Err(Error::KernelVariantMismatch {
            kernel: alibi.entry,
            needed: Variant::Modified
        })
    );
    // And a plain problem not on an ALiBi kernel.
    assert_eq!(
        plan_on(
            Dtype::F16,
            &shape,
            &named(alibi, None),
            H100_SM_COUNT,
            (9, 0)
        )
        .map(|plan| plan.kernel()),
        Err(Error::KernelVariantMismatch {
            kernel: alibi.entry,
            needed: Variant::Dense
        })
    );
}
