use core::arch::asm;

/// `ex2.approx.ftz.f32`: 2^x on the special-function unit; `ex2(-inf) = +0`.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn ex2_approx_ftz_f32(x: f32) -> f32 {
    let y: f32;
    asm!("ex2.approx.ftz.f32 {0}, {1};", out(reg32) y, in(reg32) x, options(nostack, pure, nomem));
    y
}

/// `lg2.approx.ftz.f32`: log2(x) on the special-function unit; `lg2(0) = -inf`.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn lg2_approx_ftz_f32(x: f32) -> f32 {
    let y: f32;
    asm!("lg2.approx.ftz.f32 {0}, {1};", out(reg32) y, in(reg32) x, options(nostack, pure, nomem));
    y
}

/// `tanh.approx.f32`: tanh(x) on the special-function unit (sm_75 and later), one instruction;
/// maximum relative error about 2^-11 (PTX ISA), that of an fp16 rounding; `tanh(±inf) = ±1`,
/// NaN stays NaN.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn tanh_approx_f32(x: f32) -> f32 {
    let y: f32;
    asm!("tanh.approx.f32 {0}, {1};", out(reg32) y, in(reg32) x, options(nostack, pure, nomem));
    y
}

/// `shfl.sync.bfly.b32` over the full warp: the value of lane `lane ^ lane_mask`.
///
/// # Safety
/// Every lane of the warp executes it together.
#[inline(always)]
pub unsafe fn shfl_sync_bfly_f32(value: f32, lane_mask: u32) -> f32 {
    let result: f32;
    asm!(
        "shfl.sync.bfly.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;",
        out(reg32) result,
        in(reg32) value,
        in(reg32) lane_mask,
        options(nostack, pure, nomem),
    );
    result
}

/// `shfl.sync.idx.b32` from lane 0 over the full warp: lane 0's `value` in every lane. For a
/// value the warp already shares (a warp index from the thread index), it tells ptxas that
/// the value is warp-uniform, so that what derives from it can live on the uniform datapath
/// (CUTLASS's `canonical_warp_idx_sync` does the same).
///
/// # Safety
/// Every lane of the warp executes it together.
#[inline(always)]
pub unsafe fn shfl_sync_idx_lane0_u32(value: u32) -> u32 {
    let result: u32;
    asm!(
        "shfl.sync.idx.b32 {0}, {1}, 0, 0x1f, 0xffffffff;",
        out(reg32) result,
        in(reg32) value,
        options(nostack, pure, nomem),
    );
    result
}

/// `max.f32`. As inline assembly, LLVM cannot reassociate it: it re-linearises a tree of
/// `maxnum` into one dependent chain.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn max_f32(a: f32, b: f32) -> f32 {
    let max: f32;
    asm!("max.f32 {0}, {1}, {2};", out(reg32) max, in(reg32) a, in(reg32) b, options(nostack, pure, nomem));
    max
}

/// `vote.sync.any.pred` over the full warp: whether `predicate` holds on any lane.
///
/// # Safety
/// Every lane of the warp executes it together.
#[inline(always)]
pub unsafe fn vote_sync_any(predicate: bool) -> bool {
    let any: u32;
    asm!(
        "{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.any.pred p, p, 0xffffffff; selp.u32 {0}, 1, 0, p; }}",
        out(reg32) any,
        in(reg32) predicate as u32,
        options(nostack, pure, nomem),
    );
    any != 0
}

/// `cvt.rn.f16x2.f32`: packs two f32 into one `f16x2` register, `low` in bits 0..16.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn cvt_rn_f16x2_f32(low: f32, high: f32) -> u32 {
    let packed: u32;
    // The PTX operand order is (d, a, b) with a -> upper half, b -> lower half.
    asm!(
        "cvt.rn.f16x2.f32 {0}, {1}, {2};",
        out(reg32) packed,
        in(reg32) high,
        in(reg32) low,
        options(nostack, pure, nomem),
    );
    packed
}

/// `cvt.rn.bf16x2.f32`: packs two f32 into one `bf16x2` register, `low` in bits 0..16.
///
/// # Safety
/// No memory or convergence requirement; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn cvt_rn_bf16x2_f32(low: f32, high: f32) -> u32 {
    let packed: u32;
    // The PTX operand order is (d, a, b) with a -> upper half, b -> lower half.
    asm!(
        "cvt.rn.bf16x2.f32 {0}, {1}, {2};",
        out(reg32) packed,
        in(reg32) high,
        in(reg32) low,
        options(nostack, pure, nomem),
    );
    packed
}

/// Returns `value` unchanged but hidden from LLVM: an inline-asm PTX comment that "may modify"
/// it. Not `pure`, so it is neither hoisted nor merged, and each use is a fresh unknown value.
/// It emits no instruction.
#[inline(always)]
pub fn opaque_to_optimizer(mut value: usize) -> usize {
    // SAFETY: the assembly is a comment: it reads and writes nothing.
    unsafe { asm!("// opaque {0}", inout(reg64) value, options(nomem, nostack)) };
    value
}
