//! The instructions of a warp-specialised pipeline (sm_90): shared-memory `mbarrier`s that the
//! producer's copies arrive on and the consumers wait on, the named barriers of a subset of the
//! block's warps, and the register reallocation between warpgroups (`setmaxnreg`, sm_90a).
//!
//! An `mbarrier` is 8 bytes of shared memory counting arrivals towards an expected count; when
//! the count is reached its phase completes and the next begins. A waiter names the parity of
//! the phase it waits for (the `k`-th use of a barrier is phase `k`, parity `k & 1`).

use core::arch::asm;

/// `mbarrier.init.shared::cta.b64 [address], count`: a barrier whose phases complete after
/// `count` arrivals.
///
/// # Safety
/// `address` is an 8-byte-aligned `.shared` address that nothing else uses as a barrier at the
/// same time; a block barrier follows before any thread uses it.
#[inline(always)]
pub unsafe fn mbarrier_init_shared(address: u32, count: u32) {
    asm!(
        "mbarrier.init.shared::cta.b64 [{0}], {1};",
        in(reg32) address,
        in(reg32) count,
        options(nostack),
    );
}

/// `mbarrier.arrive.release.cta.shared::cta.b64`: one arrival on the barrier at `address`,
/// releasing this thread's earlier memory accesses to whoever waits for the phase it completes.
///
/// # Safety
/// `address` is an initialised barrier ([`mbarrier_init_shared`]) whose current phase expects
/// this arrival.
#[inline(always)]
pub unsafe fn mbarrier_arrive_shared(address: u32) {
    asm!(
        "mbarrier.arrive.release.cta.shared::cta.b64 _, [{0}];",
        in(reg32) address,
        options(nostack),
    );
}

/// `mbarrier.try_wait.parity.acquire.cta.shared::cta.b64`: whether the phase of parity
/// `parity` of the barrier at `address` has completed (the instruction itself waits a while
/// before it says no), acquiring what the arrivals released.
///
/// # Safety
/// `address` is an initialised barrier; the phase asked for is the current one or the one
/// before it (an older parity reads as the wrong phase).
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity_shared(address: u32, parity: u32) -> bool {
    let done: u32;
    asm!(
        "{{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [{1}], {2}; selp.u32 {0}, 1, 0, p; }}",
        out(reg32) done,
        in(reg32) address,
        in(reg32) parity,
        options(nostack),
    );
    done != 0
}

/// `cp.async.mbarrier.arrive.noinc.shared::cta.b64`: one arrival on the barrier at `address`
/// once every `cp.async` this thread issued before has landed (the arrival is one of the
/// barrier's expected count: `.noinc`). The thread goes on at once.
///
/// # Safety
/// As for [`mbarrier_arrive_shared`]. The copies are ordinary (generic-proxy) writes: a waiter
/// whose `wgmma` reads them fences the async proxy after its wait
/// ([`super::fence_proxy_async_shared_cta`]).
#[inline(always)]
pub unsafe fn cp_async_mbarrier_arrive_noinc_shared(address: u32) {
    asm!(
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{0}];",
        in(reg32) address,
        options(nostack),
    );
}

/// `bar.sync ID, THREADS`: a barrier of the `THREADS` threads (whole warps) that name barrier
/// `ID`, which also orders their shared-memory accesses.
///
/// # Safety
/// Exactly `THREADS` threads, all of the warps they belong to, reach it together; no other
/// barrier of the block uses `ID` at the same time (`bar.sync 0` is the block's).
#[inline(always)]
pub unsafe fn bar_sync_named<const ID: u32, const THREADS: u32>() {
    asm!("bar.sync {0}, {1};", const ID, const THREADS, options(nostack));
}

/// `bar.sync id, THREADS` with the barrier's `id` in a register: [`bar_sync_named`] for a
/// barrier that the warp picks at run time.
///
/// # Safety
/// As for [`bar_sync_named`].
#[inline(always)]
pub unsafe fn bar_sync_named_at<const THREADS: u32>(id: u32) {
    asm!("bar.sync {0}, {1};", in(reg32) id, const THREADS, options(nostack));
}

/// `bar.arrive ID, THREADS`: this warp's arrival at barrier `ID` of `THREADS` threads, without
/// waiting for it (the others wait with [`bar_sync_named`]); orders nothing.
///
/// # Safety
/// As for [`bar_sync_named`]: the arrivals and waits of each of the barrier's phases number
/// `THREADS` threads.
#[inline(always)]
pub unsafe fn bar_arrive_named<const ID: u32, const THREADS: u32>() {
    asm!("bar.arrive {0}, {1};", const ID, const THREADS, options(nostack));
}

/// `setmaxnreg.inc.sync.aligned.u32 REGISTERS`: raises this warpgroup's registers per thread to
/// `REGISTERS`, taking them from those other warpgroups released.
///
/// # Safety
/// Every thread of the warpgroup executes it together; the block's registers suffice once the
/// other warpgroups' [`setmaxnreg_dec`] have run (the instruction waits for them).
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const REGISTERS: u32>() {
    asm!("setmaxnreg.inc.sync.aligned.u32 {0};", const REGISTERS, options(nostack));
}

/// `setmaxnreg.dec.sync.aligned.u32 REGISTERS`: lowers this warpgroup's registers per thread to
/// `REGISTERS`, releasing the rest to the block.
///
/// # Safety
/// Every thread of the warpgroup executes it together, and needs no more than `REGISTERS`
/// registers from here on.
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const REGISTERS: u32>() {
    asm!("setmaxnreg.dec.sync.aligned.u32 {0};", const REGISTERS, options(nostack));
}

/// `bar.arrive id, THREADS` with the barrier's `id` in a register: [`bar_arrive_named`] for a
/// barrier that the warp picks at run time.
///
/// # Safety
/// As for [`bar_sync_named`].
#[inline(always)]
pub unsafe fn bar_arrive_named_at<const THREADS: u32>(id: u32) {
    asm!("bar.arrive {0}, {1};", in(reg32) id, const THREADS, options(nostack));
}
