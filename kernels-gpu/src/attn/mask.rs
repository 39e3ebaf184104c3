//! The mask on a warp's scores: every score of a key that its query row does not see (the
//! visibility rule, [`flash_attn_params::Mask`], in the block's coordinates) or of a key past
//! the end becomes -inf, so that the softmax gives it probability 0.

use flash_attn_params::{Mask, TileMask};

use crate::attn::softmax::Scores;
use crate::fragment::Lane;

/// Which of a row's two limits a key block's mask tests. A block whose keys all lie before
/// the end of what the tile's first row sees needs no end test, one whose keys all lie at or
/// after the start of what its last row sees needs no start test: a 1024-key window's two
/// edge blocks then test one limit each, not both (one compare per score fewer).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MaskBounds {
    /// Test `key_start(r) <= k` (a rule without a left bound has no start test either way).
    pub start: bool,
    /// Test `k < key_end(r)`.
    pub end: bool,
}

impl MaskBounds {
    /// A block that every row sees whole: no mask.
    pub const NONE: MaskBounds = MaskBounds {
        start: false,
        end: false,
    };
    /// Keys past some row's end (the diagonal, a window's right end, the sequence's end).
    pub const END: MaskBounds = MaskBounds {
        start: false,
        end: true,
    };
}

/// The order the modified kernels visit their key blocks `first..end` in: from the last to the
/// first, as FlashAttention-2 does. ALiBi's bias is largest at the diagonal; visited from the
/// first block on, the rows' maxima grew at nearly every block by more than the lazy rescale's
/// threshold, and the output was rescaled at every block (about one instruction per score
/// more: BENCHMARKS.md log 46). Visits are numbered `first..end` like the blocks (the ring
/// slots, barriers and copy groups count visits); visit `v` computes key block
/// `first + end - 1 - v`.
#[derive(Clone, Copy)]
pub struct LastToFirst {
    /// `first + end`.
    mirror: u32,
}

impl LastToFirst {
    /// The order of the key blocks `first..end`.
    #[inline(always)]
    pub fn new((first, end): (u32, u32)) -> Self {
        Self {
            mirror: first + end,
        }
    }

    /// The key block of visit `visit` (one of `first..end`) of a loop that visits its blocks
    /// in this order where `LAST_TO_FIRST` (the modified kernels' loops, and the sm90
    /// single-modifier kernels' loops of each warpgroup's own blocks), and the block itself
    /// otherwise (the first to the last).
    #[inline(always)]
    pub fn key_block<const LAST_TO_FIRST: bool>(self, visit: u32) -> u32 {
        if LAST_TO_FIRST {
            self.mirror - 1 - visit
        } else {
            visit
        }
    }

    /// The visits of key blocks `begin..end` (within `first..end`; each a boundary between
    /// blocks, mirrored).
    #[inline(always)]
    pub fn visits(self, (begin, end): (u32, u32)) -> (u32, u32) {
        (self.mirror - end, self.mirror - begin)
    }
}

/// The order the ALiBi kernels' dense loop (the warp-specialised tiles) visits its key blocks
/// `first..end` in: the block `front` first, then the others from the last to the first.
/// `front` is the block of the tile's first row's diagonal where every row sees every block
/// (no causal mask), so that ALiBi's rows meet their largest bias first and the lazy rescale
/// stops firing for the blocks after it (visited from the last block on, a non-causal row's
/// maximum grew at every block up to its diagonal's: ALiBi at 2,16,4096,128 non-causal took
/// 1.08x the plain time in that order, 1.02x in this one, BENCHMARKS.md log 66); under causal
/// masking it is the last block, and the order is [`LastToFirst`]'s. Visits are numbered
/// `first..end` as there.
#[derive(Clone, Copy)]
pub struct DiagonalFirst {
    first: u32,
    end: u32,
    /// Within `first..end` (where that is not empty).
    front: u32,
}

impl DiagonalFirst {
    /// The order of the key blocks `first..end` with `front` (clamped into them) first.
    #[inline(always)]
    pub fn new((first, end): (u32, u32), front: u32) -> Self {
        Self {
            first,
            end,
            front: front.min(end.max(first + 1) - 1).max(first),
        }
    }

    /// The key block of visit `visit` (one of `first..end`).
    #[inline(always)]
    pub fn key_block(self, visit: u32) -> u32 {
        if visit == self.first {
            return self.front;
        }
        // The blocks after `front` from the last down, skipping it.
        let from_last = self.end - (visit - self.first);
        if from_last > self.front {
            from_last
        } else {
            from_last - 1
        }
    }

    /// The end of the visits after the first that hold the blocks from `tested_from` on (the
    /// blocks that need the mask's end test): they come right after the first visit, which
    /// holds `front`.
    #[inline(always)]
    pub fn tested_visits_end(self, tested_from: u32) -> u32 {
        let tested = self.end - tested_from.min(self.end);
        let front_tested = (self.front >= tested_from) as u32;
        self.first + 1 + tested - front_tested.min(tested)
    }
}

/// The key blocks of `BLOCK_N` keys that a run of query rows sees, within the block's own
/// (`first..end` of [`crate::attn::block_info::BlockInfo::key_blocks`]), and which limits of
/// the mask each needs tested: for the modified sm90 loop's warpgroups, each computing only the
/// blocks of its own 64 rows. The same rule as the sm80 loop's three key loops (blocks before
/// `key_start(last row)` need the start test, blocks from `whole_key_blocks(first row)` the end
/// test), per run of rows.
#[derive(Clone, Copy)]
pub struct RowsKeyBlocks {
    /// The first block the rows see.
    begin: u32,
    /// The end of the blocks the rows see (`begin` where they see none).
    end: u32,
    /// The blocks before this one hold keys before the first that the last row sees.
    start_tested_before: u32,
    /// The blocks from this one on hold keys past the end of what the first row sees.
    end_tested_from: u32,
}

