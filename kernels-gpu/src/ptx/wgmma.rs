//! Hopper's warpgroup MMA (`wgmma`, sm_90a) and the fence that hands shared memory written by
//! ordinary stores (`cp.async` included) to it.
//!
//! A warpgroup is 4 consecutive warps, the first with an index divisible by 4. Its
//! `wgmma.mma_async` instructions run asynchronously: [`wgmma_fence`] orders the registers
//! written before it ahead of the MMAs that read them, [`wgmma_commit_group`] closes a group of
//! MMAs and [`wgmma_wait_group`] waits for groups to finish. Until then the accumulators must
//! not be touched, and LLVM cannot see that: the caller passes every accumulator register through
//! [`fence_f32`] right before the `wgmma.fence` and right after the wait, which pins the
//! arithmetic that produces or consumes them on the right side of the two (CUTLASS's
//! `warpgroup_fence_operand`).
//!
//! The accumulator of `m64nNk16` with f32 results, in each warp of the warpgroup: warp `w` holds
//! rows `16 w..16 w + 16`; per 8 columns `8 j..` a lane holds registers `4 j..4 j + 4` =
//! (row g, columns 2t, 2t + 1), (row g + 8, the same), the m16n8 accumulator layout of
//! `mma.sync` ([`crate::fragment::Accumulator`]).

use core::arch::asm;

/// `fence.proxy.async.shared::cta`: makes this thread's earlier writes to shared memory through
/// the generic proxy (`st.shared`, `cp.async` once waited for) visible to the async proxy that
/// `wgmma` reads its shared-memory operands through.
///
/// # Safety
/// None; it is `unsafe` to keep the family uniform. A barrier must follow before another thread's
/// `wgmma` reads the bytes.
#[inline(always)]
pub unsafe fn fence_proxy_async_shared_cta() {
    asm!("fence.proxy.async.shared::cta;", options(nostack));
}

/// `wgmma.fence.sync.aligned`: orders this warpgroup's earlier register and shared-memory
/// accesses ahead of the `wgmma.mma_async` that follow.
///
/// # Safety
/// Every thread of the warpgroup executes it together (`.aligned`), none diverged or exited.
#[inline(always)]
pub unsafe fn wgmma_fence() {
    asm!("wgmma.fence.sync.aligned;", options(nostack));
}

/// `wgmma.commit_group.sync.aligned`: closes the group of this warpgroup's `wgmma.mma_async`
/// issued since the last commit.
///
/// # Safety
/// As for [`wgmma_fence`].
#[inline(always)]
pub unsafe fn wgmma_commit_group() {
    asm!("wgmma.commit_group.sync.aligned;", options(nostack));
}

/// `wgmma.wait_group.sync.aligned PENDING`: waits until at most `PENDING` committed groups of
/// this warpgroup are in flight.
///
/// # Safety
/// As for [`wgmma_fence`].
#[inline(always)]
pub unsafe fn wgmma_wait_group<const PENDING: u32>() {
    asm!("wgmma.wait_group.sync.aligned {0};", const PENDING, options(nostack));
}

/// Passes `value` through an empty volatile `asm!`: LLVM keeps the arithmetic that produced it
/// before, and every use after, this point in the order of the volatile assembly around it.
/// No instruction.
#[inline(always)]
pub fn fence_f32(value: &mut f32) {
    // SAFETY: the assembly is a comment: it reads and writes nothing but the register.
    unsafe {
        asm!(
            "// {0}",
            inout(reg32) * value,
            options(nostack, preserves_flags)
        )
    };
}

/// [`fence_f32`] for a 32-bit register of packed 16-bit elements (an RS `wgmma`'s A operand).
#[inline(always)]
pub fn fence_u32(value: &mut u32) {
    // SAFETY: the assembly is a comment: it reads and writes nothing but the register.
    unsafe {
        asm!(
            "// {0}",
            inout(reg32) * value,
            options(nostack, preserves_flags)
        )
    };
}

