//! What one block computes and where its rows live: the (batch, query head) and K/V head, the
//! block's first query row, the lengths of its two sequences and the offsets of their rows in
//! global memory. The one place a kernel reads its block indices and the sequence extents, so
//! that variable-length batches and paged K/V change this file, not the main loops.

use core::arch::nvptx::{_block_idx_x, _block_idx_y, _block_idx_z, _grid_dim_x};

use crate::ptx::ld_global_nc_u32;
use flash_attn_params::{ForwardParams, Mask, SequenceParams, TensorStrides, CHUNK_ELEMS};

/// Rows `first_row .. first_row + ROWS` of one (batch, head) slice of a tensor in global memory.
#[derive(Clone, Copy)]
pub struct RowBlock {
    /// The slice's row 0; 16-byte aligned.
    pub base: *const u16,
    /// Elements between consecutive rows; a multiple of 8.
    pub row_stride: usize,
    pub first_row: u32,
    /// Rows that exist in the slice (`seq_len`): later rows are zero-filled, never read.
    pub rows: u32,
    /// 16-byte chunks of each row that exist (the problem's head dim over 8): later chunks are
    /// zero-filled, never read.
    pub chunks: u32,
}

/// Key or value rows of one K/V head in a paged cache: row `row` (a key of the sequence) is row
/// `row % page_size` of page `pages[row / page_size]`.
#[derive(Clone, Copy)]
pub struct PagedRows {
    /// The head's row 0 in page 0; 16-byte aligned.
    pub head_base: *const u16,
    /// The sequence's page indices, each below the cache's page count (checked first).
    pub pages: *const u32,
    pub page_shift: u32,
    /// Elements between consecutive pages and consecutive rows of a page; multiples of 8.
    pub page_stride: usize,
    pub row_stride: usize,
    pub first_row: u32,
    /// Keys that exist (the sequence's used length): later rows are zero-filled, never read.
    pub rows: u32,
    /// 16-byte chunks of each row that exist (the problem's head dim over 8): later chunks are
    /// padding (see [`RowBlock::chunks`]), never read.
    pub chunks: u32,
}

impl PagedRows {
    /// Element offset of key `row` from `head_base`.
    ///
    /// # Safety
    /// `row >> page_shift` indexes the sequence's page list.
    #[inline(always)]
    pub unsafe fn row_offset(&self, row: u32) -> usize {
        let page = ld_global_nc_u32(self.pages.add((row >> self.page_shift) as usize));
        let row_in_page = row & ((1 << self.page_shift) - 1);
        page as usize * self.page_stride + row_in_page as usize * self.row_stride
    }
}

/// One tile of a dense problem: `BLOCK_M` query rows of one (batch, query head).
#[derive(Clone, Copy)]
pub struct Tile {
    pub query_block: u32,
    pub head: u32,
    pub batch: u32,
}

/// The tiles of a persistent kernel (the sm90 family's warp-specialised ones): a grid of
/// fewer blocks than tiles, each block computing tiles `blockIdx.x, blockIdx.x + gridDim.x,
/// ...` of the `query_blocks * heads_q * batch`, so that its producer copies the next tile's Q
/// and first K while its consumers finish the last tile. Tiles are numbered query block first
/// (consecutive tiles share their K and V in L2); under a causal mask from the last query block
/// to the first, so that the tiles with the most key blocks start first and the short ones
/// fill in at the end.
#[derive(Clone, Copy)]
pub struct TileSchedule {
    query_blocks: u32,
    heads: u32,
    /// Every tile of the problem: `query_blocks * heads * batch`.
    tiles: u32,
    last_first: bool,
}

impl TileSchedule {
    /// The schedule of `params` for tiles of `BLOCK_M` rows (the host keeps the tile count
    /// below 2^32).
    #[inline(always)]
    pub fn new<const BLOCK_M: usize>(params: &ForwardParams) -> Self {
        let query_blocks = params.seq_len_q.div_ceil(BLOCK_M as u32);
        Self {
            query_blocks,
            heads: params.heads_q,
            tiles: query_blocks * params.heads_q * params.batch,
            last_first: params.causal != 0,
        }
    }

