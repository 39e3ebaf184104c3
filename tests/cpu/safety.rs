//! The safe API cannot be driven outside its buffers: property tests over random shapes,
//! layouts, strides, kernels and buffer lengths, with values drawn near the u32 and u64 edges.
//!
//! For every case, [`plan`] and [`LaunchPlan::check_buffers`] (what `forward` runs before it
//! launches) must not panic, and must either return a specific error or accept a launch in
//! which, modelled here independently of the host code and in u128/i128:
//! - every address any thread of the grid reads or writes lies inside its buffer;
//! - every offset the kernel forms (padding rows included) fits its type: the 32-bit row and
//!   i32 mask arithmetic, and 64-bit element offsets whose byte value stays below 2^63;
//! - distinct output rows never share an element.
//!
//! The model follows `kernels-gpu/src/fwd/sm80.rs`. Offsets grow with each index (strides are
//! unsigned), so the blocks at the corners of the grid bound every block's addresses.
//!
//! Cases may carry the score modifiers (a sliding window, a softcap, ALiBi slopes in either
//! layout and a slopes buffer of any length), planned as the safe calls plan them ([`plan`],
//! [`plan_on`], [`plan_alibi`], [`plan_alibi_on`]): a modified kernel of either family must
//! also form its window's u32 and i32 mask arithmetic without wrapping and read only slopes
//! inside their buffer. The KV-cache cases (contiguous, paged, packed queries; a quarter of
//! them decode steps) draw the same modifiers and plan ALiBi through the serving calls' own
//! planners ([`plan_kv_cache_alibi`], [`plan_paged_kv_cache_alibi`],
//! [`plan_varlen_kv_cache_alibi`]), with the same two checks at the longest lengths; those with
//! a device plan for it ([`plan_kv_cache_on`], [`plan_paged_kv_cache_on`],
//! [`plan_varlen_kv_cache_on`]), which on compute capability 9.0 runs the sm90 family's serving
//! and paged kernels where they take the call.

use flash_attn::{
    kernel_head_dim, plan, plan_alibi, plan_alibi_on, plan_kv_cache, plan_kv_cache_alibi,
    plan_kv_cache_on, plan_on, plan_paged_kv_cache, plan_paged_kv_cache_alibi,
    plan_paged_kv_cache_on, plan_varlen_kv_cache, plan_varlen_kv_cache_alibi,
    plan_varlen_kv_cache_on, AlibiLayout, AttentionShape, BufferLengths, Dtype, Error, Family,
    ForwardOptions, ForwardStrides, LaunchPlan, Layout, PagedKvCache, SlidingWindow, TensorStrides,
    Variant, VarlenCacheExtents, FORWARD_KERNELS, MAX_SEQ_LEN, MAX_TENSOR_BYTES,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// Sizes near the edges that index arithmetic breaks at, and small ones that make launches.
fn dimension() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 1usize..=9,
        3 => 10usize..=300,
        2 => prop::sample::select(vec![
            63, 64, 65, 127, 128, 129, 4097, 65_535, 65_536, 1 << 20, (1 << 30) - 1, 1 << 30,
            (1 << 30) + 1, (1 << 31) - 1, 1 << 31, u32::MAX as usize, 1 << 32, (1 << 32) + 1,
            1 << 62, 1 << 63, usize::MAX - 1, usize::MAX,
        ]),
        1 => any::<usize>(),
    ]
}

/// [`dimension`], and key lengths of real prompts and caches, where the dispatch tables choose
/// other tiles (the sm_90a table from 512 keys on).
fn key_length() -> impl Strategy<Value = usize> {
    prop_oneof![1 => dimension(), 1 => 300usize..=5000]
}

fn head_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => prop::sample::select(vec![64usize, 128]),
        2 => (1usize..=32).prop_map(|granules| granules * 8),
        1 => prop::sample::select(vec![0usize, 4, 100, 264, 1 << 32, usize::MAX]),
    ]
}

/// Element strides: small multiples of 8, powers of two up to 2^63, the u32 and u64 edges, and
/// anything at all (mostly misaligned).
fn stride() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..=2048).prop_map(|chunks| chunks * 8),
        3 => (3u32..=63).prop_map(|power| 1u64 << power),
        2 => prop::sample::select(vec![
            u32::MAX as u64 - 7, u32::MAX as u64 + 1, (u32::MAX as u64 + 1) * 8,
            (u64::MAX / 2) & !7, (u64::MAX / 3) & !7, !7, u64::MAX,
        ]),
        1 => any::<u64>(),
    ]
}

fn tensor_strides() -> impl Strategy<Value = TensorStrides> {
    (stride(), stride(), stride()).prop_map(|(batch, head, seq)| TensorStrides { batch, head, seq })
}

/// What a buffer holds relative to what the plan requires.
#[derive(Clone, Copy, Debug)]
enum Length {
    Exact,
    OneShort,
    Extra(usize),
    Any(usize),
}

fn length() -> impl Strategy<Value = Length> {
    prop_oneof![
        24 => Just(Length::Exact),
        1 => Just(Length::OneShort),
        2 => (0usize..=1024).prop_map(Length::Extra),
        1 => any::<usize>().prop_map(Length::Any),
    ]
}

impl Length {
    fn of(self, required: usize) -> usize {
        match self {
            Length::Exact => required,
            Length::OneShort => required.saturating_sub(1),
            Length::Extra(extra) => required.saturating_add(extra),
            Length::Any(length) => length,
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    dtype: Dtype,
    shape: AttentionShape,
    options: ForwardOptions,
    sm_count: usize,
    /// The device the plan is for (`plan_on`, which dispatches on compute capability 9.0 to the
    /// sm_90a table first), or none (`plan`, the main table).
    compute_capability: Option<(i32, i32)>,
    lengths: [Length; 4],
    lse: Option<Length>,
    /// ALiBi slopes in `layout` and a slopes buffer of `length` (planned with [`plan_alibi`] or
    /// [`plan_alibi_on`]), or none.
    alibi: Option<(AlibiLayout, Length)>,
}

/// One side of a sliding window: unbounded, near the diagonal, a real window's, or at the
/// edges of the offsets the kernel's arithmetic takes (`±2^30`) and of i64.
fn window_side() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        2 => Just(None),
        3 => (0i64..=8).prop_map(Some),
        2 => (9i64..=5000).prop_map(Some),
        2 => prop::sample::select(vec![
            -1i64, -5, -(1 << 30), (1 << 30) - 1, 1 << 30, (1 << 30) + 1, 1 << 31, i64::MAX,
            i64::MIN,
        ])
        .prop_map(Some),
    ]
}

