//! The GPU architectures the project builds for, with the limits that decide whether a tile
//! configuration fits and how many of its blocks an SM holds. One table, read by the
//! compile-time gates ([`crate::TileConfig::check`]), the build (PTX target, cubins), the ptxas
//! gate and the tests.
//!
//! Only `core`: `build.rs` includes this file with `#[path]`, as it does `tile.rs`.

/// One architecture: its ptxas name, the compute capability of the devices that run its
/// cubins, and its per-SM and per-block limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    /// `-arch` of ptxas and `-Ctarget-cpu` of rustc: `"sm_89"`.
    pub name: &'static str,
    /// `(major, minor)` of the devices that load this architecture's cubins (exactly).
    pub compute_capability: (i32, i32),
    /// The most dynamic shared memory one block may opt into.
    pub max_smem_per_block: usize,
    pub smem_per_sm: usize,
    pub max_warps_per_sm: usize,
    pub max_blocks_per_sm: usize,
    pub registers_per_sm: usize,
    pub max_registers_per_thread: usize,
}

/// Ada (sm_89), the PTX target, and Hopper (sm_90): the architectures the ptxas gate covers
/// and the build assembles cubins for, in the order of the gate file's columns.
pub const ARCHITECTURES: [Architecture; 2] = [
    Architecture {
        name: "sm_89",
        compute_capability: (8, 9),
        max_smem_per_block: 99 * 1024,
        smem_per_sm: 100 * 1024,
        max_warps_per_sm: 48,
        max_blocks_per_sm: 24,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
    Architecture {
        name: "sm_90",
        compute_capability: (9, 0),
        max_smem_per_block: 227 * 1024,
        smem_per_sm: 228 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
];

/// The architecture the kernels are compiled for (`.target` of the PTX): the oldest one, so
/// that every device of [`ARCHITECTURES`] can JIT-compile the PTX, and the one whose limits the
/// compile-time gates apply.
pub const PTX_TARGET: Architecture = ARCHITECTURES[0];