    /// Computes this block's tiles, `blockIdx.x, blockIdx.x + gridDim.x, ..` below the
    /// problem's tile count, in that order: `compute(info, used, done)` for each, `info` the
    /// tile's part of `params`, `done` the tiles computed before it and `used` the sum of what
    /// `compute` returned for them (the sm90 kernels' K/V ring groups). `SERVING` is the
    /// kernel's variant (a dense problem's tiles whatever it is).
    #[inline(always)]
    pub fn walk<const BLOCK_M: usize, const SERVING: bool>(
        self,
        params: &ForwardParams,
        mut compute: impl FnMut(BlockInfo<SERVING>, u32, u32) -> u32,
    ) {
        // SAFETY (both): reading the block index and grid size registers has no precondition.
        let mut index = unsafe { _block_idx_x() } as u32;
        let (mut used, mut done) = (0, 0);
        while index < self.tiles {
            let info = BlockInfo::dense::<BLOCK_M>(params, self.tile(index));
            used += compute(info, used, done);
            done += 1;
            // Read again rather than kept: the sm90 consumers have no register to spare.
            index += unsafe { _grid_dim_x() } as u32;
        }
    }

    /// Tile number `index` (below [`Self::tiles`]).
    #[inline(always)]
    fn tile(self, index: u32) -> Tile {
        // `max(1)`: never 0 for an index below `tiles`; no division-by-zero panic in the kernel.
        let query_blocks = self.query_blocks.max(1);
        let (query_block, slice) = (index % query_blocks, index / query_blocks);
        let heads = self.heads.max(1);
        Tile {
            query_block: self.query_block(query_block),
            head: slice % heads,
            batch: slice / heads,
        }
    }

    /// The tile of a sm90 kernel that takes one tile from a grid of `(query_blocks, heads_q,
    /// batch)` blocks: block `(x, y, z)` computes query block `x` of head `y` of batch entry `z`,
    /// its query blocks numbered as the walk numbers them (under a causal mask from the last:
    /// the hardware hands the grid's blocks out in order, so the tiles with the most key blocks
    /// start first and the last wave ends on the shortest). On an H200 that order left the
    /// causal anchors' times within their spreads (the tiles of 128 slices interleave heavy
    /// and light already), and the PTX it changed ran 4,8,512,64 1-3% faster (BENCHMARKS.md
    /// log 81). The sm80 kernels keep the grid's order ([`BlockInfo::new`]: their PTX as it
    /// was, not measured on their architectures).
    #[inline(always)]
    pub fn grid_tile<const BLOCK_M: usize, const SERVING: bool>(
        self,
        params: &ForwardParams,
    ) -> BlockInfo<SERVING> {
        // SAFETY (all three): reading a block index register has no precondition.
        let (x, head, batch) = unsafe { (_block_idx_x(), _block_idx_y(), _block_idx_z()) };
        let tile = Tile {
            query_block: self.query_block(x),
            head,
            batch,
        };
        BlockInfo::dense::<BLOCK_M>(params, tile)
    }

    /// The query block of the `index`-th of a slice's (below [`Self::query_blocks`]): from the
    /// last under a causal mask.
    #[inline(always)]
    fn query_block(self, index: u32) -> u32 {
        if self.last_first {
            self.query_blocks - 1 - index
        } else {
            index
        }
    }
}

/// One block's part of the problem, for a grid of `(query blocks * splits, heads_q, batch)`
/// blocks (`splits` 1 but in a split-KV serving kernel).
///
/// `SERVING` is the variant, a compile-time specialisation: `false` for the dense kernels (the
/// [`SequenceParams`] are never read, and the code is theirs alone), `true` for the serving
/// ones (variable-length batches, a key length per sequence, split-KV).
#[derive(Clone, Copy)]
pub struct BlockInfo<const SERVING: bool> {
    pub batch: u32,
    pub head: u32,
    /// The K/V head that query head `head` reads (grouped-query attention).
    pub kv_head: u32,
    /// The block's first query row (of its sequence).
    pub first_query: u32,
    /// The sequence's first query token in Q's sequence dimension: 0 but in a variable-length
    /// batch.
    pub query_token: u32,
    /// The sequence's first key token in K's and V's sequence dimension: 0 but in a
    /// variable-length batch.
    pub key_token: u32,
    pub seq_len_q: u32,
    pub seq_len_kv: u32,
    /// The split of the key range this block computes (split-KV; 0 without).
    pub split: u32,
    /// The visibility rule of these two sequences.
    pub mask: Mask,
}

