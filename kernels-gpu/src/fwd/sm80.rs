//! The sm80 main loop of the FlashAttention-2 forward pass: `mma.sync`, `ldmatrix` and
//! `cp.async` (sm_80 and later; the PTX targets sm_80).
//!
//! One block computes `BLOCK_M` query rows of one (batch, query head); each warp owns
//! `BLOCK_M / WARPS` of them. Per key block `j` of `BLOCK_N` keys:
//! 1. wait for this block's K/V in the `cp.async` ring;
//! 2. `S = Q Kᵀ`, with Q fragments held in registers for the whole loop, or (the `_qsmem`
//!    entries) re-read from the Q tile at every dim step; between its dim steps, start the copy
//!    of block `j + STAGES - 1` (K after the first, V after the second), so loads overlap the
//!    math of `STAGES - 1` blocks; with one stage (head dims of 192 and above), K and V take
//!    turns in their one buffer each: V's copy runs under the S MMAs and the softmax, the next
//!    block's K under the `P V` MMAs;
//! 3. the modified kernels (`MODIFIED`) apply the softcap and the ALiBi bias; then mask keys past
//!    the end and, if causal, keys after the query's diagonal (a sliding window's: outside the
//!    window; only in the blocks that contain such keys, which run in loops of their own);
//!    blocks entirely after the diagonal (outside the window) are never loaded;
//! 4. online softmax on S in registers;
//! 5. `O += P V`, with P converted to 16 bits in registers as the A operand (no shared-memory
//!    trip).
//!
//! At the end O is divided by the row sums, staged through the warp's own rows of the (now
//! unused) Q tile and written with 16-byte stores; the logsumexp goes out if asked for.
//!
//! Rows past `seq_len_q` and keys past `seq_len_kv` are zero-filled in shared memory and never
//! read from or written to global memory.

use core::arch::nvptx::_thread_idx_x;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

use flash_attn_params::{
    ForwardParams, ModifierParams, QSource, SequenceParams, TileConfig, CHUNK_ELEMS,
};

use crate::attn::block_info::BlockInfo;
use crate::attn::epilogue::{write_logsumexp, write_nan_rows, write_nan_rows_padded, write_output};
use crate::attn::mask::{mask_scores, LastToFirst, MaskBounds, ScoresPlace};
use crate::attn::modifiers::{alibi_slope, apply_modifiers, window_mask};
use crate::attn::softmax::{OnlineSoftmax, Output, Scores};
use crate::attn::split::{arrive, combine, write_partials};
use crate::fragment::{Lane, LaneRows, OperandA, OperandB};
use crate::fwd::copy::{copy_paged_tile_async, copy_tile_async, cp_async_wait_at_most};
use crate::mma::WarpMma16x8x16;
use crate::ptx::{
    bar_red_or_0, bar_sync_0, cp_async_commit_group, ldmatrix_x4, ldmatrix_x4_trans,
    shared_window_address,
};
use crate::smem::SharedTile;

/// The dynamic shared-memory window. Its alignment is the base alignment that the swizzle and
/// every 16-byte copy rely on.
#[repr(C, align(128))]
struct SharedMemoryBase;

/// The forward kernel body for one MMA atom (and so element type) and tile configuration.
///
/// `Mma` is the warp MMA instruction and its input element type, `Tile` the shared-memory layout and `Q_IN_REGISTERS` says whether Q fragments stay in
/// registers or are re-read from shared memory at every key block. `M_TILES`, `KEY_STEPS` and
/// `DIM_STEPS` size the register fragments and must equal `BLOCK_M / (16 WARPS)`,
/// `BLOCK_N / 16` and `HEAD_DIM / 16` (checked at compile time); the `main_loop!` macro
/// derives them.
///
/// # Safety
/// Launched with grid `(ceil(seq_len_q / BLOCK_M), heads_q, batch)`, `32 * WARPS` threads and
/// `TileConfig::smem_bytes` bytes of dynamic shared memory; `params` satisfies
/// [`ForwardParams`]'s contract: both sequence lengths are at least 1, every row named by the
/// strides is readable (inputs) or writable (output) and 16-byte aligned, output rows of
/// different (batch, head, row) do not overlap each other or the inputs, and `lse`, if not 0,
/// has `batch * heads_q * seq_len_q` writable f32. Serving kernels (`SERVING`): `sequences`
/// satisfies [`SequenceParams`]' contract, the grid's x being `query_blocks * splits`; paged
/// ones (`PAGED`): K and V as its block table says, every page below `num_pages` holding
/// `page_size` rows. Modified kernels (`MODIFIED`): `modifiers` satisfies [`ModifierParams`]'
/// contract (window offsets within `±2^30`; `alibi_slopes`, if not 0, holding the slope of
/// every (batch, query head) of the grid).
#[inline(always)]
pub unsafe fn forward<
    Mma: WarpMma16x8x16,
    Tile: SharedTile,
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const WARPS: usize,
    const STAGES: usize,
    const HEAD_DIM: usize,
    const Q_IN_REGISTERS: bool,
    const M_TILES: usize,
    const KEY_STEPS: usize,
    const DIM_STEPS: usize,
    const SERVING: bool,
    const PAGED: bool,
    const MODIFIED: bool,
    const PADS: bool,
