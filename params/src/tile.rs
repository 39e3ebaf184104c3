//! The tile configurations of the forward kernel, the tile axis of a
//! [`KernelSpec`](crate::spec::KernelSpec): the candidate values and the compile-time gates
//! ([`TileConfig::check`]).
//!
//! Only `core`: the crate re-exports it, and `build.rs` includes this file with `#[path]` to
//! generate the list of entries, so that the list and the gates have one implementation.

use crate::arch::Family;

/// The largest dynamic shared memory one block may opt into on every device the sm80 family's
/// PTX serves (99 KiB: sm_89's, and sm_86's, which runs the sm_80 PTX): the limit of its
/// compile-time gates ([`crate::arch::max_smem_per_block_of`]).
pub const SM89_MAX_SMEM_PER_BLOCK: usize = crate::arch::max_smem_per_block_of(Family::Sm80);

/// The same limit for the sm90 family: sm_90a's per-block opt-in limit, 227 KiB.
pub const SM90_MAX_SMEM_PER_BLOCK: usize = crate::arch::max_smem_per_block_of(Family::Sm90);

/// The alignment of every shared-memory tile of the sm90 family: wgmma's shared-memory matrix
/// descriptors address 128-byte-swizzled tiles of 8-row, 1024-byte atoms from a 1024-byte
/// boundary.
pub const SM90_TILE_ALIGN: usize = 1024;

/// Query rows of one warpgroup of the sm90 family: the M of `wgmma.m64nNk16`. A tile has one
/// warpgroup of 4 warps per this many rows ([`TileConfig::check_sm90`]).
pub const SM90_WARPGROUP_ROWS: usize = 64;

/// Warps of the producer warpgroup of a warp-specialised sm90 tile: the one warpgroup that
/// copies Q, K and V while the others (one per [`SM90_WARPGROUP_ROWS`] rows) compute. A tile is
/// warp-specialised where it has these warps beyond its rows' ([`TileConfig::producer_warps`]).
pub const SM90_PRODUCER_WARPS: usize = 4;

/// Registers per thread of a warp-specialised sm90 tile's producer warpgroup and of each of its
/// consumer warpgroups after `setmaxnreg` (FlashAttention-3's split), for a tile of `block_m`
/// rows whose producer takes `producer` registers ([`crate::sm90_producer_registers`]): the
/// consumers get the most, a multiple of 8, of what the block started with. `setmaxnreg` moves
/// registers within that, not the SM's: 64,512 (168 each at `.maxntid 384`, two consumers) or
/// 65,536 (128 each at `.maxntid 512`, three: D=64's 192-row tile, [`sm90_feeds_consumers`]).
/// So a producer of 24, 40 or 80 leaves two consumers 240, 232 or 208 (a producer of 32 beside
/// consumers of 240 hung, BENCHMARKS.md log 76), and one of 24 or 32 leaves three consumers 160
/// (40 would leave them 152, which spilled 52 bytes in the serving kernel, log 86).
///
/// ```
/// use flash_attn_params::sm90_register_split;
/// assert_eq!(sm90_register_split(128, 24), (24, 240));
/// assert_eq!(sm90_register_split(128, 40), (40, 232));
/// assert_eq!(sm90_register_split(128, 80), (80, 208));
/// assert_eq!(sm90_register_split(192, 32), (32, 160));
/// ```
pub const fn sm90_register_split(block_m: usize, producer: u32) -> (u32, u32) {
    let consumers = (block_m / SM90_WARPGROUP_ROWS) as u32;
    let threads = 32 * SM90_PRODUCER_WARPS as u32 * (consumers + 1);
    let at_launch = 65536 / threads / 8 * 8;
    let consumer = (at_launch * threads - 128 * producer) / (128 * consumers) / 8 * 8;
    (producer, consumer)
}

/// Shared-memory bytes of a warp-specialised sm90 tile's `mbarrier`s, after its K/V ring: a
/// "landed" and a "free" barrier of 8 bytes per slot (three slots at most) and one for the Q
/// tile (free for the next tile's Q), padded.
pub const SM90_PIPELINE_BARRIER_BYTES: usize = 64;

/// Columns of one TMA box of Q, K or V: the 16-bit elements of one 128-byte swizzle block, the
/// column block of the sm90 family's shared-memory tiles (`kernels-gpu`'s `WgmmaTile`), which
/// the tensor maps' 128-byte swizzle lays out in the same order. A tile of `HEAD_DIM` columns
/// is `HEAD_DIM / 64` boxes.
pub const TMA_BOX_COLUMNS: usize = 64;

/// Bytes of one tensor map (`CUtensorMap`), which TMA reads 64-byte aligned.
pub const TENSOR_MAP_BYTES: usize = 128;

/// Bytes of the Q, K and V tensor maps that an sm90 kernel takes, in that order
/// ([`crate::KernelSpec::takes_tensor_maps`]).
pub const TENSOR_MAPS_BYTES: usize = 3 * TENSOR_MAP_BYTES;

