//! Split-KV (serving kernels): a block that computes one split of its query block's keys writes
//! a normalised partial output and its logsumexp to the workspace; the last block of the group
//! to arrive combines the group's partials into the output. One kernel, no second launch: the
//! arrival count is one atomic per block, and the combine reads only the rows that exist.
//!
//! Workspace layout and counters: [`SequenceParams::workspace`].

use flash_attn_params::{ForwardParams, SequenceParams};

use crate::attn::block_info::BlockInfo;
use crate::attn::softmax::{Output, RowResults};
use crate::element::Element;
use crate::fragment::Lane;
use crate::ptx::{
    atom_add_acq_rel_gpu_u32, bar_sync_0, ex2_approx_ftz_f32, fence_acq_rel_gpu, ld_global_cg_f32,
    ld_global_cg_v2_f32, ld_shared_b32, lg2_approx_ftz_f32, max_f32, shfl_sync_bfly_f32,
    st_global_v2_f32, st_relaxed_gpu_u32, st_shared_b32,
};

/// The workspace's three arrays, for one launch.
struct Workspace {
    /// f32 `[splits, heads_q, partial_rows, HEAD_DIM]`.
    outputs: *mut f32,
    /// f32 `[splits, heads_q, partial_rows]`.
    logsumexps: *mut f32,
    /// u32 `[batch, heads_q, query_blocks]`.
    counters: *mut u32,
}

impl Workspace {
    #[inline(always)]
    fn of<const HEAD_DIM: usize>(params: &ForwardParams, sequences: &SequenceParams) -> Self {
        let rows =
            sequences.splits as usize * params.heads_q as usize * sequences.partial_rows as usize;
        let outputs = sequences.workspace as *mut f32;
        let logsumexps = outputs.wrapping_add(rows * HEAD_DIM);
        Self {
            outputs,
            logsumexps,
            counters: sequences.counters as *mut u32,
        }
    }

    /// Row `row` of split `split` and query head `head`, counted in workspace rows.
    #[inline(always)]
    fn row(
        params: &ForwardParams,
        sequences: &SequenceParams,
        split: u32,
        head: u32,
        row: u32,
    ) -> usize {
        (split as usize * params.heads_q as usize + head as usize) * sequences.partial_rows as usize
            + row as usize
    }
}

/// Writes this warp's partial output rows that exist (normalised, f32) and their logsumexps to
/// the workspace.
///
/// # Safety
/// The kernel's launch contract with `splits > 1`: the workspace holds every row written.
#[inline(always)]
pub unsafe fn write_partials<
    const M_TILES: usize,
    const DIM_STEPS: usize,
    const HEAD_DIM: usize,
    const SERVING: bool,
>(
    output: &Output<M_TILES, DIM_STEPS>,
    rows: &RowResults<M_TILES>,
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    warp_row: usize,
    lane: Lane,
) {
    let workspace = Workspace::of::<HEAD_DIM>(params, sequences);
    let first_row = info.workspace_row(params, sequences);
    for m in 0..M_TILES {
        for half_m in 0..2 {
            let row = (warp_row + lane.row(m, half_m)) as u32;
            if info.first_query + row >= info.seq_len_q {
                continue;
            }
            let at = Workspace::row(params, sequences, info.split, info.head, first_row + row);
            let inverse = rows.inverse_sum[m][half_m];
            for d in 0..DIM_STEPS {
                for half_d in 0..2 {
                    let fragment = output.tiles[m][d][half_d];
                    let column = 16 * d + 8 * half_d + lane.first_column();
                    st_global_v2_f32(
                        workspace.outputs.add(at * HEAD_DIM + column),
                        [
                            fragment[2 * half_m] * inverse,
                            fragment[2 * half_m + 1] * inverse,
                        ],
                    );
                }
            }
            if lane.position == 0 {
                *workspace.logsumexps.add(at) = rows.logsumexp[m][half_m];
            }
        }
    }
}

/// Counts this block's arrival in its split group; the last block to arrive resets the counter
/// and returns true, with every other block's partials visible to it.
///
/// # Safety
/// Every thread of the block calls it together, after its [`write_partials`]; `flag` is a
/// 4-byte-aligned `.shared` address that no thread reads or writes concurrently (the
/// barriers here order it).
#[inline(always)]
pub unsafe fn arrive<const BLOCK_M: usize, const HEAD_DIM: usize, const SERVING: bool>(
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    thread: usize,
    flag: u32,
) -> bool {
    // Release: this thread's partials before the block's arrival (which thread 0 makes after
    // the barrier, cumulatively for the block).
    fence_acq_rel_gpu();
    bar_sync_0();
    if thread == 0 {
        let workspace = Workspace::of::<HEAD_DIM>(params, sequences);
        let group = (info.batch as usize * params.heads_q as usize + info.head as usize)
            * sequences.query_blocks as usize
            + (info.first_query / BLOCK_M as u32) as usize;
        let counter = workspace.counters.add(group);
        let last = atom_add_acq_rel_gpu_u32(counter, 1) == sequences.splits - 1;
        if last {
            // Every block of the group has arrived: none touches the counter again in this
            // launch, and the next launch on the stream finds it at 0.
            st_relaxed_gpu_u32(counter, 0);
        }
        st_shared_b32(flag, last as u32);
    }
    bar_sync_0();
    let last = ld_shared_b32(flag) != 0;
    // Acquire, for every thread of the last block: thread 0's atomic read the other blocks'
    // releases, and the barrier ordered the rest of the block after it.
    fence_acq_rel_gpu();
    last
}

