#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]
#[panic_handler] fn p(_: &core::panic::PanicInfo) -> ! { loop {} }
#[repr(C)] pub struct TensorMap([u64; 16]);
#[no_mangle]
pub unsafe extern "ptx-kernel" fn k(_map: TensorMap, x: i32, y: i32) {
    core::arch::asm!(
        ".reg .b64 %map;",
        "mov.u64 %map, {s}_param_0;",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [%map, {{{x}, {y}}}], [{bar}];",
        s = sym k, dst = in(reg32) 0u32, bar = in(reg32) 1024u32, x = in(reg32) x, y = in(reg32) y);
}