/// The bound on a tensor map's byte strides (the driver's: below 2^40).
pub const TMA_STRIDE_BYTES_LIMIT: u64 = 1 << 40;

/// Bytes moved by one `cp.async.cg` / one `ldmatrix` row: the unit of every shared-memory copy.
pub const CHUNK_BYTES: usize = 16;

/// fp16 elements per 16-byte chunk.
pub const CHUNK_ELEMS: usize = CHUNK_BYTES / 2;

/// The XOR swizzle permutes 16-byte chunks within groups of this many, so rows must hold a
/// multiple of it (128 bytes, the width of all 32 banks).
pub const SWIZZLE_CHUNKS: usize = 8;

/// How K, V and Q tiles are laid out in shared memory. Both make `ldmatrix` and the 16-byte
/// `cp.async` writes bank-conflict-free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SmemLayout {
    /// Dense rows, chunk `c` of row `r` stored at chunk slot `c ^ (r % 8)`.
    Swizzled,
    /// Each row padded by one 16-byte chunk, which shifts consecutive rows by 4 banks; costs
    /// `rows * 16` bytes more shared memory than the swizzle.
    Padded,
}

/// The compile-time part of an `ldmatrix` address: [`SmemLayout::lane_offset`]`^ flip + add`
/// is the offset of one lane's chunk (see [`SmemLayout::step_offset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepOffset {
    /// The swizzle's part: XORed into the lane's offset (0 in the padded layout).
    pub flip: u32,
    /// Added after the XOR.
    pub add: u32,
}

impl SmemLayout {
    /// The byte offset of chunk `chunk` of row `row` in a tile of `row_chunks` 16-byte chunks
    /// of data per row: the layout's one rule, which [`Self::lane_offset`] and
    /// [`Self::step_offset`] split in two.
    pub const fn chunk_offset(self, row: usize, chunk: usize, row_chunks: usize) -> usize {
        match self {
            SmemLayout::Swizzled => {
                (row * row_chunks + (chunk ^ (row % SWIZZLE_CHUNKS))) * CHUNK_BYTES
            }
            SmemLayout::Padded => {
                row * (row_chunks * CHUNK_BYTES + ROW_PADDING_BYTES) + chunk * CHUNK_BYTES
            }
        }
    }

    /// A lane's own part of the offsets of the chunks it addresses in a loop: row `lane_row`
    /// (any) of each 8-row group, chunk `lane_chunk`. The offset of row
    /// `8 * row_group + lane_row`, chunk `chunk + lane_chunk`, where `chunk` and `lane_chunk`
    /// share no set bit (`chunk + lane_chunk == chunk | lane_chunk`), is this `^ flip + add` of
    /// [`Self::step_offset`]`(row_group, chunk)`.
    ///
    /// Why split: with the lane's part formed once, a loop's addresses are a handful of
    /// registers (one per distinct `flip`) plus constants. Computed whole, LLVM hoisted all
    /// `KEY_STEPS * DIM_STEPS` K addresses and as many V ones out of each key loop: 64
    /// registers and about 100 instructions at each loop's entry at D=128 (ncu, log 39).
    pub const fn lane_offset(self, lane_row: usize, lane_chunk: usize, row_chunks: usize) -> u32 {
        self.chunk_offset(lane_row, lane_chunk, row_chunks) as u32
    }

    /// The compile-time part of [`Self::lane_offset`]'s addresses for row group `row_group`
    /// and chunk `chunk`. The swizzle flips the low three bits of the chunk by the row's: the
    /// lane's part already holds `lane_chunk ^ (lane_row % 8)` there, and `chunk` shares no bit
    /// with `lane_chunk`, so its low bits XOR in (`flip`) and the rest, with the rows, adds.
    pub const fn step_offset(
        self,
        row_group: usize,
        chunk: usize,
        row_chunks: usize,
    ) -> StepOffset {
        match self {
            SmemLayout::Swizzled => {
                let flipped = chunk % SWIZZLE_CHUNKS;
                StepOffset {
                    flip: (flipped * CHUNK_BYTES) as u32,
                    add: ((8 * row_group * row_chunks + chunk - flipped) * CHUNK_BYTES) as u32,
                }
            }
            SmemLayout::Padded => StepOffset {
                flip: 0,
                add: self.chunk_offset(8 * row_group, chunk, row_chunks) as u32,
            },
        }
    }
}

/// Where each warp keeps its Q fragments during the main loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QSource {
    /// Loaded once with `ldmatrix` and held in registers (`BLOCK_M / WARPS * HEAD_DIM / 64`
    /// registers per thread).
    Registers,
    /// Re-read from the shared Q tile with `ldmatrix` at every key block: fewer registers,
    /// more shared-memory traffic.
    SharedMemory,
}

/// Bytes of padding per row of a [`SmemLayout::Padded`] tile: one 16-byte chunk.
pub const ROW_PADDING_BYTES: usize = CHUNK_BYTES;

/// The largest head dim of a kernel, and so of a problem.
pub const MAX_HEAD_DIM: usize = 256;

