//! Online softmax on MMA accumulator fragments, in f32 and log2 space.
//!
//! Each lane holds two rows per m16 tile (rows `g` and `g + 8`, `g = lane / 4`); the four lanes of
//! a quad share a row, so row reductions are two butterfly shuffles.

use crate::fragment::{Accumulator, AccumulatorTile, LaneRows};
use crate::ptx::{
    ex2_approx_ftz_f32, lg2_approx_ftz_f32, max_f32, shfl_sync_bfly_f32, vote_sync_any,
};

/// Scores or probabilities of one warp for one key block: rows of the warp by `16 KEY_STEPS`
/// keys.
pub type Scores<const M_TILES: usize, const KEY_STEPS: usize> = Accumulator<M_TILES, KEY_STEPS>;

/// The output accumulator of one warp: rows of the warp by `16 DIM_STEPS` head dims.
pub type Output<const M_TILES: usize, const DIM_STEPS: usize> = Accumulator<M_TILES, DIM_STEPS>;

/// Running row maxima (in raw score units) and partial row sums of this lane's rows.
pub struct OnlineSoftmax<const M_TILES: usize> {
    row_max: LaneRows<M_TILES>,
    row_sum: LaneRows<M_TILES>,
}

/// How far (in log2 units of the scaled scores) a row maximum may grow past the running one
/// before the output is rescaled: probabilities stay at most 2^8 = 256 (FlashAttention-4's
/// choice).
pub const RESCALE_THRESHOLD_LOG2: f32 = 8.0;

/// `value`, or 0 for -inf (a row that has seen no visible key yet).
#[inline(always)]
fn finite_or_zero(value: f32) -> f32 {
    if value == f32::NEG_INFINITY {
        0.0
    } else {
        value
    }
}

/// Per row of this lane, what to add to a key block's scores as they are stored to get the
/// scores the softmax is of: the part of a modifier that is constant along a lane's row of the
/// block, which [`crate::attn::modifiers::apply_modifiers`] leaves out of its per-score work
/// (ALiBi's, on a block wholly on one side of the rows' diagonals). `None`: the stored scores
/// are the scores (a constant at the dense kernels' call sites, where it compiles to nothing).
pub type RowOffsets<const M_TILES: usize> = Option<LaneRows<M_TILES>>;

/// `value` plus row `(m, half)`'s offset, if any.
#[inline(always)]
fn with_offset<const M_TILES: usize>(
    value: f32,
    offsets: &RowOffsets<M_TILES>,
    m: usize,
    half: usize,
) -> f32 {
    match offsets {
        Some(offsets) => value + offsets[m][half],
        None => value,
    }
}

/// `value` less row `(m, half)`'s offset, if any.
#[inline(always)]
fn less_offset<const M_TILES: usize>(
    value: f32,
    offsets: &RowOffsets<M_TILES>,
    m: usize,
    half: usize,
) -> f32 {
    match offsets {
        Some(offsets) => value - offsets[m][half],
        None => value,
    }
}

/// The maximum of this lane's `4 * KEY_STEPS` scores of row `group + 8 * half` of one m16 tile,
/// as a balanced tree: depth `2 + log2(KEY_STEPS)` instead of a chain of `4 * KEY_STEPS`
/// dependent `max` (16 for BLOCK_N = 64), which only two or four rows per lane could interleave.
#[inline(always)]
unsafe fn lane_row_max<const KEY_STEPS: usize>(
    tile_row: &[[AccumulatorTile; 2]; KEY_STEPS],
    half: usize,
) -> f32 {
    // `max_f32` is inline assembly: LLVM re-linearises a tree of `maxnum` into one chain.
    let max = |a, b| max_f32(a, b);
    let mut per_step: [f32; KEY_STEPS] = core::array::from_fn(|n| {
        let [low, high] = tile_row[n];
        max(
            max(low[2 * half], low[2 * half + 1]),
            max(high[2 * half], high[2 * half + 1]),
        )
    });
    // Fold the upper half onto the lower until one value is left.
    let mut width = KEY_STEPS;
    while width > 1 {
        for i in 0..width / 2 {
            per_step[i] = max(per_step[i], per_step[width - 1 - i]);
        }
        width = width.div_ceil(2);
    }
    per_step[0]
}

