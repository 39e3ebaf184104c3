//! The Tensor Memory Accelerator (sm_90): a bulk copy of a box of a tensor, described by a
//! tensor map (`CUtensorMap`, encoded on the host), from global to shared memory, which
//! completes its bytes on an `mbarrier`.

use core::arch::asm;

/// `mbarrier.arrive.expect_tx.release.cta.shared::cta.b64`: one arrival on the barrier at
/// `address` that also expects `bytes` more bytes of transactions (TMA copies) in its phase.
///
/// # Safety
/// `address` is an initialised barrier whose current phase expects this arrival.
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx_shared(address: u32, bytes: u32) {
    asm!(
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [{0}], {1};",
        in(reg32) address,
        in(reg32) bytes,
        options(nostack),
    );
}

/// `fence.mbarrier_init.release.cluster`: makes this thread's `mbarrier.init`s visible to the
/// async proxy (the TMA unit completes transactions on them).
///
/// # Safety
/// None; `unsafe` to keep the family uniform. A block barrier follows before any use.
#[inline(always)]
pub unsafe fn fence_mbarrier_init() {
    asm!("fence.mbarrier_init.release.cluster;", options(nostack));
}

/// `cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`: copies
/// the box at `coordinates` (innermost first, in elements) of the tensor that the map at the
/// generic address `map` describes into shared memory at `destination`, completing its bytes
/// (the whole box's, zero-filled past the tensor's bounds) on the barrier at `barrier`.
///
/// # Safety
/// `map` is the generic address of a valid tensor map in the kernel's parameter, constant or
/// global space, 64-byte aligned; `destination` is a `.shared` address aligned as the map's
/// swizzle needs (1024 bytes for 128-byte swizzle) with room for the box; the barrier's
/// current phase expects the bytes ([`mbarrier_arrive_expect_tx_shared`]).
#[inline(always)]
pub unsafe fn tma_load_4d(destination: u32, map: u64, coordinates: [i32; 4], barrier: u32) {
    asm!(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}, {4}, {5}}}], [{6}];",
        in(reg32) destination,
        in(reg64) map,
        in(reg32) coordinates[0],
        in(reg32) coordinates[1],
        in(reg32) coordinates[2],
        in(reg32) coordinates[3],
        in(reg32) barrier,
        options(nostack),
    );
}