/// A softcap: a model's (Gemma 2's 30 and 50), any positive one, or one that is not finite
/// and positive.
fn softcap() -> impl Strategy<Value = f32> {
    prop_oneof![
        2 => prop::sample::select(vec![30.0f32, 50.0]),
        2 => 1e-3f32..1e4,
        1 => prop::sample::select(vec![
            0.0f32, -1.0, f32::NAN, f32::INFINITY, f32::MIN_POSITIVE, f32::MAX,
        ]),
    ]
}

/// Boxed: the KV-cache cases nest it, and the unboxed strategy's generation overflowed the
/// test thread's stack in debug builds.
fn case() -> BoxedStrategy<Case> {
    let shape = (
        dimension(),
        dimension(),
        prop_oneof![3 => 1usize..=8, 1 => dimension()],
        dimension(),
        key_length(),
        head_dim(),
    )
        .prop_map(
            |(batch, heads_kv, group, seq_len_q, seq_len_kv, head_dim)| AttentionShape {
                batch,
                heads_q: heads_kv.saturating_mul(group),
                heads_kv,
                seq_len_q,
                seq_len_kv,
                head_dim,
            },
        );
    let strides = prop::option::weighted(
        0.5,
        (
            tensor_strides(),
            tensor_strides(),
            tensor_strides(),
            tensor_strides(),
        )
            .prop_map(|(q, k, v, o)| ForwardStrides { q, k, v, o }),
    );
    let kernel = prop::option::weighted(0.2, 0..FORWARD_KERNELS.len());
    let window = prop::option::weighted(
        0.3,
        (window_side(), window_side()).prop_map(|(left, right)| SlidingWindow { left, right }),
    );
    let softcap = prop::option::weighted(0.2, softcap());
    let modifiers = (window, softcap);
    let options = (any::<bool>(), any::<bool>(), strides, kernel, modifiers).prop_map(
        |(causal, bshd, strides, kernel, (window, softcap))| ForwardOptions {
            causal,
            layout: if bshd { Layout::Bshd } else { Layout::Bhsd },
            strides,
            kernel: kernel.map(|index| &FORWARD_KERNELS[index]),
            window,
            softcap,
            ..Default::default()
        },
    );
    let alibi = prop::option::weighted(
        0.25,
        (
            prop::sample::select(vec![AlibiLayout::PerHead, AlibiLayout::PerBatchAndHead]),
            length(),
        ),
    );
    (
        any::<bool>(),
        shape,
        options,
        prop_oneof![1usize..=256, Just(0), Just(usize::MAX)],
        prop::option::of(prop::sample::select(vec![(8, 0), (8, 9), (9, 0)])),
        [length(), length(), length(), length()],
        prop::option::of(length()),
        alibi,
    )
        .prop_map(
            |(bf16, shape, options, sm_count, compute_capability, lengths, lse, alibi)| Case {
                dtype: if bf16 { Dtype::Bf16 } else { Dtype::F16 },
                shape,
                options,
                sm_count,
                compute_capability,
                lengths,
                lse,
                alibi,
            },
        )
        .boxed()
}

/// The case's buffers, sized from the plan's requirements by the case's length policies.
fn buffers(case: &Case, plan: &LaunchPlan) -> BufferLengths {
    let required = plan.required();
    let [q, k, v, o] = case.lengths;
    BufferLengths {
        q: q.of(required.q),
        k: k.of(required.k),
        v: v.of(required.v),
        o: o.of(required.o),
        lse: case.lse.map(|lse| lse.of(required.lse.unwrap_or(0))),
    }
}

/// Runs what `forward` (or with ALiBi `forward_alibi_raw`) runs before launching: `Ok` is an
/// accepted launch, with the slopes buffer's length where the case has ALiBi.
fn validate(case: &Case) -> Result<(LaunchPlan, BufferLengths, Option<usize>), Error> {
    let (dtype, shape, options, sm_count) = (case.dtype, &case.shape, &case.options, case.sm_count);
    let plan = match (case.compute_capability, case.alibi) {
        (None, None) => plan(dtype, shape, options, sm_count)?,
        (Some(compute_capability), None) => {
            plan_on(dtype, shape, options, sm_count, compute_capability)?
        }
        (None, Some((layout, _))) => plan_alibi(dtype, shape, options, layout, sm_count)?,
        (Some(compute_capability), Some((layout, _))) => {
            plan_alibi_on(dtype, shape, options, layout, sm_count, compute_capability)?
        }
    };
    let buffers = buffers(case, &plan);
    plan.check_buffers(&buffers)?;
    let slopes = case
        .alibi
        .map(|(_, length)| length.of(plan.alibi_slopes_len()));
    if let Some(slopes) = slopes {
        plan.check_alibi_slopes_len(slopes)?;
    }
    Ok((plan, buffers, slopes))
}

/// The strides the case means, derived here from the layout in u128 (`None`: they pass u64).
fn expected_strides(case: &Case) -> Option<ForwardStrides> {
    if let Some(strides) = case.options.strides {
        return Some(strides);
    }
    let s = &case.shape;
    let dense = |heads: usize, seq_len: usize| {
        let (h, s_, d) = (heads as u128, seq_len as u128, s.head_dim as u128);
        let (batch, head, seq) = match case.options.layout {
            Layout::Bhsd => (h * s_ * d, s_ * d, d),
            Layout::Bshd => (s_ * h * d, d, h * d),
        };
        Some(TensorStrides {
            batch: u64::try_from(batch).ok()?,
            head: u64::try_from(head).ok()?,
            seq: u64::try_from(seq).ok()?,
        })
    };
    let q = dense(s.heads_q, s.seq_len_q)?;
    let kv = dense(s.heads_kv, s.seq_len_kv)?;
    Some(ForwardStrides {
        q,
        k: kv,
        v: kv,
        o: q,
    })
}

/// An element offset the kernel forms as `batch * batch_stride + head * head_stride +
/// row * seq_stride + column`, each product in 64 bits: asserts that nothing wraps and that the
/// byte offset stays below 2^63, and returns it.
fn kernel_offset(strides: &TensorStrides, batch: u32, head: u32, row: u64, column: u64) -> u128 {
    let products = [
        batch as u128 * strides.batch as u128,
        head as u128 * strides.head as u128,
        row as u128 * strides.seq as u128,
    ];
    for product in products {
        assert!(
            product <= u64::MAX as u128,
            "a 64-bit product wraps: {product}"
        );
    }
    let offset = products.iter().sum::<u128>() + column as u128;
    assert!(
        offset * 2 <= MAX_TENSOR_BYTES as u128,
        "byte offset {} passes 2^63",
        offset * 2
    );
    offset
}

/// A 32-bit value of the kernel's row arithmetic: asserts that it fits.
fn u32_value(value: u128) -> u32 {
    u32::try_from(value).unwrap_or_else(|_| panic!("u32 row arithmetic wraps: {value}"))
}

