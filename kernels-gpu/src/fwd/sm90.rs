//! The sm90 main loop of the forward pass: Hopper's warpgroup MMA (`wgmma.mma_async`), sm_90a
//! PTX, for devices of compute capability 9.0 (H100, H200).
//!
//! One block computes `BLOCK_M = 64 WARPGROUPS` query rows of one (batch, query head); each
//! warpgroup (4 warps) owns 64 of them, each warp 16, and issues its `wgmma` on its own rows.
//! The tiles live in shared memory in the layout `wgmma` reads ([`WgmmaTile`]), copied in by
//! every thread with `cp.async` into one, two or three K/V slots, or ([`sm90_copies_by_tma`])
//! Q, K and V by TMA: one thread (thread 0, or the producer's first) issues each group's boxes
//! (`cp.async.bulk.tensor`, the 128-byte swizzle of the tensor maps being the tile's) against
//! the slot's `mbarrier`, which every consumer waits on. Per key block `j`:
//! - `S = Q Kᵀ`: `HEAD_DIM / 16` `wgmma` in the SS form (Q and K from shared memory);
//! - mask the keys past the end and, if causal, past the diagonal, and fold S into the online
//!   softmax in registers: the accumulator of a warp has the m16n8 layout of `mma.sync`, so
//!   [`crate::attn`]'s mask, softmax and epilogue serve this loop unchanged;
//! - `O += P V`: `BLOCK_N / 16` `wgmma` in the RS form, P packed to 16 bits in the registers it
//!   was computed in (the A fragment layout), V from shared memory, N-major.
//!
//! Two schedules, chosen per tile by [`flash_attn_params::sm90_overlaps_blocks`]:
//! - one block at a time: each `wgmma` group is waited for before its results are read; with
//!   two stages, block `j + 1`'s K and V are copied under block `j`'s MMAs;
//! - overlapped (FlashAttention-3's intra-warpgroup overlap): block `j`'s `S` and block
//!   `j - 1`'s `P V` are issued together, the softmax of block `j` runs while `P V` does, and
//!   the output's rescale waits for it ([`OnlineSoftmax::fold`]). With two slots they hold the
//!   K of one block and the V of the one before, and block `j + 1`'s K and block `j`'s V are
//!   copied under block `j`'s MMAs; with three, each copy starts one block earlier.
//!
//! Before every block the copies it needs are waited for, handed to the async proxy that
//! `wgmma` reads through (`fence.proxy.async`; TMA writes through that proxy already), and the
//! block barrier makes them visible and says that every warpgroup is past the MMAs that read
//! the slots about to be refilled. At the
//! end O is divided by the row sums, staged through the Q tile and written with 16-byte
//! stores; the logsumexp goes out if asked for.
//!
//! Warp-specialised tiles ([`TileConfig::producer_warps`]: a producer warpgroup beyond the
//! two that own the 128 rows, or at D=64 the three that own 192; overlapped schedule only)
//! split the copies from the compute, as FlashAttention-3 does. The producer (24 registers
//! per thread after `setmaxnreg`, 40 in the persistent and serving kernels, 32 in the serving
//! kernel of three consumers: [`sm90_register_split`])
//! issues the copies of each group (block `b`'s K and block `b - 1`'s V, the first with Q) as
//! soon as its slots are free: by TMA its first thread alone, arriving on the group's `landed`
//! `mbarrier` with the bytes it expects; else (head dims of 64-byte rows) its 128 threads with
//! `cp.async`, each arriving once its own copies have landed (`cp.async.mbarrier.arrive.noinc`).
//! The consumers (240 registers, 232 persistent, 160 of three) wait on `landed` (and fence the
//! `cp.async` copies to the async proxy themselves), and after the block's MMAs each warp
//! arrives on the group's `freed` barrier. No block barrier is left in the loop: the
//! warpgroups drift apart, so that one's softmax runs under the other's MMAs; and they take
//! turns to issue their MMAs (FlashAttention-3's ping-pong, a named barrier each), which makes
//! that overlap the rule rather than the chance of the schedule. Measured on an
//! H100 (`m128_n128_s2`, D=128): the producer made it 1.19x faster than the tile without one
//! at 2,16,4096,128 (1.28x causal) and 1.09-1.11x at 4,8,512,128 (BENCHMARKS.md log 45; the
//! profile had shown the block barrier as the loop's largest stall, log 44); the ping-pong
//! 1.06-1.07x more at 2,16,4096,128 non-causal and 1.15-1.18x at 4,8,512,128 (log 46), while
//! the modified kernels, whose warpgroups take turns for blocks outside their rows too, kept
//! their times at 2,16,4096,128.
//!
//! The modified warp-specialised kernels are persistent where their registers and shared memory
//! allow (`KernelSpec::is_persistent`, which says why not the dense ones): each block walks its
//! share of the problem's tiles ([`TileSchedule`]). They copy by TMA (asserted: the `cp.async`
//! producer copies its grid index's one tile). The K/V ring and the ping-pong run on from
//! one tile to the next, and the producer copies the next tile's Q (once both consumers have
//! waited for their last `S`, the `q_freed` barrier) and first K while the consumers finish the
//! tile before: its last softmax, its last `P V` and its output, which they stage in a tile of
//! its own, the Q tile being the next tile's by then. The host launches one block per SM where
//! the tiles see about as many keys each, else one block per tile (`TileConfig::walk_grid`).
//! Measured on an H100 (BENCHMARKS.md log 53): the 1024-key window at S=8192 1.03-1.04x
//! faster, the modified kernels a median 1.04x at 8,16,2048,64 non-causal and 1.02x at
//! 2,16,4096,128. The other
//! kernels take their grid index's tile before anything else, as before the walk existed: their
//! SASS kept its instruction count, and their times did not move.
//!
//! Rows past `seq_len_q` and keys past `seq_len_kv` are zero-filled in shared memory and never
//! read from or written to global memory.

use core::arch::nvptx::_thread_idx_x;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

use flash_attn_params::{
    persists, sm90_copies_by_tma, sm90_producer_registers, sm90_register_split, ForwardParams,
    ModifierParams, SequenceParams, TileConfig, Variant, SM90_PRODUCER_WARPS, SM90_WARPGROUP_ROWS,
    TENSOR_MAPS_BYTES, TENSOR_MAP_BYTES, TMA_BOX_COLUMNS,
};

use crate::attn::block_info::{BlockInfo, RowBlock, TileSchedule};
use crate::attn::epilogue::{write_logsumexp, write_nan_rows, write_nan_rows_padded, write_output};
use crate::attn::mask::{
    mask_scores, DiagonalFirst, LastToFirst, MaskBounds, RowsKeyBlocks, ScoresPlace,
};
use crate::attn::modifiers::{add_alibi, alibi_slope, apply_modifiers, apply_softcap, window_mask};
use crate::attn::softmax::{OnlineSoftmax, Output, Scores};
use crate::element::Element;
use crate::fragment::{Accumulator, Lane, OperandA};
use crate::fwd::copy::{copy_paged_tile_walking_async, copy_tile_async};
use crate::mma::{WarpgroupMma, Wgmma};
use crate::ptx::{
    bar_arrive_named, bar_arrive_named_at, bar_red_or_0, bar_sync_0, bar_sync_named,
    bar_sync_named_at, barrier_sync_0, cp_async_commit_group,
    cp_async_mbarrier_arrive_noinc_shared, cp_async_wait_group, fence_f32, fence_mbarrier_init,
    fence_proxy_async_shared_cta, fence_u32, mbarrier_arrive_expect_tx_shared,
    mbarrier_arrive_shared, mbarrier_init_shared, mbarrier_try_wait_parity_shared, setmaxnreg_dec,
    setmaxnreg_inc, shared_window_address, shfl_sync_idx_lane0_u32, tma_load_4d,
    wgmma_commit_group, wgmma_fence, wgmma_wait_group,
};
use crate::smem::{DescriptorSteps, SharedTile, WgmmaTile};

