//! Assembles the PTX with `ptxas -v` for sm_89 and sm_90 wherever ptxas is found, and checks
//! every kernel's resources: no spills, no stack, registers and shared memory within limits.
//!
//! ptxas is looked up in `$PTXAS`, then on `PATH`, then under `/usr/local/cuda/bin`. Without
//! it the test says so and passes, unless `FLASH_ATTN_REQUIRE_PTXAS` is set (CI sets it).

use std::path::PathBuf;
use std::process::Command;

use flash_attn::{FORWARD_KERNELS, PTX};

struct Architecture {
    name: &'static str,
    max_smem_per_block: usize,
}

const ARCHITECTURES: [Architecture; 2] = [
    Architecture {
        name: "sm_89",
        max_smem_per_block: 99 * 1024,
    },
    Architecture {
        name: "sm_90",
        max_smem_per_block: 227 * 1024,
    },
];
const MAX_REGISTERS_PER_THREAD: usize = 255;
const REGISTERS_PER_SM: usize = 65_536;

fn find_ptxas() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PTXAS") {
        return Some(path.into());
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("ptxas"));
    on_path
        .chain([PathBuf::from("/usr/local/cuda/bin/ptxas")])
        .find(|path| path.is_file())
}

#[derive(Debug, Default)]
struct Resources {
    registers: usize,
    stack_frame: usize,
    spill_stores: usize,
    spill_loads: usize,
}

/// Parses `ptxas -v` output into (entry, resources) pairs.
fn parse_report(report: &str) -> Vec<(String, Resources)> {
    let mut kernels: Vec<(String, Resources)> = Vec::new();
    let number_before = |line: &str, unit: &str| -> usize {
        let prefix = &line[..line
            .find(unit)
            .unwrap_or_else(|| panic!("no {unit:?} in {line:?}"))];
        prefix
            .split_whitespace()
            .last()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unparsable ptxas line {line:?}"))
    };
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            kernels.push((name, Resources::default()));
        } else if let Some((_, resources)) = kernels.last_mut() {
            if line.contains("bytes stack frame") {
                resources.stack_frame = number_before(line, "bytes stack frame");
                resources.spill_stores = number_before(line, "bytes spill stores");
                resources.spill_loads = number_before(line, "bytes spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                resources.registers = number_before(line, "registers");
            }
        }
    }
    kernels
}

#[test]
fn every_kernel_assembles_without_spills_within_limits() {
    let Some(ptxas) = find_ptxas() else {
        assert!(
            std::env::var_os("FLASH_ATTN_REQUIRE_PTXAS").is_none(),
            "FLASH_ATTN_REQUIRE_PTXAS is set but no ptxas was found (set PTXAS or PATH)"
        );
        eprintln!("skipping the ptxas checks: no ptxas found (set PTXAS=/path/to/ptxas)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("flash-attn-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx_path = dir.join("flash_attn_kernels.ptx");
    std::fs::write(&ptx_path, PTX).unwrap();

    let mut failures = Vec::new();
    for arch in &ARCHITECTURES {
        let output = Command::new(&ptxas)
            .arg(format!("-arch={}", arch.name))
            .arg("-v")
            .arg(&ptx_path)
            .arg("-o")
            .arg(dir.join(format!("{}.cubin", arch.name)))
            .output()
            .unwrap_or_else(|error| panic!("could not run {}: {error}", ptxas.display()));
        let report = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "ptxas failed for {}:\n{report}",
            arch.name
        );
        let kernels = parse_report(&report);
        assert_eq!(
            kernels.len(),
            FORWARD_KERNELS.len(),
            "ptxas report for {}:\n{report}",
            arch.name
        );
        for kernel in FORWARD_KERNELS {
            let (_, used) = kernels
                .iter()
                .find(|(name, _)| name == kernel.entry)
                .unwrap_or_else(|| {
                    panic!("{} missing from the {} report", kernel.entry, arch.name)
                });
            let tile = kernel.tile;
            println!(
                "{:<40} {}: {:>3} registers, {:>3} B stack, {:>6} B shared, {} threads",
                kernel.entry,
                arch.name,
                used.registers,
                used.stack_frame,
                tile.smem_bytes(),
                tile.threads()
            );
            let mut check = |ok: bool, what: String| {
                if !ok {
                    failures.push(format!("{} on {}: {what}", kernel.entry, arch.name));
                }
            };
            check(
                used.spill_stores == 0 && used.spill_loads == 0,
                format!("spills {used:?}"),
            );
            check(
                used.stack_frame == 0,
                format!("{} B stack frame", used.stack_frame),
            );
            check(
                used.registers <= MAX_REGISTERS_PER_THREAD,
                format!("{} registers", used.registers),
            );
            check(
                used.registers * tile.threads() <= REGISTERS_PER_SM,
                format!(
                    "{} registers x {} threads exceed an SM",
                    used.registers,
                    tile.threads()
                ),
            );
            check(
                tile.smem_bytes() <= arch.max_smem_per_block,
                format!("{} B shared memory", tile.smem_bytes()),
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        failures.is_empty(),
        "ptxas resource checks failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_report_parser_reads_ptxas_lines() {
    let report = "ptxas info    : Compiling entry function 'k' for 'sm_89'\n\
        ptxas info    : Function properties for k\n    \
        8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
        ptxas info    : Used 255 registers, used 1 barriers, 392 bytes cmem[0]\n";
    let kernels = parse_report(report);
    assert_eq!(kernels.len(), 1);
    let (name, used) = &kernels[0];
    assert_eq!(name, "k");
    assert_eq!(
        (
            used.registers,
            used.stack_frame,
            used.spill_stores,
            used.spill_loads
        ),
        (255, 8, 4, 12)
    );
}
