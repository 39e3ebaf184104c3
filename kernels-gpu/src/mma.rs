//! MMA atoms: one warp-wide matrix-multiply instruction each, on typed fragments
//! ([`crate::fragment`]), apart from the element types they multiply. A main loop is generic
//! over its atom; a Hopper `wgmma` atom will sit beside these.

use core::marker::PhantomData;

use crate::element::{Bf16, Element, F16};
use crate::fragment::{AccumulatorTile, OperandA, OperandB};
use crate::ptx::{mma_m16n8k16_bf16_f32, mma_m16n8k16_f16_f32};

/// A warp-wide `acc += a · b` on one m16n8k16 tile, for 16-bit inputs of type
/// [`Self::Input`], accumulated in f32.
pub trait WarpMma16x8x16 {
    /// The element type of A and B.
    type Input: Element;

    /// # Safety
    /// All lanes of the warp execute it together, none diverged or exited.
    unsafe fn mma(acc: &mut AccumulatorTile, a: &OperandA, b: &OperandB);
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` (sm_80 and later) for element type `T`.
pub struct MmaSync<T>(PhantomData<T>);

impl WarpMma16x8x16 for MmaSync<F16> {
    type Input = F16;

    #[inline(always)]
    unsafe fn mma(acc: &mut AccumulatorTile, a: &OperandA, b: &OperandB) {
        mma_m16n8k16_f16_f32(acc, &a.0, &b.0)
    }
}

impl WarpMma16x8x16 for MmaSync<Bf16> {
    type Input = Bf16;

    #[inline(always)]
    unsafe fn mma(acc: &mut AccumulatorTile, a: &OperandA, b: &OperandB) {
        mma_m16n8k16_bf16_f32(acc, &a.0, &b.0)
    }
}