/// How the consumer warpgroups of a warp-specialised tile but the first take turns to issue
/// their MMAs (the ping-pong in [`forward`]): consumer `w` of `n` waits for its turn on named
/// barrier `2 + w` and hands it on at `2 + (w + 1) % n`, each barrier counting 256 threads (the
/// waiter's 128 `bar.sync`, the one before's 128 `bar.arrive`); the first (barriers 2 and 3,
/// whatever `n`) is `forward`'s own. A type, not a value, and the first's calls outside it, so
/// that the two-consumer kernels' PTX stays byte for byte what it was before the
/// three-consumer tile: chosen by a value, written as one rule in registers, or with the
/// first's wait here, the choice changed the modified two-consumer kernels' PTX and spilled the
/// D=128 one (40 bytes; BENCHMARKS.md log 70).
pub trait ConsumerTurns {
    /// A consumer but the first waits for its turn.
    ///
    /// # Safety
    /// Every thread of the warpgroup calls it, in the order of turns above, so that each
    /// barrier's phases count 256 threads (see [`bar_sync_named`]).
    unsafe fn wait_other();
    /// A consumer but the first hands the turn on.
    ///
    /// # Safety
    /// Every thread of the warpgroup calls it, in the order of turns above, so that each
    /// barrier's phases count 256 threads (see [`bar_sync_named`]).
    unsafe fn pass_other();
    /// Every consumer but the first, before its first turn: the last hands the first its
    /// first turn.
    ///
    /// # Safety
    /// Every thread of the warpgroup calls it, in the order of turns above, so that each
    /// barrier's phases count 256 threads (see [`bar_sync_named`]).
    unsafe fn hand_first_turn();
}

/// Two consumer warpgroups: barriers 2 and 3, named as constants.
pub struct TwoConsumers;

impl ConsumerTurns for TwoConsumers {
    #[inline(always)]
    unsafe fn wait_other() {
        bar_sync_named::<3, 256>();
    }
    #[inline(always)]
    unsafe fn pass_other() {
        bar_arrive_named::<2, 256>();
    }
    #[inline(always)]
    unsafe fn hand_first_turn() {
        bar_arrive_named::<2, 256>();
    }
}

/// Three consumer warpgroups (D=64's 192-row tile): barriers 2 to 4, the others' named in a
/// register from the warpgroup's index.
pub struct ThreeConsumers;

impl ThreeConsumers {
    /// This consumer warpgroup's index, 1 or 2 for the others.
    #[inline(always)]
    fn consumer() -> u32 {
        // SAFETY: reads a special register.
        unsafe { _thread_idx_x() as u32 / 128 }
    }
}

impl ConsumerTurns for ThreeConsumers {
    #[inline(always)]
    unsafe fn wait_other() {
        bar_sync_named_at::<256>(2 + Self::consumer());
    }
    #[inline(always)]
    unsafe fn pass_other() {
        bar_arrive_named_at::<256>(if Self::consumer() == 2 { 2 } else { 4 });
    }
    #[inline(always)]
    unsafe fn hand_first_turn() {
        if Self::consumer() == 2 {
            bar_arrive_named::<2, 256>();
        }
    }
}

/// The turns of the warp-specialised tiles of `BLOCK_M` rows ([`TurnsOf`]).
pub trait TurnsFor {
    /// The tile's [`ConsumerTurns`].
    type Turns: ConsumerTurns;
}

/// A tile of `BLOCK_M` rows, for [`TurnsOf`].
pub struct Rows<const BLOCK_M: usize>;

impl TurnsFor for Rows<64> {
    type Turns = TwoConsumers;
}
impl TurnsFor for Rows<128> {
    type Turns = TwoConsumers;
}
impl TurnsFor for Rows<192> {
    type Turns = ThreeConsumers;
}

/// The [`ConsumerTurns`] of a tile of `BLOCK_M` rows: two consumers for 128 (and 64, which has
/// no producer and takes no turns), three for 192.
pub type TurnsOf<const BLOCK_M: usize> = <Rows<BLOCK_M> as TurnsFor>::Turns;

/// The dynamic shared-memory window. Its alignment is the swizzle's period (8 rows of 128
/// bytes), which `wgmma` reads the tiles' swizzle against.
#[repr(C, align(1024))]
struct SharedMemoryBase;

/// One tile's part of the problem, as both roles of a kernel use it: its [`BlockInfo`] (with
/// the kernel's visibility rule), the key blocks it computes (`first..end`) and its query rows.
type TileWork<const SERVING: bool> = (BlockInfo<SERVING>, (u32, u32), RowBlock);

/// The tensor maps of Q, K and V (`CUtensorMap`s, encoded by the host), the second parameter of
/// the sm90 kernels ([`flash_attn_params::KernelSpec::takes_tensor_maps`]). The kernel
/// reads them only where they lie, through the parameter's address (TMA reads a map from the
/// parameter space; a Rust reference to the parameter would copy it to local memory). A
/// 64-byte-aligned type crashes rustc's nvptx backend as a kernel parameter, so this one is
/// declared 8-byte aligned and the build rewrites its declaration to 64 bytes, as TMA needs.
#[repr(C)]
pub struct TensorMaps([u64; TENSOR_MAPS_BYTES / 8]);

/// The variant of a kernel of [`forward`]'s switches (serving, over a paged cache or not, or
/// one modifier alone, or every one).
const fn variant_of(
    serving: bool,
    paged: bool,
    modified: bool,
    alibi: bool,
    softcap: bool,
) -> Variant {
    if paged {
        Variant::Paged
    } else if serving {
        Variant::Serving
    } else if modified {
        Variant::Modified
    } else if alibi {
        Variant::Alibi
    } else if softcap {
        Variant::Softcap
    } else {
        Variant::Dense
    }
}

/// Pins every register of `acc` at this point among the volatile assembly (see
/// [`fence_f32`]): before a `wgmma.fence` for the values the MMAs read, after a wait for
/// the values they wrote.
#[inline(always)]
fn fence_accumulator<const N_STEPS: usize>(acc: &mut Accumulator<1, N_STEPS>) {
    for n in 0..N_STEPS {
        for half in 0..2 {
            for element in 0..4 {
                fence_f32(&mut acc.tiles[0][n][half][element]);
            }
        }
    }
}

/// Issues `S = Q Kᵀ` for this warpgroup's rows (`warpgroup_row..`, 64 of them) of `q` against
/// every key of `k`: `HEAD_DIM / 16` `wgmma` in the SS form, the first overwriting `scores`. The
/// caller has fenced (`wgmma.fence`) and commits and waits.
#[inline(always)]
unsafe fn issue_scores<
    T: Element,
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const HEAD_DIM: usize,
    const KEY_STEPS: usize,
    const DIM_STEPS: usize,
>(
    scores: &mut Scores<1, KEY_STEPS>,
    q: WgmmaTile<BLOCK_M, HEAD_DIM>,
    k: WgmmaTile<BLOCK_N, HEAD_DIM>,
    warpgroup_row: usize,
    steps: DescriptorSteps,
) where
    Wgmma<T>: WarpgroupMma<KEY_STEPS>,
{
    <Wgmma<T> as WarpgroupMma<KEY_STEPS>>::ss::<false>(
        scores,
        q.k_major(warpgroup_row, 0, steps),
        k.k_major(0, 0, steps),
    );
    for d in 1..DIM_STEPS {
        <Wgmma<T> as WarpgroupMma<KEY_STEPS>>::ss::<true>(
            scores,
            q.k_major(warpgroup_row, d, steps),
            k.k_major(0, d, steps),
        );
    }
}

/// Issues `O += P V`: `BLOCK_N / 16` `wgmma` in the RS form, 16 keys each. The caller has
/// fenced (`wgmma.fence`) and commits and waits.
#[inline(always)]
unsafe fn issue_values<
    T: Element,
    const BLOCK_N: usize,
    const HEAD_DIM: usize,
    const KEY_STEPS: usize,
    const DIM_STEPS: usize,
>(
    output: &mut Output<1, DIM_STEPS>,
    probabilities: &[OperandA; KEY_STEPS],
    v: WgmmaTile<BLOCK_N, HEAD_DIM>,
    steps: DescriptorSteps,
) where
    Wgmma<T>: WarpgroupMma<DIM_STEPS>,
{
    for (n, p) in probabilities.iter().enumerate() {
        <Wgmma<T> as WarpgroupMma<DIM_STEPS>>::rs::<true>(output, p, v.n_major(n, steps));
    }
}

/// The probabilities of `scores` rounded to `T` as the A operands of `P V`, 16 keys each. They
/// are pinned (see [`fence_f32`]) where this is called, before the `wgmma.fence` of their MMAs:
/// a register that an RS `wgmma` reads and that is written after the fence makes ptxas insert
/// a `warpgroup.arrive` before that MMA (its C7519 note).
#[inline(always)]
unsafe fn probabilities<T: Element, const KEY_STEPS: usize>(
    scores: &Scores<1, KEY_STEPS>,
) -> [OperandA; KEY_STEPS] {
    let mut p: [OperandA; KEY_STEPS] = core::array::from_fn(|n| {
        let [p] = scores.to_operand_a::<T>(n);
        p
    });
    fence_operands(&mut p);
    p
}

