//! The mask on a warp's scores: every score of a key that its query row does not see (the
//! visibility rule, [`flash_attn_params::Mask`], in the block's coordinates) or of a key past
//! the end becomes -inf, so that the softmax gives it probability 0.

use flash_attn_params::TileMask;

use crate::attn::softmax::ScoreFragments;

/// Masks `scores`, the warp's block of scores, with `rule`, the visibility rule in block
/// coordinates (row `r` and key `k` of the block). This lane's rows are
/// `lane_row + 16 m + 8 half_m` and its keys `lane_key + 16 n + 8 half_n + column` (the
/// accumulator layout).
///
/// Per row the rule is one bound, `k < key_end(r)`; with this lane's part of `k` split off
/// into `key_limit`, each element is compared with a compile-time constant.
#[inline(always)]
pub fn mask_scores<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut ScoreFragments<M_TILES, KEY_STEPS>,
    rule: TileMask,
    lane_row: i32,
    lane_key: i32,
) {
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = lane_row + (16 * m + 8 * half_m) as i32;
            let key_limit = rule.key_end(row) - lane_key;
            for n in 0..KEY_STEPS {
                for half_n in 0..2 {
                    for column in 0..2 {
                        if (16 * n + 8 * half_n + column) as i32 >= key_limit {
                            scores[m][n][half_n][2 * half_m + column] = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}
