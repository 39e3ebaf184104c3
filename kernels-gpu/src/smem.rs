//! Shared-memory tiles: the XOR-swizzled layout and the padded one.
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

use flash_attn_params::{SmemLayout, CHUNK_ELEMS, SWIZZLE_CHUNKS};

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
