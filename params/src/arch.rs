//! The GPU architectures the project builds for, with the limits that decide whether a tile
//! configuration fits and how many of its blocks an SM holds. One table, read by the
//! compile-time gates ([`crate::TileConfig::check`]), the build (PTX target, cubins), the ptxas
//! gate and the tests.
//!
//! Only `core`: `build.rs` includes this file with `#[path]`, as it does `tile.rs`.

/// The main loop a kernel runs, and so the instructions and the PTX targets it needs: the
/// architecture table ([`crate::ARCHITECTURES`]) gives each family its PTX targets, cubins and
/// gate columns ([`crate::ptx_target_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// The `mma.sync` + `ldmatrix` + `cp.async` main loop (`kernels-gpu/src/fwd/sm80.rs`): sm_80
    /// PTX, for compute capability 8.0 and later (cubins for sm_89 and sm_90 assembled from it).
    Sm80,
    /// Hopper's warpgroup MMA main loop (`wgmma.mma_async`, `kernels-gpu/src/fwd/sm90.rs`):
    /// sm_90a PTX, for devices of compute capability 9.0 only.
    /// [`Variant::Dense`](crate::Variant::Dense) only; its tiles are its own
    /// (`SM90_CANDIDATE_*`, gated by [`TileConfig::check_sm90`](crate::TileConfig::check_sm90):
    /// one warpgroup of 4 warps per 64 query rows, swizzled tiles, Q in shared memory).
    Sm90,
}

/// One architecture: its ptxas name, the compute capability of the devices that run its
/// cubins, what the build makes for it, and its per-SM and per-block limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    /// `-arch` of ptxas and `-Ctarget-cpu` of rustc: `"sm_89"`.
    pub name: &'static str,
    /// `(major, minor)` of the devices that load this architecture's cubins (exactly).
    pub compute_capability: (i32, i32),
    /// The kernel family whose PTX, cubins and gate columns this row is: each family's entries
    /// are compiled for its own PTX targets only (its shard crates at the target's
    /// `-Ctarget-cpu`), assembled and gated for its own architectures only.
    pub family: Family,
    /// Whether the PTX uses architecture-specific features (the `a` of `sm_90a`: wgmma,
    /// setmaxnreg), which are not forward compatible: such PTX and its cubins run only on
    /// devices of exactly [`Self::compute_capability`], not on every newer one.
    pub arch_specific: bool,
    /// Whether the build compiles the kernels' PTX for this architecture (`-Ctarget-cpu`; one
    /// nvptx build for the first PTX target of every family, another for each second one). Such
    /// PTX serves, through the driver's JIT, every device from this compute capability up to the
    /// next PTX target of the same family (the newest one for all devices above it; only its
    /// own compute capability if [`Self::arch_specific`]): see [`ptx_target_for`].
    pub ptx_target: bool,
    /// Whether the build assembles cubins for this architecture (with ptxas, from the PTX of
    /// [`ptx_target_for`] its family and compute capability), for devices of exactly this
    /// capability.
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

