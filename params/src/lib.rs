//! What the GPU kernels and the host must agree on, defined once for both targets.
//!
//! - [`ForwardParams`]: the `#[repr(C)]` argument every forward kernel takes by value.
//! - [`TileConfig`]: a tile configuration and everything derived from it (threads, shared-memory
//!   bytes, copies per thread), validated at compile time.
//! - [`for_each_forward_kernel!`]: the one list of compiled configurations. The GPU crate expands
//!   it into PTX entry points and this crate into [`FORWARD_KERNELS`], so the two cannot drift.
#![no_std]

/// Element strides of one `[batch, heads, seq_len, head_dim]` tensor; the head dimension is
/// always contiguous (stride 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorStrides {
    pub batch: u64,
    pub head: u64,
    pub seq: u64,
}

/// Arguments of a forward kernel, passed by value as one `.param` block.
///
/// Every tensor pointer is a device address aligned to 16 bytes and every stride a multiple of
/// 8 elements (16 bytes), so that each row starts 16-byte aligned; the host checks this.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForwardParams {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    /// `[batch, heads_q, seq_len_q]` f32, contiguous; 0 when the caller wants no logsumexp.
    pub lse: u64,
    pub q_strides: TensorStrides,
    pub k_strides: TensorStrides,
    pub v_strides: TensorStrides,
    pub o_strides: TensorStrides,
    pub seq_len_q: u32,
    pub seq_len_kv: u32,
    pub heads_q: u32,
    /// Query heads per K/V head (`heads_q / heads_kv`): 1 for MHA, `heads_q` for MQA.
    pub kv_group_size: u32,
    /// `softmax_scale * log2(e)`: scores are exponentiated with `ex2`, so the scale is folded
    /// into log2 space once on the host.
    pub scale_log2: f32,
    /// Nonzero for causal masking, aligned to the bottom right: query `i` sees key `j` iff
    /// `j + seq_len_q <= i + seq_len_kv`.
    pub causal: u32,
}

/// The element type of Q, K, V and O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    F16,
    Bf16,
}

/// The largest dynamic shared memory one block may opt into on sm_89 (99 KiB).
pub const SM89_MAX_SMEM_PER_BLOCK: usize = 99 * 1024;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileConfig {
    /// Query rows per block.
    pub block_m: usize,
    /// Keys per block iteration.
    pub block_n: usize,
    pub warps: usize,
    /// K/V shared-memory buffers in the `cp.async` ring; 1 means no overlap (load, wait,
    /// compute, repeat).
    pub stages: usize,
    pub head_dim: usize,
    pub layout: SmemLayout,
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

    pub const fn q_chunks(&self) -> usize {
        self.block_m * self.row_chunks()
    }

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

    pub const fn q_tile_bytes(&self) -> usize {
        self.block_m * self.smem_row_bytes()
    }

    pub const fn kv_tile_bytes(&self) -> usize {
        self.block_n * self.smem_row_bytes()
    }

    /// Byte offset of the K tile of ring slot `stage`; its V tile follows it.
    pub const fn k_tile_offset(&self, stage: usize) -> usize {
        self.q_tile_bytes() + stage * 2 * self.kv_tile_bytes()
    }

    pub const fn v_tile_offset(&self, stage: usize) -> usize {
        self.k_tile_offset(stage) + self.kv_tile_bytes()
    }

    /// Dynamic shared memory per block: the Q tile (reused to stage O) plus the K/V ring.
    pub const fn smem_bytes(&self) -> usize {
        self.k_tile_offset(self.stages)
    }
}

/// A compiled forward kernel: its PTX entry point, element type and tile configuration.
///
/// Only [`FORWARD_KERNELS`] holds them (the private index keeps other crates from building
/// one), so a `&ForwardKernel` always names a compiled entry, and its [`Self::index`] is its
/// place in that list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardKernel {
    pub entry: &'static str,
    pub dtype: Dtype,
    pub tile: TileConfig,
    index: usize,
}

impl ForwardKernel {
    /// The position of this kernel in [`FORWARD_KERNELS`]: the host keeps per-kernel state
    /// (the loaded module) in a list of the same order, and finds it without comparing names.
    pub const fn index(&self) -> usize {
        self.index
    }
}

/// The compiled kernel whose PTX entry is `name`, for tables written in source, such as the
/// host's dispatch table: evaluated in a `const` or `static`, an unknown name fails the build,
/// so such a table cannot name a kernel that is not compiled.
///
/// # Panics
/// If no compiled kernel is named `name` (at compile time, a compile error). For names only
/// known at run time, the host's `kernel_by_name` returns an error instead.
pub const fn kernel_named(name: &str) -> &'static ForwardKernel {
    let mut index = 0;
    while index < FORWARD_KERNELS.len() {
        if bytes_equal(FORWARD_KERNELS[index].entry.as_bytes(), name.as_bytes()) {
            return &FORWARD_KERNELS[index];
        }
        index += 1;
    }
    panic!("no compiled forward kernel has this entry name (see for_each_forward_kernel!)")
}

