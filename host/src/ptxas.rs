//! Assembling the embedded PTX with NVIDIA's `ptxas` to read each kernel's resources, and the
//! theoretical occupancy that follows from them. Needs no GPU, only a `ptxas` binary.

use std::process::Command;

use flash_attn_params::TileConfig;

use crate::PTX;

/// The per-SM and per-block limits of one architecture that decide occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    pub name: &'static str,
    pub max_smem_per_block: usize,
    pub smem_per_sm: usize,
    pub max_warps_per_sm: usize,
    pub max_blocks_per_sm: usize,
}

/// Ada (sm_89), the PTX target, and Hopper (sm_90): the architectures the build assembles cubins
/// for (`host/build.rs`), and the ones the resource checks cover.
pub const ARCHITECTURES: [Architecture; 2] = [
    Architecture {
        name: "sm_89",
        max_smem_per_block: 99 * 1024,
        smem_per_sm: 100 * 1024,
        max_warps_per_sm: 48,
        max_blocks_per_sm: 24,
    },
    Architecture {
        name: "sm_90",
        max_smem_per_block: 227 * 1024,
        smem_per_sm: 228 * 1024,
        max_warps_per_sm: 64,
        max_blocks_per_sm: 32,
    },
];

pub const MAX_REGISTERS_PER_THREAD: usize = 255;
pub const REGISTERS_PER_SM: usize = 65_536;
/// Shared memory the driver reserves per resident block.
const RESERVED_SMEM_PER_BLOCK: usize = 1024;

/// What `ptxas -v` reports for one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: usize,
    pub stack_frame: usize,
    pub spill_stores: usize,
    pub spill_loads: usize,
}

// Shared with build.rs, which assembles the embedded cubins with the same ptxas.
pub use crate::ptx_tools::find_ptxas;

/// Parses `ptxas -v` output into (entry, resources) pairs.
pub fn parse_report(report: &str) -> Result<Vec<(String, Resources)>, String> {
    let mut kernels: Vec<(String, Resources)> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Result<usize, String> {
        let end = line
            .find(unit)
            .ok_or_else(|| format!("no {unit:?} in {line:?}"))?;
        line[..end]
            .split_whitespace()
            .last()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unparsable ptxas line {line:?}"))
    };
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            kernels.push((name, Resources::default()));
        } else if let Some((_, resources)) = kernels.last_mut() {
            if line.contains("bytes stack frame") {
                resources.stack_frame = number_before(line, "bytes stack frame")?;
                resources.spill_stores = number_before(line, "bytes spill stores")?;
                resources.spill_loads = number_before(line, "bytes spill loads")?;
            } else if line.contains("Used") && line.contains("registers") {
                resources.registers = number_before(line, "registers")?;
            }
        }
    }
    Ok(kernels)
}

/// Assembles the embedded PTX for `arch` with `ptxas -v` and returns every kernel's resources.
pub fn assemble(
    ptxas: &std::path::Path,
    arch: &Architecture,
) -> Result<Vec<(String, Resources)>, String> {
    let dir = std::env::temp_dir().join(format!(
        "flash-attn-ptxas-{}-{}",
        std::process::id(),
        arch.name
    ));
    std::fs::create_dir_all(&dir).map_err(|error| error.to_string())?;
    let ptx_path = dir.join("flash_attn_kernels.ptx");
    std::fs::write(&ptx_path, PTX).map_err(|error| error.to_string())?;
    let output = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name))
        .arg("-v")
        .arg(&ptx_path)
        .arg("-o")
        .arg(dir.join("kernels.cubin"))
        .output()
        .map_err(|error| format!("could not run {}: {error}", ptxas.display()))?;
    std::fs::remove_dir_all(&dir).ok();
    let report = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("ptxas failed for {}:\n{report}", arch.name));
    }
    parse_report(&report)
}

/// Resident blocks per SM for `tile` at `registers` per thread, and the resource that limits
/// them (registers are allocated per thread in multiples of 8).
pub fn blocks_per_sm(
    tile: &TileConfig,
    registers: usize,
    arch: &Architecture,
) -> (usize, &'static str) {
    let registers_per_warp = registers.div_ceil(8) * 8 * 32;
    let by_registers = REGISTERS_PER_SM / registers_per_warp.max(1) / tile.warps;
    let by_smem = arch.smem_per_sm / (tile.smem_bytes() + RESERVED_SMEM_PER_BLOCK);
    let by_warps = arch.max_warps_per_sm / tile.warps;
    [
        (by_registers, "registers"),
        (by_smem, "shared memory"),
        (by_warps, "warps"),
        (arch.max_blocks_per_sm, "blocks"),
    ]
    .into_iter()
    .min_by_key(|&(blocks, _)| blocks)
    .expect("four limits")
}
