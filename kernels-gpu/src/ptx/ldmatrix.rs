use core::arch::asm;

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: four 8x8 fp16 matrices from shared memory.
///
/// Lanes `8i..8i+7` give the row addresses of matrix `i`. Result register `i` of lane `l` holds
/// matrix `i`, row `l / 4`, columns `2 (l % 4)` and `2 (l % 4) + 1`: an MMA A or B fragment.
///
/// # Safety
/// All lanes of the warp execute it together. Each lane's `row_address` is a `.shared` address
/// of 16 readable bytes, 16-byte aligned, that no thread is writing concurrently.
#[inline(always)]
pub unsafe fn ldmatrix_x4(row_address: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    asm!(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) r0,
        out(reg32) r1,
        out(reg32) r2,
        out(reg32) r3,
        in(reg32) row_address,
        options(nostack, readonly),
    );
    [r0, r1, r2, r3]
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`ldmatrix_x4`], but each matrix is
/// transposed on the way: lane `l` receives rows `2 (l % 4)` and `2 (l % 4) + 1` of column
/// `l / 4`. Loads a row-major `[key, dim]` V tile as the column-major B operand of P·V.
///
/// # Safety
/// As for [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(row_address: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    asm!(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) r0,
        out(reg32) r1,
        out(reg32) r2,
        out(reg32) r3,
        in(reg32) row_address,
        options(nostack, readonly),
    );
    [r0, r1, r2, r3]
}
