//! The mask on a warp's scores: every score of a key that its query row does not see (the
//! visibility rule, [`flash_attn_params::Mask`], in the block's coordinates) or of a key past
//! the end becomes -inf, so that the softmax gives it probability 0.

use flash_attn_params::TileMask;

use crate::attn::softmax::Scores;
use crate::fragment::Lane;

/// Masks `scores`, the warp's block of scores (rows from `warp_row` of the block, keys from 0),
/// with `rule`, the visibility rule in block coordinates (row `r` and key `k` of the block).
///
/// Per row the rule is one bound, `k < key_end(r)`; with this lane's part of `k` split off
/// into `key_limit`, each element is compared with a compile-time constant.
#[inline(always)]
pub fn mask_scores<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    rule: TileMask,
    warp_row: usize,
    lane: Lane,
) {
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = (warp_row + lane.row(m, half_m)) as i32;
            let key_limit = rule.key_end(row) - lane.first_column() as i32;
            for n in 0..KEY_STEPS {
                for half_n in 0..2 {
                    for column in 0..2 {
                        let column_past_first = Lane::column_past_first(n, half_n, column);
                        if column_past_first as i32 >= key_limit {
                            *scores.element(m, half_m, n, half_n, column) = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}
