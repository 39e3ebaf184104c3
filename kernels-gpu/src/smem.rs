//! Shared-memory tiles: the XOR-swizzled layout and the padded one (the sm80 loop), and the
//! layout of Hopper's `wgmma` operands with its descriptors (the sm90 loop).
//!
//! A tile is `[rows, head_dim]` 16-bit elements, one row after another, stored as 16-byte
//! chunks; [`SharedTile`] is what the kernel needs of a layout.
//!
//! Swizzled: chunk `c`
//! of row `r` lives at chunk slot `c ^ (r % 8)`. `ldmatrix` reads one chunk column from 8
//! consecutive rows; unswizzled, a 128-byte row stride puts all 8 in the same 4 banks (8-way
//! conflict), swizzled they cover all 32 banks. `cp.async` writes full rows, which the swizzle
//! only permutes, so they stay conflict-free too.
//!
//! Padded: rows are `HEAD_DIM * 2 + 16` bytes apart, so 8 consecutive rows start 4 banks apart
//! and one chunk column again covers all 32 banks, at the cost of 16 bytes per row.
//!
//! Alignment holds by construction: a tile's base is 128-byte aligned (checked by
//! [`flash_attn_params::TileConfig::new`]), rows are whole chunks apart, and
//! [`SharedTile::chunk_address`] (or its split form, [`SharedTile::fragment_address`]) is the
//! only way to form an address, always base plus whole 16-byte chunks.

use flash_attn_params::{SmemLayout, CHUNK_BYTES, CHUNK_ELEMS, SWIZZLE_CHUNKS};

/// Rows of one row group of [`SharedTile::fragment_address`]: the period of every layout's
/// swizzle, after which a chunk's address moves by a constant.
pub const ROW_GROUP_ROWS: usize = 8;

/// A lane's own part of the addresses it passes to `ldmatrix` in one tile layout (see
/// [`SmemLayout::lane_offset`]): formed once per kernel, so that each address in a loop is a
/// register plus constants.
#[derive(Clone, Copy)]
pub struct LaneChunk(u32);

/// A `[rows, HEAD_DIM]` tile of 16-bit elements at a `.shared` address, addressed in 16-byte
/// chunks.
pub trait SharedTile: Copy {
    /// The layout, which `TileConfig` sizes the tiles for.
    const LAYOUT: SmemLayout;
    /// 16-byte chunks of data per row.
    const ROW_CHUNKS: usize;

    /// `base` is `smem_base + offset`, where `smem_base` is the 128-byte-aligned dynamic
    /// shared-memory window address and `offset` a tile offset from `TileConfig`.
    fn at(smem_base: u32, offset: usize) -> Self;

    /// The tile's `.shared` address.
    fn base(self) -> u32;

    /// The 16-byte-aligned address of chunk `chunk` (columns `8 chunk .. 8 chunk + 8`) of `row`.
    #[inline(always)]
    fn chunk_address(self, row: usize, chunk: usize) -> u32 {
        self.base() + Self::LAYOUT.chunk_offset(row, chunk, Self::ROW_CHUNKS) as u32
    }

    /// This lane's part of [`Self::fragment_address`]: row `lane_row` of each 8-row group,
    /// chunk `lane_chunk`.
    #[inline(always)]
    fn lane_chunk(lane_row: usize, lane_chunk: usize) -> LaneChunk {
        LaneChunk(Self::LAYOUT.lane_offset(lane_row, lane_chunk, Self::ROW_CHUNKS))
    }

    /// [`Self::chunk_address`] of row `8 * row_group + lane_row`, chunk `chunk + lane_chunk`
    /// of `lane`'s, for a `chunk` that shares no set bit with `lane_chunk`: `row_group` and
    /// `chunk` are compile-time constants in the unrolled loops, so this is the lane's offset
    /// XOR a constant (one register per distinct constant, for the whole kernel) plus the base
    /// and a constant.
    #[inline(always)]
    fn fragment_address(self, lane: LaneChunk, row_group: usize, chunk: usize) -> u32 {
        let step = Self::LAYOUT.step_offset(row_group, chunk, Self::ROW_CHUNKS);
        self.base() + (lane.0 ^ step.flip) + step.add
    }
}