impl RowsKeyBlocks {
    /// The blocks of queries `first_row..first_row + rows` (those below `seq_len_q`) under
    /// `mask`, within the block's `(first, end)` blocks.
    #[inline(always)]
    pub fn new<const BLOCK_N: usize>(
        mask: Mask,
        first_row: u32,
        rows: u32,
        seq_len_q: u32,
        (first, end): (u32, u32),
    ) -> Self {
        if first_row >= seq_len_q {
            // No query: no block (its output rows are never stored).
            return Self {
                begin: first,
                end: first,
                start_tested_before: 0,
                end_tested_from: 0,
            };
        }
        let last_row = (first_row + rows).min(seq_len_q) - 1;
        let block_n = BLOCK_N as u32;
        let begin = (mask.key_start(first_row) / block_n).max(first);
        Self {
            begin,
            end: mask.key_end(last_row).div_ceil(block_n).min(end).max(begin),
            start_tested_before: mask.key_start(last_row).div_ceil(block_n),
            end_tested_from: mask.whole_key_blocks::<BLOCK_N>(first_row),
        }
    }

    /// The blocks the rows see, `begin..end` (empty where they see none).
    #[inline(always)]
    pub fn range(self) -> (u32, u32) {
        (self.begin, self.end)
    }

    /// The rows' blocks in three runs, `begin..start`, `start..end` and `end..` the rows'
    /// end: the first with the limits [`Self::bounds`] says, the second with none, the third
    /// with the end's (each run possibly empty).
    #[inline(always)]
    pub fn unmasked(self) -> (u32, u32) {
        let start = self.start_tested_before.max(self.begin).min(self.end);
        (start, self.end_tested_from.max(start).min(self.end))
    }

    /// The limits that block `block`'s mask tests for these rows.
    #[inline(always)]
    pub fn bounds(self, block: u32) -> MaskBounds {
        MaskBounds {
            start: block < self.start_tested_before,
            end: block >= self.end_tested_from,
        }
    }
}

/// Where a warp's block of scores lies in its key block: `rule`, the block's visibility rule
/// in block coordinates (row `r` and key `k` of the block), the warp's first row `warp_row`
/// and this lane; with `one_query` every row is row 0 (a packed decode step's rows: one query
/// position). The mask and the ALiBi bias read a score's row and key from it.
#[derive(Clone, Copy)]
pub struct ScoresPlace {
    /// The key block's visibility rule in block coordinates.
    pub rule: TileMask,
    /// The warp's first row in the block.
    pub warp_row: usize,
    /// This lane's place in the warp's fragments.
    pub lane: Lane,
    /// Every row is the one query of a packed decode step.
    pub one_query: bool,
}

impl ScoresPlace {
    /// The block row of this lane's row `half_m` of m-tile `m`.
    #[inline(always)]
    pub fn row(self, m: usize, half_m: usize) -> i32 {
        if self.one_query {
            0
        } else {
            (self.warp_row + self.lane.row(m, half_m)) as i32
        }
    }

    /// The block rows of the warp's first and last rows, for a warp of `M_TILES` m16 tiles:
    /// every row's in between.
    #[inline(always)]
    pub fn warp_rows<const M_TILES: usize>(self) -> (i32, i32) {
        if self.one_query {
            (0, 0)
        } else {
            let first = self.warp_row as i32;
            (first, first + 16 * M_TILES as i32 - 1)
        }
    }
}

/// Masks `scores`, the warp's block of scores at `place`, testing the limits that `bounds`
/// names.
///
/// `bounds` is warp-uniform: each combination is its own unrolled body behind one branch per
/// block (none where `bounds` is a constant at the call site).
#[inline(always)]
pub fn mask_scores<const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    place: ScoresPlace,
    bounds: MaskBounds,
) {
    match (bounds.start, bounds.end) {
        (true, true) => mask_limits::<true, true, M_TILES, KEY_STEPS>(scores, place),
        (true, false) => mask_limits::<true, false, M_TILES, KEY_STEPS>(scores, place),
        (false, true) => mask_limits::<false, true, M_TILES, KEY_STEPS>(scores, place),
        (false, false) => {}
    }
}

/// [`mask_scores`] with compile-time limits: `START` and `END` say which it tests.
///
/// Per row the rule is one range, `key_start(r) <= k < key_end(r)`; with this lane's part of
/// `k` split off into the row's limits, each element is compared with a compile-time constant.
/// A rule without a left bound (the dense kernels': no window) compiles to the end test alone.
///
/// The kernel forms `rule` only for key blocks that start before the end of what the block's
/// last query sees, which keeps `key_end(r)` far above `i32::MIN` (at least `-BLOCK_M`); the
/// start, which a window's left offset can push anywhere, is subtracted saturating.
#[inline(always)]
fn mask_limits<const START: bool, const END: bool, const M_TILES: usize, const KEY_STEPS: usize>(
    scores: &mut Scores<M_TILES, KEY_STEPS>,
    place: ScoresPlace,
) {
    let ScoresPlace { rule, lane, .. } = place;
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = place.row(m, half_m);
            let first_column = lane.first_column() as i32;
            let key_limit = rule.key_end(row) - first_column;
            let start_limit = rule
                .key_start(row)
                .filter(|_| START)
                .map(|start| start.saturating_sub(first_column));
            for n in 0..KEY_STEPS {
                for half_n in 0..2 {
                    for column in 0..2 {
                        let column_past_first = Lane::column_past_first(n, half_n, column) as i32;
                        if (END && column_past_first >= key_limit)
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