/// One `wgmma.mma_async` of each form for each accumulator width: `$n` columns, `$regs = $n / 2`
/// f32 registers per thread, listed as `[0 1 .. $regs - 1]`.
macro_rules! wgmma_m64nk16 {
    ($($n:literal, $regs:literal, [$first:literal $($index:literal)*];)*) => {
        /// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` for the `N` this trait names.
        pub trait WgmmaShape<const REGS: usize> {
            /// SS form: `acc (+)= A B` with A (`m64k16`) and B (`k16nN`) in shared memory, both
            /// K-major, as their descriptors say; without `ACCUMULATE`, `acc = A B`. The
            /// switch is an immediate: a register set between two `wgmma` of a group (as LLVM
            /// placed a shared `1`) makes ptxas serialise them (its C7513 note).
            ///
            /// # Safety
            /// Every thread of the warpgroup executes it together, after a [`wgmma_fence`];
            /// the descriptors are the same in all of them and describe initialised shared
            /// memory (made visible to the async proxy); `acc` is not read or written until a
            /// [`wgmma_wait_group`] covering this MMA has returned.
            unsafe fn ss<const ACCUMULATE: bool>(acc: &mut [f32; REGS], a: u64, b: u64);
            /// RS form: `acc (+)= A B` with A (`m64k16`) in registers, this warp's 16 rows as
            /// the `mma.sync` A fragment, and B (`k16nN`) in shared memory, N-major
            /// (transposed), as its descriptor says.
            ///
            /// # Safety
            /// As for [`Self::ss`].
            unsafe fn rs<const ACCUMULATE: bool>(acc: &mut [f32; REGS], a: &[u32; 4], b: u64);
        }

        /// The `f16` inputs.
        pub struct WgmmaF16;
        /// The `bf16` inputs.
        pub struct WgmmaBf16;

        $(
            wgmma_m64nk16!(@impl WgmmaF16, "f16", $n, $regs, [$first $($index)*]);
            wgmma_m64nk16!(@impl WgmmaBf16, "bf16", $n, $regs, [$first $($index)*]);
        )*
    };
    (@impl $input:ident, $ty:literal, $n:literal, $regs:literal, [$first:literal $($index:literal)*]) => {
        impl WgmmaShape<$regs> for $input {
            #[inline(always)]
            unsafe fn ss<const ACCUMULATE: bool>(acc: &mut [f32; $regs], a: u64, b: u64) {
                asm!(
                    concat!(
                        "{{ .reg .pred accumulate; setp.ne.b32 accumulate, {scale}, 0; ",
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
                        "{{{", $first, "}" $(, ", {", $index, "}")*, "}}, ",
                        "{a}, {b}, accumulate, 1, 1, 0, 0; }}"
                    ),
                    inout(reg32) acc[$first],
                    $(inout(reg32) acc[$index],)*
                    a = in(reg64) a,
                    b = in(reg64) b,
                    scale = const ACCUMULATE as u32,
                    options(nostack),
                );
            }

            #[inline(always)]
            unsafe fn rs<const ACCUMULATE: bool>(acc: &mut [f32; $regs], a: &[u32; 4], b: u64) {
                asm!(
                    concat!(
                        "{{ .reg .pred accumulate; setp.ne.b32 accumulate, {scale}, 0; ",
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
                        "{{{", $first, "}" $(, ", {", $index, "}")*, "}}, ",
                        "{{{a0}, {a1}, {a2}, {a3}}}, {b}, accumulate, 1, 1, 1; }}"
                    ),
                    inout(reg32) acc[$first],
                    $(inout(reg32) acc[$index],)*
                    a0 = in(reg32) a[0],
                    a1 = in(reg32) a[1],
                    a2 = in(reg32) a[2],
                    a3 = in(reg32) a[3],
                    b = in(reg64) b,
                    scale = const ACCUMULATE as u32,
                    options(nostack),
                );
            }
        }
    };
}

// N = 32..256 in steps of 16: the key blocks (S) and the head dims (O) of the sm90 tiles.
wgmma_m64nk16! {
    32, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15];
    64, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31];
    96, 48, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47];
    128, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63];
    160, 80, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79];
    192, 96, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95];
    224, 112, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111];
    256, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127];
}