/// A swizzled `[rows, HEAD_DIM]` fp16 tile at a `.shared` address.
#[derive(Clone, Copy)]
pub struct SwizzledTile<const HEAD_DIM: usize> {
    base: u32,
}

impl<const HEAD_DIM: usize> SwizzledTile<HEAD_DIM> {
    const ROWS_ARE_SWIZZLE_GROUPS: () = assert!(
        HEAD_DIM.is_multiple_of(CHUNK_ELEMS * SWIZZLE_CHUNKS),
        "a swizzled row must be whole 8-chunk groups"
    );
}

impl<const HEAD_DIM: usize> SharedTile for SwizzledTile<HEAD_DIM> {
    const LAYOUT: SmemLayout = SmemLayout::Swizzled;
    const ROW_CHUNKS: usize = HEAD_DIM / CHUNK_ELEMS;

    #[inline(always)]
    fn at(smem_base: u32, offset: usize) -> Self {
        let () = Self::ROWS_ARE_SWIZZLE_GROUPS;
        Self {
            base: smem_base + offset as u32,
        }
    }

    #[inline(always)]
    fn base(self) -> u32 {
        self.base
    }
}

/// A padded `[rows, HEAD_DIM]` tile at a `.shared` address: one unused 16-byte chunk after
/// each row.
#[derive(Clone, Copy)]
pub struct PaddedTile<const HEAD_DIM: usize> {
    base: u32,
}

impl<const HEAD_DIM: usize> SharedTile for PaddedTile<HEAD_DIM> {
    const LAYOUT: SmemLayout = SmemLayout::Padded;
    const ROW_CHUNKS: usize = HEAD_DIM / CHUNK_ELEMS;

    #[inline(always)]
    fn at(smem_base: u32, offset: usize) -> Self {
        Self {
            base: smem_base + offset as u32,
        }
    }

    #[inline(always)]
    fn base(self) -> u32 {
        self.base
    }
}

/// A `[ROWS, HEAD_DIM]` tile of 16-bit elements in the layout that Hopper's `wgmma` reads
/// through a [`SmemDescriptor`]: the columns cut into blocks of [`Self::SWIZZLE_BYTES`] bytes,
/// each block `ROWS` rows of that width one after another, with the hardware's swizzle of that
/// width (16-byte chunk `c` of row `r` at slot `c ^ (r % 8)` with 128-byte rows, `c ^ (r / 2 %
/// 4)` with 64-byte rows: the bits of the address above the row XORed into the chunk's). The
/// widest swizzle whose blocks divide the row: 128 bytes where the head dim is a multiple of
/// 64, else 64 (head dims 32, 96, 160, 224).
///
/// The same bytes as a swizzled [`flash_attn_params::TileConfig`] tile (`ROWS` rows of
/// `HEAD_DIM` elements, no padding), so the tile offsets are `TileConfig`'s. The swizzle repeats
/// every 8 rows of a block, and a block is a multiple of 1024 bytes (the sizes of the sm90
/// tiles), so a tile at a 1024-byte-aligned offset keeps the pattern `wgmma` expects.
#[derive(Clone, Copy)]
pub struct WgmmaTile<const ROWS: usize, const HEAD_DIM: usize> {
    base: u32,
}

impl<const ROWS: usize, const HEAD_DIM: usize> WgmmaTile<ROWS, HEAD_DIM> {
    /// The bytes of one row of a column block, and the swizzle's width.
    pub const SWIZZLE_BYTES: usize = if HEAD_DIM.is_multiple_of(64) { 128 } else { 64 };
    /// 16-byte chunks in one row of a column block.
    const BLOCK_CHUNKS: usize = Self::SWIZZLE_BYTES / CHUNK_BYTES;
    /// Bytes of one column block: `ROWS` rows of [`Self::SWIZZLE_BYTES`].
    pub const COLUMN_BLOCK_BYTES: usize = ROWS * Self::SWIZZLE_BYTES;
    /// Column blocks of the tile: one TMA box each where they are 128 bytes wide.
    pub const COLUMN_BLOCKS: usize = HEAD_DIM * 2 / Self::SWIZZLE_BYTES;
    /// Bytes from one 8-row group of a column block to the next: the swizzle's period.
    const ROW_GROUP_BYTES: usize = 8 * Self::SWIZZLE_BYTES;
    const FITS: () = assert!(
        HEAD_DIM.is_multiple_of(32) && ROWS.is_multiple_of(64),
        "a wgmma tile holds 64-row groups of whole 64-byte swizzle rows"
    );

