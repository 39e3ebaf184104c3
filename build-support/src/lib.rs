//! How flash-attn's kernels are built, as a library: the runtime's build script
//! (`host/build.rs`) runs [`build_kernels`], and the tools and tests use the same ptxas runner
//! ([`ptxas`]) and ptxas gate ([`gate`]), so that the gate's rule and its file format are
//! written once; the tuner writes the dispatch table's data file through [`dispatch`].
//!
//! Needs no GPU; the cubins and the gate need NVIDIA's `ptxas`.

pub mod dispatch;
pub mod gate;
mod kernels;
mod modules;
pub mod ptxas;

pub use kernels::build_kernels;
pub use modules::{module_path, PTX_DIR_METADATA};
