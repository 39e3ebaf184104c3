//! The sm90 main loop: Hopper's warpgroup MMA (`wgmma.mma_async`), sm_90a PTX.
//! (Work in progress: the body is being written.)

use flash_attn_params::ForwardParams;

use crate::element::Element;

/// The forward kernel body of the Hopper family for element type `T`: one warpgroup (4 warps)
/// per 64 query rows, `BLOCK_M = 16 * WARPS`.
///
/// # Safety
/// Launched with grid `(ceil(seq_len_q / BLOCK_M), heads_q, batch)`, `32 * WARPS` threads and
/// `TileConfig::smem_bytes` bytes of dynamic shared memory, on a device of compute capability
/// 9.0; `params` satisfies [`ForwardParams`]' contract (as for the sm80 dense kernels).
#[inline(always)]
pub unsafe fn forward<
    T: Element,
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const WARPS: usize,
    const STAGES: usize,
    const HEAD_DIM: usize,
>(
    _params: &ForwardParams,
) {
    core::arch::nvptx::trap()
}