    /// The swizzle of `row`: XORed into the chunk index within the row's block.
    #[inline(always)]
    const fn swizzle(row: usize) -> usize {
        if Self::SWIZZLE_BYTES == 128 {
            row % 8
        } else {
            (row / 2) % 4
        }
    }

    /// The byte offset of chunk `chunk` of row `row` from the tile's base: the layout's one rule.
    #[inline(always)]
    const fn offset(row: usize, chunk: usize) -> usize {
        let slot = (chunk % Self::BLOCK_CHUNKS) ^ Self::swizzle(row);
        (chunk / Self::BLOCK_CHUNKS) * Self::COLUMN_BLOCK_BYTES
            + row * Self::SWIZZLE_BYTES
            + slot * CHUNK_BYTES
    }

    /// The tile at `smem_base + offset` (`offset` a multiple of 1024).
    #[inline(always)]
    pub fn at(smem_base: u32, offset: usize) -> Self {
        let () = Self::FITS;
        Self {
            base: smem_base + offset as u32,
        }
    }

    /// The descriptor of the operand `offset` bytes past the tile's start, built as `steps`
    /// says.
    #[inline(always)]
    fn descriptor(
        self,
        offset: usize,
        leading_bytes: usize,
        steps: DescriptorSteps,
    ) -> SmemDescriptor {
        let descriptor = |address: u32| {
            SmemDescriptor::new(
                address,
                Self::SWIZZLE_BYTES,
                leading_bytes,
                Self::ROW_GROUP_BYTES,
            )
        };
        match steps {
            DescriptorSteps::FromAddress => descriptor(self.base + offset as u32),
            DescriptorSteps::Advanced => descriptor(self.base).advanced(offset),
        }
    }

    /// The descriptor of the K-major `[rows, 16]` operand whose first row is `row` (a multiple
    /// of 8) and whose 16 columns are `16 k_step..`: rows 8 apart by
    /// [`Self::SWIZZLE_BYTES`]` * 8` bytes, the columns within one block's row.
    #[inline(always)]
    pub fn k_major(self, row: usize, k_step: usize, steps: DescriptorSteps) -> SmemDescriptor {
        let steps_per_block = Self::SWIZZLE_BYTES / 32;
        let offset = (k_step / steps_per_block) * Self::COLUMN_BLOCK_BYTES
            + row * Self::SWIZZLE_BYTES
            + (k_step % steps_per_block) * 32;
        // The leading byte offset is unused by a swizzled K-major operand, whose 16 columns
        // lie in one swizzle row.
        self.descriptor(offset, CHUNK_BYTES, steps)
    }

    /// The descriptor of the N-major (transposed) `[16, HEAD_DIM]` operand of rows `16 k_step..`
    /// (the B operand of `P V`: keys are its k, head dims its n): along n the column blocks,
    /// [`Self::COLUMN_BLOCK_BYTES`] apart; along k the 8-row groups.
    #[inline(always)]
    pub fn n_major(self, k_step: usize, steps: DescriptorSteps) -> SmemDescriptor {
        let offset = 16 * k_step * Self::SWIZZLE_BYTES;
        self.descriptor(offset, Self::COLUMN_BLOCK_BYTES, steps)
    }
}

impl<const ROWS: usize, const HEAD_DIM: usize> SharedTile for WgmmaTile<ROWS, HEAD_DIM> {
    /// Nominal: this layout is none of [`SmemLayout`]'s, and overrides every method that reads
    /// one; its byte sizes are the swizzled layout's.
    const LAYOUT: SmemLayout = SmemLayout::Swizzled;
    const ROW_CHUNKS: usize = HEAD_DIM / CHUNK_ELEMS;

