//! Shared-memory tiles and their XOR swizzle.
//!
//! A tile is `[rows, head_dim]` fp16, one row after another, stored as 16-byte chunks. Chunk `c`
//! of row `r` lives at chunk slot `c ^ (r % 8)`. `ldmatrix` reads one chunk column from 8
//! consecutive rows; unswizzled, a 128-byte row stride puts all 8 in the same 4 banks (8-way
//! conflict), swizzled they cover all 32 banks. `cp.async` writes full rows, which the swizzle
//! only permutes, so they stay conflict-free too.
//!
//! Alignment holds by construction: a tile's base is 128-byte aligned (checked by
//! [`flash_attn_params::TileConfig::new`]) and [`SwizzledTile::chunk_address`] is the only way
//! to form an address, always base plus whole 16-byte chunks.

use flash_attn_params::{CHUNK_BYTES, CHUNK_ELEMS, SWIZZLE_CHUNKS};

/// A swizzled `[rows, HEAD_DIM]` fp16 tile at a `.shared` address.
#[derive(Clone, Copy)]
pub struct SwizzledTile<const HEAD_DIM: usize> {
    base: u32,
}

impl<const HEAD_DIM: usize> SwizzledTile<HEAD_DIM> {
    /// 16-byte chunks per row.
    pub const ROW_CHUNKS: usize = HEAD_DIM / CHUNK_ELEMS;

    const ROWS_ARE_SWIZZLE_GROUPS: () = assert!(
        HEAD_DIM.is_multiple_of(CHUNK_ELEMS * SWIZZLE_CHUNKS),
        "a swizzled row must be whole 8-chunk groups"
    );

    /// `base` is `smem_base + offset`, where `smem_base` is the 128-byte-aligned dynamic
    /// shared-memory window address and `offset` a tile offset from `TileConfig`.
    #[inline(always)]
    pub fn at(smem_base: u32, offset: usize) -> Self {
        let () = Self::ROWS_ARE_SWIZZLE_GROUPS;
        Self {
            base: smem_base + offset as u32,
        }
    }

    /// The 16-byte-aligned address of chunk `chunk` (columns `8 chunk .. 8 chunk + 8`) of `row`.
    #[inline(always)]
    pub fn chunk_address(self, row: usize, chunk: usize) -> u32 {
        let slot = chunk ^ (row % SWIZZLE_CHUNKS);
        self.base + ((row * Self::ROW_CHUNKS + slot) * CHUNK_BYTES) as u32
    }
}