>(
    params: &ForwardParams,
    sequences: &SequenceParams,
    modifiers: &ModifierParams,
) {
    let tile: TileConfig = const {
        let q_source = if Q_IN_REGISTERS {
            QSource::Registers
        } else {
            QSource::SharedMemory
        };
        let tile = TileConfig::new(
            BLOCK_M,
            BLOCK_N,
            WARPS,
            STAGES,
            HEAD_DIM,
            Tile::LAYOUT,
            q_source,
        );
        assert!(
            Tile::ROW_CHUNKS * CHUNK_ELEMS == HEAD_DIM,
            "the tile type is for another head dim"
        );
        assert!(
            M_TILES == tile.m_tiles(),
            "M_TILES != BLOCK_M / (16 * WARPS)"
        );
        assert!(KEY_STEPS * 16 == BLOCK_N, "KEY_STEPS != BLOCK_N / 16");
        assert!(DIM_STEPS * 16 == HEAD_DIM, "DIM_STEPS != HEAD_DIM / 16");
        assert!(SERVING || !PAGED, "a paged kernel is a serving kernel");
        tile
    };
    let thread = _thread_idx_x() as usize;
    let (warp, lane) = (thread / 32, thread % 32);
    let mut info = BlockInfo::<SERVING>::new::<BLOCK_M>(params, sequences);
    // A packed decode step's rows (serving kernels): each the one query of its sequence, at
    // position 0 of a sequence of one query, for the mask and the ALiBi distances.
    let one_query = SERVING && MODIFIED && modifiers.rows_share_one_query != 0;
    if MODIFIED {
        let seq_len_q = if one_query { 1 } else { info.seq_len_q };
        info.mask = window_mask(modifiers, seq_len_q, info.seq_len_kv);
    }
    if info.is_past_the_queries() {
        return;
    }
    // The ALiBi slope of each of this lane's rows in the scores' units (all 0 without ALiBi):
    // the block's head's, or in a packed decode block each row's own, row `r` being query head
    // `head * seq_len_q + r` (rows past the group, never stored, read the group's last). Read
    // first, so that the loads' latency hides under the prologue's copies.
    let mut alibi_slopes: LaneRows<M_TILES> = [[0.0; 2]; M_TILES];
    if MODIFIED && modifiers.alibi_slopes != 0 {
        if one_query {
            let first_row = info.first_query as usize + warp * (BLOCK_M / WARPS);
            let last_row = info.seq_len_q as usize - 1;
            for (m, slopes_of_tile) in alibi_slopes.iter_mut().enumerate() {
                for (half, slope) in slopes_of_tile.iter_mut().enumerate() {
                    let row = (first_row + Lane::of(lane).row(m, half)).min(last_row);
                    let head = info.head as usize * info.seq_len_q as usize + row;
                    *slope = alibi_slope(modifiers, info.batch, head);
                }
            }
        } else {
            let slope = alibi_slope(modifiers, info.batch, info.head as usize);
            alibi_slopes = [[slope; 2]; M_TILES];
        }
    }
    // Whether to add the bias: a dense kernel's one slope tested for 0 (a slope of 0 adds
    // none; testing the address instead spilled the 255-register D=64 m128 entry on sm_90), a
    // serving kernel's address (its rows' slopes may differ).
    let has_alibi = if SERVING {
        MODIFIED && modifiers.alibi_slopes != 0
    } else {
        alibi_slopes[0][0] != 0.0
    };
    // A page index outside the cache is never read: the whole block learns of it before any
    // copy, and the sequence's rows are NaN (written once, by split 0).
    if PAGED {
        let threads = 32 * WARPS as u32;
        let outside = info.names_a_page_outside_the_cache(sequences, thread as u32, threads);
        if bar_red_or_0(outside) {
            if info.split == 0 {
                if PADS {
                    write_nan_rows_padded::<Mma::Input, BLOCK_M, WARPS, HEAD_DIM, SERVING>(
                        &info, params, sequences, thread,
                    );
                } else {
                    write_nan_rows::<Mma::Input, BLOCK_M, WARPS, HEAD_DIM, SERVING>(
                        &info, params, sequences, thread,
                    );
                }
            }
            return;
        }
    }
    let mask = info.mask;
    let first_query = info.first_query;

    // Keys this block needs: from the first its first query row sees (key 0 but with a
    // window) to the end of those its last query row sees (of its split, with split-KV).
    // `first_position` and `last_position` are those rows' query positions, which the mask
    // takes: the rows' own, or with `one_query` the sequence's one query.
    let last_query = (first_query + BLOCK_M as u32).min(info.seq_len_q) - 1;
    let (first_position, last_position) = if one_query {
        (0, 0)
    } else {
        (first_query, last_query)
    };
    let first_needed = if MODIFIED {
        mask.key_start(first_position)
    } else {
        0
    };
    let (first_block, key_blocks) =
        info.key_blocks::<BLOCK_N>(sequences, first_needed, mask.key_end(last_position));
    // The modified kernels visit the key blocks from the last to the first ([`LastToFirst`]:
    // ALiBi's bias); the loops below count visits, and the copies and the mask take each
    // visit's key block.
    let order = LastToFirst::new((first_block, key_blocks));
    let key_block_of = |visit: u32| order.key_block::<MODIFIED>(visit);
    let q_rows = info.query_rows(params);

    let smem = shared_window_address(gpu_launch_sized_workgroup_mem::<SharedMemoryBase>());
    let q_tile = Tile::at(smem, 0);
    let stage_bytes = (tile.k_tile_offset(1) - tile.k_tile_offset(0)) as u32;
    let k_tile = |stage: u32| Tile::at(smem + stage * stage_bytes, tile.k_tile_offset(0));
    let v_tile = |stage: u32| Tile::at(smem + stage * stage_bytes, tile.v_tile_offset(0));
    // The K and the V tile of visit `visit`'s key block into ring slot `stage`, separately
    // (the prefetch issues them at different points) or together.
    let copy_key_tile = #[inline(always)]
    |visit: u32, stage: u32| {
        let first_key = key_block_of(visit) * BLOCK_N as u32;
        if PAGED {
            let k_rows =
                info.paged_key_rows(params, sequences, &params.k_strides, params.k, first_key);
            copy_paged_tile_async::<Tile, BLOCK_N, WARPS, PADS>(k_tile(stage), k_rows, thread);
        } else {
            let k_rows = info.key_rows(params, &params.k_strides, params.k, first_key);
            copy_tile_async::<Tile, BLOCK_N, WARPS, PADS, false>(k_tile(stage), k_rows, thread);
        }
    };
    let copy_value_tile = #[inline(always)]
    |visit: u32, stage: u32| {
        let first_key = key_block_of(visit) * BLOCK_N as u32;
        if PAGED {
            let v_rows =
                info.paged_key_rows(params, sequences, &params.v_strides, params.v, first_key);
            copy_paged_tile_async::<Tile, BLOCK_N, WARPS, PADS>(v_tile(stage), v_rows, thread);
        } else {
            let v_rows = info.key_rows(params, &params.v_strides, params.v, first_key);
            copy_tile_async::<Tile, BLOCK_N, WARPS, PADS, false>(v_tile(stage), v_rows, thread);
        }
    };
    let copy_key_block = #[inline(always)]
    |block: u32, stage: u32| {
        copy_key_tile(block, stage);
        copy_value_tile(block, stage);
    };

    // Prologue: Q in its own group, then STAGES - 1 K/V groups (empty ones too, so that the
    // group count, and thus the waits below, is the same on every path). With one stage the
    // loop loads every block itself.
    copy_tile_async::<Tile, BLOCK_M, WARPS, PADS, true>(q_tile, q_rows, thread);
    cp_async_commit_group();
    for stage in 0..STAGES as u32 - 1 {
        if first_block + stage < key_blocks {
            copy_key_block(first_block + stage, stage);
        }
        cp_async_commit_group();
    }
    if STAGES == 1 {
        // One stage: K of the first block in its own group; the loop copies each V under the
        // S MMAs and each next K under the `P V` MMAs.
        if first_block < key_blocks {
            copy_key_tile(first_block, 0);
        }
        cp_async_commit_group();
    }

    let warp_row = warp * (BLOCK_M / WARPS);
    // Lane roles in ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i (the matrices
    // of K and of V are listed where the loop reads them).
    let (lane_row_in_8, lane_matrix) = (lane % 8, lane / 8);
    let k_lane = Tile::lane_chunk(lane_row_in_8 + 8 * (lane_matrix / 2), lane_matrix % 2);
    let v_lane = Tile::lane_chunk(lane_row_in_8 + 8 * (lane_matrix % 2), lane_matrix / 2);
    let this_lane = Lane::of(lane);

    // The 16x16 A fragment of Q rows warp_row + 16m.., dims 16d... Matrices 0..3 = (rows 0-7,
    // dims 0-7), (rows 8-15, dims 0-7), (rows 0-7, dims 8-15), (rows 8-15, dims 8-15): the A
    // fragment order. A warp only ever reads its own rows of the Q tile.
    let q_lane = Tile::lane_chunk(warp_row + lane % 16, lane / 16);
    let load_q_fragment =
        |m: usize, d: usize| OperandA(ldmatrix_x4(q_tile.fragment_address(q_lane, 2 * m, 2 * d)));
    // Q has landed: the `STAGES - 1` K/V groups committed after it (with one stage, the first
    // K) may still be in flight. The barrier makes every thread's Q copies visible, and (with
    // no key block) orders them before the epilogue reuses the Q tile.
    cp_async_wait_at_most(STAGES.max(2) - 1);
    bar_sync_0();
    // q_fragments[m][d], loaded once for the whole loop when Q lives in registers.
    let q_fragments: Option<[[OperandA; DIM_STEPS]; M_TILES]> = Q_IN_REGISTERS
        .then(|| core::array::from_fn(|m| core::array::from_fn(|d| load_q_fragment(m, d))));
    let mut output = Output::<M_TILES, DIM_STEPS>::zero();
    let mut softmax = OnlineSoftmax::<M_TILES>::default();

    // Ring slots of the block computed and of the block prefetched, advanced by one each
    // iteration (a counter, not `block % STAGES`: a 64-bit remainder costs registers).
    let next_slot = |slot: u32| {
        if slot + 1 == STAGES as u32 {
            0
        } else {
            slot + 1
        }
    };
    let (mut stage, mut prefetch_stage) = (0, STAGES as u32 - 1);
    // Whether any of this warp's rows is a query of the sequence: not in a serving block whose
    // sequence ends before the warp's rows start (decode packs the few query heads of a K/V
    // head into the first rows of the tile, so that most warps have none). Such a warp skips
    // the MMAs and the softmax of every key block, which held B=1 decode to 2.2 TB/s (ncu: 72%
    // of cycles with no eligible warp, tensor pipe 26%, for 4 real rows in 64).
    let warp_has_rows = !SERVING || first_query + (warp_row as u32) < info.seq_len_q;
    // Part `d` of the prefetch of block `block + STAGES - 1` into slot `prefetch_stage`, issued
    // after dim step `d` of the S MMAs: K at 0, V and the commit at 1, nothing later. A macro,
    // not a closure, so that the dense kernels' code is what it was before warps could skip
    // (a closure reordered their PTX).
    macro_rules! prefetch_part {
        ($block:expr, $d:expr) => {
            if STAGES > 1 && $d < 2 {
                let prefetch = $block + STAGES as u32 - 1;
                if prefetch < key_blocks {
                    if $d == 0 {
                        copy_key_tile(prefetch, prefetch_stage);
                    } else {
                        copy_value_tile(prefetch, prefetch_stage);
                    }
                }
                if $d == 1 {
                    cp_async_commit_group();
                }
            }
        };
    }

    // One key block, masked at the limits `bounds` names: a constant at each call site but the
    // window's left edge, so the unmasked loop below carries no mask code and no branch that
    // would split its schedule.
    let mut key_block = #[inline(always)]
    |block: u32, bounds: MaskBounds| {
        // The oldest ring slot has landed (with one stage: this block's K, the only group in
        // flight): the `STAGES - 2` groups committed after it may still be in flight.
        cp_async_wait_at_most(STAGES.saturating_sub(2));
        // Makes every thread's copies of this block visible, and guarantees that all warps are
        // done with the slot the prefetch below overwrites (it held block - 1; with one stage,
        // the V tile, read by block - 1's `P V`).
        bar_sync_0();
        if STAGES == 1 {
            // One stage, K and V in turn (FlashAttention-2's order): V lands under the S MMAs
            // and the softmax, the next K under the `P V` MMAs. Copying both at the top of
            // the block and waiting left every warp idle for the copy's whole latency.
            copy_value_tile(block, 0);
            cp_async_commit_group();
        }
        if STAGES > 1 && !warp_has_rows {
            // No row of this warp exists: it only copies its share of the next tiles. (`stage`
            // first: the order in which this closure first names the two slots orders their
            // registers, and the dense kernels' PTX keeps its own.)
            stage = next_slot(stage);
            for d in 0..DIM_STEPS.min(2) {
                prefetch_part!(block, d);
            }
            prefetch_stage = next_slot(prefetch_stage);
            return;
        }

        // With more than one stage every warp here has rows (the test folds to a constant).
        let mut scores = Scores::<M_TILES, KEY_STEPS>::zero();
        if STAGES > 1 || warp_has_rows {
            for d in 0..DIM_STEPS {
                // q[m]: this dim step's A fragments, from registers or re-read from the Q tile.
                let q: [OperandA; M_TILES] = core::array::from_fn(|m| match &q_fragments {
                    Some(fragments) => fragments[m][d],
                    None => load_q_fragment(m, d),
                });
                for n in 0..KEY_STEPS {
                    // Matrices: (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7),
                    // (keys 8-15, dims 8-15): the B fragments of key tiles 16n and 16n + 8.
                    let address = k_tile(stage).fragment_address(k_lane, 2 * n, 2 * d);
                    let [b_low, b_high] = OperandB::pair_of_x4(ldmatrix_x4(address));
                    for m in 0..M_TILES {
                        Mma::mma(&mut scores.tiles[m][n][0], &q[m], &b_low);
                        Mma::mma(&mut scores.tiles[m][n][1], &q[m], &b_high);
                    }
                }
                // The prefetch is split over the first two dim steps of the S MMAs (K after the
                // first, V after the second), so that its address arithmetic and `cp.async` issue
                // hide under the MMAs in flight. After all the S MMAs (before log 19) it held the
                // softmax back: 32,16,512,64 took 124.5 us, here 119.5. Before the MMAs it spilled
                // the BLOCK_M = 128 kernel; K and V together after the first step ran 117.0 us but
                // spilled 12-16 bytes on sm_89 (log 19).
                prefetch_part!(block, d);
            }

            let block_mask = mask.in_tile(first_position, key_block_of(block) * BLOCK_N as u32);
            let place = ScoresPlace {
                rule: block_mask,
                warp_row,
                lane: this_lane,
                one_query,
            };
            // Warp-uniform switches (one problem's modifiers), tested once per key block; the
            // modifiers come before the mask, which must leave masked keys at -inf.
            let offsets = if MODIFIED {
                Some(apply_modifiers(
                    &mut scores,
                    modifiers,
                    has_alibi,
                    &alibi_slopes,
                    place,
                ))
            } else {
                None
            };
            mask_scores(&mut scores, place, bounds);

            softmax.update(&mut scores, offsets, &mut output, params.scale_log2);
        }
        if STAGES == 1 {
            // V has landed and every warp is done with K: the next block's K goes in. Every
            // warp, one with no rows too, meets this one barrier instruction (compute-sanitizer's
            // synccheck rejects a block whose warps meet at different ones).
            cp_async_wait_at_most(0);
            bar_sync_0();
            if block + 1 < key_blocks {
                copy_key_tile(block + 1, 0);
            }
            cp_async_commit_group();
            if !warp_has_rows {
                return;
            }
        }

        for n in 0..KEY_STEPS {
            // p[m]: the A operand of probabilities for keys 16n...
            let p = scores.to_operand_a::<Mma::Input>(n);
            for d in 0..DIM_STEPS {
                // Transposed matrices: (keys 0-7, dims 0-7), (keys 8-15, dims 0-7),
                // (keys 0-7, dims 8-15), (keys 8-15, dims 8-15): the B fragments of dim tiles
                // 16d and 16d + 8.
                let address = v_tile(stage).fragment_address(v_lane, 2 * n, 2 * d);
                let [b_low, b_high] = OperandB::pair_of_x4(ldmatrix_x4_trans(address));
                for m in 0..M_TILES {
                    Mma::mma(&mut output.tiles[m][d][0], &p[m], &b_low);
                    Mma::mma(&mut output.tiles[m][d][1], &p[m], &b_high);
                }
            }
        }
        stage = next_slot(stage);
        prefetch_stage = next_slot(prefetch_stage);
    };

    // Blocks before `unmasked_blocks` hold only keys that the block's first query, and so
    // every query of the block, sees (none past the end). The rest need the end test.
    let unmasked_blocks = mask.whole_key_blocks::<BLOCK_N>(first_position);
    // A split's own range (`first_block <= key_blocks`, and both 0 in a dense kernel).
    let unmasked_blocks = if SERVING {
        unmasked_blocks.max(first_block).min(key_blocks)
    } else {
        unmasked_blocks
    };
    if MODIFIED {
        // A window's left end too: blocks before `unmasked_start` hold keys before the first
        // that the block's last query row (and so some row) sees: they need the start test,
        // and the end test only past `unmasked_blocks` (a window narrower than the tile). The
        // blocks from `unmasked_start` on hold no such key: the unmasked ones, then the end's.
        let unmasked_start = mask
            .key_start(last_position)
            .div_ceil(BLOCK_N as u32)
            .max(first_block)
            .min(key_blocks);
        let unmasked_end = unmasked_blocks.max(unmasked_start).min(key_blocks);
        // Visited from the last block to the first ([`LastToFirst`]): the end's, the
        // unmasked ones, then those that need the start test.
        let (untested_from, tested_from) = order.visits((unmasked_start, unmasked_end));
        for block in first_block..untested_from {
            key_block(block, MaskBounds::END);
        }
        for block in untested_from..tested_from {
            key_block(block, MaskBounds::NONE);
        }
        for block in tested_from..key_blocks {
            let bounds = MaskBounds {
                start: true,
                end: key_block_of(block) >= unmasked_blocks,
            };
            key_block(block, bounds);
        }
    } else {
        for block in first_block..unmasked_blocks {
            key_block(block, MaskBounds::NONE);
        }
        for block in unmasked_blocks..key_blocks {
            key_block(block, MaskBounds::END);
        }
    }

    // Epilogue: this warp's rows of the Q tile (only this warp ever read them; with no key
    // block, the block barrier above ordered every Q copy) stage its output rows.
    let rows = softmax.finish(params.scale_log2);
    if SERVING && sequences.splits > 1 {
        write_partials::<M_TILES, DIM_STEPS, HEAD_DIM, SERVING>(
            &output, &rows, &info, params, sequences, warp_row, this_lane,
        );
        // The arrival flag in the Q tile's first word: every read of the Q tile is behind the
        // key loop's barriers, or (with no key block) behind the one after the Q copies.
        let flag = q_tile.chunk_address(0, 0);
        if arrive::<BLOCK_M, HEAD_DIM, SERVING>(&info, params, sequences, thread, flag) {
            combine::<Mma::Input, BLOCK_M, WARPS, HEAD_DIM, SERVING, PADS>(
                &info, params, sequences, warp, lane,
            );
        }
    } else {
        write_output::<Mma::Input, Tile, M_TILES, DIM_STEPS, SERVING, PADS>(
            &output, &rows, q_tile, &info, params, warp_row, this_lane,
        );
        write_logsumexp(&rows, &info, params, sequences, warp_row, this_lane);
    }
}