/// The granularity of a problem's head dim: one 16-byte chunk of 16-bit elements, the unit of
/// every copy (a kernel zero-fills the chunks past the problem's head dim and never stores them).
pub const HEAD_DIM_GRANULE: usize = CHUNK_ELEMS;

/// The head dim of the kernels that run a problem of head dim `head_dim`: `head_dim` itself if
/// it is one of [`CANDIDATE_HEAD_DIMS`], else the smallest larger one whose kernels pad
/// ([`crate::spec::head_dim_pads`]: not 64 or 128), which the kernel pads to (as FlashAttention
/// does): 8-24 run on 32, 40-88 on 96, 104-152 on 160. `None` unless `head_dim` is a multiple
/// of [`HEAD_DIM_GRANULE`] in `8..=MAX_HEAD_DIM`.
pub const fn padded_head_dim(head_dim: usize) -> Option<usize> {
    if head_dim == 0 || !head_dim.is_multiple_of(HEAD_DIM_GRANULE) {
        return None;
    }
    let mut index = 0;
    while index < CANDIDATE_HEAD_DIMS.len() {
        let candidate = CANDIDATE_HEAD_DIMS[index];
        let pads = crate::spec::head_dim_pads(candidate);
        if candidate == head_dim || (candidate > head_dim && pads) {
            return Some(candidate);
        }
        index += 1;
    }
    None
}

/// How `threads` threads split the 16-byte copies of a tile of `rows` rows of `row_chunks`
/// chunks (a shared-memory tile, or a warp's output rows), one rule for every copy loop:
/// the row is cut into `groups` groups of `group_chunks` consecutive chunks, thread `t` copies
/// chunk `t % group_chunks` of every group of rows `t / group_chunks + p * rows_per_pass`, for
/// each pass `p < passes`. `group_chunks` is the largest power of two dividing both the row's
/// chunks and the threads: the whole row (one group) where the threads cover whole rows, as for
/// head dims 64, 128 and 256, and 4 chunks for head dims 96, 160 and 224 (12, 20 and 28
/// chunks). A thread's chunk column within a group is fixed, so its copies walk one pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyPlan {
    /// Consecutive chunks of a row per group: the threads of one row of a pass.
    pub group_chunks: usize,
    /// Groups per row: the copies of one row per thread.
    pub groups: usize,
    /// Rows one pass of all threads copies.
    pub rows_per_pass: usize,
    /// Passes over the tile.
    pub passes: usize,
}

impl CopyPlan {
    /// The plan, or `None` where the rows do not split into whole passes.
    pub const fn of(rows: usize, threads: usize, row_chunks: usize) -> Option<CopyPlan> {
        if rows == 0 || threads == 0 || row_chunks == 0 {
            return None;
        }
        let mut group_chunks = 1;
        while row_chunks.is_multiple_of(2 * group_chunks)
            && threads.is_multiple_of(2 * group_chunks)
        {
            group_chunks *= 2;
        }
        let rows_per_pass = threads / group_chunks;
        if !rows.is_multiple_of(rows_per_pass) {
            return None;
        }
        Some(CopyPlan {
            group_chunks,
            groups: row_chunks / group_chunks,
            rows_per_pass,
            passes: rows / rows_per_pass,
        })
    }

    /// [`CopyPlan::of`] in a `const` context, where a tile that does not split is a compile
    /// error.
    pub const fn of_tile(rows: usize, threads: usize, row_chunks: usize) -> CopyPlan {
        match CopyPlan::of(rows, threads, row_chunks) {
            Some(plan) => plan,
            None => panic!("the tile does not split into whole passes of 16-byte copies"),
        }
    }
}

/// One tile configuration of the forward kernel. Build it with [`TileConfig::new`], which
/// rejects (at compile time, when used in a `const`) every configuration that cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// Query rows per block.
    pub block_m: usize,
    /// Keys per block iteration.
    pub block_n: usize,
    /// Warps per block, 1 to 16; each owns `block_m / warps` query rows.
    pub warps: usize,
    /// K/V shared-memory buffers in the `cp.async` ring; 1 means no overlap (load, wait,
    /// compute, repeat).
    pub stages: usize,
    /// The head dimension of Q, K, V and O (a multiple of 16; of 64 when swizzled).
    pub head_dim: usize,
    /// How the Q, K and V tiles are laid out in shared memory.
    pub layout: SmemLayout,
    /// Where each warp keeps its Q fragments.
    pub q_source: QSource,
}