/// An i32 value of the kernel's mask arithmetic: asserts that it fits.
fn i32_value(value: i128) -> i32 {
    i32::try_from(value).unwrap_or_else(|_| panic!("i32 mask arithmetic wraps: {value}"))
}

/// Checks an accepted launch against the model of the kernel: see the module's doc.
fn check_accepted(
    case: &Case,
    plan: &LaunchPlan,
    buffers: &BufferLengths,
    alibi_slopes: Option<usize>,
) {
    let shape = &case.shape;
    let tile = plan.kernel().spec.tile;
    let params = plan.params();
    let strides = expected_strides(case).expect("accepted strides fit in u64");
    assert_eq!(plan.kernel().spec.dtype, case.dtype);
    // Its own head dim, or (a kernel that pads) a larger one: the options may name any.
    assert!(plan.kernel().spec.runs_head_dim(shape.head_dim));
    if case.options.kernel.is_none() {
        assert_eq!(
            Ok(tile.head_dim),
            kernel_head_dim(case.dtype, plan.kernel().spec.variant, shape.head_dim)
        );
    }
    assert_eq!(params.head_dim as usize, shape.head_dim);
    assert_eq!(
        (
            params.q_strides,
            params.k_strides,
            params.v_strides,
            params.o_strides
        ),
        (strides.q, strides.k, strides.v, strides.o)
    );
    assert_eq!(params.seq_len_q as usize, shape.seq_len_q);
    assert_eq!(params.seq_len_kv as usize, shape.seq_len_kv);
    assert_eq!(params.heads_q as usize, shape.heads_q);
    assert_eq!(
        (params.kv_group_size as usize) * shape.heads_kv,
        shape.heads_q
    );
    assert!(shape.seq_len_q <= MAX_SEQ_LEN && shape.seq_len_kv <= MAX_SEQ_LEN);
    assert!(params.scale_log2.is_finite() && params.scale_log2 > 0.0);

    let (block_m, block_n) = (tile.block_m as u128, tile.block_n as u128);
    // The tiles the kernel computes, (query blocks, heads, batch): the grid's blocks, or a
    // persistent kernel's walk over them (`TileSchedule`, numbered in u32 from `params.batch`)
    // with one block per SM at most.
    let query_blocks = (shape.seq_len_q as u128).div_ceil(block_m);
    let tiles = (
        u32_value(query_blocks),
        shape.heads_q as u32,
        shape.batch as u32,
    );
    assert_eq!(params.batch as usize, shape.batch);
    let grid = plan.grid();
    if plan.kernel().spec.is_persistent() {
        // One block per tile, or (tiles of about the same length) one per SM at most.
        let count = u32_value(query_blocks * shape.heads_q as u128 * shape.batch as u128);
        assert_eq!((grid.1, grid.2), (1, 1));
        assert!(grid.0 == count || (grid.0 >= 1 && grid.0 as usize <= case.sm_count.max(1)));
        assert!(grid.0 <= count);
    } else {
        assert_eq!(grid, tiles);
    }
    assert!(tiles.0 <= i32::MAX as u32 && tiles.1 <= 65_535 && tiles.2 <= 65_535);

    let (seq_q, seq_kv) = (shape.seq_len_q as u128, shape.seq_len_kv as u128);
    let head_dim = shape.head_dim as u64;
    let causal = case.options.causal;
    for block_x in [0, tiles.0 - 1] {
        for head in [0, tiles.1 - 1] {
            for batch in [0, tiles.2 - 1] {
                let kv_head = head / params.kv_group_size;
                // Query rows and the keys they need (fwd/sm80.rs: first_query .. key_blocks).
                let first_query = u32_value(block_x as u128 * block_m) as u128;
                u32_value(first_query + block_m);
                let last_query = (first_query + block_m).min(seq_q) - 1;
                let key_end = if causal {
                    (u32_value(last_query + 1 + seq_kv) as u128)
                        .saturating_sub(seq_q)
                        .min(seq_kv)
                } else {
                    seq_kv
                };
                let key_blocks = key_end.div_ceil(block_n);
                if causal {
                    u32_value(first_query + 1 + seq_kv);
                }
                // The masked loop's i32 arithmetic, at its extreme block and rows.
                for block in [0, key_blocks.saturating_sub(1)] {
                    let block_start = u32_value(block * block_n) as i128;
                    let keys_left = i32_value(seq_kv as i128 - block_start);
                    let diagonal = i32_value(first_query as i128 + seq_kv as i128) as i128
                        - i32_value(seq_q as i128 + block_start) as i128;
                    for row in [0, block_m as i128 - 1] {
                        i32_value(keys_left.min(i32_value(row + diagonal + 1)) as i128);
                    }
                }

                // Q: rows first_query .. last_query read (missing rows clamp to the last).
                let q_end = kernel_offset(&strides.q, batch, head, last_query as u64, head_dim);
                assert!(q_end <= buffers.q as u128, "q read past its buffer");
                // K and V: whole blocks while they fit the sequence, clamped rows after.
                let last_key = (key_blocks * block_n).min(seq_kv).max(1) - 1;
                for (tensor, tensor_strides, length) in
                    [("k", &strides.k, buffers.k), ("v", &strides.v, buffers.v)]
                {
                    let end =
                        kernel_offset(tensor_strides, batch, kv_head, last_key as u64, head_dim);
                    assert!(end <= length as u128, "{tensor} read past its buffer");
                }
                // O: rows below seq_len_q written; the pointer walks every row of the tile.
                let o_end = kernel_offset(&strides.o, batch, head, last_query as u64, head_dim);
                assert!(o_end <= buffers.o as u128, "o written past its buffer");
                kernel_offset(
                    &strides.o,
                    batch,
                    head,
                    (first_query + block_m - 1) as u64,
                    head_dim,
                );
                if let Some(lse_length) = buffers.lse {
                    let slice = batch as u128 * shape.heads_q as u128 + head as u128;
                    let end = slice * seq_q + last_query + 1;
                    assert!(end <= lse_length as u128, "lse written past its buffer");
                    assert!(end * 4 <= MAX_TENSOR_BYTES as u128);
                }
            }
        }
    }
    check_output_rows_disjoint(shape, &strides.o);
    check_modifiers(case, plan, alibi_slopes);
}