/// Every architecture the project builds for, by family, oldest first, in the order of the gate
/// file's columns: for [`Family::Sm80`] Ampere (sm_80, the A100), Ada (sm_89) and Hopper
/// (sm_90), all three from the sm_80 PTX; for [`Family::Sm90`] Hopper's architecture-specific
/// sm_90a. The ptxas gate covers each architecture of an entry's family (an entry is exposed
/// only if it passes on all of them); the build compiles PTX for the PTX targets and cubins for
/// the others marked so. Adding an architecture is adding a row.
///
/// The sm80 family has one PTX target, as `nvcc -gencode arch=compute_80,code=[sm_89,sm_90]`
/// would: rustc's sm_89 PTX of these kernels was the sm_80 PTX's instructions in a newer PTX
/// syntax (a sink operand `_` for an unused register), so its separate nvptx build only cost
/// the cold build about 55 s of CPU time, which on two cores took it over 2 minutes (2 min
/// 14 s, BENCHMARKS.md log 55).
///
/// sm_80's PTX also serves sm_86 and sm_87 (compute capability 8.0 up to 8.9), whose blocks
/// may opt into only 99 KiB of shared memory (101,376 bytes), against 163 KiB (166,912) on
/// the A100: the compile-time gates hold every tile to the smallest per-block limit of the
/// architectures its PTX serves, and the loader refuses a kernel whose shared memory a device
/// cannot give ([`crate::TileConfig::smem_bytes`] against the device's opt-in limit).
pub const ARCHITECTURES: [Architecture; 4] = [
    Architecture {
        name: "sm_80",
        compute_capability: (8, 0),
        family: Family::Sm80,
        arch_specific: false,
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
        family: Family::Sm80,
        arch_specific: false,
        ptx_target: false,
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
        family: Family::Sm80,
        arch_specific: false,
        ptx_target: false,
        cubins: true,
        max_smem_per_block: 227 * 1024,
        smem_per_sm: 228 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
    Architecture {
        name: "sm_90a",
        compute_capability: (9, 0),
        family: Family::Sm90,
        arch_specific: true,
        ptx_target: true,
        cubins: true,
        max_smem_per_block: 227 * 1024,
        smem_per_sm: 228 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
        registers_per_sm: 65_536,
        max_registers_per_thread: 255,
    },
];

/// The smallest per-block shared-memory limit of `family`'s architectures: the limit of its
/// compile-time gates. For [`Family::Sm80`] sm_89's 99 KiB (sm_86 and sm_87, which run sm_80's
/// PTX without a row of their own, allow the same 99 KiB); for [`Family::Sm90`] sm_90a's 227 KiB.
pub const fn max_smem_per_block_of(family: Family) -> usize {
    let mut min = usize::MAX;
    let mut index = 0;
    while index < ARCHITECTURES.len() {
        let arch = &ARCHITECTURES[index];
        if arch.family as u8 == family as u8 && arch.max_smem_per_block < min {
            min = arch.max_smem_per_block;
        }
        index += 1;
    }
    min
}

/// The architecture whose PTX a device of `compute_capability` runs for the kernels of
/// `family`: the newest PTX target of the family not newer than it (of exactly its compute
/// capability where the target is [`Architecture::arch_specific`]), or `None` where the device
/// cannot run the family. The one family-to-PTX-target rule: the build, the gate, the loader
/// and the tests all ask it.
///
/// ```
/// use flash_attn_params::{ptx_target_for, Family};
///
/// assert_eq!(ptx_target_for(Family::Sm80, (8, 6)).unwrap().name, "sm_80"); // an RTX 30x0
/// assert_eq!(ptx_target_for(Family::Sm80, (9, 0)).unwrap().name, "sm_80"); // an H100
/// assert!(ptx_target_for(Family::Sm80, (7, 5)).is_none()); // Turing: too old
/// assert_eq!(ptx_target_for(Family::Sm90, (9, 0)).unwrap().name, "sm_90a"); // an H100
/// assert!(ptx_target_for(Family::Sm90, (8, 9)).is_none()); // no wgmma before Hopper
/// assert!(ptx_target_for(Family::Sm90, (10, 0)).is_none()); // sm_90a is not forward compatible
/// ```
pub const fn ptx_target_for(
    family: Family,
    compute_capability: (i32, i32),
) -> Option<&'static Architecture> {
    let mut found = None;
    let mut index = 0;
    while index < ARCHITECTURES.len() {
        let arch = &ARCHITECTURES[index];
        let (major, minor) = arch.compute_capability;
        let runs = if arch.arch_specific {
            major == compute_capability.0 && minor == compute_capability.1
        } else {
            major < compute_capability.0
                || (major == compute_capability.0 && minor <= compute_capability.1)
        };
        if arch.ptx_target && arch.family as u8 == family as u8 && runs {
            found = Some(arch);
        }
        index += 1;
    }
    found
}

/// The architectures of `family`'s gate columns, cubins and PTX targets, in table order.
pub fn architectures_of(family: Family) -> impl Iterator<Item = &'static Architecture> {
    ARCHITECTURES
        .iter()
        .filter(move |arch| arch.family == family)
}

/// The architecture named `name` (`"sm_80"`), if it is one of [`ARCHITECTURES`].
pub fn architecture_named(name: &str) -> Option<&'static Architecture> {
    ARCHITECTURES.iter().find(|arch| arch.name == name)
}
