//! The FlashAttention-2 forward main loop.
//!
//! One block computes `BLOCK_M` query rows of one (batch, head); each warp owns
//! `BLOCK_M / WARPS` of them. Per key block of `BLOCK_N` keys:
//! 1. wait for this block's K/V in the `cp.async` ring, then start the copy of block
//!    `j + STAGES - 1`, so loads overlap the math of `STAGES - 1` blocks;
//! 2. `S = Q Kᵀ` with Q fragments held in registers for the whole loop;
//! 3. online softmax on S in registers;
//! 4. `O += P V`, with P converted to fp16 in registers as the A operand (no shared-memory trip).
//!
//! At the end O is divided by the row sums, staged through the warp's own rows of the (now
//! unused) Q tile and written with 16-byte stores.

use core::arch::nvptx::{_block_idx_x, _block_idx_y, _thread_idx_x};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

use flash_attn_params::{ForwardParams, TileConfig, CHUNK_ELEMS};

use crate::ptx::{
    bar_sync_0, bar_warp_sync, cp_async_cg_16, cp_async_commit_group, cp_async_wait_group,
    cvt_rn_f16x2_f32, ld_shared_v4_b32, ldmatrix_x4, ldmatrix_x4_trans, mma_m16n8k16_f16_f32,
    shared_window_address, st_global_v4_b32, st_shared_b32,
};
use crate::smem::SwizzledTile;
use crate::softmax::{OnlineSoftmax, OutputFragments, ScoreFragments};

/// The dynamic shared-memory window. Its alignment is the base alignment that the swizzle and
/// every 16-byte copy rely on.
#[repr(C, align(128))]
struct SharedMemoryBase;

/// Issues this thread's share of the 16-byte copies of a `[ROWS, HEAD_DIM]` tile whose rows are
/// `HEAD_DIM` elements apart in global memory.
///
/// # Safety
/// `source` is 16-byte aligned and points at `ROWS * HEAD_DIM` readable fp16; every thread of
/// the block calls it with its own `thread`.
#[inline(always)]
unsafe fn copy_tile_async<const ROWS: usize, const HEAD_DIM: usize, const WARPS: usize>(
    tile: SwizzledTile<HEAD_DIM>,
    source: *const u16,
    thread: usize,
) {
    let row_chunks = SwizzledTile::<HEAD_DIM>::ROW_CHUNKS;
    let threads = 32 * WARPS;
    let copies_per_thread = const {
        let chunks = ROWS * SwizzledTile::<HEAD_DIM>::ROW_CHUNKS;
        assert!(
            chunks.is_multiple_of(32 * WARPS),
            "a tile must split into whole 16-byte chunks per thread"
        );
        chunks / (32 * WARPS)
    };
    for copy in 0..copies_per_thread {
        let chunk_index = thread + copy * threads;
        let (row, chunk) = (chunk_index / row_chunks, chunk_index % row_chunks);
        let element = row * HEAD_DIM + chunk * CHUNK_ELEMS;
        cp_async_cg_16(tile.chunk_address(row, chunk), source.add(element).cast());
    }
}

/// Waits until the K/V copies of the oldest ring slot have landed: the `STAGES - 2` groups
/// committed after it may still be in flight.
#[inline(always)]
unsafe fn wait_for_oldest_stage<const STAGES: usize>() {
    match STAGES {
        2 => cp_async_wait_group::<0>(),
        3 => cp_async_wait_group::<1>(),
        _ => cp_async_wait_group::<2>(),
    }
}

/// The forward kernel body for one tile configuration.
///
/// `M_TILES`, `KEY_STEPS` and `DIM_STEPS` size the register fragments and must equal
/// `BLOCK_M / (16 WARPS)`, `BLOCK_N / 16` and `HEAD_DIM / 16` (checked at compile time); the
/// `forward_kernels!` macro derives them.
///
/// # Safety
/// Launched with grid `(seq_len / BLOCK_M, batch * heads)`, `32 * WARPS` threads and
/// `TileConfig::smem_bytes` bytes of dynamic shared memory; `params` satisfies
/// [`ForwardParams`]'s contract with `seq_len` a nonzero multiple of `BLOCK_M` and `BLOCK_N`.
#[inline(always)]
pub unsafe fn forward<
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const WARPS: usize,
    const STAGES: usize,
    const HEAD_DIM: usize,
    const M_TILES: usize,
    const KEY_STEPS: usize,
    const DIM_STEPS: usize,
