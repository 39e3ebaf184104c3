//! The raw launch: the only place where device addresses cross to the GPU.

use std::ffi::c_void;

use cust::error::CudaResult;
use cust::function::{Function, GridSize};
use cust::stream::Stream;
use flash_attn_params::{ForwardParams, TileConfig};

/// Enqueues one forward kernel on `stream` without waiting for it.
///
/// # Safety
/// - `function` is the entry compiled for `tile`, from a module of the stream's context.
/// - `params.q`, `.k`, `.v` are device addresses of `blocks_y * params.seq_len * head_dim`
///   readable fp16 each and `params.o` of as many writable ones, all 16-byte aligned, alive
///   until the kernel finishes, and `o` does not overlap the inputs.
/// - `params.seq_len` is a nonzero multiple of `tile.block_m` and `tile.block_n`.
pub(crate) unsafe fn launch_forward(
    stream: &Stream,
    function: &Function<'_>,
    tile: &TileConfig,
    blocks_y: u32,
    mut params: ForwardParams,
) -> CudaResult<()> {
    let grid = GridSize::xy(params.seq_len / tile.block_m as u32, blocks_y);
    // The kernel takes one by-value argument, the `#[repr(C)]` ForwardParams: the driver copies
    // size_of::<ForwardParams>() bytes from this pointer.
    let arguments = [&mut params as *mut ForwardParams as *mut c_void];
    stream.launch(
        function,
        grid,
        tile.threads() as u32,
        tile.smem_bytes() as u32,
        &arguments,
    )
}