impl TileConfig {
    /// Validates the configuration. In a `const` item a failed check is a compile error whose
    /// message names the violated limit (see [`TileConfig::check`]).
    pub const fn new(
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> Self {
        match Self::check(block_m, block_n, warps, stages, head_dim, layout, q_source) {
            Ok(config) => config,
            Err(limit) => panic!("{}", limit),
        }
    }

    /// The configuration, or the first limit it violates: the compile-time gates of the sm80
    /// family ([`TileConfig::check_for`] picks a family's). Every tile of a list in source is
    /// built through [`TileConfig::new`], which turns an `Err` into a compile error.
    ///
    /// ```
    /// use flash_attn_params::{QSource, SmemLayout, TileConfig};
    ///
    /// let (layout, q_source) = (SmemLayout::Swizzled, QSource::Registers);
    /// let fits = TileConfig::check(64, 64, 4, 2, 128, layout, q_source);
    /// assert_eq!(fits.unwrap().smem_bytes(), 16_384 + 2 * 2 * 16_384);
    /// // 3 stages of 128-key K and V tiles at head dim 128 need 224 KiB.
    /// let too_big = TileConfig::check(128, 128, 8, 3, 128, layout, q_source);
    /// assert!(too_big.unwrap_err().contains("99 KiB"));
    /// ```
    pub const fn check(
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> Result<Self, &'static str> {
        let config = TileConfig {
            block_m,
            block_n,
            warps,
            stages,
            head_dim,
            layout,
            q_source,
        };
        if warps < 1 || warps > 16 {
            return Err("warps must be in 1..=16");
        }
        if !block_m.is_multiple_of(16 * warps) {
            return Err(
                "block_m must be a multiple of 16 * warps: each warp owns whole m16 MMA tiles",
            );
        }
        if !block_n.is_multiple_of(16) {
            return Err("block_n must be a multiple of 16 (the P.V MMA k-step)");
        }
        if !head_dim.is_multiple_of(16) {
            return Err("head_dim must be a multiple of 16 (the Q.K MMA k-step)");
        }
        if matches!(layout, SmemLayout::Swizzled)
            && !head_dim.is_multiple_of(CHUNK_ELEMS * SWIZZLE_CHUNKS)
        {
            return Err(
                "head_dim must be a multiple of 64 when swizzled: a row must be whole 128-byte swizzle groups",
            );
        }
        if head_dim > MAX_HEAD_DIM {
            return Err("head_dim must be at most 256");
        }
        if stages < 1 || stages > 4 {
            return Err("stages must be in 1..=4 (the kernel waits on at most 3 copy groups)");
        }
        if let Some(limit) = config.copy_split_violation() {
            return Err(limit);
        }
        if !config.q_tile_bytes().is_multiple_of(128) || !config.kv_tile_bytes().is_multiple_of(128)
        {
            return Err("every shared-memory tile must start 128-byte aligned");
        }
        if config.smem_bytes() > SM89_MAX_SMEM_PER_BLOCK {
            return Err("shared memory exceeds the sm_89 per-block limit of 99 KiB");
        }
        Ok(config)
    }

    /// [`TileConfig::new`] for the tiles of `family`'s main loop ([`TileConfig::check_for`]).
    #[allow(clippy::too_many_arguments)]
    pub const fn new_for(
        family: Family,
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> Self {
        match Self::check_for(
            family, block_m, block_n, warps, stages, head_dim, layout, q_source,
        ) {
            Ok(config) => config,
            Err(limit) => panic!("{}", limit),
        }
    }

    /// [`TileConfig::new_for`] of the sm90 family, in its one layout and Q source: `wgmma`'s
    /// swizzled tiles, Q in shared memory.
    pub const fn sm90(
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
    ) -> Self {
        Self::new_for(
            Family::Sm90,
            block_m,
            block_n,
            warps,
            stages,
            head_dim,
            SmemLayout::Swizzled,
            QSource::SharedMemory,
        )
    }

    /// [`TileConfig::check`] for the tiles of `family`'s main loop: the sm80 family's gates,
    /// or for [`Family::Sm90`] its own ([`TileConfig::check_sm90`]).
    #[allow(clippy::too_many_arguments)]
    pub const fn check_for(
        family: Family,
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> Result<Self, &'static str> {
        match family {
            Family::Sm80 => {
                Self::check(block_m, block_n, warps, stages, head_dim, layout, q_source)
            }
            Family::Sm90 => {
                Self::check_sm90(block_m, block_n, warps, stages, head_dim, layout, q_source)
            }
        }
    }

    /// The gates of the sm90 family's tiles: one warpgroup of 4 warps per 64 query rows
    /// (`warps == block_m / 16`, or [`SM90_PRODUCER_WARPS`] more for a producer warpgroup where
    /// [`sm90_feeds_consumers`] allows one), key blocks a multiple of 16 (wgmma's
    /// k-step over P.V), head dims a multiple of 32 up to 256 (the kernel swizzles 64-byte rows at D=96 and 128-byte
    /// ones otherwise, so D need not be a multiple of 64 as the sm80 family's swizzle needs),
    /// swizzled tiles with Q in shared memory, every tile at a 1024-byte boundary
    /// ([`SM90_TILE_ALIGN`]), and sm_90a's per-block shared memory ([`SM90_MAX_SMEM_PER_BLOCK`]).
    ///
    /// ```
    /// use flash_attn_params::{QSource, SmemLayout, TileConfig};
    ///
    /// let (layout, q_source) = (SmemLayout::Swizzled, QSource::SharedMemory);
    /// let big = TileConfig::check_sm90(128, 64, 8, 2, 256, layout, q_source).unwrap();
    /// assert_eq!(big.smem_bytes(), 64 * 1024 + 2 * 2 * 32 * 1024); // over 99 KiB, within 227
    /// assert!(TileConfig::check_sm90(128, 64, 4, 2, 128, layout, q_source).is_err());
    /// ```
    pub const fn check_sm90(
        block_m: usize,
        block_n: usize,
        warps: usize,
        stages: usize,
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> Result<Self, &'static str> {
        let config = TileConfig {
            block_m,
            block_n,
            warps,
            stages,
            head_dim,
            layout,
            q_source,
        };
        if block_m == 0
            || !block_m.is_multiple_of(SM90_WARPGROUP_ROWS)
            || (warps != block_m / 16 && warps != block_m / 16 + SM90_PRODUCER_WARPS)
        {
            return Err(
                "sm90: block_m must be a multiple of 64, with one warpgroup (4 warps) per 64 rows \
                 and at most a producer warpgroup more",
            );
        }
        if config.producer_warps() != 0 && !sm90_feeds_consumers(block_m, head_dim, stages) {
            return Err(
                "sm90: a producer warpgroup only in the overlapped schedule (head_dim 64 or from \
                 128 on, two or three stages), with two consumer warpgroups (block_m 128) or, at \
                 head_dim 64, three (block_m 192)",
            );
        }
        if block_n == 0 || !block_n.is_multiple_of(16) || block_n > 256 {
            return Err("sm90: block_n must be a multiple of 16 up to 256 (wgmma's N and k-step)");
        }
        if head_dim == 0 || !head_dim.is_multiple_of(32) || head_dim > MAX_HEAD_DIM {
            return Err("sm90: head_dim must be a multiple of 32 up to 256");
        }
        if stages < 1 || stages > 3 {
            return Err("sm90: stages must be 1, 2 or 3 (K/V slots)");
        }
        if stages == 3 && !sm90_overlaps_blocks(head_dim, stages) {
            return Err(
                "sm90: three stages only in the overlapped schedule (head_dim 64 or from 128 on)",
            );
        }
        if let Some(limit) = config.copy_split_violation() {
            return Err(limit);
        }
        if !matches!(layout, SmemLayout::Swizzled) || !matches!(q_source, QSource::SharedMemory) {
            return Err(
                "sm90: tiles are swizzled, with Q in shared memory (wgmma reads both there)",
            );
        }
        if !config.q_tile_bytes().is_multiple_of(SM90_TILE_ALIGN)
            || !config.kv_tile_bytes().is_multiple_of(SM90_TILE_ALIGN)
        {
            return Err("sm90: every shared-memory tile must start 1024-byte aligned");
        }
        if config.smem_bytes() > SM90_MAX_SMEM_PER_BLOCK {
            return Err("sm90: shared memory exceeds the sm_90a per-block limit of 227 KiB");
        }
        Ok(config)
    }

    /// The gate both families' tile copies need (`CopyPlan::of_tile`): the Q tile and each K/V
    /// tile split into whole passes of 16-byte copies over the block's threads; `None` where
    /// they do.
    const fn copy_split_violation(&self) -> Option<&'static str> {
        if CopyPlan::of(self.block_m, self.copy_threads(), self.row_chunks()).is_none() {
            return Some("the Q tile must split into whole passes of 16-byte copies per thread");
        }
        if CopyPlan::of(self.block_n, self.copy_threads(), self.row_chunks()).is_none() {
            return Some("a K/V tile must split into whole passes of 16-byte copies per thread");
        }
        None
    }

    /// Threads per block: 32 per warp.
    pub const fn threads(&self) -> usize {
        self.warps * 32
    }

    /// The warps of a producer warpgroup (warp-specialised sm90 tiles: [`SM90_PRODUCER_WARPS`]
    /// beyond one warp per 16 rows), or 0. Every tile of the sm80 family has at most one warp
    /// per 16 rows, so no sm80 tile has any.
    pub const fn producer_warps(&self) -> usize {
        self.warps.saturating_sub(self.block_m / 16)
    }

    /// Whether a kernel of this tile can be persistent ([`crate::KernelSpec::is_persistent`]):
    /// its blocks walk the problem's tiles ([`Self::walk_grid`]), so that the producer copies
    /// a tile's Q and first K while the consumers finish the tile before, and stage their
    /// output in a tile of its own ([`Self::output_tile_offset`]), the Q tile being the next
    /// tile's by then. A warp-specialised tile of two consumer warpgroups can (a producer
    /// warpgroup copies ahead of the compute; the walk was built and measured with two
    /// consumers of 240 registers) where that output tile fits the shared memory (not D=160's
    /// 128-key tile), up to head dim 160: at 192 and 224 the walk took the consumers past their
    /// 240 registers (ptxas spilled 8 bytes of the two-stage tiles).
    pub const fn can_persist(&self) -> bool {
        self.producer_warps() != 0
            && self.block_m == 2 * SM90_WARPGROUP_ROWS
            && self.head_dim <= 160
            && self.output_tile_offset() + self.q_tile_bytes() <= SM90_MAX_SMEM_PER_BLOCK
    }

    /// The grid of a persistent kernel ([`crate::KernelSpec::is_persistent`]) for `tiles` tiles on a
    /// device of `sm_count` SMs: one block per SM (a warp-specialised block takes every
    /// register of its SM), no more than there are tiles, where `walks` (each block computes
    /// tiles `blockIdx.x, blockIdx.x + gridDim.x, ...`); else one block per tile, which the
    /// hardware hands out as SMs free up (the tiles of a causal mask differ in length, and
    /// dealt out in turns they left SMs idle at the end: 7% slower at 8,16,2048,64, BENCHMARKS.md
    /// log 52).
    pub const fn walk_grid(tiles: u32, sm_count: u32, walks: bool) -> (u32, u32, u32) {
        let blocks = if walks && sm_count < tiles {
            sm_count
        } else {
            tiles
        };
        (if blocks == 0 { 1 } else { blocks }, 1, 1)
    }

    /// The warps that compute (own query rows): every warp but a producer's.
    pub const fn consumer_warps(&self) -> usize {
        self.warps - self.producer_warps()
    }

    /// The threads that copy the tiles into shared memory ([`copy_warps`]).
    pub const fn copy_threads(&self) -> usize {
        32 * copy_warps(self.block_m, self.warps)
    }

    /// Query rows owned by one warp.
    pub const fn rows_per_warp(&self) -> usize {
        self.block_m / self.consumer_warps()
    }

    /// m16 MMA tiles per warp.
    pub const fn m_tiles(&self) -> usize {
        self.rows_per_warp() / 16
    }

    /// n8 MMA tiles across one row of S (keys of one block).
    pub const fn s_n_tiles(&self) -> usize {
        self.block_n / 8
    }

    /// n8 MMA tiles across one row of O (the head dimension).
    pub const fn d_tiles(&self) -> usize {
        self.head_dim / 8
    }

    /// 16-byte chunks in one row of `head_dim` 16-bit elements.
    pub const fn row_chunks(&self) -> usize {
        self.head_dim / CHUNK_ELEMS
    }

    /// Bytes from one row of a shared-memory tile to the next.
    pub const fn smem_row_bytes(&self) -> usize {
        match self.layout {
            SmemLayout::Swizzled => self.head_dim * 2,
            SmemLayout::Padded => self.head_dim * 2 + ROW_PADDING_BYTES,
        }
    }

    /// 16-byte chunks in the Q tile.
    pub const fn q_chunks(&self) -> usize {
        self.block_m * self.row_chunks()
    }

    /// 16-byte chunks in one K (or V) tile.
    pub const fn kv_tile_chunks(&self) -> usize {
        self.block_n * self.row_chunks()
    }

    /// 16-byte `cp.async` copies each copying thread issues for the Q tile.
    pub const fn q_copies_per_thread(&self) -> usize {
        self.q_chunks() / self.copy_threads()
    }

    /// 16-byte `cp.async` copies each copying thread issues for one K (or V) tile.
    pub const fn kv_copies_per_thread(&self) -> usize {
        self.kv_tile_chunks() / self.copy_threads()
    }

    /// Shared-memory bytes of the Q tile, padding included.
    pub const fn q_tile_bytes(&self) -> usize {
        self.block_m * self.smem_row_bytes()
    }

    /// Shared-memory bytes of one K (or V) tile, padding included.
    pub const fn kv_tile_bytes(&self) -> usize {
        self.block_n * self.smem_row_bytes()
    }

    /// Byte offset of the K tile of ring slot `stage`; its V tile follows it.
    pub const fn k_tile_offset(&self, stage: usize) -> usize {
        self.q_tile_bytes() + stage * 2 * self.kv_tile_bytes()
    }

    /// Byte offset of the V tile of ring slot `stage`, right after its K tile.
    pub const fn v_tile_offset(&self, stage: usize) -> usize {
        self.k_tile_offset(stage) + self.kv_tile_bytes()
    }

    /// Byte offset of a warp-specialised tile's pipeline barriers
    /// ([`SM90_PIPELINE_BARRIER_BYTES`]): right after the K/V ring.
    pub const fn pipeline_barrier_offset(&self) -> usize {
        self.k_tile_offset(self.stages)
    }

    /// Byte offset of a persistent kernel's output staging tile ([`Self::can_persist`], as
    /// large as the Q tile): after the pipeline barriers, at the swizzle's alignment.
    pub const fn output_tile_offset(&self) -> usize {
        (self.pipeline_barrier_offset() + SM90_PIPELINE_BARRIER_BYTES)
            .next_multiple_of(SM90_TILE_ALIGN)
    }

    /// Dynamic shared memory per block: the Q tile (reused to stage O) plus the K/V ring, and
    /// a warp-specialised tile's pipeline barriers (a persistent kernel's output tile besides:
    /// [`crate::KernelSpec::smem_bytes`]).
    pub const fn smem_bytes(&self) -> usize {
        let barriers = if self.producer_warps() != 0 {
            SM90_PIPELINE_BARRIER_BYTES
        } else {
            0
        };
        self.pipeline_barrier_offset() + barriers
    }
}

/// The warps of a tile of `block_m` rows and `warps` warps that copy its tiles into shared
/// memory: a producer warpgroup's ([`TileConfig::producer_warps`]), or every warp.
pub const fn copy_warps(block_m: usize, warps: usize) -> usize {
    if warps > block_m / 16 {
        warps - block_m / 16
    } else {
        warps
    }
}

/// The candidate values of each tile parameter. Every combination is a candidate tile of every
/// candidate spec ([`crate::spec::for_each_candidate`]), but for the head dims beyond the first
/// two, whose space is narrower ([`in_candidate_space`]).
pub const CANDIDATE_HEAD_DIMS: [usize; 8] = [32, 64, 96, 128, 160, 192, 224, 256];
/// The candidate [`TileConfig::block_m`] values.
pub const CANDIDATE_BLOCK_M: [usize; 2] = [64, 128];
/// The candidate [`TileConfig::block_n`] values.
pub const CANDIDATE_BLOCK_N: [usize; 3] = [32, 64, 128];
/// The candidate [`TileConfig::warps`] values.
pub const CANDIDATE_WARPS: [usize; 2] = [4, 8];
/// The candidate [`TileConfig::stages`] values.
pub const CANDIDATE_STAGES: [usize; 3] = [1, 2, 3];
/// The candidate [`TileConfig::layout`] values.
pub const CANDIDATE_LAYOUTS: [SmemLayout; 2] = [SmemLayout::Swizzled, SmemLayout::Padded];
/// The candidate [`TileConfig::q_source`] values.
pub const CANDIDATE_Q_SOURCES: [QSource; 2] = [QSource::Registers, QSource::SharedMemory];

/// The head dims whose candidate space is the whole grid of the values above: those the
/// dispatch table was first tuned over. Every other head dim has a narrower space, so that the
/// search space (`FLASH_ATTN_KERNELS=all`, which the tuner and the GPU suite build) grows by a
/// few dozen entries per head dim rather than a hundred: one layout (swizzled where the rows
/// are whole 128-byte groups, else padded), no 128-key blocks above head dim 96, no more than
/// 128 f32 accumulators of O per thread (a warp's rows times the head dim at most 32 * 128).
/// Each limit cut tiles that spilled on sm_89 (ptxas 12.9): 128-key blocks at head dim 160, and
/// 32 rows per warp at head dims 160 to 256, spilled 16 bytes to 2.4 KB. Every stage count is a
/// candidate: one stage first only where two did not fit in shared memory (head dims 192 and
/// above), until the one-stage `m128_n64_w4_s1_qsmem` won D=128's large non-causal grids by
/// 3.7-4.0% (BENCHMARKS.md log 40).
pub const FULL_GRID_HEAD_DIMS: [usize; 2] = [64, 128];

/// Whether `tile` is in the candidate space of its head dim (see [`FULL_GRID_HEAD_DIMS`]).
pub const fn in_candidate_space(tile: &TileConfig) -> bool {
    let head_dim = tile.head_dim;
    if head_dim == FULL_GRID_HEAD_DIMS[0] || head_dim == FULL_GRID_HEAD_DIMS[1] {
        return true;
    }
    let layout = if head_dim.is_multiple_of(CHUNK_ELEMS * SWIZZLE_CHUNKS) {
        SmemLayout::Swizzled
    } else {
        SmemLayout::Padded
    };
    tile.layout as u8 == layout as u8
        && (tile.block_n <= 64 || head_dim <= 96)
        && tile.block_m / tile.warps * head_dim <= 32 * 128
}

/// Whether the sm90 main loop of this tile overlaps each key block's softmax with the
/// previous block's `P V` in each warpgroup (FlashAttention-3's intra-warpgroup overlap: two
/// blocks in flight, the K/V slots holding the K of one and the V of the other, and with
/// three slots the copies one block further ahead), or runs one block at a time (the next
/// block's K and V copied under it with two stages). The one rule of the choice, by head dim
/// as FlashAttention-3's `tile_size_fwd_sm90` makes it: with two or three stages at D=64 and
/// from D=128 on (three stages only there: [`TileConfig::check_sm90`]). Measured on an H200
/// (BENCHMARKS.md log 42; the same tile with and without the overlap, `m128_n64`, `m128_n128`
/// at D=32, 64 and 128): the overlap ran 7% faster at 2,16,4096,128 non-causal (1% slower
/// causal, inside the noise), 11-12% at D=256, 9-11% at D=160 and 2-6% at D=192 (those two
/// against the first call's timings), but 16-20% slower at D=96, 35% at D=32 (against the
/// first call) and 11% faster to 5% slower at D=64. At D=64 again on an H100 with the loop
/// as it is now (log 48): the overlapped `m128_n64_w8_s2` 1.06-1.22x faster than the sm80
/// table's kernels at S=512 and 1024, the warp-specialised `m128_n128_w12_s2` 1.19-1.31x at
/// 8,16,2048,64, 2,16,4096,64 and 4,8,512,64; at D=96 the overlapped 8-warp tile was slower
/// again and at D=32 at most 3-5% faster (log 48, not adopted). Three slots against two, same
/// tiles (H100, BENCHMARKS.md log 44, as the loop is now): 2-7% faster at D=224, 0-1.5% at
/// D=128 (2,16,4096,128 and 4,8,512,128), 2-4% slower at D=192, D=160 the same; a candidate of
/// the search space, not shipped. Only this schedule has warp-specialised tiles
/// ([`TileConfig::producer_warps`]).
pub const fn sm90_overlaps_blocks(head_dim: usize, stages: usize) -> bool {
    stages >= 2 && (head_dim == 64 || head_dim >= 128)
}

/// Whether an sm90 tile of `block_m` rows may have a producer warpgroup
/// ([`TileConfig::producer_warps`]) feeding its consumers (one warpgroup per 64 rows): in the
/// overlapped schedule ([`sm90_overlaps_blocks`]), two consumer warpgroups (`block_m` 128), or
/// three (192) at D=64, FlashAttention-3's tile there. Three consumers share the registers
/// that two have elsewhere (160 each after `setmaxnreg`, against 240), which D=64's
/// accumulators fit.
pub const fn sm90_feeds_consumers(block_m: usize, head_dim: usize, stages: usize) -> bool {
    sm90_overlaps_blocks(head_dim, stages)
        && (block_m == 2 * SM90_WARPGROUP_ROWS
            || (block_m == 3 * SM90_WARPGROUP_ROWS && head_dim == 64))
}

/// The candidate head dims of the sm90 family's tiles: every kernel head dim of the sm80 family
/// ([`CANDIDATE_HEAD_DIMS`]; the kernel takes any multiple of 32 up to 256).
pub const SM90_CANDIDATE_HEAD_DIMS: [usize; 8] = CANDIDATE_HEAD_DIMS;
/// The candidate `block_m` values of the sm90 family, each with `block_m / 16` warps.
pub const SM90_CANDIDATE_BLOCK_M: [usize; 3] = [64, 128, 192];
/// The candidate `block_n` values of the sm90 family.
pub const SM90_CANDIDATE_BLOCK_N: [usize; 2] = [64, 128];
/// The candidate stage counts of the sm90 family.
pub const SM90_CANDIDATE_STAGES: [usize; 3] = [1, 2, 3];

/// Calls `visit(candidate, verdict)` for every candidate tile of `family`, in the order of the
/// PTX entries: head dim, `block_m`, `block_n`, warps, stages, layout, Q source (the sm90
/// family's: head dim, `block_m`, `block_n`, stages, warps). `candidate`
/// holds the parameters, checked or not; `verdict` is [`TileConfig::check_for`]'s: `Ok` with
/// the same configuration, or the first limit it violates.
pub(crate) fn for_each_tile_candidate(
    family: Family,
    mut visit: impl FnMut(TileConfig, Result<TileConfig, &'static str>),
) {
    // Every candidate goes through its family's gates.
    let mut visit_checked = |candidate: TileConfig| {
        let TileConfig {
            block_m,
            block_n,
            warps,
            stages,
            head_dim,
            layout,
            q_source,
        } = candidate;
        let verdict = TileConfig::check_for(
            family, block_m, block_n, warps, stages, head_dim, layout, q_source,
        );
        visit(candidate, verdict);
    };
    if let Family::Sm90 = family {
        for head_dim in SM90_CANDIDATE_HEAD_DIMS {
            for block_m in SM90_CANDIDATE_BLOCK_M {
                for block_n in SM90_CANDIDATE_BLOCK_N {
                    for stages in SM90_CANDIDATE_STAGES {
                        // One warp per 16 rows, and where the tile can have one, a producer
                        // warpgroup more.
                        let warp_specialised = sm90_feeds_consumers(block_m, head_dim, stages);
                        let producers: &[usize] = if warp_specialised {
                            &[0, SM90_PRODUCER_WARPS]
                        } else {
                            &[0]
                        };
                        for producer_warps in producers {
                            visit_checked(TileConfig {
                                block_m,
                                block_n,
                                warps: block_m / 16 + producer_warps,
                                stages,
                                head_dim,
                                layout: SmemLayout::Swizzled,
                                q_source: QSource::SharedMemory,
                            });
                        }
                    }
                }
            }
        }
        return;
    }
    for head_dim in CANDIDATE_HEAD_DIMS {
        for block_m in CANDIDATE_BLOCK_M {
            for block_n in CANDIDATE_BLOCK_N {
                for warps in CANDIDATE_WARPS {
                    for stages in CANDIDATE_STAGES {
                        for layout in CANDIDATE_LAYOUTS {
                            for q_source in CANDIDATE_Q_SOURCES {
                                let candidate = TileConfig {
                                    block_m,
                                    block_n,
                                    warps,
                                    stages,
                                    head_dim,
                                    layout,
                                    q_source,
                                };
                                if in_candidate_space(&candidate) {
                                    visit_checked(candidate);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