/// Combines the split group's partials of the block's rows that exist into the output and the
/// logsumexp: one warp per row, two columns per lane at a time. The partials are `HEAD_DIM`
/// wide; with `PADS` (a kernel that runs padded problems) only the columns up to the problem's
/// head dim are read and stored.
///
/// # Safety
/// Called by the last block of a split group ([`arrive`]), every warp of it; the launch
/// contract of the kernel holds.
#[inline(always)]
pub unsafe fn combine<
    T: Element,
    const BLOCK_M: usize,
    const WARPS: usize,
    const HEAD_DIM: usize,
    const SERVING: bool,
    const PADS: bool,
>(
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    warp: usize,
    lane: usize,
) {
    // Two columns per lane at a time: column pairs `lane + 32 * pair`, the last pair's lanes
    // past the head dim idle (head dims that are not multiples of 64; with `PADS`, the
    // problem's head dim, a multiple of 8, so that a pair is wholly in or out).
    let pairs_per_lane = const {
        assert!(HEAD_DIM <= 256, "at most 4 column pairs per lane");
        HEAD_DIM.div_ceil(64)
    };
    let columns = if PADS {
        params.head_dim as usize
    } else {
        HEAD_DIM
    };
    let is_column = |column: usize| (!PADS && HEAD_DIM.is_multiple_of(64)) || column < columns;
    let workspace = Workspace::of::<HEAD_DIM>(params, sequences);
    let splits = sequences.splits;
    let first_row = info.workspace_row(params, sequences);
    let rows = (info.seq_len_q - info.first_query).min(BLOCK_M as u32);
    let logsumexp_of = |split: u32, row: u32| {
        ld_global_cg_f32(workspace.logsumexps.add(Workspace::row(
            params,
            sequences,
            split,
            info.head,
            first_row + row,
        )))
    };
    let mut row = warp as u32;
    while row < rows {
        // The largest partial logsumexp, then the sum of the partials' weights relative to it.
        let mut largest = f32::NEG_INFINITY;
        let mut split = lane as u32;
        while split < splits {
            largest = max_f32(largest, logsumexp_of(split, row));
            split += 32;
        }
        for step in 0..5 {
            largest = max_f32(largest, shfl_sync_bfly_f32(largest, 16 >> step));
        }
        // A row that sees no key in any split keeps output 0 and logsumexp -inf.
        let reference = if largest == f32::NEG_INFINITY {
            0.0
        } else {
            largest
        };
        let mut sum = 0.0;
        let mut split = lane as u32;
        while split < splits {
            sum += ex2_approx_ftz_f32(
                (logsumexp_of(split, row) - reference) * core::f32::consts::LOG2_E,
            );
            split += 32;
        }
        for step in 0..5 {
            sum += shfl_sync_bfly_f32(sum, 16 >> step);
        }
        let (logsumexp, inverse_sum) = if sum == 0.0 {
            (f32::NEG_INFINITY, 0.0)
        } else {
            (
                reference + lg2_approx_ftz_f32(sum) * core::f32::consts::LN_2,
                1.0 / sum,
            )
        };
        // The weighted sum of the partials, `SPLITS_IN_FLIGHT` splits at a time: every load of
        // a chunk is issued before any is used, so that a chunk costs one L2 round trip where a
        // split at a time cost one per split (29 of them in B=1 decode at 32,768 keys).
        // Splits past the last read the last one's rows again, with weight 0: the loads stay
        // unconditional, so that nothing splits the chunk's schedule.
        const SPLITS_IN_FLIGHT: u32 = 8;
        let mut combined = [[0.0f32; 2]; 4];
        let mut first_split = 0;
        while first_split < splits {
            let mut logsumexps = [0.0f32; SPLITS_IN_FLIGHT as usize];
            let mut partials = [[[0.0f32; 2]; 4]; SPLITS_IN_FLIGHT as usize];
            for i in 0..SPLITS_IN_FLIGHT as usize {
                let split = (first_split + i as u32).min(splits - 1);
                logsumexps[i] = logsumexp_of(split, row);
                let at = Workspace::row(params, sequences, split, info.head, first_row + row);
                for pair in 0..pairs_per_lane {
                    let column = 2 * (lane + 32 * pair);
                    if is_column(column) {
                        partials[i][pair] =
                            ld_global_cg_v2_f32(workspace.outputs.add(at * HEAD_DIM + column));
                    }
                }
            }
            for i in 0..SPLITS_IN_FLIGHT as usize {
                let weight = if first_split + (i as u32) < splits {
                    ex2_approx_ftz_f32((logsumexps[i] - reference) * core::f32::consts::LOG2_E)
                        * inverse_sum
                } else {
                    0.0
                };
                for pair in 0..pairs_per_lane {
                    combined[pair][0] += weight * partials[i][pair][0];
                    combined[pair][1] += weight * partials[i][pair][1];
                }
            }
            first_split += SPLITS_IN_FLIGHT;
        }
        let output = (params.o as *mut u16).add(info.output_row_offset(params, row as usize));
        for pair in 0..pairs_per_lane {
            let column = 2 * (lane + 32 * pair);
            if is_column(column) {
                *output.add(column).cast::<u32>() = T::pack(combined[pair][0], combined[pair][1]);
            }
        }
        if params.lse != 0 && lane == 0 {
            *info
                .logsumexp_row(params, sequences)
                .add((info.first_query + row) as usize * info.logsumexp_row_stride(sequences)) =
                logsumexp;
        }
        row += WARPS as u32;
    }
}
