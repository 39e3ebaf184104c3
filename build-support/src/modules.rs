//! Where the build leaves the single-entry PTX modules: written by the kernel build
//! ([`crate::build_kernels`]), read by the gate ([`crate::gate`]) and by the tools.

use std::path::{Path, PathBuf};

/// The `cargo:` metadata key under which the build publishes the folder of every gated entry's
/// PTX module: crates that depend on the runtime directly read it in their build script as
/// `DEP_FLASH_ATTN_KERNELS_PTX_DIR` (the runtime's `links` name is `flash_attn_kernels`).
pub const PTX_DIR_METADATA: &str = "ptx_dir";

/// The single-entry PTX module of `entry` for the PTX target `arch` in the build's module
/// folder `ptx_dir`: `ptx_dir/<arch>/<entry>.ptx`.
pub fn module_path(ptx_dir: &Path, arch: &str, entry: &str) -> PathBuf {
    ptx_dir.join(arch).join(format!("{entry}.ptx"))
}