/// A modified launch (any launch of a case with a modifier must be one): the window's offsets
/// within the kernel's `±2^30`, its u32 and i32 mask arithmetic (`params::Mask` and
/// `TileMask`, which the modified kernels of both families form per block and per row) without
/// wrapping at the grid's corner blocks, and the ALiBi slopes the grid reads inside their
/// buffer. Where the case has no modifier the plan must carry none.
fn check_modifiers(case: &Case, plan: &LaunchPlan, alibi_slopes: Option<usize>) {
    let shape = &case.shape;
    // A window may run as a dense kernel only where the dense kernel's rule (causal or not)
    // shows every query the keys the window (with the causal mask) shows: compared at the
    // first and last 2048 queries.
    let dense_causal = plan.params().causal != 0;
    let window_bounds_something = case.options.window.is_some_and(|window| {
        let (seq_q, seq_kv) = (shape.seq_len_q as i128, shape.seq_len_kv as i128);
        let right = match (window.right, case.options.causal) {
            (Some(right), true) => Some(right.min(0)),
            (None, true) => Some(0),
            (right, false) => right,
        };
        let visible = |left: Option<i64>, right: Option<i64>, query: i128| {
            let window = (left.map(i128::from), right.map(i128::from));
            let (start, end) = model_key_range(window, seq_q, seq_kv, query);
            if start < end {
                (start, end)
            } else {
                (0, 0)
            }
        };
        let dense_right = dense_causal.then_some(0);
        (0..seq_q.min(2048))
            .chain((seq_q - 2048).max(0)..seq_q)
            .any(|query| visible(window.left, right, query) != visible(None, dense_right, query))
    });
    let has_modifier =
        window_bounds_something || case.options.softcap.is_some() || case.alibi.is_some();
    let variant = plan.kernel().spec.variant;
    let Some(modifiers) = plan.modifiers() else {
        assert!(!has_modifier, "a modifier ran on the {variant:?} kernel");
        return;
    };
    // ALiBi or the softcap alone runs a single-modifier kernel where the device has one of
    // the dense problem's tile.
    let alone = match (case.alibi.is_some(), case.options.softcap.is_some()) {
        _ if window_bounds_something => None,
        (true, false) => Some(Variant::Alibi),
        (false, true) => Some(Variant::Softcap),
        _ => None,
    };
    assert!(
        variant == Variant::Modified || Some(variant) == alone,
        "{variant:?}"
    );
    assert_eq!(
        modifiers.alibi_slopes, 0,
        "a plan has no device address yet"
    );
    let softcap_scale = modifiers.softcap_input_scale;
    assert!(softcap_scale.is_finite() && softcap_scale >= 0.0);
    assert_eq!(softcap_scale > 0.0, case.options.softcap.is_some());
    assert!(modifiers.alibi_slope_scale.is_finite());
    let tile = plan.kernel().spec.tile;
    let query_blocks = plan.grid().0 as i128;
    let lengths = (shape.seq_len_q as i128, shape.seq_len_kv as i128);
    check_window_arithmetic(
        modifiers,
        lengths,
        query_blocks,
        (tile.block_m, tile.block_n),
    );
    match (case.alibi, alibi_slopes) {
        (Some((layout, _)), Some(slopes)) => {
            check_slope_reads(modifiers, layout, slopes, shape.batch, shape.heads_q)
        }
        (None, None) => assert_eq!(plan.alibi_slopes_len(), 0),
        _ => unreachable!("validate reads slopes exactly where the case has ALiBi"),
    }
}

/// A modified launch's window arithmetic: the offsets within the kernel's `±2^30`, and its u32
/// and i32 mask arithmetic (`params::Mask` and `TileMask`, which the modified kernels of both
/// families form per block and per row) without wrapping at the corner query blocks of
/// `query_blocks`, for `seq_q` queries (the mask's: 1 for a packed decode block, whose rows
/// are one query) and `seq_kv` keys. A serving plan is checked at its longest lengths, which
/// bound every sequence's sums.
fn check_window_arithmetic(
    modifiers: &flash_attn::ModifierParams,
    (seq_q, seq_kv): (i128, i128),
    query_blocks: i128,
    (block_m, block_n): (usize, usize),
) {
    let offset_limit = 1i64 << 30;
    for offset in [modifiers.window_left, modifiers.window_right] {
        assert!((-offset_limit..=offset_limit).contains(&(offset as i64)));
    }
    let (left, right) = (
        modifiers.window_left as i128,
        modifiers.window_right as i128,
    );
    let (block_m, block_n) = (block_m as i128, block_n as i128);
    let u32_fits = |value: i128| {
        assert!(
            (0..=u32::MAX as i128).contains(&value),
            "u32 mask arithmetic wraps: {value}"
        );
        value
    };
    // Mask::key_start and key_end of a query: the u32 sums before their saturating
    // subtraction fit, and their values are the model's.
    let range = |query: i128| model_key_range((Some(left), Some(right)), seq_q, seq_kv, query);
    let key_start = |query: i128| {
        let (up, down) = (left.max(0), (-left).max(0));
        u32_fits(seq_q + up);
        u32_fits(query + seq_kv + down);
        range(query).0
    };
    let key_end = |query: i128| {
        let (up, down) = (right.max(0), (-right).max(0));
        u32_fits(seq_q + down);
        u32_fits(query + 1 + seq_kv + up);
        range(query).1
    };
    for first_query in [0, (query_blocks - 1).min((seq_q - 1) / block_m) * block_m] {
        let last_query = (first_query + block_m).min(seq_q) - 1;
        let (first_key, end_key) = (key_start(first_query), key_end(last_query));
        key_start(last_query);
        key_end(first_query);
        // The blocks the tile computes: TileMask::in_tile of each, and its rows' limits.
        let first_block = first_key / block_n;
        let key_blocks = (end_key + block_n - 1) / block_n;
        for block in [first_block, key_blocks.max(first_block + 1) - 1] {
            let block_start = block * block_n;
            if block_start >= seq_kv {
                continue;
            }
            i32_value(seq_kv - block_start);
            let diagonal = i32_value(u32_fits(first_query + seq_kv)) as i128
                - i32_value(u32_fits(seq_q + block_start)) as i128;
            i32_value(diagonal);
            for row in [0, block_m - 1] {
                // key_end: row + diagonal + 1 before its saturating add; key_start and ALiBi's
                // distance: the diagonal column, less this lane's first column (below 8).
                i32_value(row + diagonal + 1);
                i32_value(row + diagonal - 8);
            }
        }
    }
}

/// The ALiBi slopes a modified launch reads, one per (batch entry or sequence, query head) of
/// `batch` and `heads_q` (a packed decode block's rows each read their own head's), inside the
/// `slopes` the buffer holds, in `layout`.
fn check_slope_reads(
    modifiers: &flash_attn::ModifierParams,
    layout: AlibiLayout,
    slopes: usize,
    batch: usize,
    heads_q: usize,
) {
    let batch_stride = match layout {
        AlibiLayout::PerHead => 0,
        AlibiLayout::PerBatchAndHead => heads_q as u128,
    };
    assert_eq!(modifiers.alibi_batch_stride as u128, batch_stride);
    // The last (batch, head) of the grid reads the highest slope.
    let last = (batch as u128 - 1) * batch_stride + heads_q as u128 - 1;
    assert!(last < slopes as u128, "an ALiBi slope read past its buffer");
}

