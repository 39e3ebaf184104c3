//! MMA atoms: one warp-wide matrix-multiply instruction each, on typed fragments
//! ([`crate::fragment`]), apart from the element types they multiply. A main loop is generic
//! over its atom: [`MmaSync`] (a warp's `mma.sync`) for the sm80 loop, [`Wgmma`] (a
//! warpgroup's `wgmma`) for the sm90 one.

use core::marker::PhantomData;

use crate::element::{Bf16, Element, F16};
use crate::fragment::{Accumulator, AccumulatorTile, OperandA, OperandB};
use crate::ptx::{mma_m16n8k16_bf16_f32, mma_m16n8k16_f16_f32, WgmmaBf16, WgmmaF16, WgmmaShape};
use crate::smem::SmemDescriptor;

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

/// Hopper's warpgroup MMA atom on 16-bit inputs `T` (sm_90a): `m64nNk16` with f32 accumulators,
/// `N = 16 N_STEPS`. Each warp of the warpgroup sees its 16 rows of the accumulator as an
/// [`Accumulator<1, N_STEPS>`], the layout of the m16n8 tiles of [`MmaSync`], so the mask, the
/// online softmax and the epilogue serve both atoms.
pub trait WarpgroupMma<const N_STEPS: usize> {
    /// `acc (+)= A B`, A (`m64k16`) and B (`k16nN`) in shared memory, both K-major (see
    /// `ptx::WgmmaShape::ss`); without `ACCUMULATE`, `acc = A B`.
    ///
    /// # Safety
    /// As for `ptx::WgmmaShape::ss`.
    unsafe fn ss<const ACCUMULATE: bool>(
        acc: &mut Accumulator<1, N_STEPS>,
        a: SmemDescriptor,
        b: SmemDescriptor,
    );

    /// `acc (+)= A B`, A (`m64k16`) this warp's 16 rows in registers, B (`k16nN`) in shared
    /// memory, N-major (see `ptx::WgmmaShape::rs`).
    ///
    /// # Safety
    /// As for `ptx::WgmmaShape::rs`.
    unsafe fn rs<const ACCUMULATE: bool>(
        acc: &mut Accumulator<1, N_STEPS>,
        a: &OperandA,
        b: SmemDescriptor,
    );
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` (sm_90a) for element type `T`.
pub struct Wgmma<T>(PhantomData<T>);

/// The accumulator's registers in the instruction's order: `tiles[0][n][half][e]` is register
/// `8 n + 4 half + e`, which is also its place in memory (`Accumulator` is `repr(transparent)`
/// over the nested arrays).
macro_rules! warpgroup_mma {
    ($($input:ident => $shape:ident: $($steps:literal),*;)*) => {$($(
        impl WarpgroupMma<$steps> for Wgmma<$input> {
            #[inline(always)]
            unsafe fn ss<const ACCUMULATE: bool>(
                acc: &mut Accumulator<1, $steps>,
                a: SmemDescriptor,
                b: SmemDescriptor,
            ) {
                let registers = &mut *(acc as *mut Accumulator<1, $steps>).cast::<[f32; 8 * $steps]>();
                <$shape as WgmmaShape<{ 8 * $steps }>>::ss::<ACCUMULATE>(registers, a.0, b.0)
            }

            #[inline(always)]
            unsafe fn rs<const ACCUMULATE: bool>(
                acc: &mut Accumulator<1, $steps>,
                a: &OperandA,
                b: SmemDescriptor,
            ) {
                let registers = &mut *(acc as *mut Accumulator<1, $steps>).cast::<[f32; 8 * $steps]>();
                <$shape as WgmmaShape<{ 8 * $steps }>>::rs::<ACCUMULATE>(registers, &a.0, b.0)
            }
        }
    )*)*};
}

warpgroup_mma! {
    F16 => WgmmaF16: 2, 4, 6, 8, 10, 12, 14, 16;
    Bf16 => WgmmaBf16: 2, 4, 6, 8, 10, 12, 14, 16;
}
