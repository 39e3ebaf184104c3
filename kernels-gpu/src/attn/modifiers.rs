//! The score modifiers of the modified kernels
//! ([`Variant::Modified`](flash_attn_params::Variant::Modified); ALiBi alone in the
//! [`Variant::Alibi`](flash_attn_params::Variant::Alibi) ones, the softcap alone in the
//! [`Variant::Softcap`](flash_attn_params::Variant::Softcap) ones), applied to a warp's block of
//! scores after `S = Q Kᵀ` and before the mask: the softcap, then the ALiBi bias (the order of
//! FlashAttention's, whose bias is added to the capped scores). The scores stay in the kernel's
//! unscaled units, which the softmax multiplies by `scale_log2`; [`ModifierParams`] says how the
//! host folds the softmax scale and the softcap into those units, so that neither costs a
//! multiply per score here beyond its own.
//!
//! [`ModifierParams`]: flash_attn_params::ModifierParams

use flash_attn_params::{Mask, ModifierParams};

use crate::attn::mask::ScoresPlace;
use crate::attn::softmax::Scores;
use crate::fragment::{Lane, LaneRows};
use crate::ptx::tanh_approx_f32;

/// The visibility rule of a modified kernel's problem of `seq_len_q` queries (1 for a packed
/// decode block's rows) and `seq_len_kv` keys: the host gives both window offsets (an
/// unbounded side as the offset that bounds nothing), so the window code has no `None` path
/// to carry.
#[inline(always)]
pub fn window_mask(modifiers: &ModifierParams, seq_len_q: u32, seq_len_kv: u32) -> Mask {
    Mask::windowed(
        seq_len_q,
        seq_len_kv,
        Some(modifiers.window_left),
        Some(modifiers.window_right),
    )
}

/// The ALiBi slope of query head `head` of batch entry `batch` in the scores' units.
///
/// # Safety
/// `modifiers.alibi_slopes` is not 0 and holds that slope ([`ModifierParams`]' contract).
#[inline(always)]
pub unsafe fn alibi_slope(modifiers: &ModifierParams, batch: u32, head: usize) -> f32 {
    let slopes = modifiers.alibi_slopes as *const f32;
    let batch_base = batch as usize * modifiers.alibi_batch_stride as usize;
    *slopes.add(batch_base + head) * modifiers.alibi_slope_scale
}

/// Applies a modified kernel's score modifiers to a warp's block of scores at `place`, before
/// its mask: the softcap where one is set, then (where `has_alibi`) the ALiBi bias of each
/// row's slope (`slopes`, see `add_alibi`). Both switches are warp-uniform, tested once per
/// key block. Returns the offsets that the softmax adds to the stored scores (ALiBi's part
/// that is constant along each of this lane's rows; 0 without ALiBi).
#[inline(always)]
pub fn apply_modifiers<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    modifiers: &ModifierParams,
    has_alibi: bool,
    slopes: &LaneRows<M_TILES>,
    place: ScoresPlace,
) -> LaneRows<M_TILES> {
    if modifiers.softcap_input_scale != 0.0 {
        apply_softcap(scores, modifiers.softcap_input_scale);
    }
    if has_alibi {
        add_alibi(scores, slopes, place)
    } else {
        [[0.0; 2]; M_TILES]
    }
}

/// Replaces every score `s` with `tanh(s * input_scale)`: the softcap, in units of the cap
/// (`input_scale` is `softmax_scale / softcap`, and the softmax's `scale_log2` is
/// `softcap * log2(e)`). One multiply and one `tanh.approx` per score.
#[inline(always)]
pub fn apply_softcap<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    input_scale: f32,
) {
    // Index loops: LLVM unrolls them fully and keeps the scores in registers (an iterator
    // chain over the nested arrays stayed a loop, and put the scores in local memory).
    for m in 0..M_TILES {
        for n in 0..KEY_STEPS {
            for half_n in 0..2 {
                for element in 0..4 {
                    let score = &mut scores.tiles[m][n][half_n][element];
                    // SAFETY: `tanh.approx.f32` has no precondition.
                    *score = unsafe { tanh_approx_f32(*score * input_scale) };
                }
            }
        }
    }
}

