//! The input element types and their f32 -> 16-bit packing. The MMA instructions that multiply
//! them are atoms of their own ([`crate::mma`]).

use crate::ptx::{cvt_rn_bf16x2_f32, cvt_rn_f16x2_f32};

/// A 16-bit element type of Q, K, V and O, accumulated in f32.
pub trait Element {
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
    unsafe fn pack(low: f32, high: f32) -> u32 {
        cvt_rn_f16x2_f32(low, high)
    }
}

impl Element for Bf16 {
    #[inline(always)]
    unsafe fn pack(low: f32, high: f32) -> u32 {
        cvt_rn_bf16x2_f32(low, high)
    }
}
