//! The epilogue: a warp's output rows, normalised, rounded and written to global memory, and
//! their logsumexp.

use flash_attn_params::{CopyPlan, ForwardParams, SequenceParams, CHUNK_ELEMS};

use crate::attn::block_info::{row_chunks, BlockInfo};
use crate::attn::softmax::{Output, RowResults};
use crate::element::Element;
use crate::fragment::Lane;
use crate::ptx::{
    bar_warp_sync, ld_shared_v4_b32, opaque_to_optimizer, st_global_v4_b32, st_shared_b32,
};
use crate::smem::SharedTile;

/// Writes this warp's `16 * M_TILES` output rows (from block row `warp_row`) that exist:
/// normalises `output` by `rows.inverse_sum`, rounds it to `T`, stages it in the warp's own rows
/// of `staging` (a tile of the block's rows that only this warp reads from now on) and stores
/// it 16 bytes per lane: with `PADS` (a kernel that runs padded problems) only the columns up
/// to the problem's head dim.
///
/// # Safety
/// All lanes of the warp call it together, after their last read of their rows of `staging`
/// (the staging stores are ordered after those by a warp barrier here, not by a block barrier);
/// `params` and `info` satisfy the kernel's launch contract.
#[inline(always)]
pub unsafe fn write_output<
    T: Element,
    Tile: SharedTile,
    const M_TILES: usize,
    const DIM_STEPS: usize,
    const SERVING: bool,
    const PADS: bool,
>(
    output: &Output<M_TILES, DIM_STEPS>,
    rows: &RowResults<M_TILES>,
    staging: Tile,
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    warp_row: usize,
    lane: Lane,
) {
    // Lanes of a warp may drift apart: the warp barrier orders every lane's last read of the
    // staging rows before the staging stores.
    bar_warp_sync();
    // Row `lane.row(m, half_m)` of the warp's is row group `2 m + half_m` of the lane's own.
    let staging_lane = Tile::lane_chunk(warp_row + lane.row(0, 0), 0);
    for m in 0..M_TILES {
        for d in 0..DIM_STEPS {
            for half_d in 0..2 {
                let fragment = output.tiles[m][d][half_d];
                for half_m in 0..2 {
                    let inverse = rows.inverse_sum[m][half_m];
                    let packed = T::pack(
                        fragment[2 * half_m] * inverse,
                        fragment[2 * half_m + 1] * inverse,
                    );
                    let chunk =
                        staging.fragment_address(staging_lane, 2 * m + half_m, 2 * d + half_d);
                    // This lane's two elements: 4 bytes from its first column on.
                    let address = chunk + 4 * lane.position as u32;
                    st_shared_b32(address, packed);
                }
            }
        }
    }
    bar_warp_sync();
    // The warp's rows split over its lanes as the tile copies split a tile over the block
    // ([`CopyPlan`]); each lane's row walks one pointer (no 64-bit multiply per store).
    let plan = const { CopyPlan::of_tile(16 * M_TILES, 32, Tile::ROW_CHUNKS) };
    let (lane_row, chunk) = (
        warp_row + lane.index / plan.group_chunks,
        lane.index % plan.group_chunks,
    );
    let o_step = opaque_to_optimizer(plan.rows_per_pass * params.o_strides.seq as usize);
    // Rows past `seq_len_q` are never stored to, but their addresses are formed, and they may
    // lie past the allocation: `wrapping_add`, not `add`. The host keeps every such offset below
    // 2^63 bytes (`MAX_TENSOR_BYTES`), so the offset arithmetic itself cannot wrap.
    let mut o_pointer = (params.o as *mut u16)
        .wrapping_add(info.output_row_offset(params, lane_row) + chunk * CHUNK_ELEMS);
    let data_chunks = row_chunks(params);
    for pass in 0..plan.passes {
        let row = lane_row + pass * plan.rows_per_pass;
        if info.first_query + (row as u32) < info.seq_len_q {
            for group in 0..plan.groups {
                let column = group * plan.group_chunks + chunk;
                // Columns past the problem's head dim hold padding: not stored (only the
                // kernels that pad, `PADS`, run such problems).
                if !PADS || (column as u32) < data_chunks {
                    let value = ld_shared_v4_b32(staging.chunk_address(row, column));
                    let pointer = o_pointer.wrapping_add(group * plan.group_chunks * CHUNK_ELEMS);
                    st_global_v4_b32(pointer.cast(), value);
                }
            }
        }
        o_pointer = o_pointer.wrapping_add(o_step);
    }
}