/// Distinct output rows share no element: every pair when the output has at most 4096 rows,
/// else a deterministic sample of pairs.
fn check_output_rows_disjoint(shape: &AttentionShape, o: &TensorStrides) {
    let dims = [
        shape.batch as u128,
        shape.heads_q as u128,
        shape.seq_len_q as u128,
    ];
    let start = |[b, h, s]: [u128; 3]| b * o.batch as u128 + h * o.head as u128 + s * o.seq as u128;
    let rows = dims.iter().product::<u128>();
    let d = shape.head_dim as u128;
    if rows <= 4096 {
        let mut starts: Vec<u128> = (0..rows)
            .map(|i| start([i / (dims[1] * dims[2]), i / dims[2] % dims[1], i % dims[2]]))
            .collect();
        starts.sort_unstable();
        for pair in starts.windows(2) {
            assert!(
                pair[1] >= pair[0] + d,
                "output rows alias at offset {}",
                pair[1]
            );
        }
    } else {
        let mut state = rows as u64 ^ o.batch ^ o.head.rotate_left(21) ^ o.seq.rotate_left(42);
        let mut next = |bound: u128| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as u128 % bound
        };
        for _ in 0..256 {
            let a = [next(dims[0]), next(dims[1]), next(dims[2])];
            let mut b = [next(dims[0]), next(dims[1]), next(dims[2])];
            if a == b {
                b[2] = (b[2] + 1) % dims[2];
                if a == b {
                    continue;
                }
            }
            let (x, y) = (start(a), start(b));
            assert!(
                x + d <= y || y + d <= x,
                "output rows {a:?} and {b:?} alias"
            );
        }
    }
}

/// The errors validation may give: each names what is wrong. A CUDA or loading error here
/// would mean validation reached the driver.
fn is_specific(error: &Error) -> bool {
    matches!(
        error,
        Error::UnsupportedHeadDim { .. }
            | Error::InvalidHeadDim { .. }
            | Error::ZeroSizedDimension { .. }
            | Error::InvalidGqaRatio { .. }
            | Error::KernelDtypeMismatch { .. }
            | Error::KernelHeadDimMismatch { .. }
            | Error::ProblemTooLarge { .. }
            | Error::TensorTooLarge { .. }
            | Error::BufferTooSmall { .. }
            | Error::MisalignedStride { .. }
            | Error::OverlappingOutput { .. }
            | Error::InvalidSoftmaxScale { .. }
            | Error::UnknownKernel { .. }
            | Error::KernelVariantMismatch { .. }
            | Error::KernelNotForKvCache { .. }
            | Error::UnsupportedPageSize { .. }
            | Error::PagedCapacityMismatch { .. }
            | Error::PagedStridesMismatch { .. }
            | Error::InvalidSplitCount { .. }
            | Error::InvalidSoftcap { .. }
            | Error::EmptyWindow { .. }
            | Error::WindowExcludesEveryKey { .. }
            | Error::AlibiSlopesTooShort { .. }
    )
}

proptest! {
    #![proptest_config(Config { cases: 6000, ..Config::default() })]

    #[test]
    fn validation_accepts_only_launches_that_stay_inside_their_buffers(case in case()) {
        match validate(&case) {
            Ok((plan, buffers, slopes)) => check_accepted(&case, &plan, &buffers, slopes),
            Err(error) => prop_assert!(is_specific(&error), "{error:?}"),
        }
    }
}

/// The property above is only as strong as the cases that pass validation: the generator must
/// produce accepted launches, rejected ones, and accepted ones with large offsets.
#[test]
fn the_generator_reaches_accepted_rejected_and_large_cases() {
    let mut runner = TestRunner::deterministic();
    let (mut accepted, mut rejected, mut large, mut sm90) = (0, 0, 0, 0);
    let (mut modified, mut modified_sm90, mut alibi) = (0, 0, 0);
    for _ in 0..4000 {
        let case = case().new_tree(&mut runner).unwrap().current();
        match validate(&case) {
            Ok((plan, _, slopes)) => {
                accepted += 1;
                large += (plan.required().o as u64 > u32::MAX as u64) as usize;
                let family = plan.kernel().spec.family;
                // The sm90 family's tiles chosen by the sm_90a table, not named by the case.
                sm90 += (family == Family::Sm90 && case.options.kernel.is_none()) as usize;
                if plan.modifiers().is_some() {
                    modified += 1;
                    modified_sm90 += (family == Family::Sm90) as usize;
                    alibi += slopes.is_some() as usize;
                }
            }
            Err(_) => rejected += 1,
        }
    }
    let counts = format!(
        "{accepted} accepted ({large} past 2^32 elements, {sm90} dispatched to the sm90 family, \
         {modified} modified: {modified_sm90} on the sm90 family, {alibi} with ALiBi), \
         {rejected} rejected"
    );
    eprintln!("{counts}");
    assert!(
        accepted >= 200
            && rejected >= 200
            && large >= 20
            && sm90 >= 10
            && modified >= 100
            && modified_sm90 >= 10
            && alibi >= 30,
        "{counts}"
    );
}

/// The overflows that once wrapped: each is now a specific error.
#[test]
fn extents_past_64_bits_are_errors_not_wraps() {
    let shape = AttentionShape {
        batch: 3,
        ..AttentionShape::new(1, 2, 16, 64)
    };
    let dense = Layout::Bhsd.strides(2, 16, 64).unwrap();
    // (batch - 1) * 2^63 is 2^64: it wrapped to 0, so tiny buffers passed and batches aliased.
    let huge = TensorStrides {
        batch: 1 << 63,
        ..dense
    };
    for (tensor, strides) in [
        (
            "q",
            ForwardStrides {
                q: huge,
                k: dense,
                v: dense,
                o: dense,
            },
        ),
        (
            "k",
            ForwardStrides {
                q: dense,
                k: huge,
                v: dense,
                o: dense,
            },
        ),
        (
            "o",
            ForwardStrides {
                q: dense,
                k: dense,
                v: dense,
                o: huge,
            },
        ),
    ] {
        let options = ForwardOptions {
            strides: Some(strides),
            ..Default::default()
        };
        assert_eq!(
            plan(Dtype::F16, &shape, &options, 132).map(|plan| plan.required()),
            Err(Error::TensorTooLarge {
                tensor,
                dimension: "batch"
            })
        );
    }
    // Dense strides whose product passes u64, and element counts that pass usize.
    let wide = AttentionShape {
        heads_q: 1 << 16,
        heads_kv: 1 << 16,
        seq_len_q: 1 << 30,
        seq_len_kv: 1 << 30,
        ..shape
    };
    let wider = AttentionShape {
        head_dim: 1 << 40,
        ..wide
    };
    assert_eq!(
        ForwardOptions::default().resolved_strides(&wider),
        Err(Error::TensorTooLarge {
            tensor: "q",
            dimension: "batch"
        })
    );
    assert!(matches!(
        wider.q_elements(),
        Err(Error::TensorTooLarge { tensor: "q", .. })
    ));
    assert!(matches!(
        AttentionShape {
            batch: usize::MAX,
            ..shape
        }
        .lse_elements(),
        Err(Error::TensorTooLarge {
            tensor: "lse",
            dimension: "heads_q"
        })
    ));
    // The padding rows of the last query tile count: a sequence stride that fits for the rows
    // that exist but not for the tile's padding is rejected.
    let one_row = AttentionShape {
        seq_len_q: 1,
        ..shape
    };
    // One row of 64 at this stride spans 2^63 bytes.
    let seq_stride = 1 << 57;
    let strides = ForwardStrides {
        q: Layout::Bhsd.strides(2, 1, 64).unwrap(),
        k: dense,
        v: dense,
        o: TensorStrides {
            batch: 128,
            head: 64,
            seq: seq_stride,
        },
    };
    let options = ForwardOptions {
        strides: Some(strides),
        ..Default::default()
    };
    assert_eq!(
        plan(Dtype::F16, &one_row, &options, 132).map(|plan| plan.required()),
        Err(Error::TensorTooLarge {
            tensor: "o",
            dimension: "seq"
        })
    );
}

