use core::arch::asm;

/// `cp.async.cg.shared.global [dst], [src], 16`: an asynchronous 16-byte copy from global to
/// shared memory that bypasses L1.
///
/// # Safety
/// `dst` is a 16-byte-aligned `.shared` address of 16 writable bytes; `src` is a 16-byte-aligned
/// global address of 16 readable bytes. Nothing reads `dst` until a [`cp_async_wait_group`] that
/// covers this copy has returned and a barrier has made the bytes visible to other threads.
#[inline(always)]
pub unsafe fn cp_async_cg_16(dst: u32, src: *const u8) {
    asm!(
        "cp.async.cg.shared.global [{0}], [{1}], 16;",
        in(reg32) dst,
        in(reg64) src,
        options(nostack),
    );
}

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies the first `src_bytes` bytes
/// (0 or 16 here) and fills the rest of the 16 with zeros; with 0 nothing is read from `src`.
///
/// # Safety
/// As for [`cp_async_cg_16`], with `src` a valid 16-byte-aligned global address even when
/// `src_bytes` is 0, and `src_bytes <= 16`.
#[inline(always)]
pub unsafe fn cp_async_cg_16_zfill(dst: u32, src: *const u8, src_bytes: u32) {
    asm!(
        "cp.async.cg.shared.global [{0}], [{1}], 16, {2};",
        in(reg32) dst,
        in(reg64) src,
        in(reg32) src_bytes,
        options(nostack),
    );
}

/// `cp.async.commit_group`: closes the group of this thread's copies issued since the last commit.
///
/// # Safety
/// None beyond those of the copies it commits; it is `unsafe` to keep the family uniform.
#[inline(always)]
pub unsafe fn cp_async_commit_group() {
    asm!("cp.async.commit_group;", options(nostack));
}

/// `cp.async.wait_group N`: waits until at most `PENDING` of this thread's committed groups
/// are still in flight.
///
/// # Safety
/// It orders only this thread's copies: a barrier must follow before other threads read them.
#[inline(always)]
pub unsafe fn cp_async_wait_group<const PENDING: u32>() {
    asm!("cp.async.wait_group {0};", const PENDING, options(nostack));
}
