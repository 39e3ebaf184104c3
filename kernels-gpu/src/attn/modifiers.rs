//! The score modifiers of the modified kernels
//! ([`Variant::Modified`](flash_attn_params::Variant::Modified)), applied to a warp's block of
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
/// key block.
#[inline(always)]
pub fn apply_modifiers<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    modifiers: &ModifierParams,
    has_alibi: bool,
    slopes: &LaneRows<M_TILES>,
    place: ScoresPlace,
) {
    if modifiers.softcap_input_scale != 0.0 {
        apply_softcap(scores, modifiers.softcap_input_scale);
    }
    if has_alibi {
        add_alibi(scores, slopes, place);
    }
}

/// Replaces every score `s` with `tanh(s * input_scale)`: the softcap, in units of the cap
/// (`input_scale` is `softmax_scale / softcap`, and the softmax's `scale_log2` is
/// `softcap * log2(e)`). One multiply and one `tanh.approx` per score.
#[inline(always)]
fn apply_softcap<const M_TILES: usize, const KEY_STEPS: usize>(
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
/// block each row's own head's). Per row one conversion of this lane's first distance to f32;
/// per score a subtraction of a compile-time constant and one fused multiply-add.
///
/// Distances are exact in f32 up to 2^24 keys; beyond that they round to f32 (a relative error
/// of 2^-24 in the bias).
#[inline(always)]
fn add_alibi<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    slopes: &LaneRows<M_TILES>,
    place: ScoresPlace,
) {
    let ScoresPlace { rule, lane, .. } = place;
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = place.row(m, half_m);
            let first_distance = (rule.diagonal_column(row) - lane.first_column() as i32) as f32;
            let slope = slopes[m][half_m];
            for n in 0..KEY_STEPS {
                for half_n in 0..2 {
                    for column in 0..2 {
                        let column_past_first = Lane::column_past_first(n, half_n, column) as f32;
                        let distance = first_distance - column_past_first;
                        let score = scores.element(m, half_m, n, half_n, column);
                        *score = core::intrinsics::fmaf32(distance.abs(), -slope, *score);
                    }
                }
            }
        }
    }
}