/// A softmax scale that is finite but overflows once folded into log2 space.
#[test]
fn a_scale_that_overflows_in_log2_space_is_rejected() {
    let options = ForwardOptions {
        softmax_scale: Some(f32::MAX),
        ..Default::default()
    };
    assert_eq!(
        plan(
            Dtype::F16,
            &AttentionShape::new(1, 1, 16, 64),
            &options,
            132
        )
        .map(|plan| plan.grid()),
        Err(Error::InvalidSoftmaxScale { scale: f32::MAX })
    );
}

/// A KV-cache case: a dense case's shape and options, (paged) a page size and page count, and
/// (a variable-length batch of queries) the packed query tokens, `shape.seq_len_q` being the
/// longest sequence's.
#[derive(Clone, Debug)]
struct CacheCase {
    case: Case,
    paged: Option<(usize, usize)>,
    tokens_q: Option<usize>,
}

fn cache_case() -> impl Strategy<Value = CacheCase> {
    let page_size = prop_oneof![
        8 => prop::sample::select(vec![16usize, 32, 64, 128, 256]),
        1 => prop::sample::select(vec![0usize, 8, 48, 512]),
    ];
    (
        case(),
        prop::option::weighted(0.5, (page_size, dimension())),
        prop::option::weighted(0.3, dimension()),
        // An explicit split count: mostly 1 to MAX_SPLITS, at times 0 or past it (an error).
        prop::option::weighted(0.2, 0..=flash_attn::MAX_SPLITS + 8),
        // Decode (one query per sequence), the serving calls' commonest case and the one that
        // packs grouped query heads into a tile.
        prop::bool::weighted(0.25),
        // A prefill chunk on Hopper (more than one query), unsplit and unmodified: where the
        // sm90 family's serving and paged kernels take the call, which the random cases reach
        // rarely.
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(mut case, paged, extra_tokens, num_splits, decode, hopper)| {
                case.options.num_splits = num_splits;
                if decode {
                    case.shape.seq_len_q = 1;
                }
                if hopper {
                    case.shape.seq_len_q = case.shape.seq_len_q.max(2);
                    case.compute_capability = Some((9, 0));
                    case.options.num_splits = Some(1);
                    (case.options.window, case.options.softcap, case.alibi) = (None, None, None);
                }
                if let Some((page_size, _)) = paged {
                    // The capacity in whole pages, so that most paged cases are valid; K and V in
                    // the pages' own layout.
                    let pages = case.shape.seq_len_kv.div_ceil(page_size.max(1));
                    case.shape.seq_len_kv = pages.saturating_mul(page_size);
                    case.options.strides = None;
                }
                // Mostly at least the longest sequence's tokens; at times fewer (an error).
                let tokens_q = extra_tokens.map(|extra| case.shape.seq_len_q.saturating_add(extra));
                CacheCase {
                    case,
                    paged,
                    tokens_q,
                }
            },
        )
}

/// An accepted KV-cache launch: its plan, buffers, paged cache and (with ALiBi) slopes.
type AcceptedCache = (
    LaunchPlan,
    BufferLengths,
    Option<PagedKvCache>,
    Option<usize>,
);

/// Plans a KV-cache case as `forward_kv_cache`, `forward_paged_kv_cache` or (packed queries)
/// `forward_varlen_kv_cache` and `forward_varlen_paged_kv_cache` would, or their ALiBi forms
/// where the case has ALiBi (then with the slopes buffer's length).
fn validate_cache(cache: &CacheCase) -> Result<AcceptedCache, Error> {
    let case = &cache.case;
    let paged = cache.paged.map(|(page_size, num_pages)| PagedKvCache {
        num_pages,
        page_size,
        pages_per_sequence: case.shape.seq_len_kv / page_size.max(1),
    });
    let (dtype, shape, options, sm_count) = (case.dtype, &case.shape, &case.options, case.sm_count);
    let layout = case.alibi.map(|(layout, _)| layout);
    let plan = match (cache.tokens_q, &paged, layout) {
        (Some(tokens_q), paged, layout) => {
            let extents = VarlenCacheExtents {
                longest: *shape,
                tokens_q,
            };
            let paged = paged.as_ref();
            match (layout, case.compute_capability) {
                (None, None) => plan_varlen_kv_cache(dtype, &extents, paged, options, sm_count)?,
                (None, Some(capability)) => {
                    plan_varlen_kv_cache_on(dtype, &extents, paged, options, sm_count, capability)?
                }
                (Some(layout), _) => {
                    plan_varlen_kv_cache_alibi(dtype, &extents, paged, options, layout, sm_count)?
                }
            }
        }
        (None, None, None) => match case.compute_capability {
            None => plan_kv_cache(dtype, shape, options, sm_count)?,
            Some(capability) => plan_kv_cache_on(dtype, shape, options, sm_count, capability)?,
        },
        (None, None, Some(layout)) => plan_kv_cache_alibi(dtype, shape, options, layout, sm_count)?,
        (None, Some(paged), None) => match case.compute_capability {
            None => plan_paged_kv_cache(dtype, shape, paged, options, sm_count)?,
            Some(capability) => {
                plan_paged_kv_cache_on(dtype, shape, paged, options, sm_count, capability)?
            }
        },
        (None, Some(paged), Some(layout)) => {
            plan_paged_kv_cache_alibi(dtype, shape, paged, options, layout, sm_count)?
        }
    };
    let buffers = buffers(case, &plan);
    plan.check_buffers(&buffers)?;
    let slopes = case
        .alibi
        .map(|(_, length)| length.of(plan.alibi_slopes_len()));
    if let Some(slopes) = slopes {
        plan.check_alibi_slopes_len(slopes)?;
    }
    Ok((plan, buffers, paged, slopes))
}

