//! One `#[inline(always)]` wrapper per PTX instruction, named after the instruction, plus
//! `opaque_to_optimizer`, an instruction-free `asm!` that hides a value from LLVM.
//!
//! Shared-memory operands are 32-bit addresses in the `.shared` window (see
//! [`shared_window_address`]); global operands are generic 64-bit pointers.

mod cp_async;
mod ldmatrix;
mod mbarrier;
mod memory;
mod mma;
mod special;
mod tma;
mod wgmma;

pub use cp_async::{
    cp_async_cg_16, cp_async_cg_16_zfill, cp_async_commit_group, cp_async_wait_group,
};
pub use ldmatrix::{ldmatrix_x4, ldmatrix_x4_trans};
pub use mbarrier::{
    bar_arrive_named, bar_arrive_named_at, bar_sync_named, bar_sync_named_at,
    cp_async_mbarrier_arrive_noinc_shared, mbarrier_arrive_shared, mbarrier_init_shared,
    mbarrier_try_wait_parity_shared, setmaxnreg_dec, setmaxnreg_inc,
};
pub use memory::{
    atom_add_acq_rel_gpu_u32, bar_red_or_0, bar_sync_0, bar_warp_sync, barrier_sync_0,
    fence_acq_rel_gpu, ld_global_cg_f32, ld_global_cg_v2_f32, ld_global_nc_u32, ld_shared_b32,
    ld_shared_v4_b32, shared_window_address, st_global_v2_f32, st_global_v4_b32,
    st_relaxed_gpu_u32, st_shared_b32,
};
pub use mma::{mma_m16n8k16_bf16_f32, mma_m16n8k16_f16_f32};
pub use special::{
    cvt_rn_bf16x2_f32, cvt_rn_f16x2_f32, ex2_approx_ftz_f32, lg2_approx_ftz_f32, max_f32,
    opaque_to_optimizer, shfl_sync_bfly_f32, shfl_sync_idx_lane0_u32, tanh_approx_f32,
    vote_sync_any,
};
pub use tma::{fence_mbarrier_init, mbarrier_arrive_expect_tx_shared, tma_load_4d};
pub use wgmma::{
    fence_f32, fence_proxy_async_shared_cta, fence_u32, wgmma_commit_group, wgmma_fence,
    wgmma_wait_group, WgmmaBf16, WgmmaF16, WgmmaShape,
};
