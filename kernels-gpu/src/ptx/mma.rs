use core::arch::asm;

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: `acc += a · b` for one 16x8 tile.
///
/// Fragments, for lane `l` with `g = l / 4` and `t = l % 4`:
/// - `a: [u32; 4]`, 16x16 fp16 row-major, two halves per register:
///   `a[0]` = (row g, cols 2t..2t+1), `a[1]` = (row g+8, cols 2t..), `a[2]` = (row g, cols 2t+8..),
///   `a[3]` = (row g+8, cols 2t+8..).
/// - `b: [u32; 2]`, 16x8 fp16 column-major: `b[0]` = (rows 2t..2t+1, col g), `b[1]` = (rows 2t+8.., col g).
/// - `acc: [f32; 4]`, 16x8: `acc[0..2]` = (row g, cols 2t..2t+1), `acc[2..4]` = (row g+8, cols 2t..).
///
/// # Safety
/// Every lane of the warp must execute this instruction together (`.sync.aligned`), with no lane
/// diverged or exited.
#[inline(always)]
pub unsafe fn mma_m16n8k16_f16_f32(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
    asm!(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{0}, {1}, {2}, {3}}};",
        inout(reg32) acc[0],
        inout(reg32) acc[1],
        inout(reg32) acc[2],
        inout(reg32) acc[3],
        in(reg32) a[0],
        in(reg32) a[1],
        in(reg32) a[2],
        in(reg32) a[3],
        in(reg32) b[0],
        in(reg32) b[1],
        options(nostack, pure, nomem),
    );
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: as [`mma_m16n8k16_f16_f32`] with
/// bf16 inputs (same fragment layouts).
///
/// # Safety
/// As for [`mma_m16n8k16_f16_f32`].
#[inline(always)]
pub unsafe fn mma_m16n8k16_bf16_f32(acc: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
    asm!(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{0}, {1}, {2}, {3}}};",
        inout(reg32) acc[0],
        inout(reg32) acc[1],
        inout(reg32) acc[2],
        inout(reg32) acc[3],
        in(reg32) a[0],
        in(reg32) a[1],
        in(reg32) a[2],
        in(reg32) a[3],
        in(reg32) b[0],
        in(reg32) b[1],
        options(nostack, pure, nomem),
    );
}