/// [`lane_row_max`] with the per-step maxima in a loop rather than `array::from_fn`, for
/// [`OnlineSoftmax::fold`]: in the sm90 loop's larger bodies LLVM left `from_fn`'s closure out
/// of line (a call and a bounds check in the PTX). The sm80 loop keeps [`lane_row_max`]: this
/// form changed the PTX of four of its dispatched kernels (`d160`/`d224_m64_n32_w4_s1_pad`),
/// whose timing it has not been checked against yet.
#[inline(always)]
unsafe fn lane_row_max_unrolled<const KEY_STEPS: usize>(
    tile_row: &[[AccumulatorTile; 2]; KEY_STEPS],
    half: usize,
) -> f32 {
    let max = |a, b| max_f32(a, b);
    let mut per_step = [0.0; KEY_STEPS];
    for n in 0..KEY_STEPS {
        let [low, high] = tile_row[n];
        per_step[n] = max(
            max(low[2 * half], low[2 * half + 1]),
            max(high[2 * half], high[2 * half + 1]),
        );
    }
    let mut width = KEY_STEPS;
    while width > 1 {
        for i in 0..width / 2 {
            per_step[i] = max(per_step[i], per_step[width - 1 - i]);
        }
        width = width.div_ceil(2);
    }
    per_step[0]
}

#[inline(always)]
unsafe fn quad_max(value: f32) -> f32 {
    let value = value.max(shfl_sync_bfly_f32(value, 1));
    value.max(shfl_sync_bfly_f32(value, 2))
}

#[inline(always)]
unsafe fn quad_sum(value: f32) -> f32 {
    let value = value + shfl_sync_bfly_f32(value, 1);
    value + shfl_sync_bfly_f32(value, 2)
}

impl<const M_TILES: usize> Default for OnlineSoftmax<M_TILES> {
    /// No keys seen yet: maxima at -inf, sums at 0.
    #[inline(always)]
    fn default() -> Self {
        Self {
            row_max: [[f32::NEG_INFINITY; 2]; M_TILES],
            row_sum: [[0.0; 2]; M_TILES],
        }
    }
}

impl<const M_TILES: usize> OnlineSoftmax<M_TILES> {
    /// Folds one key block into the running softmax: replaces `scores` with unnormalised
    /// probabilities `2^(s * scale_log2 - max * scale_log2)` against the running row maxima,
    /// and when those move, rescales `output` and the row sums by `2^(old - new)`. Each score
    /// `s` is the stored one plus its row's offset where `offsets` has one: the offset goes
    /// into the row's block maximum (before the quad's lanes compare theirs) and into the
    /// maximum subtracted from the stored scores, one addition per row instead of per score.
    ///
    /// The running maximum only moves when some row of the warp has grown by more than
    /// [`RESCALE_THRESHOLD_LOG2`] (FlashAttention-4's lazy rescaling): below that, a stale
    /// maximum only lets probabilities reach `2^RESCALE_THRESHOLD_LOG2`, which f32 sums, f32
    /// accumulators and 16-bit P hold exactly as well (relative precision), and the final
    /// division by the row sum cancels it. The skipped rescale is 2 `ex2` and `2 * DIM_STEPS * 4`
    /// multiplies per row pair and block. The row sums stay per lane (no shuffles) until
    /// [`Self::finish`].
    ///
    /// The sm80 loop's fold; [`Self::fold`] is the sm90 one. Both are `raise_maxima` and
    /// `exponentiate`; this one takes each lane's row maxima with `lane_row_max`, whose PTX
    /// the sm80 kernels were tuned against (see `lane_row_max_unrolled`).
    ///
    /// # Safety
    /// All lanes of the warp call it together (it shuffles and votes).
    #[inline(always)]
    pub unsafe fn update<const KEY_STEPS: usize, const DIM_STEPS: usize>(
        &mut self,
        scores: &mut Scores<M_TILES, KEY_STEPS>,
        offsets: RowOffsets<M_TILES>,
        output: &mut Output<M_TILES, DIM_STEPS>,
        scale_log2: f32,
    ) {
        self.raise_maxima(
            scores,
            &offsets,
            scale_log2,
            #[inline(always)]
            |tile_row, half| lane_row_max(tile_row, half),
            #[inline(always)]
            |m, half, rescale| {
                for d in 0..DIM_STEPS {
                    for half_d in 0..2 {
                        for column in 0..2 {
                            *output.element(m, half, d, half_d, column) *= rescale;
                        }
                    }
                }
            },
        );
        self.exponentiate(scores, &offsets, scale_log2);
    }

