//! Hands the folder where flash-attn's build wrote every gated entry's PTX module (published by
//! its build script as `cargo:ptx_dir`, see `flash_attn_build::PTX_DIR_METADATA`) to this
//! crate as `FLASH_ATTN_PTX_DIR`, for the ptxas gate's measurement.

fn main() {
    let ptx_dir = std::env::var("DEP_FLASH_ATTN_KERNELS_PTX_DIR").expect(
        "flash-attn's build script publishes ptx_dir (its links name is flash_attn_kernels)",
    );
    println!("cargo:rustc-env=FLASH_ATTN_PTX_DIR={ptx_dir}");
}
