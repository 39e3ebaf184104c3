//! The mask on a warp's scores: every score of a key that its query row does not see (the
//! visibility rule, [`flash_attn_params::Mask`], in the block's coordinates) or of a key past
//! the end becomes -inf, so that the softmax gives it probability 0.

use flash_attn_params::TileMask;

use crate::attn::softmax::Scores;
use crate::fragment::Lane;

/// Masks `scores`, the warp's block of scores (rows from `warp_row` of the block, keys from 0),
/// with `rule`, the visibility rule in block coordinates (row `r` and key `k` of the block);
/// with `one_query` every row is row 0 (a packed decode step's rows: one query position).
///
/// Per row the rule is one range, `key_start(r) <= k < key_end(r)`; with this lane's part of
/// `k` split off into the row's limits, each element is compared with a compile-time constant.
/// A rule without a left bound (the dense kernels': no window) compiles to the end test alone.
///
/// The kernel forms `rule` only for key blocks that start before the end of what the block's
/// last query sees, which keeps `key_end(r)` far above `i32::MIN` (at least `-BLOCK_M`); the
/// start, which a window's left offset can push anywhere, is subtracted saturating.
#[inline(always)]
pub fn mask_scores<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    rule: TileMask,
    warp_row: usize,
    lane: Lane,
    one_query: bool,
) {
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = if one_query {
                0
            } else {
                (warp_row + lane.row(m, half_m)) as i32
            };
            let first_column = lane.first_column() as i32;
            let key_limit = rule.key_end(row) - first_column;
            let start_limit = rule
                .key_start(row)
                .map(|start| start.saturating_sub(first_column));
            for n in 0..KEY_STEPS {
                for half_n in 0..2 {
                    for column in 0..2 {
                        let column_past_first = Lane::column_past_first(n, half_n, column) as i32;
                        if column_past_first >= key_limit
                            || start_limit.is_some_and(|start| column_past_first < start)
                        {
                            *scores.element(m, half_m, n, half_n, column) = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}
