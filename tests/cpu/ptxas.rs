//! Assembles the PTX with `ptxas -v` for sm_89 and sm_90 wherever ptxas is found, and checks
//! every kernel's resources: no spills, no stack, registers and shared memory within limits.
//!
//! ptxas is looked up in `$PTXAS`, then on `PATH`, then under `/usr/local/cuda/bin`. Without
//! it the test says so and passes, unless `FLASH_ATTN_REQUIRE_PTXAS` is set (CI sets it).

use flash_attn::ptxas::{
    assemble, blocks_per_sm, find_ptxas, parse_report, ARCHITECTURES, MAX_REGISTERS_PER_THREAD,
};
use flash_attn::QSource::Registers;
use flash_attn::SmemLayout::Swizzled;
use flash_attn::{TileConfig, FORWARD_KERNELS};

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
    let mut failures = Vec::new();
    for arch in &ARCHITECTURES {
        let kernels = assemble(&ptxas, arch).unwrap();
        assert_eq!(
            kernels.len(),
            FORWARD_KERNELS.len(),
            "kernels in the {} report",
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
            let (blocks, _) = blocks_per_sm(&tile, used.registers, arch);
            println!(
                "{:<40} {}: {:>3} registers, {:>3} B stack, {:>6} B shared, {} threads, {} blocks/SM",
                kernel.entry,
                arch.name,
                used.registers,
                used.stack_frame,
                tile.smem_bytes(),
                tile.threads(),
                blocks
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
                blocks >= 1,
                format!("not one block fits an SM ({} registers)", used.registers),
            );
            check(
                tile.smem_bytes() <= arch.max_smem_per_block,
                format!("{} B shared memory", tile.smem_bytes()),
            );
        }
    }
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
    let kernels = parse_report(report).unwrap();
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

#[test]
fn occupancy_follows_the_tightest_limit() {
    let tile = TileConfig::new(64, 64, 4, 3, 64, Swizzled, Registers); // 56 KiB, 128 threads
    let [ada, hopper] = ARCHITECTURES;
    // 168 registers: 21504 per block, 3 blocks in 65536; shared memory allows 4 on Hopper.
    assert_eq!(blocks_per_sm(&tile, 168, &hopper), (3, "registers"));
    // 169 rounds up to 176: 22528 per block, only 2 fit.
    assert_eq!(blocks_per_sm(&tile, 169, &hopper), (2, "registers"));
    // Ada has 100 KiB per SM: one 57 KiB block.
    assert_eq!(blocks_per_sm(&tile, 64, &ada), (1, "shared memory"));
}
