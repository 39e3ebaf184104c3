//! The tile configurations of the forward kernel, the tile axis of a
//! [`KernelSpec`](crate::spec::KernelSpec): the candidate values and the compile-time gates
//! ([`TileConfig::check`]).
//!
//! Only `core`: the crate re-exports it, and `build.rs` includes this file with `#[path]` to
//! generate the list of entries, so that the list and the gates have one implementation.

/// The largest dynamic shared memory one block may opt into on every device the PTX serves
/// (99 KiB: sm_89's, and sm_86's, which runs the sm_80 PTX): the limit of the compile-time
/// gates ([`crate::arch::MIN_SMEM_PER_BLOCK`]).
pub const SM89_MAX_SMEM_PER_BLOCK: usize = crate::arch::MIN_SMEM_PER_BLOCK;

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

    /// The configuration, or the first limit it violates. These are the compile-time gates:
    /// every kernel is instantiated through [`TileConfig::new`], which turns an `Err` into a
    /// compile error.
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
        if stages < 1 || stages > 4 {
            return Err("stages must be in 1..=4 (the kernel waits on at most 3 copy groups)");
        }
        if !config.threads().is_multiple_of(config.row_chunks()) {
            return Err("the threads must cover whole rows of 16-byte chunks");
        }
        if !config.q_chunks().is_multiple_of(config.threads()) {
            return Err("the Q tile must split into whole 16-byte chunks per thread");
        }
        if !config.kv_tile_chunks().is_multiple_of(config.threads()) {
            return Err("a K/V tile must split into whole 16-byte chunks per thread");
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

    /// Threads per block: 32 per warp.
    pub const fn threads(&self) -> usize {
        self.warps * 32
    }

    /// Query rows owned by one warp.
    pub const fn rows_per_warp(&self) -> usize {
        self.block_m / self.warps
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

    /// 16-byte `cp.async` copies each thread issues for the Q tile.
    pub const fn q_copies_per_thread(&self) -> usize {
        self.q_chunks() / self.threads()
    }

    /// 16-byte `cp.async` copies each thread issues for one K (or V) tile.
    pub const fn kv_copies_per_thread(&self) -> usize {
        self.kv_tile_chunks() / self.threads()
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

    /// Dynamic shared memory per block: the Q tile (reused to stage O) plus the K/V ring.
    pub const fn smem_bytes(&self) -> usize {
        self.k_tile_offset(self.stages)
    }
}

/// The candidate values of each tile parameter. Every combination is a candidate tile of every
/// candidate spec ([`crate::spec::for_each_candidate`]).
pub const CANDIDATE_HEAD_DIMS: [usize; 2] = [64, 128];
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

/// Calls `visit(candidate, verdict)` for every candidate tile, in the order of the PTX entries:
/// head dim, `block_m`, `block_n`, warps, stages, layout, Q source. `candidate` holds the
/// parameters, checked or not; `verdict` is [`TileConfig::check`]'s: `Ok` with the same
/// configuration, or the first limit it violates.
pub(crate) fn for_each_tile_candidate(
    mut visit: impl FnMut(TileConfig, Result<TileConfig, &'static str>),
) {
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
                                let verdict = TileConfig::check(
                                    block_m, block_n, warps, stages, head_dim, layout, q_source,
                                );
                                visit(candidate, verdict);
                            }
                        }
                    }
                }
            }
        }
    }
}