>(
    params: &ForwardParams,
) {
    let tile: TileConfig = const {
        let tile = TileConfig::new(BLOCK_M, BLOCK_N, WARPS, STAGES, HEAD_DIM);
        assert!(
            M_TILES == tile.m_tiles(),
            "M_TILES != BLOCK_M / (16 * WARPS)"
        );
        assert!(KEY_STEPS * 16 == BLOCK_N, "KEY_STEPS != BLOCK_N / 16");
        assert!(DIM_STEPS * 16 == HEAD_DIM, "DIM_STEPS != HEAD_DIM / 16");
        tile
    };
    let thread = _thread_idx_x() as usize;
    let (warp, lane) = (thread / 32, thread % 32);
    let seq_len = params.seq_len as usize;
    let key_blocks = seq_len / BLOCK_N;

    // Element offsets into [batch * heads, seq_len, HEAD_DIM]; 64-bit so that large tensors
    // cannot overflow.
    let head_offset = _block_idx_y() as usize * seq_len * HEAD_DIM;
    let q_block_offset = head_offset + _block_idx_x() as usize * BLOCK_M * HEAD_DIM;
    let q = (params.q as *const u16).add(q_block_offset);
    let k = (params.k as *const u16).add(head_offset);
    let v = (params.v as *const u16).add(head_offset);
    let o = (params.o as *mut u16).add(q_block_offset);

    let smem = shared_window_address(gpu_launch_sized_workgroup_mem::<SharedMemoryBase>());
    let q_tile = SwizzledTile::<HEAD_DIM>::at(smem, 0);
    let k_tile = |stage: usize| SwizzledTile::<HEAD_DIM>::at(smem, tile.k_tile_offset(stage));
    let v_tile = |stage: usize| SwizzledTile::<HEAD_DIM>::at(smem, tile.v_tile_offset(stage));
    let copy_key_block = |block: usize| {
        let stage = block % STAGES;
        let rows = block * BLOCK_N * HEAD_DIM;
        copy_tile_async::<BLOCK_N, HEAD_DIM, WARPS>(k_tile(stage), k.add(rows), thread);
        copy_tile_async::<BLOCK_N, HEAD_DIM, WARPS>(v_tile(stage), v.add(rows), thread);
    };

    // Prologue: Q joins the first K/V group; STAGES - 1 groups are committed (empty ones too,
    // so that the group count, and thus `wait_for_oldest_stage`, is the same on every path).
    copy_tile_async::<BLOCK_M, HEAD_DIM, WARPS>(q_tile, q, thread);
    for block in 0..STAGES - 1 {
        if block < key_blocks {
            copy_key_block(block);
        }
        cp_async_commit_group();
    }

    let warp_row = warp * (BLOCK_M / WARPS);
    // Lane roles in ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i.
    let lane_row_in_8 = lane % 8;
    let lane_matrix = lane / 8;

    // q_fragments[m][d]: the 16x16 A fragment of rows warp_row + 16m.., dims 16d...
    let mut q_fragments = [[[0u32; 4]; DIM_STEPS]; M_TILES];
    let mut output: OutputFragments<M_TILES, DIM_STEPS> = [[[[0.0; 4]; 2]; DIM_STEPS]; M_TILES];
    let mut softmax = OnlineSoftmax::<M_TILES>::default();

    for block in 0..key_blocks {
        wait_for_oldest_stage::<STAGES>();
        // Makes every thread's copies of this block visible, and guarantees that all warps are
        // done with the slot the prefetch below overwrites (it held block - 1).
        bar_sync_0();
        let prefetch = block + STAGES - 1;
        if prefetch < key_blocks {
            copy_key_block(prefetch);
        }
        cp_async_commit_group();

        if block == 0 {
            // Matrices 0..3 = (rows 0-7, dims 0-7), (rows 8-15, dims 0-7), (rows 0-7, dims 8-15),
            // (rows 8-15, dims 8-15) of each 16x16 tile: the A fragment order.
            for (m, fragments) in q_fragments.iter_mut().enumerate() {
                for (d, fragment) in fragments.iter_mut().enumerate() {
                    let row = warp_row + 16 * m + lane % 16;
                    *fragment = ldmatrix_x4(q_tile.chunk_address(row, 2 * d + lane / 16));
                }
            }
        }

        let stage = block % STAGES;
        // scores[m][n][half]: S for rows 16m.., keys 16n + 8 half ...
        let mut scores: ScoreFragments<M_TILES, KEY_STEPS> = [[[[0.0; 4]; 2]; KEY_STEPS]; M_TILES];
        for d in 0..DIM_STEPS {
            for n in 0..KEY_STEPS {
                // Matrices: (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7),
                // (keys 8-15, dims 8-15): the B fragments of key tiles 16n and 16n + 8.
                let key = 16 * n + lane_row_in_8 + 8 * (lane_matrix / 2);
                let chunk = 2 * d + lane_matrix % 2;
                let [b0, b1, b2, b3] = ldmatrix_x4(k_tile(stage).chunk_address(key, chunk));
                for m in 0..M_TILES {
                    mma_m16n8k16_f16_f32(&mut scores[m][n][0], &q_fragments[m][d], &[b0, b1]);
                    mma_m16n8k16_f16_f32(&mut scores[m][n][1], &q_fragments[m][d], &[b2, b3]);
                }
            }
        }

        softmax.update(&mut scores, &mut output, params.scale_log2);

        for n in 0..KEY_STEPS {
            // p[m]: the 16x16 A fragment of probabilities for keys 16n.., built from the two
            // 16x8 score fragments of that key step.
            let mut p = [[0u32; 4]; M_TILES];
            for m in 0..M_TILES {
                let [low, high] = scores[m][n];
                p[m] = [
                    cvt_rn_f16x2_f32(low[0], low[1]),
                    cvt_rn_f16x2_f32(low[2], low[3]),
                    cvt_rn_f16x2_f32(high[0], high[1]),
                    cvt_rn_f16x2_f32(high[2], high[3]),
                ];
            }
            for d in 0..DIM_STEPS {
                // Transposed matrices: (keys 0-7, dims 0-7), (keys 8-15, dims 0-7),
                // (keys 0-7, dims 8-15), (keys 8-15, dims 8-15): the B fragments of dim tiles
                // 16d and 16d + 8.
                let key = 16 * n + lane_row_in_8 + 8 * (lane_matrix % 2);
                let chunk = 2 * d + lane_matrix / 2;
                let [b0, b1, b2, b3] = ldmatrix_x4_trans(v_tile(stage).chunk_address(key, chunk));
                for m in 0..M_TILES {
                    mma_m16n8k16_f16_f32(&mut output[m][d][0], &p[m], &[b0, b1]);
                    mma_m16n8k16_f16_f32(&mut output[m][d][1], &p[m], &[b2, b3]);
                }
            }
        }
    }

    // Epilogue: normalise, stage this warp's rows in its own rows of the Q tile (only this warp
    // ever read them), then write them out 16 bytes per lane.
    let inverse_sums = softmax.inverse_row_sums();
    let (group, thread_in_group) = (lane / 4, lane % 4);
    for m in 0..M_TILES {
        for d in 0..DIM_STEPS {
            for half_d in 0..2 {
                let fragment = output[m][d][half_d];
                for half_m in 0..2 {
                    let row = warp_row + 16 * m + group + 8 * half_m;
                    let inverse = inverse_sums[m][half_m];
                    let packed = cvt_rn_f16x2_f32(
                        fragment[2 * half_m] * inverse,
                        fragment[2 * half_m + 1] * inverse,
                    );
                    let chunk = 2 * d + half_d;
                    let address = q_tile.chunk_address(row, chunk) + 4 * thread_in_group as u32;
                    st_shared_b32(address, packed);
                }
            }
        }
    }
    bar_warp_sync();
    let row_chunks = SwizzledTile::<HEAD_DIM>::ROW_CHUNKS;
    let warp_chunks = const { BLOCK_M / WARPS * (HEAD_DIM / CHUNK_ELEMS) };
    for first in (0..warp_chunks).step_by(32) {
        let chunk_index = first + lane;
        let (row, chunk) = (
            warp_row + chunk_index / row_chunks,
            chunk_index % row_chunks,
        );
        let value = ld_shared_v4_b32(q_tile.chunk_address(row, chunk));
        st_global_v4_b32(o.add(row * HEAD_DIM + chunk * CHUNK_ELEMS).cast(), value);
    }
}