/// The keys `start..end` that query `query` of `seq_q` sees among `seq_kv` under the window
/// `(left, right)` (`None`: that side unbounded), FlashAttention's bottom-right-aligned rule,
/// clamped to the keys: modelled in i128 apart from `params::Mask`.
fn model_key_range(
    (left, right): (Option<i128>, Option<i128>),
    seq_q: i128,
    seq_kv: i128,
    query: i128,
) -> (i128, i128) {
    let diagonal = query + seq_kv - seq_q;
    let start = left.map_or(0, |left| (diagonal - left).clamp(0, seq_kv));
    let end = right.map_or(seq_kv, |right| (diagonal + right + 1).clamp(0, seq_kv));
    (start, end)
}

/// The most keys, in whole key blocks, that one query block of a modified serving kernel
/// computes: from the block of its first query's first key to the block of its last query's
/// last key (`params::Mask` in i128), over every query block of `rows` rows (the first and
/// last 2048 where there are more); a packed decode block's rows are each the one query of a
/// sequence of one.
fn window_span_keys(
    modifiers: &flash_attn::ModifierParams,
    rows: u32,
    seq_len_kv: u64,
    one_query: bool,
    (block_m, block_n): (usize, usize),
) -> u64 {
    let (left, right) = (
        modifiers.window_left as i128,
        modifiers.window_right as i128,
    );
    let (seq_q, seq_kv) = (if one_query { 1 } else { rows as i128 }, seq_len_kv as i128);
    let (block_m, block_n) = (block_m as i128, block_n as i128);
    let query_blocks = (rows as i128 + block_m - 1) / block_m;
    let span = |block: i128| {
        let first = if one_query { 0 } else { block * block_m };
        let last = if one_query {
            0
        } else {
            (first + block_m).min(seq_q) - 1
        };
        let window = (Some(left), Some(right));
        let key_start = model_key_range(window, seq_q, seq_kv, first).0;
        let key_end = model_key_range(window, seq_q, seq_kv, last).1;
        let blocks = (key_end + block_n - 1) / block_n - key_start / block_n;
        blocks.max(0) * block_n
    };
    (0..query_blocks.min(2048))
        .chain((query_blocks - 2048).max(0)..query_blocks)
        .map(span)
        .max()
        .unwrap_or(0) as u64
}