/// Element offset of token `token` of the (batch, head) slice of a tensor: the one place where
/// indices widen to 64 bits (with the sequence-stride products), so that large tensors cannot
/// overflow.
#[inline(always)]
fn slice_offset(strides: &TensorStrides, batch: u32, head: u32) -> usize {
    batch as usize * strides.batch as usize + head as usize * strides.head as usize
}

/// [`slice_offset`] plus `token` rows.
#[inline(always)]
fn token_offset(strides: &TensorStrides, batch: u32, head: u32, token: u32) -> usize {
    slice_offset(strides, batch, head) + token as usize * strides.seq as usize
}

/// Tokens `offsets[batch]..offsets[batch + 1]`, as (first token, count).
///
/// # Safety
/// `offsets` is the device address of more than `batch + 1` u32, non-decreasing.
#[inline(always)]
unsafe fn sequence_tokens(offsets: u64, batch: u32) -> (u32, u32) {
    let offsets = offsets as *const u32;
    let start = *offsets.add(batch as usize);
    (start, *offsets.add(batch as usize + 1) - start)
}

impl<const SERVING: bool> BlockInfo<SERVING> {
    /// This block's part, from its block index, `params` and (serving kernels) `sequences`.
    ///
    /// Row and block arithmetic is 32-bit (the host keeps both sequence lengths <= 2^30, so
    /// `seq_len_q + seq_len_kv` fits in i32): on 64-bit indices it took ~2x the instructions of
    /// the per-block prologue and epilogue (SASS, flash_fwd_f16_d64_m64_n64_w4_s3).
    ///
    /// # Safety
    /// `sequences` satisfies [`SequenceParams`]' contract for this launch (serving kernels).
    #[inline(always)]
    pub unsafe fn new<const BLOCK_M: usize>(
        params: &ForwardParams,
        sequences: &SequenceParams,
    ) -> Self {
        if !SERVING {
            // In the order of the dense kernels' PTX since log 25 (the gate's digests): the
            // rule of `Self::dense`, written out again because calling it with the grid's
            // block indices as the `Tile` reordered the sm80 kernels' PTX and moved their
            // registers by up to 10 either way.
            let (seq_len_q, seq_len_kv) = (params.seq_len_q, params.seq_len_kv);
            let mask = Mask::new(seq_len_q, seq_len_kv, params.causal != 0);
            // SAFETY (all three): reading a block index register has no precondition.
            let (batch, head) = (_block_idx_z() as u32, _block_idx_y() as u32);
            // `max(1)`: the host never passes 0, and the kernel must not carry a
            // division-by-zero panic.
            let group_size = params.kv_group_size.max(1);
            let first_query = _block_idx_x() as u32 * BLOCK_M as u32;
            return Self {
                batch,
                head,
                kv_head: head / group_size,
                first_query,
                query_token: 0,
                key_token: 0,
                seq_len_q,
                seq_len_kv,
                split: 0,
                mask,
            };
        }
        let (batch, head) = (_block_idx_z() as u32, _block_idx_y() as u32);
        let kv_head = head / params.kv_group_size.max(1);
        let splits = sequences.splits.max(1);
        let (query_block, split) = (
            _block_idx_x() as u32 / splits,
            _block_idx_x() as u32 % splits,
        );
        let (query_token, seq_len_q) = if sequences.cu_seqlens_q != 0 {
            sequence_tokens(sequences.cu_seqlens_q, batch)
        } else {
            (0, params.seq_len_q)
        };
        let (key_token, seq_len_kv) = if sequences.cu_seqlens_kv != 0 {
            sequence_tokens(sequences.cu_seqlens_kv, batch)
        } else if sequences.seq_used_kv != 0 {
            // At most the cache's capacity, whatever the device holds: no key outside it is
            // ever read.
            let used = *(sequences.seq_used_kv as *const u32).add(batch as usize);
            (0, used.min(params.seq_len_kv))
        } else {
            (0, params.seq_len_kv)
        };
        Self {
            batch,
            head,
            kv_head,
            first_query: query_block * BLOCK_M as u32,
            query_token,
            key_token,
            seq_len_q,
            seq_len_kv,
            split,
            mask: Mask::new(seq_len_q, seq_len_kv, params.causal != 0),
        }
    }

