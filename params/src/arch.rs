//! The GPU architectures the project builds for, with the limits that decide whether a tile
//! configuration fits and how many of its blocks an SM holds. One table, read by the
//! compile-time gates ([`crate::TileConfig::check`]), the build (PTX target, cubins), the ptxas
//! gate and the tests.
//!
//! Only `core`: `build.rs` includes this file with `#[path]`, as it does `tile.rs`.

/// One architecture: its ptxas name, the compute capability of the devices that run its
/// cubins, what the build makes for it, and its per-SM and per-block limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    /// `-arch` of ptxas and `-Ctarget-cpu` of rustc: `"sm_89"`.
    pub name: &'static str,
    /// `(major, minor)` of the devices that load this architecture's cubins (exactly).
    pub compute_capability: (i32, i32),
    /// Whether the build compiles the kernels' PTX for this architecture (`-Ctarget-cpu`, one
    /// nvptx build each). Such PTX serves, through the driver's JIT, every device from this
    /// compute capability up to the next PTX target's (the newest one for all devices above
    /// it): see [`ptx_target_for`].
    pub ptx_target: bool,
    /// Whether the build assembles cubins for this architecture (with ptxas, from the PTX of
    /// [`ptx_target_for`] its compute capability), for devices of exactly this capability.
    pub cubins: bool,
    /// The most dynamic shared memory one block may opt into.
    pub max_smem_per_block: usize,
    /// Shared memory of one SM, in bytes, which its resident blocks share (each also costing
    /// the driver's reserved 1 KiB).
    pub smem_per_sm: usize,
    /// The most warps resident on one SM.
    pub max_warps_per_sm: usize,
    /// The most blocks resident on one SM.
    pub max_blocks_per_sm: usize,
    /// 32-bit registers of one SM, which its resident threads share.
    pub registers_per_sm: usize,
    /// The most registers one thread may use; a kernel that needs more spills.
    pub max_registers_per_thread: usize,
}

/// Every architecture the project builds for, oldest first, in the order of the gate file's
/// columns: Ampere (sm_80, the A100), Ada (sm_89) and Hopper (sm_90). The ptxas gate covers
/// each (an entry is exposed only if it passes on all of them); the build compiles PTX for the
/// PTX targets and cubins for the others marked so. Adding an architecture is adding a row.
///
/// sm_80's PTX also serves sm_86 and sm_87 (compute capability 8.0 up to 8.9), whose blocks
/// may opt into only 99 KiB of shared memory (101,376 bytes), against 163 KiB (166,912) on
/// the A100: the compile-time gates hold every tile to the smallest per-block limit of the
/// architectures its PTX serves, and the loader refuses a kernel whose shared memory a device
/// cannot give ([`crate::TileConfig::smem_bytes`] against the device's opt-in limit).
pub const ARCHITECTURES: [Architecture; 3] = [
    Architecture {
        name: "sm_80",
        compute_capability: (8, 0),
        ptx_target: true,
        cubins: false,
        max_smem_per_block: 163 * 1024,
        smem_per_sm: 164 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
    Architecture {
        name: "sm_89",
        compute_capability: (8, 9),
        ptx_target: true,
        cubins: true,
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
        ptx_target: false,
        cubins: true,
        max_smem_per_block: 227 * 1024,
        smem_per_sm: 228 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
];

/// The smallest per-block shared-memory limit of [`ARCHITECTURES`] (sm_89's 99 KiB): the limit
/// of the compile-time gates. sm_86 and sm_87, which run sm_80's PTX without a row of their
/// own, allow the same 99 KiB.
pub const MIN_SMEM_PER_BLOCK: usize = {
    let mut min = usize::MAX;
    let mut index = 0;
    while index < ARCHITECTURES.len() {
        if ARCHITECTURES[index].max_smem_per_block < min {
            min = ARCHITECTURES[index].max_smem_per_block;
        }
        index += 1;
    }
    min
};

/// The architecture whose PTX a device of `compute_capability` runs: the newest PTX target not
/// newer than it, or `None` for a device older than every PTX target.
///
/// ```
/// use flash_attn_params::ptx_target_for;
///
/// assert_eq!(ptx_target_for((8, 6)).unwrap().name, "sm_80"); // an RTX 30x0
/// assert_eq!(ptx_target_for((9, 0)).unwrap().name, "sm_89"); // an H100
/// assert!(ptx_target_for((7, 5)).is_none()); // Turing: too old
/// ```
pub const fn ptx_target_for(compute_capability: (i32, i32)) -> Option<&'static Architecture> {
    let mut found = None;
    let mut index = 0;
    while index < ARCHITECTURES.len() {
        let arch = &ARCHITECTURES[index];
        let (major, minor) = arch.compute_capability;
        let not_newer = major < compute_capability.0
            || (major == compute_capability.0 && minor <= compute_capability.1);
        if arch.ptx_target && not_newer {
            found = Some(arch);
        }
        index += 1;
    }
    found
}

/// The architecture named `name` (`"sm_80"`), if it is one of [`ARCHITECTURES`].
pub fn architecture_named(name: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|arch| arch.name == name)
}
