//! How flash-attn's kernels are built, as a library: the runtime's build script
//! (`host/build.rs`) runs [`build_kernels`], and the tools and tests use the same ptxas runner
//! ([`ptxas`]) and ptxas gate ([`gate`]), so that the gate's rule and its file format are
//! written once; the tuner writes the dispatch table's data file through [`dispatch`].
//!
//! Needs no GPU; the cubins and the gate need NVIDIA's `ptxas`.
//!
//! ```
//! use flash_attn_build::ptxas::{parse_report, Resources};
//!
//! let report = "ptxas info    : Compiling entry function 'flash_fwd_f16_d64_m64_n64_w4_s2'
//! ptxas info    : Function properties for flash_fwd_f16_d64_m64_n64_w4_s2
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 128 registers, used 1 barriers, 448 bytes cmem[0]";
//! let resources = Resources { registers: 128, stack_frame: 0, spill_stores: 0, spill_loads: 0 };
//! assert_eq!(
//!     parse_report(report).unwrap(),
//!     [("flash_fwd_f16_d64_m64_n64_w4_s2".to_string(), resources)]
//! );
//! ```
#![warn(missing_docs)]

pub mod dispatch;
pub mod gate;
mod kernels;
mod modules;
pub mod ptxas;

pub use kernels::build_kernels;
pub use modules::{module_path, PTX_DIR_METADATA};
