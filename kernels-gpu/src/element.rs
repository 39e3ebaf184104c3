//! The input element types: each picks its MMA instruction and its f32 -> 16-bit packing.

use crate::ptx::{
    cvt_rn_bf16x2_f32, cvt_rn_f16x2_f32, mma_m16n8k16_bf16_f32, mma_m16n8k16_f16_f32,
};

/// A 16-bit element type of Q, K, V and O, accumulated in f32.
pub trait Element {
    /// `acc += a · b` for one m16n8k16 tile (fragment layouts as in [`mma_m16n8k16_f16_f32`]).
    ///
    /// # Safety
    /// All lanes of the warp execute it together.
    unsafe fn mma(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]);

    /// Two f32 rounded to nearest and packed, `low` in bits 0..16.
    ///
    /// # Safety
    /// None; `unsafe` only because it is inline assembly.
    unsafe fn pack(low: f32, high: f32) -> u32;
}

pub struct F16;
pub struct Bf16;

impl Element for F16 {
    #[inline(always)]
    unsafe fn mma(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
        mma_m16n8k16_f16_f32(acc, a, b)
    }

    #[inline(always)]
    unsafe fn pack(low: f32, high: f32) -> u32 {
        cvt_rn_f16x2_f32(low, high)
    }
}

impl Element for Bf16 {
    #[inline(always)]
    unsafe fn mma(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
        mma_m16n8k16_bf16_f32(acc, a, b)
    }

    #[inline(always)]
    unsafe fn pack(low: f32, high: f32) -> u32 {
        cvt_rn_bf16x2_f32(low, high)
    }
}
