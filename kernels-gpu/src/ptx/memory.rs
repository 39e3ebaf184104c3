use core::arch::asm;

/// `cvta.to.shared.u64` + `cvt.u32.u64`: the 32-bit `.shared` window address of a generic
/// pointer into shared memory, the operand form of `ldmatrix`, `cp.async` and `ld/st.shared`.
///
/// # Safety
/// `pointer` points into this block's shared memory.
#[inline(always)]
pub unsafe fn shared_window_address<T>(pointer: *const T) -> u32 {
    let address: u32;
    // Passed as an integer: the instruction converts the address and touches no memory.
    let generic = pointer as u64;
    asm!(
        "{{ .reg .u64 window; cvta.to.shared.u64 window, {1}; cvt.u32.u64 {0}, window; }}",
        out(reg32) address,
        in(reg64) generic,
        options(nostack, pure, nomem),
    );
    address
}

/// `st.shared.b32`.
///
/// # Safety
/// `address` is a 4-byte-aligned `.shared` address that no other thread accesses concurrently.
#[inline(always)]
pub unsafe fn st_shared_b32(address: u32, value: u32) {
    asm!("st.shared.b32 [{0}], {1};", in(reg32) address, in(reg32) value, options(nostack));
}

/// `ld.shared.v4.b32`: one 16-byte shared-memory load.
///
/// # Safety
/// `address` is a 16-byte-aligned `.shared` address that no thread writes concurrently.
#[inline(always)]
pub unsafe fn ld_shared_v4_b32(address: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    asm!(
        "ld.shared.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) r0,
        out(reg32) r1,
        out(reg32) r2,
        out(reg32) r3,
        in(reg32) address,
        options(nostack, readonly),
    );
    [r0, r1, r2, r3]
}

/// `st.global.v4.b32`: one 16-byte global store.
///
/// # Safety
/// `destination` is a 16-byte-aligned global address of 16 writable bytes.
#[inline(always)]
pub unsafe fn st_global_v4_b32(destination: *mut u8, value: [u32; 4]) {
    asm!(
        "st.global.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};",
        in(reg64) destination,
        in(reg32) value[0],
        in(reg32) value[1],
        in(reg32) value[2],
        in(reg32) value[3],
        options(nostack),
    );
}

/// `bar.sync 0`: a block-wide barrier that also orders shared-memory accesses.
///
/// # Safety
/// Every thread of the block reaches this same barrier.
#[inline(always)]
pub unsafe fn bar_sync_0() {
    asm!("bar.sync 0;", options(nostack));
}

/// `barrier.sync 0`: [`bar_sync_0`] without `.aligned`, for threads that reach the barrier at
/// different instructions (the warpgroups of the modified sm90 loop, each in key loops of its
/// own). `bar.sync` is `barrier.sync.aligned`, which every thread of the block must execute at
/// the same instruction: met in those loops it failed compute-sanitizer's synccheck (1280
/// errors, and the launch under it).
///
/// # Safety
/// Every thread of the block reaches this barrier as many times as the others, at any
/// instruction of it.
#[inline(always)]
pub unsafe fn barrier_sync_0() {
    asm!("barrier.sync 0;", options(nostack));
}

/// `bar.red.or.pred` on barrier 0: a block-wide barrier that returns whether `predicate` was
/// true in any thread of the block.
///
/// # Safety
/// Every thread of the block reaches this same barrier.
#[inline(always)]
pub unsafe fn bar_red_or_0(predicate: bool) -> bool {
    let any: u32;
    asm!(
        "{{ .reg .pred p; setp.ne.u32 p, {1}, 0; bar.red.or.pred p, 0, p; selp.u32 {0}, 1, 0, p; }}",
        out(reg32) any,
        in(reg32) predicate as u32,
        options(nostack),
    );
    any != 0
}

/// `bar.warp.sync 0xffffffff`: a warp-wide barrier that orders the warp's memory accesses.
///
/// # Safety
/// Every lane of the warp reaches it.
#[inline(always)]
pub unsafe fn bar_warp_sync() {
    asm!("bar.warp.sync 0xffffffff;", options(nostack));
}

