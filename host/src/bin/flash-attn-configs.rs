//! Lists the tile-configuration space of the forward kernel: for each candidate, whether the
//! compile-time gates accept it (and if not, the limit it breaks), whether it is compiled, and,
//! for compiled ones when `ptxas` is found, registers, spills and theoretical occupancy on
//! sm_89 and sm_90.
//!
//! `flash-attn-configs` (set `PTXAS=/path/to/ptxas` for the resource columns).

use flash_attn::ptxas::{
    assemble, blocks_per_sm, find_ptxas, Architecture, Resources, ARCHITECTURES,
};
use flash_attn::{Dtype, QSource, SmemLayout, TileConfig, FORWARD_KERNELS};

/// The candidate values of each tile parameter.
const BLOCK_M: [usize; 2] = [64, 128];
const BLOCK_N: [usize; 3] = [32, 64, 128];
const WARPS: [usize; 2] = [4, 8];
const STAGES: [usize; 3] = [1, 2, 3];
const HEAD_DIMS: [usize; 2] = [64, 128];
const LAYOUTS: [SmemLayout; 2] = [SmemLayout::Swizzled, SmemLayout::Padded];
const Q_SOURCES: [QSource; 2] = [QSource::Registers, QSource::SharedMemory];

fn main() {
    let reports: Vec<Option<Vec<(String, Resources)>>> = match find_ptxas() {
        Some(ptxas) => ARCHITECTURES
            .iter()
            .map(|arch| match assemble(&ptxas, arch) {
                Ok(report) => Some(report),
                Err(error) => {
                    eprintln!("{error}");
                    None
                }
            })
            .collect(),
        None => {
            eprintln!("no ptxas found (set PTXAS): register and occupancy columns are left empty");
            vec![None, None]
        }
    };
    println!(
        "{:<5} {:>4} {:>4} {:>5} {:>6} {:>4} {:<8} {:<9} {:>8}  {:<9} {:<26} {:<26}  reason",
        "dtype",
        "D",
        "BM",
        "BN",
        "warps",
        "stg",
        "layout",
        "Q",
        "smem KiB",
        "status",
        "sm_89 regs/spill/blocks",
        "sm_90 regs/spill/blocks"
    );
    let (mut accepted, mut rejected, mut compiled) = (0, 0, 0);
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for head_dim in HEAD_DIMS {
            for block_m in BLOCK_M {
                for block_n in BLOCK_N {
                    for warps in WARPS {
                        for stages in STAGES {
                            for layout in LAYOUTS {
                                for q_source in Q_SOURCES {
                                    let verdict = TileConfig::check(
                                        block_m, block_n, warps, stages, head_dim, layout, q_source,
                                    );
                                    let kernel = FORWARD_KERNELS.iter().find(|k| {
                                        k.dtype == dtype && verdict.is_ok_and(|tile| tile == k.tile)
                                    });
                                    let smem = verdict.map_or(String::from("-"), |t| {
                                        format!("{:.0}", t.smem_bytes() as f64 / 1024.0)
                                    });
                                    let (status, reason) = match (verdict, kernel) {
                                        (Err(limit), _) => {
                                            rejected += 1;
                                            ("rejected", limit.to_owned())
                                        }
                                        (Ok(_), Some(kernel)) => {
                                            accepted += 1;
                                            compiled += 1;
                                            ("compiled", kernel.entry.to_owned())
                                        }
                                        (Ok(_), None) => {
                                            accepted += 1;
                                            (
                                                "valid",
                                                "passes the gates; not in the compiled list"
                                                    .to_owned(),
                                            )
                                        }
                                    };
                                    let columns: Vec<String> = ARCHITECTURES
                                        .iter()
                                        .zip(&reports)
                                        .map(|(arch, report)| resources(kernel, report, arch))
                                        .collect();
                                    println!(
                                        "{:<5} {:>4} {:>4} {:>5} {:>6} {:>4} {:<8} {:<9} {:>8}  {:<9} {:<26} {:<26}  {}",
                                        format!("{dtype:?}"), head_dim, block_m, block_n, warps,
                                        stages, format!("{layout:?}"),
                                        match q_source {
                                            QSource::Registers => "registers",
                                            QSource::SharedMemory => "shared",
                                        },
                                        smem, status, columns[0], columns[1], reason
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "{accepted} configurations pass the gates ({compiled} compiled), {rejected} rejected. \
         Compiled ones are checked by ptxas in `cargo test` (no spills, registers, one block \
         fits) and run by the GPU tests; valid ones that are not compiled are left out for build, \
         JIT and GPU test time (see `for_each_forward_kernel!`)."
    );
}

/// `registers/spill bytes/blocks per SM (limiting resource)` of a compiled kernel on `arch`.
fn resources(
    kernel: Option<&flash_attn::ForwardKernel>,
    report: &Option<Vec<(String, Resources)>>,
    arch: &Architecture,
) -> String {
    let found = kernel.zip(report.as_ref()).and_then(|(kernel, report)| {
        report
            .iter()
            .find(|(name, _)| name == kernel.entry)
            .map(|(_, used)| (kernel, used))
    });
    match found {
        Some((kernel, used)) => {
            let (blocks, limit) = blocks_per_sm(&kernel.tile, used.registers, arch);
            format!(
                "{}/{}/{} ({})",
                used.registers, used.spill_stores, blocks, limit
            )
        }
        None => "-".to_owned(),
    }
}