/// Writes the logsumexp of this warp's rows that exist (from block row `warp_row`), if
/// `params.lse` asks for it.
///
/// # Safety
/// `params` and `info` satisfy the kernel's launch contract.
#[inline(always)]
pub unsafe fn write_logsumexp<const M_TILES: usize, const SERVING: bool>(
    rows: &RowResults<M_TILES>,
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    warp_row: usize,
    lane: Lane,
) {
    // The four lanes of a quad hold the same rows: one of them writes.
    if params.lse != 0 && lane.position == 0 {
        let lse = info.logsumexp_row(params, sequences);
        let stride = info.logsumexp_row_stride(sequences);
        for m in 0..M_TILES {
            for half_m in 0..2 {
                let row = info.first_query + (warp_row + lane.row(m, half_m)) as u32;
                if row < info.seq_len_q {
                    *lse.add(row as usize * stride) = rows.logsumexp[m][half_m];
                }
            }
        }
    }
}

/// Writes NaN to every output row of the block that exists, and to their logsumexps if
/// `params.lse` asks for them: the defined result of a sequence whose paged cache names a page
/// outside the cache (its keys are never read). Thread `thread` of the block's `32 * WARPS`
/// writes 16-byte chunks `thread, thread + 32 * WARPS, ...` of the `[BLOCK_M, HEAD_DIM]` rows.
///
/// # Safety
/// `params` and `info` satisfy the kernel's launch contract.
#[inline(always)]
pub unsafe fn write_nan_rows<
    T: Element,
    const BLOCK_M: usize,
    const WARPS: usize,
    const HEAD_DIM: usize,
    const SERVING: bool,
>(
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    thread: usize,
) {
    let nan = T::pack(f32::NAN, f32::NAN);
    let row_chunks = HEAD_DIM / CHUNK_ELEMS;
    let mut chunk_index = thread;
    while chunk_index < BLOCK_M * row_chunks {
        let (row, chunk) = (chunk_index / row_chunks, chunk_index % row_chunks);
        if info.first_query + (row as u32) < info.seq_len_q {
            let offset = info.output_row_offset(params, row) + chunk * CHUNK_ELEMS;
            st_global_v4_b32((params.o as *mut u16).add(offset).cast(), [nan; 4]);
        }
        chunk_index += 32 * WARPS;
    }
    write_nan_logsumexps::<BLOCK_M, SERVING>(info, params, sequences, thread);
}

/// [`write_nan_rows`] for a kernel that runs padded problems (`PADS`): only the columns up to
/// the problem's head dim, the rest not being the output's. A function of its own, chosen by
/// the kernel on `PADS`, rather than a `PADS` switch in [`write_nan_rows`]: any such switch,
/// constant-folded or not, reordered the basic blocks of the D=64 and D=128 paged kernels
/// (their PTX changed, register numbers and labels).
///
/// # Safety
/// As [`write_nan_rows`].
#[inline(always)]
pub unsafe fn write_nan_rows_padded<
    T: Element,
    const BLOCK_M: usize,
    const WARPS: usize,
    const HEAD_DIM: usize,
    const SERVING: bool,
>(
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    thread: usize,
) {
    let nan = T::pack(f32::NAN, f32::NAN);
    let data_chunks = row_chunks(params) as usize;
    let tile_chunks = HEAD_DIM / CHUNK_ELEMS;
    let mut chunk_index = thread;
    while chunk_index < BLOCK_M * tile_chunks {
        let (row, chunk) = (chunk_index / tile_chunks, chunk_index % tile_chunks);
        if info.first_query + (row as u32) < info.seq_len_q && chunk < data_chunks {
            let offset = info.output_row_offset(params, row) + chunk * CHUNK_ELEMS;
            st_global_v4_b32((params.o as *mut u16).add(offset).cast(), [nan; 4]);
        }
        chunk_index += 32 * WARPS;
    }
    write_nan_logsumexps::<BLOCK_M, SERVING>(info, params, sequences, thread);
}

/// The logsumexps of [`write_nan_rows`]: NaN for every row of the block that exists, if
/// `params.lse` asks for them; thread `thread` writes row `thread`'s.
///
/// # Safety
/// `params` and `info` satisfy the kernel's launch contract.
#[inline(always)]
unsafe fn write_nan_logsumexps<const BLOCK_M: usize, const SERVING: bool>(
    info: &BlockInfo<SERVING>,
    params: &ForwardParams,
    sequences: &SequenceParams,
    thread: usize,
) {
    if params.lse != 0 && thread < BLOCK_M {
        let row = info.first_query + thread as u32;
        if row < info.seq_len_q {
            let stride = info.logsumexp_row_stride(sequences);
            *info
                .logsumexp_row(params, sequences)
                .add(row as usize * stride) = f32::NAN;
        }
    }
}