    /// [`Self::update`] for a main loop whose output is still being written (by an
    /// asynchronous `P V` of the previous block) when this block's scores are ready: the same
    /// fold, with the output's rescale returned instead of applied, for the caller to apply
    /// once the output is its own again: [`OutputRescale::apply`].
    ///
    /// # Safety
    /// As for [`Self::update`].
    #[inline(always)]
    pub unsafe fn fold<const KEY_STEPS: usize>(
        &mut self,
        scores: &mut Scores<M_TILES, KEY_STEPS>,
        offsets: RowOffsets<M_TILES>,
        scale_log2: f32,
    ) -> OutputRescale<M_TILES> {
        let mut rescale = OutputRescale {
            factors: [[1.0; 2]; M_TILES],
            needed: false,
        };
        self.raise_maxima(
            scores,
            &offsets,
            scale_log2,
            #[inline(always)]
            |tile_row, half| lane_row_max_unrolled(tile_row, half),
            #[inline(always)]
            |m, half, factor| {
                rescale.factors[m][half] = factor;
                rescale.needed = true;
            },
        );
        self.exponentiate(scores, &offsets, scale_log2);
        rescale
    }

    /// The first half of a fold: raises the running maxima to this block's where some row of
    /// the warp grew past [`RESCALE_THRESHOLD_LOG2`], rescaling the row sums, and hands each
    /// row's factor to `rescale_output` (for every row of the warp, or for none: the choice is
    /// warp-uniform). `lane_row_max` takes this lane's maximum of one row of a tile's scores
    /// (the row `half` says), as [`lane_row_max`] does.
    #[inline(always)]
    unsafe fn raise_maxima<const KEY_STEPS: usize>(
        &mut self,
        scores: &Scores<M_TILES, KEY_STEPS>,
        offsets: &RowOffsets<M_TILES>,
        scale_log2: f32,
        lane_row_max: impl Fn(&[[AccumulatorTile; 2]; KEY_STEPS], usize) -> f32,
        mut rescale_output: impl FnMut(usize, usize, f32),
    ) {
        // lane_max[m][half]: this lane's maxima of the block's scores, row by row.
        let mut lane_max = [[f32::NEG_INFINITY; 2]; M_TILES];
        let mut grew = false;
        for m in 0..M_TILES {
            for half in 0..2 {
                lane_max[m][half] =
                    with_offset(lane_row_max(&scores.tiles[m], half), offsets, m, half);
                // A row grew iff one of its quad's lanes saw it grow: the quad shares the
                // running maximum. So the vote needs no shuffle, and the quads' shuffles run
                // only when the maxima move, not before every block's `ex2` (the D=64 sm90
                // kernels 2-4% faster, the D=128 ones 0-1%: BENCHMARKS.md log 59). True for the
                // first key of a row (the old maximum is -inf), false while a row sees only
                // masked keys (both -inf).
                grew |= lane_max[m][half] * scale_log2
                    > self.row_max[m][half] * scale_log2 + RESCALE_THRESHOLD_LOG2;
            }
        }
        if vote_sync_any(grew) {
            // new_max[m][half]: the row maxima over the running maximum and this block.
            let mut new_max = self.row_max;
            for m in 0..M_TILES {
                for half in 0..2 {
                    new_max[m][half] = quad_max(max_f32(lane_max[m][half], self.row_max[m][half]));
                }
            }
            // Until some row of the warp has seen a visible key, its output and sums are still
            // all 0: the first key block of every tile skips the multiplies (64 per lane at
            // D=128, 0.8% of a 1024-key window's instructions, ncu, log 39).
            let mut seen_keys = false;
            for m in 0..M_TILES {
                for half in 0..2 {
                    seen_keys |= self.row_max[m][half] != f32::NEG_INFINITY;
                }
            }
            let rescale_sums = vote_sync_any(seen_keys);
            for m in 0..M_TILES {
                for half in 0..2 {
                    let rescale = ex2_approx_ftz_f32(
                        self.row_max[m][half] * scale_log2
                            - finite_or_zero(new_max[m][half]) * scale_log2,
                    );
                    self.row_max[m][half] = new_max[m][half];
                    if rescale_sums {
                        self.row_sum[m][half] *= rescale;
                        rescale_output(m, half, rescale);
                    }
                }
            }
        }
    }