/// Adds the ALiBi bias `-slope * |distance|` to every score, `distance` being the score's
/// distance from its row's diagonal key (the block's visibility rule at `place`,
/// [`flash_attn_params::TileMask::diagonal_column`]) and `slope` its row's slope in the scores'
/// units (`slopes[m][half_m]`, `slope * alibi_slope_scale`: the head's, or in a packed decode
/// block each row's own head's), less the returned per-row offsets, which the softmax adds back
/// ([`crate::attn::softmax::RowOffsets`]).
///
/// Where every key that the warp's rows see in the block lies on one side of each row's
/// diagonal (every block of a causal problem, the diagonal's included, whose keys past it the
/// mask removes; a non-causal row's blocks but one or two), the distance is `sign *
/// (first_distance - c)`, `c` the score's column past this lane's first (a compile-time
/// constant) and `first_distance` the row's distance at that first column, so the bias is `sign
/// * slope * c` per score, one fused multiply-add, and `-sign * slope * first_distance` per row,
/// the offset. Elsewhere, per score one fused multiply-add on the distance's absolute value,
/// and offsets 0; the distances are subtractions of `c`, which a lane's two rows share (see
/// `add_alibi_across_the_diagonal`). The side is warp-uniform: one branch per block.
///
/// Distances are exact in f32 up to 2^24 keys; beyond that they round to f32 (a relative error
/// of 2^-24 in the bias).
#[inline(always)]
pub fn add_alibi<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    slopes: &LaneRows<M_TILES>,
    place: ScoresPlace,
) -> LaneRows<M_TILES> {
    let ScoresPlace { rule, lane, .. } = place;
    let (first_row, last_row) = place.warp_rows::<M_TILES>();
    let last_column = 16 * KEY_STEPS as i32 - 1;
    // +1: every distance the rows see at least 0 (the keys at or before every row's diagonal);
    // -1: at most 0.
    let side = if rule.sees_no_key_past_the_diagonal(first_row, last_column) {
        Some(1.0)
    } else if rule.sees_no_key_before_the_diagonal(last_row) {
        Some(-1.0)
    } else {
        None
    };
    let mut offsets = [[0.0; 2]; M_TILES];
    // The first distance of each of this lane's rows.
    let first_distances: LaneRows<M_TILES> = core::array::from_fn(|m| {
        core::array::from_fn(|half_m| {
            (rule.diagonal_column(place.row(m, half_m)) - lane.first_column() as i32) as f32
        })
    });
    // Two bodies behind the one branch, not a choice per row or score.
    if let Some(sign) = side {
        for m in 0..M_TILES {
            for half_m in 0..2 {
                let signed_slope = sign * slopes[m][half_m];
                offsets[m][half_m] = -signed_slope * first_distances[m][half_m];
                for_each_row_score(scores, m, half_m, |column_past_first, score| {
                    core::intrinsics::fmaf32(column_past_first, signed_slope, score)
                });
            }
        }
    } else if place.one_query {
        add_alibi_across_the_diagonal::<M_TILES, KEY_STEPS, 0>(scores, slopes, &first_distances);
    } else {
        add_alibi_across_the_diagonal::<M_TILES, KEY_STEPS, 8>(scores, slopes, &first_distances);
    }
    offsets
}

/// ALiBi's bias on a block whose keys lie on both sides of some row's diagonal: per score
/// `-slope * |first_distance - c|` (see [`add_alibi`]), where a lane's row `(m, 1)` is
/// `ROW_STEP` rows after its row `(m, 0)` ([`Lane::row`]'s 8; 0 in a packed decode block, whose
/// rows are one query). Row `(m, 1)`'s distance at column `c` is then row `(m, 0)`'s at `c -
/// ROW_STEP`, the same subtraction of the same exact integers, which LLVM computes once: a
/// lane's two rows share all but two of their subtractions (34 for 64 scores at 128 keys).
#[inline(always)]
fn add_alibi_across_the_diagonal<
    const M_TILES: usize,
    const KEY_STEPS: usize,
    const ROW_STEP: usize,
>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    slopes: &LaneRows<M_TILES>,
    first_distances: &LaneRows<M_TILES>,
) {
    let row_step = ROW_STEP as f32;
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let slope = slopes[m][half_m];
            for_each_row_score(scores, m, half_m, |column_past_first, score| {
                // Constant-folded per score: which row's subtraction this score shares.
                let distance = if half_m == 1 && column_past_first >= row_step {
                    first_distances[m][0] - (column_past_first - row_step)
                } else {
                    first_distances[m][half_m] - column_past_first
                };
                core::intrinsics::fmaf32(distance.abs(), -slope, score)
            });
        }
    }
}

/// Replaces each score of row `(m, half_m)` with `update(c, score)`, `c` the score's column
/// past this lane's first, as f32 (a compile-time constant).
#[inline(always)]
fn for_each_row_score<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    m: usize,
    half_m: usize,
    update: impl Fn(f32, f32) -> f32,
) {
    for n in 0..KEY_STEPS {
        for half_n in 0..2 {
            for column in 0..2 {
                let column_past_first = Lane::column_past_first(n, half_n, column) as f32;
                let score = scores.element(m, half_m, n, half_n, column);
                *score = update(column_past_first, *score);
            }
        }
    }
}