/// `ld.shared.b32`.
///
/// # Safety
/// `address` is a 4-byte-aligned `.shared` address that no thread writes concurrently.
#[inline(always)]
pub unsafe fn ld_shared_b32(address: u32) -> u32 {
    let value: u32;
    asm!("ld.shared.b32 {0}, [{1}];", out(reg32) value, in(reg32) address, options(nostack, readonly));
    value
}

/// `st.global.v2.f32`: one 8-byte global store.
///
/// # Safety
/// `destination` is an 8-byte-aligned global address of 8 writable bytes.
#[inline(always)]
pub unsafe fn st_global_v2_f32(destination: *mut f32, value: [f32; 2]) {
    asm!(
        "st.global.v2.f32 [{0}], {{{1}, {2}}};",
        in(reg64) destination,
        in(reg32) value[0],
        in(reg32) value[1],
        options(nostack),
    );
}

/// `ld.global.nc.u32`: a load through the read-only (non-coherent) cache, for data that no
/// thread writes while the kernel runs. A plain `*pointer` compiles to a generic `ld` here,
/// which ptxas keeps in order behind every `cp.async` (a generic address could be shared
/// memory): the paged copies' page lookups then each waited their own latency.
///
/// # Safety
/// `source` is a 4-byte-aligned global address of a u32 that nothing writes during the
/// kernel.
#[inline(always)]
pub unsafe fn ld_global_nc_u32(source: *const u32) -> u32 {
    let value: u32;
    asm!("ld.global.nc.u32 {0}, [{1}];", out(reg32) value, in(reg64) source, options(pure, readonly, nostack));
    value
}

/// `ld.global.cg.f32`: a load cached in L2 only, so that it sees what other blocks wrote
/// before a release that this thread acquired (L1 is not coherent across blocks).
///
/// # Safety
/// `source` is a 4-byte-aligned global address of a readable f32.
#[inline(always)]
pub unsafe fn ld_global_cg_f32(source: *const f32) -> f32 {
    let value: f32;
    asm!("ld.global.cg.f32 {0}, [{1}];", out(reg32) value, in(reg64) source, options(nostack, readonly));
    value
}

/// `ld.global.cg.v2.f32`: [`ld_global_cg_f32`] for 8 bytes.
///
/// # Safety
/// `source` is an 8-byte-aligned global address of 8 readable bytes.
#[inline(always)]
pub unsafe fn ld_global_cg_v2_f32(source: *const f32) -> [f32; 2] {
    let (a, b): (f32, f32);
    asm!(
        "ld.global.cg.v2.f32 {{{0}, {1}}}, [{2}];",
        out(reg32) a,
        out(reg32) b,
        in(reg64) source,
        options(nostack, readonly),
    );
    [a, b]
}

/// `fence.acq_rel.gpu`: orders this thread's memory accesses before it against those after it,
/// for every thread of the GPU (the release and acquire sides of a block's arrival count).
///
/// # Safety
/// No precondition; `unsafe` only because it is inline assembly.
#[inline(always)]
pub unsafe fn fence_acq_rel_gpu() {
    asm!("fence.acq_rel.gpu;", options(nostack));
}

/// `atom.acq_rel.gpu.global.add.u32`: adds `value` to the u32 at `address` and returns what it
/// held.
///
/// # Safety
/// `address` is a 4-byte-aligned global address of a u32 that is only accessed atomically while
/// other threads may touch it.
#[inline(always)]
pub unsafe fn atom_add_acq_rel_gpu_u32(address: *mut u32, value: u32) -> u32 {
    let old: u32;
    asm!(
        "atom.acq_rel.gpu.global.add.u32 {0}, [{1}], {2};",
        out(reg32) old,
        in(reg64) address,
        in(reg32) value,
        options(nostack),
    );
    old
}

/// `st.relaxed.gpu.global.u32`: a store that other blocks' atomics see.
///
/// # Safety
/// `address` is a 4-byte-aligned global address of a writable u32.
#[inline(always)]
pub unsafe fn st_relaxed_gpu_u32(address: *mut u32, value: u32) {
    asm!("st.relaxed.gpu.global.u32 [{0}], {1};", in(reg64) address, in(reg32) value, options(nostack));
}
