// rustc nightly-2026-05-20, `--target nvptx64-nvidia-cuda -C target-cpu=sm_90a`: this kernel
// (a by-value 128-byte aggregate of 64-byte alignment, the shape of a CUtensorMap) stops the
// compiler with a panic in rustc_target/src/callconv/nvptx64.rs:78 (BENCHMARKS.md log 73).
#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
#[repr(C, align(64))]
pub struct TensorMap([u64; 16]);
#[no_mangle]
pub unsafe extern "ptx-kernel" fn k(map: TensorMap, out: *mut u64) {
    let p: u64;
    core::arch::asm!("cvta.param.u64 {p}, {m};", p = out(reg64) p, m = in(reg64) &map as *const TensorMap as u64);
    *out = p;
}