    /// The second half of a fold: turns `scores` into probabilities against the running
    /// maxima and adds them to the row sums.
    #[inline(always)]
    unsafe fn exponentiate<const KEY_STEPS: usize>(
        &mut self,
        scores: &mut Scores<M_TILES, KEY_STEPS>,
        offsets: &RowOffsets<M_TILES>,
        scale_log2: f32,
    ) {
        for m in 0..M_TILES {
            for half in 0..2 {
                // A row that has seen only masked keys keeps max -inf: subtract 0 instead, so
                // that its probabilities are ex2(-inf) = 0 rather than NaN. The stored scores
                // are the scores less the row's offset: so is the maximum they are taken from.
                let max_scaled =
                    less_offset(finite_or_zero(self.row_max[m][half]), offsets, m, half)
                        * scale_log2;
                for n in 0..KEY_STEPS {
                    for half_n in 0..2 {
                        for column in 0..2 {
                            let score = scores.element(m, half, n, half_n, column);
                            *score = ex2_approx_ftz_f32(core::intrinsics::fmaf32(
                                *score,
                                scale_log2,
                                -max_scaled,
                            ));
                        }
                    }
                }
                // A chain, not a tree: it hides behind the `ex2` that feed it.
                let mut block_sum = 0.0;
                for n in 0..KEY_STEPS {
                    for half_n in 0..2 {
                        for column in 0..2 {
                            block_sum += *scores.element(m, half, n, half_n, column);
                        }
                    }
                }
                self.row_sum[m][half] += block_sum;
            }
        }
    }

    /// For each of this lane's rows: `1 / row_sum` (0 for a row that saw no key, so its output
    /// is 0) and the logsumexp of its scaled scores in natural-log units (-inf for such a row).
    ///
    /// # Safety
    /// All lanes of the warp call it together (it shuffles).
    #[inline(always)]
    pub unsafe fn finish(&self, scale_log2: f32) -> RowResults<M_TILES> {
        let mut results = RowResults {
            inverse_sum: [[0.0; 2]; M_TILES],
            logsumexp: [[f32::NEG_INFINITY; 2]; M_TILES],
        };
        for m in 0..M_TILES {
            for half in 0..2 {
                let sum = quad_sum(self.row_sum[m][half]);
                if sum != 0.0 {
                    results.inverse_sum[m][half] = 1.0 / sum;
                    let log2_sum = self.row_max[m][half] * scale_log2 + lg2_approx_ftz_f32(sum);
                    results.logsumexp[m][half] = log2_sum * core::f32::consts::LN_2;
                }
            }
        }
        results
    }
}

/// Per-row results of [`OnlineSoftmax::finish`], for this lane's rows.
pub struct RowResults<const M_TILES: usize> {
    pub inverse_sum: LaneRows<M_TILES>,
    pub logsumexp: LaneRows<M_TILES>,
}

/// The rescale of the output that [`OnlineSoftmax::fold`] asks for: one factor per row of this
/// lane, where the running maxima moved (`needed`, warp-uniform).
pub struct OutputRescale<const M_TILES: usize> {
    factors: LaneRows<M_TILES>,
    needed: bool,
}

impl<const M_TILES: usize> OutputRescale<M_TILES> {
    /// Multiplies each row of `output` by its factor, if any moved.
    #[inline(always)]
    pub fn apply<const DIM_STEPS: usize>(&self, output: &mut Output<M_TILES, DIM_STEPS>) {
        if self.needed {
            for m in 0..M_TILES {
                for half in 0..2 {
                    for d in 0..DIM_STEPS {
                        for half_d in 0..2 {
                            for column in 0..2 {
                                *output.element(m, half, d, half_d, column) *=
                                    self.factors[m][half];
                            }
                        }
                    }
                }
            }
        }
    }
}