    #[inline(always)]
    fn at(smem_base: u32, offset: usize) -> Self {
        WgmmaTile::at(smem_base, offset)
    }

    #[inline(always)]
    fn base(self) -> u32 {
        self.base
    }

    #[inline(always)]
    fn chunk_address(self, row: usize, chunk: usize) -> u32 {
        self.base + Self::offset(row, chunk) as u32
    }

    /// The lane's offset of row `lane_row`, chunk `lane_chunk`: its swizzle is that of every row
    /// `lane_row + 8 i`.
    #[inline(always)]
    fn lane_chunk(lane_row: usize, lane_chunk: usize) -> LaneChunk {
        LaneChunk(Self::offset(lane_row, lane_chunk) as u32)
    }

    /// Row `8 row_group + lane_row`, chunk `chunk + lane_chunk`: within a block the chunk bits
    /// of `chunk` flip the lane's swizzled slot, its block and the row group add.
    #[inline(always)]
    fn fragment_address(self, lane: LaneChunk, row_group: usize, chunk: usize) -> u32 {
        let flip = (chunk % Self::BLOCK_CHUNKS) * CHUNK_BYTES;
        let add = (chunk / Self::BLOCK_CHUNKS) * Self::COLUMN_BLOCK_BYTES
            + row_group * Self::ROW_GROUP_BYTES;
        self.base + (lane.0 ^ flip as u32) + add as u32
    }
}

/// How a [`WgmmaTile`]'s descriptors are built for the steps of an operand (the `k` steps of
/// `Q Kᵀ`, the key steps of `P V`), which differ only in their start address. Both give the
/// same descriptors; they differ in the instructions ptxas schedules around the `wgmma`s.
#[derive(Clone, Copy)]
pub enum DescriptorSteps {
    /// Each step's descriptor built from the step's address: a shift, a mask and an OR of
    /// uniform registers per step.
    FromAddress,
    /// The tile's descriptor built once and each step's an addition to it
    /// ([`SmemDescriptor::advanced`]): 18-48 fewer instructions in each key loop.
    Advanced,
}

/// A `wgmma` shared-memory matrix descriptor (sm_90): the operand's start address, the byte
/// offsets between its core-matrix groups along the leading and the strided dimension, and the
/// swizzle; the format of the PTX ISA's "Matrix Descriptor Format".
#[derive(Clone, Copy)]
pub struct SmemDescriptor(pub u64);

impl SmemDescriptor {
    /// Start address `>> 4` in bits 0-13, leading byte offset `>> 4` in 16-29, stride byte
    /// offset `>> 4` in 32-45, base offset 0 (the tiles start on the swizzle's period), and the
    /// swizzle in bits 62-63 (1: 128 bytes, 2: 64 bytes).
    #[inline(always)]
    pub fn new(
        address: u32,
        swizzle_bytes: usize,
        leading_bytes: usize,
        stride_bytes: usize,
    ) -> Self {
        let swizzle: u64 = if swizzle_bytes == 128 { 1 } else { 2 };
        Self(
            ((address as u64 & 0x3_FFFF) >> 4)
                | (((leading_bytes as u64) >> 4) << 16)
                | (((stride_bytes as u64) >> 4) << 32)
                | (swizzle << 62),
        )
    }

    /// The descriptor of the operand `bytes` (a multiple of 16) past this one's start: the
    /// tile's descriptor built once and each step's an addition to its start address field,
    /// as CUTLASS's descriptor iterator does, not a descriptor built from the step's address.
    /// The field cannot carry into the next: it holds `address >> 4` in 14 bits, so it
    /// reaches 256 KiB, and an sm_90 block's shared memory ends below 228 KiB.
    #[inline(always)]
    pub fn advanced(self, bytes: usize) -> Self {
        let start = self.0 as u32 + (bytes >> 4) as u32;
        Self((self.0 & !u64::from(u32::MAX)) | u64::from(start))
    }
}