/// Checks an accepted KV-cache launch against the kernel's addressing: every block's query and
/// output rows (in the packed view of decode with grouped heads) are the rows of the problem
/// as given and inside their buffers, the logsumexps inside theirs, every key row the block may
/// read inside K and V (every page's, for a paged cache), and the split-KV ranges and workspace
/// consistent.
fn check_accepted_cache(cache: &CacheCase, (plan, buffers, paged, slopes): &AcceptedCache) {
    let (plan, buffers, paged) = (plan, buffers, *paged);
    let shape = &cache.case.shape;
    let params = plan.params();
    let sequences = plan.sequences().expect("a serving plan");
    let tile = plan.kernel().spec.tile;
    assert!(plan.kernel().spec.variant.is_serving());
    assert_eq!(plan.kernel().spec.variant.is_paged(), paged.is_some());
    // The sm90 family's serving and paged kernels run unsplit calls without packed heads or
    // modifiers (their contract: one split), on compute capability 9.0.
    if plan.kernel().spec.family == Family::Sm90 {
        assert_eq!(sequences.splits, 1);
        assert_eq!(params.heads_q as usize, shape.heads_q, "packed heads");
        assert!(plan.modifiers().is_none());
        let named = cache.case.options.kernel.is_some();
        assert!(named || cache.case.compute_capability == Some((9, 0)));
        assert!(
            named || shape.seq_len_q > 1,
            "a decode step stays on the sm80 kernels"
        );
    }
    // Packed queries: Q, O and the logsumexps hold `tokens_q` rows, which the kernel reaches
    // at any batch (batch stride 0) through the offsets, each row of a sequence being a token
    // below `tokens_q`.
    let tokens_q = cache.tokens_q;
    let given = expected_strides(&Case {
        shape: AttentionShape {
            seq_len_q: tokens_q.unwrap_or(shape.seq_len_q),
            ..*shape
        },
        ..cache.case.clone()
    })
    .expect("accepted strides fit in u64");
    let (heads, rows, d) = (params.heads_q, params.seq_len_q, shape.head_dim as u64);
    let group = (shape.heads_q / shape.heads_kv) as u32;
    let packed = heads as usize != shape.heads_q;
    assert!(!packed || (shape.seq_len_q == 1 && heads as usize == shape.heads_kv));
    if let Some(tokens_q) = tokens_q {
        assert!(!packed, "packed queries are not packed heads");
        assert_eq!((params.q_strides.batch, params.o_strides.batch), (0, 0));
        let lse_strides = TensorStrides {
            batch: 0,
            head: tokens_q as u64,
            seq: 1,
        };
        assert_eq!(sequences.lse_strides, lse_strides);
        assert!(rows as usize <= tokens_q);
    }
    // The query rows at the corners: a sequence's first and last (of the longest), or the
    // packed batch's first and last token.
    let last_row = tokens_q.map_or(rows - 1, |tokens| tokens as u32 - 1);
    let splits = sequences.splits;
    let query_blocks = rows.div_ceil(tile.block_m as u32);
    assert_eq!(sequences.query_blocks, query_blocks);
    assert_eq!(
        plan.grid(),
        (query_blocks * splits, heads, shape.batch as u32)
    );
    // Split-KV: whole key blocks per split, every split non-empty, together every key a query
    // block needs: from key 0, or under a window from the block of its first query's first key.
    let (keys, per_split) = (params.seq_len_kv as u64, sequences.keys_per_split as u64);
    assert!(splits >= 1 && splits as usize <= flash_attn::MAX_SPLITS);
    assert!(per_split.is_multiple_of(tile.block_n as u64));
    // (A window's span is sized for its widest alignment, one key block more than some query
    // blocks need: their last split may be empty, never one past that block.)
    let (needed, slack) = match plan.modifiers() {
        None => (keys, 0),
        Some(modifiers) => {
            let one_query = modifiers.rows_share_one_query != 0;
            let blocks = (tile.block_m, tile.block_n);
            let span = window_span_keys(modifiers, rows, keys, one_query, blocks);
            (span, tile.block_n as u64)
        }
    };
    assert!(splits as u64 * per_split >= needed);
    assert!((splits as u64 - 1) * per_split < needed.max(1) + slack);
    if splits > 1 {
        let partial_rows =
            tokens_q.map_or(shape.batch as u64 * rows as u64, |tokens| tokens as u64);
        assert_eq!(sequences.partial_rows as u64, partial_rows);
        let workspace = splits as u64 * heads as u64 * partial_rows * (d + 1) * 4;
        assert!(plan.workspace_bytes() as u64 >= workspace);
        assert_eq!(
            plan.counters() as u64,
            shape.batch as u64 * heads as u64 * query_blocks as u64
        );
    }
    // A modified launch: its window arithmetic at the longest lengths, which bound every
    // sequence's (the one query of a packed decode block), and its slope reads. A softcap or
    // ALiBi always runs one.
    match plan.modifiers() {
        Some(modifiers) => {
            let one_query = modifiers.rows_share_one_query != 0;
            let queries = if one_query { 1 } else { rows as i128 };
            let blocks = (tile.block_m, tile.block_n);
            check_window_arithmetic(
                modifiers,
                (queries, keys as i128),
                query_blocks as i128,
                blocks,
            );
            match (cache.case.alibi, *slopes) {
                (Some((layout, _)), Some(slopes)) => {
                    check_slope_reads(modifiers, layout, slopes, shape.batch, shape.heads_q)
                }
                (None, None) => assert_eq!(plan.alibi_slopes_len(), 0),
                _ => unreachable!("validate_cache reads slopes exactly where the case has ALiBi"),
            }
        }
        None => assert!(
            cache.case.options.softcap.is_none() && cache.case.alibi.is_none(),
            "a modifier ran on the {:?} kernel",
            plan.kernel().spec.variant
        ),
    }
    let lse_elements = match tokens_q {
        Some(tokens) => shape.heads_q as u128 * tokens as u128,
        None => (shape.batch * shape.heads_q * shape.seq_len_q) as u128,
    };
    for batch in [0, shape.batch as u32 - 1] {
        for head in [0, heads - 1] {
            for row in [0, last_row] {
                // The problem's (query head, row) behind this packed one.
                let (original_head, original_row) = if packed {
                    (head * group + row, 0)
                } else {
                    (head, row)
                };
                for (tensor, strides, original, length) in [
                    ("q", &params.q_strides, &given.q, buffers.q),
                    ("o", &params.o_strides, &given.o, buffers.o),
                ] {
                    let at = kernel_offset(strides, batch, head, row as u64, 0);
                    let original = TensorStrides {
                        batch: if tokens_q.is_some() {
                            0
                        } else {
                            original.batch
                        },
                        ..*original
                    };
                    let want =
                        kernel_offset(&original, batch, original_head, original_row as u64, 0);
                    assert_eq!(at, want, "{tensor} row ({batch}, {head}, {row})");
                    assert!(at + d as u128 <= length as u128, "{tensor} past its buffer");
                }
                let lse = kernel_offset(&sequences.lse_strides, batch, head, row as u64, 0);
                let want = match tokens_q {
                    Some(tokens) => original_head as u128 * tokens as u128 + row as u128,
                    None => {
                        (batch as u128 * shape.heads_q as u128 + original_head as u128)
                            * shape.seq_len_q as u128
                            + original_row as u128
                    }
                };
                assert_eq!(lse, want, "logsumexp row ({batch}, {head}, {row})");
                assert!(lse < lse_elements);
                let kv_head = head / params.kv_group_size;
                assert!((kv_head as usize) < shape.heads_kv);
                // The key rows a block reads: any used row (the kernel clamps the used length
                // to the capacity), of any page below `num_pages` when paged.
                for (tensor, strides, length) in [
                    ("k", &params.k_strides, buffers.k),
                    ("v", &params.v_strides, buffers.v),
                ] {
                    let end = match paged {
                        None => kernel_offset(strides, batch, kv_head, keys - 1, d),
                        Some(paged) => {
                            kernel_offset(strides, 0, kv_head, paged.page_size as u64 - 1, d)
                                + (paged.num_pages as u128 - 1) * strides.batch as u128
                        }
                    };
                    assert!(
                        end <= length as u128,
                        "{tensor} read past its buffer: {end} > {length}"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: 4000, ..Config::default() })]

    #[test]
    fn kv_cache_validation_accepts_only_launches_that_stay_inside_their_buffers(
        cache in cache_case()
    ) {
        match validate_cache(&cache) {
            Ok(accepted) => check_accepted_cache(&cache, &accepted),
            Err(error) => prop_assert!(is_specific(&error), "{error:?}"),
        }
    }
}

/// Whether a KV-cache plan packs the query heads of a K/V head into one tile's rows (decode
/// with grouped heads).
fn seen_packed(plan: &LaunchPlan, cache: &CacheCase) -> bool {
    plan.params().heads_q as usize != cache.case.shape.heads_q
}

/// The KV-cache property is only as strong as its accepted cases: contiguous and paged ones,
/// split and not, packed and not, with ALiBi and without.
#[test]
fn the_kv_cache_generator_reaches_every_kind_of_plan() {
    let mut runner = TestRunner::deterministic();
    // contiguous, paged, split, packed heads, varlen, varlen split, explicit split count,
    // modified (a window, a softcap or ALiBi), a window split, ALiBi, ALiBi with packed heads,
    // the sm90 family's kernel, that on packed queries, that on a paged cache
    let mut seen = [0usize; 14];
    let mut rejected = 0;
    for _ in 0..4000 {
        let cache = cache_case().new_tree(&mut runner).unwrap().current();
        match validate_cache(&cache) {
            Ok((plan, _, paged, slopes)) => {
                let split = plan.splits() > 1;
                seen[paged.is_some() as usize] += 1;
                seen[2] += split as usize;
                seen[3] += seen_packed(&plan, &cache) as usize;
                seen[4] += cache.tokens_q.is_some() as usize;
                seen[5] += (cache.tokens_q.is_some() && split) as usize;
                seen[6] += cache.case.options.num_splits.is_some_and(|n| n > 1) as usize;
                let modified = plan.modifiers().is_some();
                seen[7] += modified as usize;
                seen[8] += (modified && split && cache.case.options.window.is_some()) as usize;
                seen[9] += slopes.is_some() as usize;
                seen[10] += (slopes.is_some() && seen_packed(&plan, &cache)) as usize;
                let sm90 = plan.kernel().spec.family == Family::Sm90;
                seen[11] += sm90 as usize;
                seen[12] += (sm90 && cache.tokens_q.is_some()) as usize;
                seen[13] += (sm90 && paged.is_some()) as usize;
            }
            Err(_) => rejected += 1,
        }
    }
    eprintln!(
        "contiguous, paged, split, packed heads, varlen, varlen split, explicit split count, \
         modified, window split, ALiBi, ALiBi packed, sm90, sm90 varlen, sm90 paged: {seen:?}; \
         {rejected} rejected"
    );
    assert!(
        seen.iter().all(|&count| count >= 20) && rejected >= 200,
        "{seen:?}, {rejected}"
    );
}