/// [`fence_accumulator`] for A operands in registers: pins them before the `wgmma.fence` of
/// the MMAs that read them, and (for an MMA still running) keeps them alive until its wait.
#[inline(always)]
fn fence_operands<const STEPS: usize>(operands: &mut [OperandA; STEPS]) {
    for operand in operands {
        for register in &mut operand.0 {
            fence_u32(register);
        }
    }
}

/// Issues the TMA copy of the `ROWS` rows of (`head`, `batch`) from row `row` on of the tensor
/// whose map is at the generic address `map` into `tile`: a box of `TMA_BOX_COLUMNS` columns
/// per column block of the tile (the map's 128-byte swizzle is the tile's), each completing
/// its bytes, [`tma_tile_bytes`], on the barrier at `barrier`. Rows and columns past the
/// tensor's bounds are zero-filled, and their bytes completed too.
///
/// # Safety
/// As for [`tma_load_4d`]: `map` is a valid map of `ROWS`-row boxes in the kernel's
/// parameter space, `tile` 1024-byte aligned, and the barrier's phase expects the bytes.
#[inline(always)]
unsafe fn tma_load_tile<const ROWS: usize, const HEAD_DIM: usize>(
    tile: WgmmaTile<ROWS, HEAD_DIM>,
    map: u64,
    [row, head, batch]: [u32; 3],
    barrier: u32,
) {
    for column_block in 0..WgmmaTile::<ROWS, HEAD_DIM>::COLUMN_BLOCKS {
        tma_load_4d(
            tile.base() + (column_block * WgmmaTile::<ROWS, HEAD_DIM>::COLUMN_BLOCK_BYTES) as u32,
            map,
            [
                (column_block * TMA_BOX_COLUMNS) as i32,
                row as i32,
                head as i32,
                batch as i32,
            ],
            barrier,
        );
    }
}

/// The bytes that [`tma_load_tile`] completes on its barrier: the whole tile's.
const fn tma_tile_bytes<const ROWS: usize, const HEAD_DIM: usize>() -> u32 {
    (WgmmaTile::<ROWS, HEAD_DIM>::COLUMN_BLOCKS * WgmmaTile::<ROWS, HEAD_DIM>::COLUMN_BLOCK_BYTES)
        as u32
}

/// The forward kernel body of the Hopper family for element type `T` and one tile
/// configuration. `KEY_STEPS` and `DIM_STEPS` must equal `BLOCK_N / 16` and `HEAD_DIM / 16`
/// (checked at compile time), `COPY_WARPS` the warps that copy
/// ([`flash_attn_params::copy_warps`]: a producer warpgroup's, or all `WARPS`), and `OVERLAP`
/// [`flash_attn_params::sm90_overlaps_blocks`]'s choice of schedule (see the module's
/// documentation); the `main_loop!` macro derives them.
/// The modified kernels (`MODIFIED`) apply `modifiers`' window, softcap and ALiBi bias, and
/// each warpgroup computes only the key blocks its own 64 rows see (a window's block span is
/// the rows' plus the window's), visiting them from the last to the first
/// ([`LastToFirst`]). The ALiBi kernels (`ALIBI`) are the dense ones with ALiBi's bias on
/// every block (no switch, no window) and the key blocks in an order for it; the softcap
/// kernels (`SOFTCAP`) the dense ones with the softcap on every block. With
/// `PADS` ([`flash_attn_params::pads_head_dim`]) the kernel runs problems of a smaller head
/// dim than its own. The serving kernels (`SERVING`, [`flash_attn_params::SM90_SERVING_TILES`])
/// are the dense ones over a variable-length batch: each block reads its sequence's offsets
/// and lengths ([`BlockInfo::new`]) and copies with `cp.async`, whose zero-fill ends each
/// tile at its own sequence's last row.
///
/// # Safety
/// Launched on a device of compute capability 9.0 with grid `(ceil(seq_len_q / BLOCK_M),
/// heads_q, batch)`, or (persistent: `KernelSpec::is_persistent`) `(blocks, 1, 1)` for any
/// `blocks` from 1 (with `params.batch` the batch), `32 * WARPS` threads and
/// `KernelSpec::smem_bytes` bytes of dynamic shared memory; `params` satisfies
/// [`ForwardParams`]' contract (as for the sm80 dense kernels): both sequence lengths are at
/// least 1, every row named by the strides is readable (inputs) or writable (output) and
/// 16-byte aligned, output rows of different (batch, head, row) do not overlap each other or
/// the inputs, and `lse`, if not 0, has `batch * heads_q * seq_len_q` writable f32. Modified
/// kernels: `modifiers` satisfies [`ModifierParams`]' contract (window
/// offsets within `±2^30`; `alibi_slopes`, if not 0, holding the slope of every (batch, query
/// head) of the grid). ALiBi kernels: `modifiers.alibi_slopes` is not 0 and holds those slopes
/// (the other modifiers are not read); softcap kernels: `modifiers.softcap_input_scale` is the
/// softcap's (the other modifiers are not read). Serving kernels: the grid is
/// `(ceil(longest seq_len_q / BLOCK_M), heads_q, batch)`, `sequences` satisfies
/// [`SequenceParams`]' contract with one split (`keys_per_split` covering the longest key
/// sequence) and no block table, `params` describes one sequence of the longest lengths in the
/// packed tensors' strides, and `lse`, if not 0, holds the logsumexps at
/// `sequences.lse_strides`. The other kernels get [`SequenceParams::DENSE`].
#[inline(always)]
pub unsafe fn forward<
    T: Element,
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const WARPS: usize,
    const COPY_WARPS: usize,
    const STAGES: usize,
    const HEAD_DIM: usize,
    const KEY_STEPS: usize,
    const DIM_STEPS: usize,
    const OVERLAP: bool,
    const MODIFIED: bool,
    const ALIBI: bool,
    const SOFTCAP: bool,
    const PADS: bool,
    const SERVING: bool,
    const PAGED: bool,
    const PRODUCER_REGISTERS: u32,
    const CONSUMER_REGISTERS: u32,
    const CONSUMER_THREADS: u32,
    Turns: ConsumerTurns,