    /// The part of a dense kernel's block that computes `tile`: the one rule for the (batch,
    /// head) and rows of a tile, of the kernels that take their tile from the grid
    /// ([`Self::new`]) and of those that walk a [`TileSchedule`].
    #[inline(always)]
    pub fn dense<const BLOCK_M: usize>(params: &ForwardParams, tile: Tile) -> Self {
        let (seq_len_q, seq_len_kv) = (params.seq_len_q, params.seq_len_kv);
        // `max(1)`: the host never passes 0, and the kernel must not carry a
        // division-by-zero panic.
        let group_size = params.kv_group_size.max(1);
        Self {
            batch: tile.batch,
            head: tile.head,
            kv_head: tile.head / group_size,
            first_query: tile.query_block * BLOCK_M as u32,
            query_token: 0,
            key_token: 0,
            seq_len_q,
            seq_len_kv,
            split: 0,
            mask: Mask::new(seq_len_q, seq_len_kv, params.causal != 0),
        }
    }

    /// Whether every query row of the block lies past its sequence's (a variable-length batch
    /// padded to its longest sequence): such a block has nothing to do, and returns before its
    /// first barrier. Never for a dense kernel.
    #[inline(always)]
    pub fn is_past_the_queries(&self) -> bool {
        SERVING && self.first_query >= self.seq_len_q
    }

    /// The key blocks of `BLOCK_N` keys that the block computes, `first..end` (`first <= end`),
    /// given `first_needed..needed`, the keys its queries see (from the first key its first
    /// query row sees, 0 without a window, to the end of those its last query row sees): all the
    /// blocks that hold one, or its split's part of them, counted from the first such block (so
    /// that a window's few key blocks spread over the splits rather than fall into one; none
    /// where the split starts past `needed`). A block wholly outside the range is skipped, never
    /// loaded.
    #[inline(always)]
    pub fn key_blocks<const BLOCK_N: usize>(
        &self,
        sequences: &SequenceParams,
        first_needed: u32,
        needed: u32,
    ) -> (u32, u32) {
        let end = needed.div_ceil(BLOCK_N as u32);
        let start = first_needed / BLOCK_N as u32;
        if !SERVING {
            return (start.min(end), end);
        }
        // `keys_per_split` is a multiple of `BLOCK_N`, and the splits together cover the
        // blocks from `start` (the host sizes them for the blocks a query block can see).
        // (Written so that `start` 0, the kernels without a window, gives the PTX of splits
        // counted from key 0: `.min(end)` on `first` spilled the D=128 serving kernel on sm_80.)
        let blocks_per_split = sequences.keys_per_split / BLOCK_N as u32;
        let first = start + self.split * blocks_per_split;
        (first, end.max(first).min(first + blocks_per_split))
    }

    /// The block's `BLOCK_M` query rows.
    ///
    /// # Safety
    /// `params.q` and its strides name this block's slice (the kernel's launch contract).
    #[inline(always)]
    pub unsafe fn query_rows(&self, params: &ForwardParams) -> RowBlock {
        let strides = &params.q_strides;
        let offset = if SERVING {
            token_offset(strides, self.batch, self.head, self.query_token)
        } else {
            slice_offset(strides, self.batch, self.head)
        };
        RowBlock {
            base: (params.q as *const u16).add(offset),
            row_stride: strides.seq as usize,
            first_row: self.first_query,
            rows: self.seq_len_q,
            chunks: row_chunks(params),
        }
    }

    /// Key or value rows from `first_row` of the tensor at `pointer` with `strides`.
    ///
    /// # Safety
    /// `pointer` and `strides` are `params.k` or `params.v` and theirs.
    #[inline(always)]
    pub unsafe fn key_rows(
        &self,
        params: &ForwardParams,
        strides: &TensorStrides,
        pointer: u64,
        first_row: u32,
    ) -> RowBlock {
        let offset = if SERVING {
            token_offset(strides, self.batch, self.kv_head, self.key_token)
        } else {
            slice_offset(strides, self.batch, self.kv_head)
        };
        RowBlock {
            base: (pointer as *const u16).add(offset),
            row_stride: strides.seq as usize,
            first_row,
            rows: self.seq_len_kv,
            chunks: row_chunks(params),
        }
    }

    /// The sequence's page indices in a paged cache (`sequences.block_table` not 0).
    #[inline(always)]
    fn pages(&self, sequences: &SequenceParams) -> *const u32 {
        let row = self.batch as usize * sequences.pages_per_sequence as usize;
        (sequences.block_table as *const u32).wrapping_add(row)
    }

