//! What one block computes and where its rows live: the (batch, query head) and K/V head, the
//! block's first query row, the lengths of its two sequences and the offsets of their rows in
//! global memory. The one place a kernel reads its block indices and the sequence extents, so
//! that variable-length batches and paged K/V change this file, not the main loops.

use core::arch::nvptx::{_block_idx_x, _block_idx_y, _block_idx_z};

use flash_attn_params::{ForwardParams, Mask, TensorStrides};

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
}

/// One block's part of the problem, for a grid of `(ceil(seq_len_q / BLOCK_M), heads_q, batch)`
/// blocks.
#[derive(Clone, Copy)]
pub struct BlockInfo {
    pub batch: u32,
    pub head: u32,
    /// The K/V head that query head `head` reads (grouped-query attention).
    pub kv_head: u32,
    /// The block's first query row.
    pub first_query: u32,
    pub seq_len_q: u32,
    pub seq_len_kv: u32,
    /// The visibility rule of these two sequences.
    pub mask: Mask,
}

/// Element offset of the (batch, head) slice of a tensor: the one place where indices widen to
/// 64 bits (with the sequence-stride products), so that large tensors cannot overflow.
#[inline(always)]
fn slice_offset(strides: &TensorStrides, batch: u32, head: u32) -> usize {
    batch as usize * strides.batch as usize + head as usize * strides.head as usize
}

impl BlockInfo {
    /// This block's part, from its block index and `params`.
    ///
    /// Row and block arithmetic is 32-bit (the host keeps both sequence lengths <= 2^30, so
    /// `seq_len_q + seq_len_kv` fits in i32): on 64-bit indices it took ~2x the instructions of
    /// the per-block prologue and epilogue (SASS, flash_fwd_f16_d64_m64_n64_w4_s3).
    #[inline(always)]
    pub fn new<const BLOCK_M: usize>(params: &ForwardParams) -> Self {
        let (seq_len_q, seq_len_kv) = (params.seq_len_q, params.seq_len_kv);
        let mask = Mask::new(seq_len_q, seq_len_kv, params.causal != 0);
        // SAFETY (both): reading a block index register has no precondition.
        let (batch, head) = unsafe { (_block_idx_z() as u32, _block_idx_y() as u32) };
        // `max(1)`: the host never passes 0, and the kernel must not carry a division-by-zero
        // panic.
        let group_size = params.kv_group_size.max(1);
        let first_query = unsafe { _block_idx_x() } as u32 * BLOCK_M as u32;
        let kv_head = head / group_size;
        Self {
            batch,
            head,
            kv_head,
            first_query,
            seq_len_q,
            seq_len_kv,
            mask,
        }
    }

    /// The block's `BLOCK_M` query rows.
    ///
    /// # Safety
    /// `params.q` and its strides name this block's slice (the kernel's launch contract).
    #[inline(always)]
    pub unsafe fn query_rows(&self, params: &ForwardParams) -> RowBlock {
        let strides = &params.q_strides;
        RowBlock {
            base: (params.q as *const u16).add(slice_offset(strides, self.batch, self.head)),
            row_stride: strides.seq as usize,
            first_row: self.first_query,
            rows: self.seq_len_q,
        }
    }

    /// Key or value rows from `first_row` of the tensor at `pointer` with `strides`.
    ///
    /// # Safety
    /// `pointer` and `strides` are `params.k` or `params.v` and theirs.
    #[inline(always)]
    pub unsafe fn key_rows(
        &self,
        strides: &TensorStrides,
        pointer: u64,
        first_row: u32,
    ) -> RowBlock {
        RowBlock {
            base: (pointer as *const u16).add(slice_offset(strides, self.batch, self.kv_head)),
            row_stride: strides.seq as usize,
            first_row,
            rows: self.seq_len_kv,
        }
    }

    /// Element offset of output row `row` of the block (a query row, which may lie past
    /// `seq_len_q`) from `params.o`.
    #[inline(always)]
    pub fn output_row_offset(&self, params: &ForwardParams, row: usize) -> usize {
        let strides = &params.o_strides;
        slice_offset(strides, self.batch, self.head)
            + (self.first_query as usize + row) * strides.seq as usize
    }

    /// The logsumexp row of this (batch, head) slice: `seq_len_q` f32 from `params.lse`.
    ///
    /// # Safety
    /// `params.lse` is not 0 (the kernel's launch contract sizes it).
    #[inline(always)]
    pub unsafe fn logsumexp_row(&self, params: &ForwardParams) -> *mut f32 {
        let slice = self.batch as usize * params.heads_q as usize + self.head as usize;
        (params.lse as *mut f32).add(slice * self.seq_len_q as usize)
    }
}