>(
    params: &ForwardParams,
    sequences: &SequenceParams,
    modifiers: &ModifierParams,
    tensor_maps: u64,
) where
    Wgmma<T>: WarpgroupMma<KEY_STEPS> + WarpgroupMma<DIM_STEPS>,
{
    // The sm90 family's gates (one warpgroup per 64 rows, the 1024-byte tile offsets the
    // swizzle needs, sm_90a's shared memory), at compile time; the byte sizes and offsets of
    // the tiles are the swizzled layout's (see `WgmmaTile`). Whether the tile is persistent
    // and where its output tile lies, at compile time too (as calls, not inlined across the
    // crates, they left ptxas an unresolved function).
    let (tile, persistent, output_tile_offset): (TileConfig, bool, usize) = const {
        assert!(KEY_STEPS * 16 == BLOCK_N, "KEY_STEPS != BLOCK_N / 16");
        assert!(
            COPY_WARPS == WARPS || (COPY_WARPS == SM90_PRODUCER_WARPS && WARPS * 16 > BLOCK_M),
            "COPY_WARPS != the warps that copy (TileConfig::copy_threads)"
        );
        assert!(DIM_STEPS * 16 == HEAD_DIM, "DIM_STEPS != HEAD_DIM / 16");
        assert!(
            !OVERLAP || STAGES == 2 || STAGES == 3,
            "the overlapped loop keeps two blocks in flight, in two or three slots"
        );
        assert!(
            OVERLAP || STAGES <= 2,
            "the loop of one block at a time has one or two slots"
        );
        assert!(
            WARPS * 16 == BLOCK_M || (OVERLAP && (BLOCK_M == 128 || BLOCK_M == 192)),
            "a producer warpgroup feeds two or three consumer warpgroups in the overlapped loop"
        );
        let tile = TileConfig::sm90(BLOCK_M, BLOCK_N, WARPS, STAGES, HEAD_DIM);
        let variant = variant_of(SERVING, PAGED, MODIFIED, ALIBI, SOFTCAP);
        assert!(SERVING || !PAGED, "a paged kernel is a serving kernel");
        assert!(
            {
                let (producer, consumer) =
                    sm90_register_split(BLOCK_M, sm90_producer_registers(variant, &tile));
                PRODUCER_REGISTERS == producer
                    && CONSUMER_REGISTERS == consumer
                    && CONSUMER_THREADS as usize == 32 * tile.consumer_warps()
            },
            "the register split and CONSUMER_THREADS are the tile's (sm90_register_split)"
        );
        assert!(
            MODIFIED as u8 + ALIBI as u8 + SOFTCAP as u8 <= 1,
            "one modifier alone or every modifier"
        );
        assert!(
            !SERVING || !(MODIFIED || ALIBI || SOFTCAP),
            "the serving kernels have no score modifier"
        );
        let tma = sm90_copies_by_tma(variant, &tile);
        assert!(
            !SERVING || !(tma || persists(variant, &tile)),
            "a serving kernel copies its grid index's tile with cp.async (zero past each sequence)"
        );
        assert!(
            tma || !persists(variant, &tile),
            "a persistent kernel copies by TMA: the cp.async producer copies the grid's tile"
        );
        assert!(
            !tma || (OVERLAP
                && WgmmaTile::<BLOCK_N, HEAD_DIM>::SWIZZLE_BYTES == 2 * TMA_BOX_COLUMNS),
            "TMA copies whole rows of 128-byte swizzle blocks, in the overlapped loop"
        );
        (tile, persists(variant, &tile), tile.output_tile_offset())
    };
    // Whether Q, K and V are copied by TMA ([`sm90_copies_by_tma`], asserted above). A macro
    // over the const parameters, as `own_ranges!` below: through a value from the block above
    // the PTX of kernels that do not copy by TMA changed (the modified 8-warp ones, when only
    // the dense ones did).
    macro_rules! tma {
        () => {
            const {
                sm90_copies_by_tma(
                    variant_of(SERVING, PAGED, MODIFIED, ALIBI, SOFTCAP),
                    &TileConfig::sm90(BLOCK_M, BLOCK_N, WARPS, STAGES, HEAD_DIM),
                )
            }
        };
    }
    // Warp-specialised: a producer warpgroup (the last, beyond the rows' warpgroups) copies
    // Q, K and V, and the consumers wait for each block's copies on `mbarrier`s and free its
    // slots on others, with no block barrier in the loop. Such a block is persistent: it
    // computes tiles `blockIdx.x, blockIdx.x + gridDim.x, ...` of the problem
    // ([`TileSchedule`]), its K/V ring running on from one tile to the next.
    let has_producer = tile.producer_warps() != 0;
    // The 8-warp tiles advance each tile's descriptor from step to step: on an H200 the D=64
    // one ran 16,16,512,64 and 32,16,512,64 1.6-1.9% faster non-causal, 0.5-1.1% causal. The
    // warp-specialised ones build each step's from its address: advanced, their key loops ran
    // 30-42 instructions fewer but 1-2% slower at 4,8,512,64 and with ALiBi alone at
    // 8,16,2048,64 (BENCHMARKS.md log 72).
    let descriptor_steps = if has_producer {
        DescriptorSteps::FromAddress
    } else {
        DescriptorSteps::Advanced
    };
    // Whether each warpgroup computes only the key blocks its own rows see, in key loops of
    // its own: the modified kernels, and the single-modifier kernels without a producer (the
    // 8-warp tiles, whose 64-key blocks leave a warpgroup's causal rows a diagonal block they
    // do not see; the warp-specialised ones run the dense loop, which was faster with ALiBi
    // alone: BENCHMARKS.md log 66). Those loops visit from the last block to the first. A
    // macro, so that the dense and modified kernels' choice is made by their const parameters
    // alone, as before the single-modifier kernels: through a value (a `let`, or one of the
    // constants above) it changed the dense kernels' PTX.
    macro_rules! own_ranges {
        () => {
            MODIFIED || ((ALIBI || SOFTCAP) && !has_producer)
        };
    }
    let thread = _thread_idx_x() as usize;
    // The warp index through a broadcast from lane 0, which ptxas takes as warp-uniform: the
    // modified kernels' key loops run over each warpgroup's own blocks, and with bounds it
    // could not prove uniform it computed every `wgmma` descriptor per thread and moved it to
    // uniform registers before each `wgmma` (+10.5 M warp instructions, 7%, at 2,16,4096,128;
    // BENCHMARKS.md log 46).
    let warp = shfl_sync_idx_lane0_u32((thread / 32) as u32) as usize;
    let lane = thread % 32;
    // This thread's index among those that copy (`COPY_WARPS` warps: the producer's, or all).
    let copier = thread.wrapping_sub(32 * WARPS - 32 * COPY_WARPS);
    let warpgroup_row = SM90_WARPGROUP_ROWS * (warp / 4);
    let warp_row = 16 * warp;
    let this_lane = Lane::of(lane);
    // The key block of a visit: the modified kernels and the loops of `own_ranges` visit theirs
    // from the last to the first ([`LastToFirst`]); the ALiBi kernels of the dense loop (a
    // producer's) the block of the first row's diagonal first ([`DiagonalFirst`]); the dense
    // and softcap kernels of the dense loop from the first to the last.
    let visit_order = #[inline(always)]
    |order: LastToFirst, diagonal_first: DiagonalFirst, visit: u32| {
        if ALIBI && has_producer {
            diagonal_first.key_block(visit)
        } else if ALIBI || (SOFTCAP && !has_producer) {
            order.key_block::<true>(visit)
        } else {
            order.key_block::<MODIFIED>(visit)
        }
    };
    // The ALiBi kernels' [`DiagonalFirst`] order of a tile's key blocks `blocks`.
    let diagonal_first_order = #[inline(always)]
    |info: &BlockInfo<SERVING>, blocks: (u32, u32)| {
        let front = if params.causal != 0 {
            blocks.1.max(1) - 1
        } else {
            // The first row's diagonal key, clamped into the keys.
            let diagonal = (info.first_query + info.seq_len_kv).saturating_sub(info.seq_len_q);
            diagonal.min(info.seq_len_kv - 1) / BLOCK_N as u32
        };
        DiagonalFirst::new(blocks, front)
    };
    // What both roles derive from the part of the problem a tile is, `info`: its visibility
    // rule and the key blocks it computes, `first..end` (visited from the last to the first in
    // the modified kernels: [`LastToFirst`], ALiBi's bias; the loops below count visits, and
    // the copies and the mask take each visit's key block).
    let tile_work = #[inline(always)]
    |mut info: BlockInfo<SERVING>| {
        if MODIFIED {
            info.mask = window_mask(modifiers, info.seq_len_q, info.seq_len_kv);
        }
        let first_query = info.first_query;
        let last_query = (first_query + BLOCK_M as u32).min(info.seq_len_q) - 1;
        let first_needed = if MODIFIED {
            info.mask.key_start(first_query)
        } else {
            0
        };
        let blocks =
            info.key_blocks::<BLOCK_N>(sequences, first_needed, info.mask.key_end(last_query));
        let q_rows = info.query_rows(params);
        (info, blocks, q_rows)
    };
    // A persistent kernel's tiles: its share of the problem's, walked `blockIdx.x,
    // blockIdx.x + gridDim.x, ..` by both roles. The others compute their grid index's tile
    // (`TileSchedule::grid_tile`: under a causal mask the last query block first, as the walk
    // orders them; BENCHMARKS.md log 81), derived here, before anything else, as they did
    // before the walk existed (a tile loop of one pass, or the tile derived in each role, moved
    // their registers and made them 1.5-3% slower on small grids, log 52).
    // A serving kernel's grid is `(query blocks of the longest sequence, heads_q, batch)`
    // ([`BlockInfo::new`]): a block whose rows all lie past its sequence's queries returns
    // here, before its first barrier, every thread of it.
    let schedule = TileSchedule::new::<BLOCK_M>(params);
    let grid_tile = tile_work(if SERVING {
        BlockInfo::<SERVING>::new::<BLOCK_M>(params, sequences)
    } else {
        schedule.grid_tile::<BLOCK_M, SERVING>(params)
    });
    if grid_tile.0.is_past_the_queries() {
        return;
    }
    // A paged kernel never reads a page index outside the cache: the whole block learns of one
    // before any copy, and the sequence's rows are NaN (one split: the serving kernels' contract).
    if PAGED {
        let info = &grid_tile.0;
        let outside =
            info.names_a_page_outside_the_cache(sequences, thread as u32, 32 * WARPS as u32);
        if bar_red_or_0(outside) {
            if PADS {
                write_nan_rows_padded::<T, BLOCK_M, WARPS, HEAD_DIM, SERVING>(
                    info, params, sequences, thread,
                );
            } else {
                write_nan_rows::<T, BLOCK_M, WARPS, HEAD_DIM, SERVING>(
                    info, params, sequences, thread,
                );
            }
            return;
        }
    }

    let smem = shared_window_address(gpu_launch_sized_workgroup_mem::<SharedMemoryBase>());
    let q_tile = WgmmaTile::<BLOCK_M, HEAD_DIM>::at(smem, 0);
    let output_tile = WgmmaTile::<BLOCK_M, HEAD_DIM>::at(smem, output_tile_offset);
    let stage_bytes = (tile.k_tile_offset(1) - tile.k_tile_offset(0)) as u32;
    let k_tile = |stage: u32| {
        WgmmaTile::<BLOCK_N, HEAD_DIM>::at(smem + stage * stage_bytes, tile.k_tile_offset(0))
    };
    let v_tile = |stage: u32| {
        WgmmaTile::<BLOCK_N, HEAD_DIM>::at(smem + stage * stage_bytes, tile.v_tile_offset(0))
    };
    // The K, or the V, tile of key block `key_block` of `info`'s tile into ring slot `stage`,
    // by copying thread `copier`: from the tensor's rows, or in a paged kernel from the pages
    // that the sequence's block table names (checked above).
    let copy_key_tile = #[inline(always)]
    |info: &BlockInfo<SERVING>, key_block: u32, stage: u32, copier: usize| {
        let first_key = key_block * BLOCK_N as u32;
        let (k, strides) = (params.k, &params.k_strides);
        if PAGED {
            let k_rows = info.paged_key_rows(params, sequences, strides, k, first_key);
            copy_paged_tile_walking_async::<_, BLOCK_N, COPY_WARPS, WARPS, PADS>(
                k_tile(stage),
                k_rows,
                copier,
            );
        } else {
            let k_rows = info.key_rows(params, strides, k, first_key);
            copy_tile_async::<_, BLOCK_N, COPY_WARPS, PADS, false>(k_tile(stage), k_rows, copier);
        }
    };
    let copy_value_tile = #[inline(always)]
    |info: &BlockInfo<SERVING>, key_block: u32, stage: u32, copier: usize| {
        let first_key = key_block * BLOCK_N as u32;
        let (v, strides) = (params.v, &params.v_strides);
        if PAGED {
            let v_rows = info.paged_key_rows(params, sequences, strides, v, first_key);
            copy_paged_tile_walking_async::<_, BLOCK_N, COPY_WARPS, WARPS, PADS>(
                v_tile(stage),
                v_rows,
                copier,
            );
        } else {
            let v_rows = info.key_rows(params, strides, v, first_key);
            copy_tile_async::<_, BLOCK_N, COPY_WARPS, PADS, false>(v_tile(stage), v_rows, copier);
        }
    };

    // The groups of the K/V ring are counted over the block's tiles: group `g` (a tile's
    // visit `b` is group `ring + b - first`, `ring` the groups of the tiles before) sits in
    // slot `g % STAGES`. The warp-specialised pipeline's barriers, two per slot: `landed`
    // completes once the producer's copies of a group (visit `b`'s K and visit `b - 1`'s V;
    // a tile's first group with its Q, its last with V alone) have landed, `freed` once every
    // consumer warp is done with them (with visit `b`'s `S` and visit `b - 1`'s `P V`). The
    // `k`-th group of a slot is phase `k` of both. And one more, `q_freed`: phase `t` completes
    // once every consumer warp has issued and waited for the last `S` of the block's tile `t`,
    // after which the producer copies the next tile's Q.
    let ring_slot = |group: u32| group % STAGES as u32;
    let barriers = smem + tile.pipeline_barrier_offset() as u32;
    let landed = |group: u32| barriers + 8 * ring_slot(group);
    let freed = |group: u32| barriers + 8 * (STAGES as u32 + ring_slot(group));
    let q_freed = barriers + 16 * STAGES as u32;
    let phase_parity = |group: u32| (group / STAGES as u32) & 1;
    // The tensor maps of Q, K and V, in the kernel's parameter.
    let q_map = tensor_maps;
    let k_map = tensor_maps + TENSOR_MAP_BYTES as u64;
    let v_map = tensor_maps + 2 * TENSOR_MAP_BYTES as u64;
    // With TMA, one `landed` barrier per slot: thread 0's arrival, with the bytes it expects.
    if tma!() && !has_producer {
        if thread == 0 {
            for slot in 0..STAGES as u32 {
                mbarrier_init_shared(barriers + 8 * slot, 1);
            }
            fence_mbarrier_init();
        }
        bar_sync_0();
    }
    if has_producer {
        if thread == 0 {
            let consumer_warps = tile.consumer_warps() as u32;
            // A group's arrivals: with TMA the one copying thread's, with the bytes it expects.
            let copying_threads = if tma!() {
                1
            } else {
                (32 * SM90_PRODUCER_WARPS) as u32
            };
            for slot in 0..STAGES as u32 {
                mbarrier_init_shared(barriers + 8 * slot, copying_threads);
                mbarrier_init_shared(barriers + 8 * (STAGES as u32 + slot), consumer_warps);
            }
            if persistent {
                mbarrier_init_shared(q_freed, consumer_warps);
            }
            if tma!() {
                fence_mbarrier_init();
            }
        }
        bar_sync_0();
        if warp >= tile.consumer_warps() {
            setmaxnreg_dec::<PRODUCER_REGISTERS>();
            if tma!() {
                // The producer's first thread issues every copy, each group's boxes against
                // its `landed` barrier (a tile's first with its Q, its last with V alone),
                // once the consumers freed the slots (and for Q, the tile before's Q); its
                // other threads have none to make.
                let produce_tile = #[inline(always)]
                |(info, (first_block, key_blocks), _): TileWork<SERVING>,
                                    ring: u32,
                                    tiles_done: u32| {
                    let order = LastToFirst::new((first_block, key_blocks));
                    let diagonal_first = diagonal_first_order(&info, (first_block, key_blocks));
                    let key_block_of = |visit: u32| visit_order(order, diagonal_first, visit);
                    if tiles_done > 0 {
                        let parity = (tiles_done - 1) & 1;
                        while !mbarrier_try_wait_parity_shared(q_freed, parity) {}
                    }
                    for visit in first_block..key_blocks + 1 {
                        let group = ring + visit - first_block;
                        if group >= STAGES as u32 {
                            let parity = phase_parity(group) ^ 1;
                            while !mbarrier_try_wait_parity_shared(freed(group), parity) {}
                        }
                        let barrier = landed(group);
                        let copies_q = visit == first_block;
                        let copies_key = visit < key_blocks;
                        let copies_value = visit > first_block;
                        let kv_tiles = copies_key as u32 + copies_value as u32;
                        mbarrier_arrive_expect_tx_shared(
                            barrier,
                            copies_q as u32 * tma_tile_bytes::<BLOCK_M, HEAD_DIM>()
                                + kv_tiles * tma_tile_bytes::<BLOCK_N, HEAD_DIM>(),
                        );
                        if copies_q {
                            let rows = [info.first_query, info.head, info.batch];
                            tma_load_tile(q_tile, q_map, rows, barrier);
                        }
                        if copies_key {
                            let first_key = key_block_of(visit) * BLOCK_N as u32;
                            let rows = [first_key, info.kv_head, info.batch];
                            tma_load_tile(k_tile(ring_slot(group)), k_map, rows, barrier);
                        }
                        if copies_value {
                            let first_key = key_block_of(visit - 1) * BLOCK_N as u32;
                            let rows = [first_key, info.kv_head, info.batch];
                            tma_load_tile(v_tile(ring_slot(group - 1)), v_map, rows, barrier);
                        }
                    }
                    key_blocks - first_block + 1
                };
                if copier == 0 {
                    if persistent {
                        schedule.walk::<BLOCK_M, SERVING>(
                            params,
                            #[inline(always)]
                            |info, ring, tiles_done| {
                                produce_tile(tile_work(info), ring, tiles_done)
                            },
                        );
                    } else {
                        produce_tile(grid_tile, 0, 0);
                    }
                }
                return;
            }
            // Without TMA (head dims of half swizzle blocks, whose kernels are not persistent:
            // asserted above), the grid's one tile from every producer thread: group `g` goes
            // into slot `g % STAGES` once the consumers freed its last group there.
            let (info, (first_block, key_blocks), q_rows) = grid_tile;
            let order = LastToFirst::new((first_block, key_blocks));
            let diagonal_first = diagonal_first_order(&info, (first_block, key_blocks));
            let key_block_of = |visit: u32| visit_order(order, diagonal_first, visit);
            copy_tile_async::<_, BLOCK_M, COPY_WARPS, PADS, true>(q_tile, q_rows, copier);
            for group in 0..key_blocks - first_block + 1 {
                let visit = first_block + group;
                if group >= STAGES as u32 {
                    let parity = phase_parity(group) ^ 1;
                    while !mbarrier_try_wait_parity_shared(freed(group), parity) {}
                }
                if visit < key_blocks {
                    copy_key_tile(&info, key_block_of(visit), ring_slot(group), copier);
                }
                if visit > first_block {
                    let stage = ring_slot(group - 1);
                    copy_value_tile(&info, key_block_of(visit - 1), stage, copier);
                }
                cp_async_mbarrier_arrive_noinc_shared(landed(group));
            }
            // No copy outlives its thread.
            cp_async_wait_group::<0>();
            return;
        }
        setmaxnreg_inc::<CONSUMER_REGISTERS>();
    }

    // Ping-pong (FlashAttention-3's warpgroup scheduler), with a producer (`has_producer`): the
    // consumer warpgroups take turns to issue their MMAs, one group each in group order, so
    // that one warpgroup's softmax runs while another's MMAs do. Consumer `w` waits for its
    // turn on barrier `2 + w` and hands it on at the next one's (the first's after the last;
    // `Turns`, [`ConsumerTurns`], for all but the first). Every warpgroup takes one turn per
    // group (a modified kernel's too for the groups outside its rows), the first consumer
    // first, so the counts match; the turns run on from one tile to the next. With three
    // consumers (D=64's 192-row tile) the first against the other two (barriers of 384
    // threads, the second and third issuing together) ran 1.05-1.13x slower than two
    // consumers, the rotation 1.07-1.17x faster (H200, BENCHMARKS.md logs 69 and 70).
    let first_consumer = warpgroup_row == 0;
    let wait_turn = #[inline(always)]
    || {
        if has_producer {
            if first_consumer {
                bar_sync_named::<2, 256>();
            } else {
                Turns::wait_other();
            }
        }
    };
    let pass_turn = #[inline(always)]
    || {
        if has_producer {
            if first_consumer {
                bar_arrive_named::<3, 256>();
            } else {
                Turns::pass_other();
            }
        }
    };
    // The first consumer goes first: the last hands it its first turn. And the last hands on
    // one turn more than the first takes, which the first takes at the end, so that no barrier
    // is left half-met. Once per tile, or in a walk once per block.
    let first_turn = #[inline(always)]
    || {
        if has_producer && !first_consumer {
            Turns::hand_first_turn();
        }
    };
    let last_turn = #[inline(always)]
    || {
        if has_producer && first_consumer {
            wait_turn();
        }
    };

    // One tile: `ring` the groups of the K/V ring that the block's tiles before used; returns
    // this tile's.
    let compute_tile = #[inline(always)]
    |(info, (first_block, key_blocks), q_rows): TileWork<SERVING>, ring: u32| {
        // The ALiBi slope of the tile's (batch, head) in the scores' units; 0 adds no bias.
        // Two branches, not one condition: `(MODIFIED && ..) || ALIBI` changed the modified
        // kernels' PTX.
        #[allow(clippy::if_same_then_else)]
        let head_slope = if MODIFIED && modifiers.alibi_slopes != 0 {
            alibi_slope(modifiers, info.batch, info.head as usize)
        } else if ALIBI {
            alibi_slope(modifiers, info.batch, info.head as usize)
        } else {
            0.0
        };
        let mask = info.mask;
        let first_query = info.first_query;
        let order = LastToFirst::new((first_block, key_blocks));
        let diagonal_first = diagonal_first_order(&info, (first_block, key_blocks));
        let key_block_of = |visit: u32| visit_order(order, diagonal_first, visit);
        // Visit `b`'s group of the ring (see above).
        let group = |visit: u32| ring + visit - first_block;
        let slot = |visit: u32| ring_slot(group(visit));
        // Every copy this thread issued has landed (but the latest group, where
        // `latest_in_flight`: the overlapped loop's with three slots, whose copies run two
        // groups ahead); the fence hands them to the async proxy that `wgmma` reads through,
        // and the block barrier makes every thread's visible and says that every warpgroup is
        // past its last wait for the MMAs it issued before. Warpgroups of `own_ranges`, and
        // those of the overlapped dense loop, which stop at their own last block, meet the
        // block barrier in key loops of their own: the barrier that allows that
        // (`barrier_sync_0`).
        let block_barrier = || {
            if own_ranges!() || OVERLAP {
                barrier_sync_0();
            } else {
                bar_sync_0();
            }
        };
        let copies_landed = |block: u32, latest_in_flight: bool| {
            if tma!() {
                while !mbarrier_try_wait_parity_shared(
                    landed(group(block)),
                    phase_parity(group(block)),
                ) {}
                block_barrier();
                return;
            }
            if latest_in_flight {
                cp_async_wait_group::<1>();
            } else {
                cp_async_wait_group::<0>();
            }
            fence_proxy_async_shared_cta();
            block_barrier();
        };
        // A consumer's wait for visit `visit`'s group, which hands `cp.async` copies
        // (generic-proxy writes) to the async proxy that its `wgmma` reads them through; and,
        // once the warp is done with the group, its arrival on `freed` (and on `q_freed`, once
        // done with the tile's Q).
        let wait_landed = |visit: u32| {
            while !mbarrier_try_wait_parity_shared(landed(group(visit)), phase_parity(group(visit)))
            {
            }
            // TMA writes through the async proxy already.
            if !tma!() {
                fence_proxy_async_shared_cta();
            }
        };
        let finish_block = #[inline(always)]
        |visit: u32| {
            if has_producer && lane == 0 {
                mbarrier_arrive_shared(freed(group(visit)));
            }
        };
        let finish_q = #[inline(always)]
        || {
            if persistent && lane == 0 {
                mbarrier_arrive_shared(q_freed);
            }
        };
        // The last group's (V alone) and an empty tile's: waited for only by the next tile's
        // copies, so freed only in a persistent kernel.
        let finish_last_group = #[inline(always)]
        |visit: u32| {
            if persistent {
                finish_block(visit);
            }
        };
        // The consumers copy only without a producer, where the single-modifier kernels' order
        // is [`LastToFirst`] (their own ranges): the copies map visits without the
        // [`DiagonalFirst`] choice, which, in reach of every copy, made LLVM outline them.
        let copied_block_of = |visit: u32| {
            if ALIBI || SOFTCAP {
                order.key_block::<true>(visit)
            } else {
                order.key_block::<MODIFIED>(visit)
            }
        };
        // The K, or the V, tile of visit `visit`'s key block (the 8-warp tiles: every thread
        // copies).
        let copy_key =
            |visit: u32, stage: u32| copy_key_tile(&info, copied_block_of(visit), stage, copier);
        let copy_value =
            |visit: u32, stage: u32| copy_value_tile(&info, copied_block_of(visit), stage, copier);

        // `S = Q Kᵀ` of this warpgroup's rows against the keys of `k`, and `O += P V` with the
        // keys of `v`, each waited for before it returns (the overlapped loop issues its pair
        // of them itself).
        let scores_of = #[inline(always)]
        |k: WgmmaTile<BLOCK_N, HEAD_DIM>| {
            let mut scores = Scores::<1, KEY_STEPS>::zero();
            fence_accumulator(&mut scores);
            wgmma_fence();
            issue_scores::<T, BLOCK_M, BLOCK_N, HEAD_DIM, KEY_STEPS, DIM_STEPS>(
                &mut scores,
                q_tile,
                k,
                warpgroup_row,
                descriptor_steps,
            );
            wgmma_commit_group();
            wgmma_wait_group::<0>();
            fence_accumulator(&mut scores);
            scores
        };
        let add_values = #[inline(always)]
        |output: &mut Output<1, DIM_STEPS>,
                          p: &[OperandA; KEY_STEPS],
                          v: WgmmaTile<BLOCK_N, HEAD_DIM>| {
            fence_accumulator(output);
            wgmma_fence();
            issue_values::<T, BLOCK_N, HEAD_DIM, KEY_STEPS, DIM_STEPS>(
                output,
                p,
                v,
                descriptor_steps,
            );
            wgmma_commit_group();
            wgmma_wait_group::<0>();
            fence_accumulator(output);
        };

        // With TMA ([`sm90_copies_by_tma`]) and no producer, visit `visit`'s group: its K and
        // the V of the visit before (none before the first), and the tile's Q `with_q` (the
        // first group), issued by thread 0, whose arrival on the group's `landed` barrier
        // expects their bytes. The boxes are counted whole: TMA zero-fills the rows past the
        // end (and completes their bytes), as the `cp.async` copies do.
        let tma_group = #[inline(always)]
        |visit: u32, with_q: bool| {
            if thread == 0 {
                let barrier = landed(group(visit));
                let copies_key = visit < key_blocks;
                let copies_value = visit > first_block && visit - 1 < key_blocks;
                let kv_tiles = copies_key as u32 + copies_value as u32;
                mbarrier_arrive_expect_tx_shared(
                    barrier,
                    with_q as u32 * tma_tile_bytes::<BLOCK_M, HEAD_DIM>()
                        + kv_tiles * tma_tile_bytes::<BLOCK_N, HEAD_DIM>(),
                );
                if with_q {
                    let rows = [first_query, info.head, info.batch];
                    tma_load_tile(q_tile, q_map, rows, barrier);
                }
                if copies_key {
                    let first_key = copied_block_of(visit) * BLOCK_N as u32;
                    let rows = [first_key, info.kv_head, info.batch];
                    tma_load_tile(k_tile(slot(visit)), k_map, rows, barrier);
                }
                if copies_value {
                    let first_key = copied_block_of(visit - 1) * BLOCK_N as u32;
                    let rows = [first_key, info.kv_head, info.batch];
                    tma_load_tile(v_tile(slot(visit - 1)), v_map, rows, barrier);
                }
            }
        };

        // Prologue: Q and the first K (and with two stages and no overlap, the first V) in one
        // group. A tile with no key block needs no Q.
        if tma!() && !has_producer {
            if first_block < key_blocks {
                tma_group(first_block, true);
            }
        } else if !has_producer {
            copy_tile_async::<_, BLOCK_M, COPY_WARPS, PADS, true>(q_tile, q_rows, copier);
            if first_block < key_blocks && STAGES > 1 {
                copy_key(first_block, 0);
                if !OVERLAP {
                    copy_value(first_block, 0);
                }
            }
            cp_async_commit_group();
        }

        let mut output = Output::<1, DIM_STEPS>::zero();
        let mut softmax = OnlineSoftmax::<1>::default();
        // Modifies (the modified kernels) and masks visit `visit`'s scores (at the limits
        // `bounds` names) and folds them into the running softmax, returning the output's
        // rescale.
        let mut fold_block = #[inline(always)]
        |scores: &mut Scores<1, KEY_STEPS>, visit: u32, bounds: MaskBounds| {
            let block_mask = mask.in_tile(first_query, key_block_of(visit) * BLOCK_N as u32);
            let place = ScoresPlace {
                rule: block_mask,
                warp_row,
                lane: this_lane,
                one_query: false,
            };
            // The modifiers come before the mask, which must leave masked keys at -inf.
            let offsets = if MODIFIED {
                let slopes = [[head_slope; 2]];
                Some(apply_modifiers(
                    scores,
                    modifiers,
                    head_slope != 0.0,
                    &slopes,
                    place,
                ))
            } else if ALIBI {
                Some(add_alibi(scores, &[[head_slope; 2]], place))
            } else {
                if SOFTCAP {
                    apply_softcap(scores, modifiers.softcap_input_scale);
                }
                None
            };
            mask_scores(scores, place, bounds);
            softmax.fold(scores, offsets, params.scale_log2)
        };
        // Blocks before `unmasked_blocks` hold only keys that the block's first query, and so
        // every query of the block, sees (none past the end). The rest need the end test: the
        // bounds are a constant at each call site, so the unmasked blocks carry no mask code.
        let unmasked_blocks = mask.whole_key_blocks::<BLOCK_N>(first_query);
        // With `own_ranges` each warpgroup computes the blocks its own rows see, their limits
        // tested where those rows need them (warpgroup-uniform, at run time): under a window of
        // `w` keys the block's 128 rows span `w + 127` keys, a warpgroup's 64 `w + 63`.
        let own = RowsKeyBlocks::new::<BLOCK_N>(
            mask,
            first_query + warpgroup_row as u32,
            SM90_WARPGROUP_ROWS as u32,
            info.seq_len_q,
            (first_block, key_blocks),
        );

        if OVERLAP && first_block < key_blocks {
            // Two blocks in flight per warpgroup: block `j`'s `S = Q Kᵀ` and block `j - 1`'s
            // `P V` are issued together, and the softmax of block `j` runs while `P V` does; the
            // output's rescale waits for `P V`. Block `b`'s K and V sit in slot `slot(b)`; the
            // copies of block `j + STAGES - 1`'s K and block `j + STAGES - 2`'s V start once every
            // warpgroup is past block `j - 1`'s `S` and block `j - 2`'s `P V`, which used those
            // slots: with three slots each copy has two blocks' time to land, with two one.
            // One group of copies (the 8-warp tiles): block `key_block`'s K and the V of the block
            // before (the group after the prologue's, `first + 1`, holds the first block's V).
            let copy_group = #[inline(always)]
            |key_block: u32| {
                if tma!() {
                    tma_group(key_block, false);
                    return;
                }
                if key_block < key_blocks {
                    copy_key(key_block, slot(key_block));
                }
                if key_block - 1 < key_blocks {
                    copy_value(key_block - 1, slot(key_block - 1));
                }
                cp_async_commit_group();
            };
            if !persistent {
                first_turn();
            }
            // With three slots the groups run two ahead: the one of block `first + 1` goes before
            // the first block's wait.
            if !has_producer {
                for key_block in first_block + 1..first_block + STAGES as u32 - 1 {
                    copy_group(key_block);
                }
            }
            // Block `block`'s group has landed (and, without a producer, the group `STAGES - 1`
            // blocks on is issued; with one, it is this warpgroup's turn), and after its MMAs, the
            // warp is done with it.
            let start_block = #[inline(always)]
            |block: u32| {
                if has_producer {
                    wait_landed(block);
                    wait_turn();
                } else {
                    copies_landed(block, STAGES == 3);
                    copy_group(block + STAGES as u32 - 1);
                }
            };
            // A group outside this warpgroup's rows: its turn passed on at once.
            let skip_block = #[inline(always)]
            |block: u32| {
                start_block(block);
                pass_turn();
                finish_block(block);
            };
            // The last group (the last block's V) has landed (and it is this warpgroup's turn),
            // and the warpgroup is done with the tile's Q (its last `S` waited for).
            let last_landed = #[inline(always)]
            || {
                finish_q();
                if has_producer {
                    wait_landed(key_blocks);
                    wait_turn();
                } else {
                    copies_landed(key_blocks, false);
                }
            };
            // The probabilities of the block before, for its `P V` (with `own_ranges` the
            // warpgroup computes them at its first block).
            let mut previous = [OperandA([0; 4]); KEY_STEPS];
            if !own_ranges!() {
                start_block(first_block);
                let mut scores = scores_of(k_tile(slot(first_block)));
                pass_turn();
                finish_block(first_block);
                // The output is 0: its rescale changes nothing. The bounds are tested at run
                // time here (one block), so that the fold is inlined at three places, not four.
                let first_bounds = MaskBounds {
                    start: false,
                    end: key_block_of(first_block) >= unmasked_blocks,
                };
                fold_block(&mut scores, first_block, first_bounds);
                previous = probabilities::<T, KEY_STEPS>(&scores);
            }

            // Block `block`: its `S` and fold, and the previous block's `P V` where
            // `adds_previous` (always in the dense loop; with `own_ranges` a warpgroup starts its
            // own blocks with `S` alone). A constant at every call site: a `wgmma` behind a
            // warpgroup-uniform run-time branch made ptxas serialise every `wgmma` of the kernel
            // (its C7520 note: a warpgroup arrive it inserted in a divergent path).
            let mut overlapped_block = #[inline(always)]
            |block: u32, bounds: MaskBounds, adds_previous: bool| {
                start_block(block);
                let mut scores = Scores::<1, KEY_STEPS>::zero();
                fence_accumulator(&mut scores);
                fence_accumulator(&mut output);
                wgmma_fence();
                issue_scores::<T, BLOCK_M, BLOCK_N, HEAD_DIM, KEY_STEPS, DIM_STEPS>(
                    &mut scores,
                    q_tile,
                    k_tile(slot(block)),
                    warpgroup_row,
                    descriptor_steps,
                );
                wgmma_commit_group();
                if adds_previous {
                    issue_values::<T, BLOCK_N, HEAD_DIM, KEY_STEPS, DIM_STEPS>(
                        &mut output,
                        &previous,
                        v_tile(slot(block - 1)),
                        descriptor_steps,
                    );
                    wgmma_commit_group();
                }
                pass_turn();
                // Groups complete in order: with one pending, `S` is done.
                if adds_previous {
                    wgmma_wait_group::<1>();
                } else {
                    wgmma_wait_group::<0>();
                }
                fence_accumulator(&mut scores);
                let rescale = fold_block(&mut scores, block, bounds);
                wgmma_wait_group::<0>();
                fence_accumulator(&mut output);
                // The previous probabilities stay alive until their MMAs are done, and the next
                // are packed only then: registers packed while `P V` runs were serialised by ptxas
                // (its C7513 note; FlashAttention-3 converts after the wait too).
                fence_operands(&mut previous);
                finish_block(block);
                rescale.apply(&mut output);
                previous = probabilities::<T, KEY_STEPS>(&scores);
            };
            if own_ranges!() {
                // Every thread starts every visit of the block's range (the copies and the
                // barrier); the warpgroup computes its own, `begin..end`, in loops of their own
                // (warpgroup-uniform bounds, no branch around a `wgmma`).
                let (begin, end) = order.visits(own.range());
                let (untested_from, tested_from) = order.visits(own.unmasked());
                for block in first_block..begin {
                    skip_block(block);
                }
                let mut next_to_start = begin;
                if begin < end {
                    overlapped_block(begin, own.bounds(key_block_of(begin)), false);
                    // The end's limit tested, then none, then the limits tested at run time (the
                    // rest constants: the unmasked blocks carry no mask code).
                    let (untested_from, tested_from) =
                        (untested_from.max(begin + 1), tested_from.max(begin + 1));
                    for block in begin + 1..untested_from {
                        overlapped_block(block, MaskBounds::END, true);
                    }
                    for block in untested_from..tested_from {
                        overlapped_block(block, MaskBounds::NONE, true);
                    }
                    for block in tested_from..end {
                        overlapped_block(block, own.bounds(key_block_of(block)), true);
                    }
                    next_to_start = end;
                    if end < key_blocks {
                        // The warpgroup's last `P V`, under the next block's copies.
                        start_block(end);
                        add_values(&mut output, &previous, v_tile(slot(end - 1)));
                        pass_turn();
                        finish_block(end);
                        next_to_start = end + 1;
                    }
                }
                for block in next_to_start..key_blocks {
                    skip_block(block);
                }
                last_landed();
                if begin < end && end == key_blocks {
                    add_values(&mut output, &previous, v_tile(slot(key_blocks - 1)));
                }
                pass_turn();
                finish_last_group(key_blocks);
            } else {
                if ALIBI {
                    // The blocks that need the end test come first after the first in this
                    // order ([`DiagonalFirst`]).
                    let tested_to = diagonal_first.tested_visits_end(unmasked_blocks);
                    for block in first_block + 1..tested_to.max(first_block + 1) {
                        overlapped_block(block, MaskBounds::END, true);
                    }
                    for block in tested_to.max(first_block + 1)..key_blocks {
                        overlapped_block(block, MaskBounds::NONE, true);
                    }
                    // The last block's `P V`.
                    last_landed();
                    add_values(&mut output, &previous, v_tile(slot(key_blocks - 1)));
                } else {
                    // In this order (first to last) the blocks past every key this warpgroup's
                    // rows see come last: under a causal mask, the tile's last block for the
                    // first 64 rows of the 192-row tile, or of a 128-row tile of 64-key blocks;
                    // in a tile of no more rows than keys per block, where the keys outnumber
                    // the queries by a remainder of 64 or more; in every tile, all blocks for a
                    // warpgroup whose rows are past the queries. The warpgroup stops after its
                    // own last block, `own_end`, and takes only its turns for the rest: on an
                    // H200, 8,16,2048,64 causal 1.05x faster (BENCHMARKS.md log 82),
                    // 16,16,512,64 and 32,16,512,64 causal in the 8-warp tiles 1.05x (log 83),
                    // 16,16,448,128 with 512 keys and causal 2,16,4032,128 with 4096 keys
                    // 2.4-6.2% in the tiles of 128-key blocks (log 84).
                    // The 8-warp tiles' warpgroups meet their block barrier from different
                    // places then, so it is `barrier.sync` there (synccheck rejects that for
                    // `bar.sync`).
                    let own_end = own.range().1.max(first_block + 1);
                    let unmasked_from = unmasked_blocks.max(first_block + 1).min(own_end);
                    for block in first_block + 1..unmasked_from {
                        overlapped_block(block, MaskBounds::NONE, true);
                    }
                    for block in unmasked_from..own_end {
                        overlapped_block(block, MaskBounds::END, true);
                    }
                    if own_end < key_blocks {
                        // The warpgroup's last `P V`, under the next block's copies.
                        start_block(own_end);
                        add_values(&mut output, &previous, v_tile(slot(own_end - 1)));
                        pass_turn();
                        finish_block(own_end);
                        for block in own_end + 1..key_blocks {
                            skip_block(block);
                        }
                        last_landed();
                    } else {
                        // The last block's `P V`.
                        last_landed();
                        add_values(&mut output, &previous, v_tile(slot(key_blocks - 1)));
                    }
                }
                pass_turn();
                finish_last_group(key_blocks);
            }
            if !persistent {
                last_turn();
            }
        } else if !OVERLAP {
            // One block at a time per warpgroup, block `j + 1`'s K and V copied (with two stages)
            // under block `j`'s MMAs into the slot that block `j - 1` held; a warpgroup computes
            // the block where `computes` (always in the dense kernels).
            let mut stage = 0;
            let mut key_block = #[inline(always)]
            |block: u32, bounds: MaskBounds, computes: bool| {
                if STAGES == 1 {
                    // One slot: every warpgroup is done with the previous block before it is
                    // overwritten (with no block before, the barrier is one more, harmless).
                    block_barrier();
                    copy_key(block, 0);
                    copy_value(block, 0);
                    cp_async_commit_group();
                    copies_landed(block, false);
                } else {
                    copies_landed(block, false);
                    if block + 1 < key_blocks {
                        copy_key(block + 1, stage ^ 1);
                        copy_value(block + 1, stage ^ 1);
                    }
                    cp_async_commit_group();
                }

                if computes {
                    let mut scores = scores_of(k_tile(stage));
                    fold_block(&mut scores, block, bounds).apply(&mut output);
                    add_values(
                        &mut output,
                        &probabilities::<T, KEY_STEPS>(&scores),
                        v_tile(stage),
                    );
                }
                if STAGES > 1 {
                    stage ^= 1;
                }
            };
            if own_ranges!() {
                // As in the overlapped loop: every visit started by every thread, the
                // warpgroup's own computed in runs of constant mask limits.
                let (begin, end) = order.visits(own.range());
                let (untested_from, tested_from) = order.visits(own.unmasked());
                for block in first_block..begin {
                    key_block(block, MaskBounds::NONE, false);
                }
                for block in begin..untested_from {
                    key_block(block, MaskBounds::END, true);
                }
                for block in untested_from..tested_from {
                    key_block(block, MaskBounds::NONE, true);
                }
                for block in tested_from..end {
                    key_block(block, own.bounds(key_block_of(block)), true);
                }
                for block in end..key_blocks {
                    key_block(block, MaskBounds::NONE, false);
                }
            } else {
                for block in first_block..unmasked_blocks {
                    key_block(block, MaskBounds::NONE, true);
                }
                for block in unmasked_blocks..key_blocks {
                    key_block(block, MaskBounds::END, true);
                }
            }
        }

        // Epilogue: the output rows are staged through the Q tile, which the other warps of
        // the warpgroup read through their MMAs: every warp is past its last wait (and with no
        // key block, every Q copy has landed) at this barrier, the consumers' alone with a
        // producer. A persistent kernel stages them in a tile of their own, each warp in its
        // own rows (the producer refills the Q tile with the next tile's meanwhile): no
        // barrier. Straight from the registers, 4 bytes a lane, the writes took 2-4 us more
        // per tile at 4,8,512,128 (BENCHMARKS.md log 52).
        if has_producer {
            if first_block >= key_blocks {
                // A tile with no key block: its one group (Q alone) taken and freed, so that
                // the ring and the Q barrier stay in step with the producer.
                wait_landed(first_block);
                finish_last_group(first_block);
                finish_q();
            }
            if !persistent {
                // Barrier 1, of the consumer warpgroups.
                bar_sync_named::<1, CONSUMER_THREADS>();
            }
        } else {
            cp_async_wait_group::<0>();
            bar_sync_0();
        }
        // A serving kernel reads its sequence's offsets and lengths again for the output
        // (a load after the loop's barriers, never merged with the first): kept from the
        // tile's start they held registers through the key loop, which the three-consumer
        // tile's consumers (160 each) lack.
        let info = if SERVING {
            BlockInfo::<SERVING>::new::<BLOCK_M>(params, sequences)
        } else {
            info
        };
        let rows = softmax.finish(params.scale_log2);
        let staging = if persistent { output_tile } else { q_tile };
        write_output::<T, WgmmaTile<BLOCK_M, HEAD_DIM>, 1, DIM_STEPS, SERVING, PADS>(
            &output, &rows, staging, &info, params, warp_row, this_lane,
        );
        write_logsumexp(&rows, &info, params, sequences, warp_row, this_lane);
        key_blocks - first_block + 1
    };

    if persistent {
        first_turn();
        schedule.walk::<BLOCK_M, SERVING>(
            params,
            #[inline(always)]
            |info, ring, _| compute_tile(tile_work(info), ring),
        );
        last_turn();
    } else {
        compute_tile(grid_tile, 0);
    }
}