    /// Whether any page that this thread checks, of those that hold the sequence's used keys,
    /// lies outside the cache: thread `thread` of `threads` checks pages `thread`,
    /// `thread + threads`, ... The block's threads together check them all.
    ///
    /// # Safety
    /// `sequences.block_table` is not 0 and holds `pages_per_sequence` u32 for every sequence.
    #[inline(always)]
    pub unsafe fn names_a_page_outside_the_cache(
        &self,
        sequences: &SequenceParams,
        thread: u32,
        threads: u32,
    ) -> bool {
        let pages = self.pages(sequences);
        let used_pages = self.seq_len_kv.div_ceil(1 << sequences.page_shift);
        let mut page = thread;
        let mut outside = false;
        while page < used_pages {
            outside |= ld_global_nc_u32(pages.add(page as usize)) >= sequences.num_pages;
            page += threads;
        }
        outside
    }

    /// Key or value rows from `first_row` of the paged tensor at `pointer` with `strides`
    /// (`strides.batch` steps pages), of `params.head_dim` columns.
    ///
    /// # Safety
    /// `pointer` and `strides` are `params.k` or `params.v` and theirs; the cache is paged and
    /// [`Self::names_a_page_outside_the_cache`] found no page outside it.
    #[inline(always)]
    pub unsafe fn paged_key_rows(
        &self,
        params: &ForwardParams,
        sequences: &SequenceParams,
        strides: &TensorStrides,
        pointer: u64,
        first_row: u32,
    ) -> PagedRows {
        PagedRows {
            head_base: (pointer as *const u16).add(self.kv_head as usize * strides.head as usize),
            pages: self.pages(sequences),
            page_shift: sequences.page_shift,
            page_stride: strides.batch as usize,
            row_stride: strides.seq as usize,
            first_row,
            rows: self.seq_len_kv,
            chunks: row_chunks(params),
        }
    }

    /// Element offset of output row `row` of the block (a query row, which may lie past
    /// `seq_len_q`) from `params.o`.
    #[inline(always)]
    pub fn output_row_offset(&self, params: &ForwardParams, row: usize) -> usize {
        let strides = &params.o_strides;
        let slice = if SERVING {
            token_offset(strides, self.batch, self.head, self.query_token)
        } else {
            slice_offset(strides, self.batch, self.head)
        };
        slice + (self.first_query as usize + row) * strides.seq as usize
    }

    /// Elements between the logsumexps of consecutive query rows: 1 for the dense kernels,
    /// `sequences.lse_strides.seq` for the serving ones.
    #[inline(always)]
    pub fn logsumexp_row_stride(&self, sequences: &SequenceParams) -> usize {
        if SERVING {
            sequences.lse_strides.seq as usize
        } else {
            1
        }
    }

    /// The logsumexp of this (batch, head) slice's query row 0: `seq_len_q` f32 from there, at
    /// [`Self::logsumexp_row_stride`].
    ///
    /// # Safety
    /// `params.lse` is not 0 (the kernel's launch contract sizes it).
    #[inline(always)]
    pub unsafe fn logsumexp_row(
        &self,
        params: &ForwardParams,
        sequences: &SequenceParams,
    ) -> *mut f32 {
        let offset = if SERVING {
            token_offset(
                &sequences.lse_strides,
                self.batch,
                self.head,
                self.query_token,
            )
        } else {
            let slice = self.batch as usize * params.heads_q as usize + self.head as usize;
            slice * self.seq_len_q as usize
        };
        (params.lse as *mut f32).add(offset)
    }

    /// The workspace row of the block's query row 0, for split-KV (serving kernels): its query
    /// token, counted over the whole batch.
    #[inline(always)]
    pub fn workspace_row(&self, params: &ForwardParams, sequences: &SequenceParams) -> u32 {
        let first_token = if sequences.cu_seqlens_q != 0 {
            self.query_token
        } else {
            self.batch * params.seq_len_q
        };
        first_token + self.first_query
    }
}

/// 16-byte chunks of each row of Q, K, V and O that hold the problem's data: its head dim over
/// 8 (the kernel's own head dim, or fewer where the problem is padded to it).
#[inline(always)]
pub fn row_chunks(params: &ForwardParams) -> u32 {
    params.head_dim / CHUNK_ELEMS as u32
}
