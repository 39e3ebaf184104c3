//! What the GPU kernels and the host must agree on, defined once for both targets.
//!
//! - [`ForwardParams`]: the `#[repr(C)]` argument every forward kernel takes by value.
//! - [`TileConfig`]: a tile configuration and everything derived from it (threads, shared-memory
//!   bytes, copies per thread), validated at compile time; the candidate space and the entry
//!   name of each configuration ([`tile`]).
//! - [`Mask`]: which keys each query row sees ([`mask`]), for the kernels and the CPU reference.
//! - [`for_each_kernel_entry_of_shard!`]: the list of PTX entries, generated from the space and
//!   the gates. The GPU crate expands it into entry points; the host's build script enumerates
//!   the same space ([`for_each_gated_config`]) to list the kernels it exposes.
#![no_std]

pub mod mask;
pub mod tile;
pub use mask::{Mask, TileMask};
pub use tile::*;

include!(concat!(env!("OUT_DIR"), "/kernel_entries.rs"));

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
    /// Nonzero for causal masking, aligned to the bottom right (see [`Mask`]).
    pub causal: u32,
}

impl ForwardParams {
    /// The visibility rule of this launch.
    #[inline(always)]
    pub fn mask(&self) -> Mask {
        Mask::new(self.seq_len_q, self.seq_len_kv, self.causal != 0)
    }
}