/// `a == b` for byte strings, usable in a `const fn` (where `==` on slices is not).
const fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The one list of compiled forward kernels:
/// `(entry, dtype, block_m, block_n, warps, stages, head_dim, layout, q_source)`.
///
/// `$callback!` receives the whole list once. For each (dtype, head_dim), the first entry is
/// the fallback default; the tuned dispatch table picks among all of them. Entry names spell
/// the configuration out, with `_pad` for [`SmemLayout::Padded`] and `_qsmem` for
/// [`QSource::SharedMemory`].
///
/// Not every configuration that passes the gates is compiled: each entry costs build time,
/// JIT time and GPU test and sanitizer time. The list covers every value of every tile
/// parameter and keeps the configurations that won a shape in the H100 measurements
/// (BENCHMARKS.md); `flash-attn-configs` lists the whole space.
#[macro_export]
macro_rules! for_each_forward_kernel {
    ($callback:ident) => {
        $callback! {
            (flash_fwd_f16_d64_m64_n64_w4_s3, F16, 64, 64, 4, 3, 64, Swizzled, Registers),
            (flash_fwd_f16_d64_m64_n64_w4_s2, F16, 64, 64, 4, 2, 64, Swizzled, Registers),
            // 128 registers: four blocks (16 warps) per SM, against three for BLOCK_N = 64.
            (flash_fwd_f16_d64_m64_n32_w4_s3, F16, 64, 32, 4, 3, 64, Swizzled, Registers),
            (flash_fwd_f16_d64_m64_n64_w4_s1, F16, 64, 64, 4, 1, 64, Swizzled, Registers),
            (flash_fwd_f16_d64_m64_n64_w4_s3_pad, F16, 64, 64, 4, 3, 64, Padded, Registers),
            (flash_fwd_f16_d64_m64_n64_w4_s3_qsmem, F16, 64, 64, 4, 3, 64, Swizzled, SharedMemory),
            // 128x128 with 8 warps was the fastest at the seed shape (10.5 us against 10.6 for
            // this one) but spills 12 bytes on sm_89.
            (flash_fwd_f16_d64_m64_n128_w4_s2, F16, 64, 128, 4, 2, 64, Swizzled, Registers),
            (flash_fwd_f16_d64_m128_n32_w4_s3, F16, 128, 32, 4, 3, 64, Swizzled, Registers),
            // Two m16 tiles per warp halve the K/V `ldmatrix` traffic per MMA (FA2's shape for
            // D=64). Spilled 32 bytes until the lazy rescale; the 3-stage ring spills 8 bytes on
            // sm_89.
            (flash_fwd_f16_d64_m128_n64_w4_s2, F16, 128, 64, 4, 2, 64, Swizzled, Registers),
            (flash_fwd_f16_d64_m128_n64_w4_s2_qsmem, F16, 128, 64, 4, 2, 64, Swizzled, SharedMemory),
            // D=128: three stages of 64x128 K and V tiles would need 112 KiB of shared memory,
            // over the sm_89 limit of 99 KiB.
            (flash_fwd_f16_d128_m64_n64_w4_s2, F16, 64, 64, 4, 2, 128, Swizzled, Registers),
            (flash_fwd_f16_d128_m128_n64_w8_s2, F16, 128, 64, 8, 2, 128, Swizzled, Registers),
            (flash_fwd_f16_d128_m64_n32_w4_s3, F16, 64, 32, 4, 3, 128, Swizzled, Registers),
            (flash_fwd_f16_d128_m64_n64_w4_s2_qsmem, F16, 64, 64, 4, 2, 128, Swizzled, SharedMemory),
            // D=128 with two m16 tiles per warp fits only with Q re-read from shared memory.
            (flash_fwd_f16_d128_m128_n32_w4_s2_qsmem, F16, 128, 32, 4, 2, 128, Swizzled, SharedMemory),
            (flash_fwd_f16_d128_m128_n32_w4_s3_qsmem, F16, 128, 32, 4, 3, 128, Swizzled, SharedMemory),
            (flash_fwd_bf16_d64_m64_n64_w4_s3, Bf16, 64, 64, 4, 3, 64, Swizzled, Registers),
            (flash_fwd_bf16_d64_m64_n64_w4_s2, Bf16, 64, 64, 4, 2, 64, Swizzled, Registers),
            (flash_fwd_bf16_d64_m64_n32_w4_s3, Bf16, 64, 32, 4, 3, 64, Swizzled, Registers),
            (flash_fwd_bf16_d64_m64_n128_w4_s2, Bf16, 64, 128, 4, 2, 64, Swizzled, Registers),
            (flash_fwd_bf16_d64_m128_n64_w4_s2, Bf16, 128, 64, 4, 2, 64, Swizzled, Registers),
            (flash_fwd_bf16_d128_m64_n64_w4_s2, Bf16, 64, 64, 4, 2, 128, Swizzled, Registers),
            (flash_fwd_bf16_d128_m128_n64_w8_s2, Bf16, 128, 64, 8, 2, 128, Swizzled, Registers),
            (flash_fwd_bf16_d128_m64_n32_w4_s3, Bf16, 64, 32, 4, 3, 128, Swizzled, Registers),
            (flash_fwd_bf16_d128_m128_n32_w4_s2_qsmem, Bf16, 128, 32, 4, 2, 128, Swizzled, SharedMemory),
        }
    };
}

macro_rules! forward_kernel_table {
    ($(($entry:ident, $dtype:ident, $block_m:literal, $block_n:literal, $warps:literal, $stages:literal, $head_dim:literal, $layout:ident, $q_source:ident)),* $(,)?) => {
        /// The entries in list order: `Position::$entry as usize` is an entry's index.
        #[allow(non_camel_case_types, clippy::enum_variant_names)]
        enum Position {
            $($entry),*
        }

        /// Every compiled forward kernel, in the order of [`for_each_forward_kernel!`].
        pub const FORWARD_KERNELS: &[ForwardKernel] = &[$(ForwardKernel {
            entry: stringify!($entry),
            dtype: Dtype::$dtype,
            tile: TileConfig::new(
                $block_m, $block_n, $warps, $stages, $head_dim,
                SmemLayout::$layout, QSource::$q_source,
            ),
            index: Position::$entry as usize,
        }),*];
    };
}
for_each_forward_kernel!(forward_kernel_table);
