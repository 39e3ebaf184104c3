//! The ptxas gate: the rule that rejects a configuration after the build (spills, a stack
//! frame, over-limit registers, or not one block per SM) on any of the
//! [`ARCHITECTURES`](flash_attn_params::ARCHITECTURES), the gate file that records every
//! entry's resources (`host/ptxas-gate.tsv`), and its measurement with ptxas.
//!
//! The file holds a record for every configuration of the search space (every one that passes
//! the compile-time gates), whichever set a build compiles. The build reads it to decide which
//! of the entries it compiled the runtime exposes, without running ptxas over them;
//! `flash-attn-configs --write-gate` (from a `FLASH_ATTN_KERNELS=all` build) writes it, and
//! `cargo test` measures again the entries the build compiled and fails where their records
//! are stale. All three go through this module, so the rule and the
//! format are written once.

use std::path::{Path, PathBuf};

use flash_attn_params::{ptx_target_for, Architecture, TileConfig, ARCHITECTURES};

use crate::modules::module_path;
use crate::ptxas::{assemble_module, cache_file_name, ptxas_version, run_in_parallel, Resources};

/// Shared memory the driver reserves per resident block.
const RESERVED_SMEM_PER_BLOCK: usize = 1024;

/// One line of the gate file: an entry's resources on each of [`ARCHITECTURES`], in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRecord {
    pub entry: String,
    pub resources: [Resources; ARCHITECTURES.len()],
}

/// Resident blocks per SM for `tile` at `registers` per thread, and the resource that limits
/// them (registers are allocated per thread in multiples of 8).
pub fn blocks_per_sm(
    tile: &TileConfig,
    registers: usize,
    arch: &Architecture,
) -> (usize, &'static str) {
    let registers_per_warp = registers.div_ceil(8) * 8 * 32;
    let by_registers = arch.registers_per_sm / registers_per_warp.max(1) / tile.warps;
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

/// The gate: every limit `tile`, assembled for `arch` with resources `used`, breaks; empty
/// where the configuration passes. Spilled or stacked registers go through local memory, so a
/// kernel with either is rejected rather than run slowly.
pub fn gate_failures(tile: &TileConfig, arch: &Architecture, used: &Resources) -> Vec<String> {
    let mut failures = Vec::new();
    if used.spill_stores != 0 || used.spill_loads != 0 {
        failures.push(format!(
            "spills on {} ({} B stores, {} B loads)",
            arch.name, used.spill_stores, used.spill_loads
        ));
    } else if used.stack_frame != 0 {
        failures.push(format!(
            "a {} B stack frame on {}",
            used.stack_frame, arch.name
        ));
    }
    if used.registers > arch.max_registers_per_thread {
        failures.push(format!("{} registers on {}", used.registers, arch.name));
    }
    if tile.smem_bytes() > arch.max_smem_per_block {
        failures.push(format!(
            "{} B shared memory over the {} B limit of {}",
            tile.smem_bytes(),
            arch.max_smem_per_block,
            arch.name
        ));
    }
    if blocks_per_sm(tile, used.registers, arch).0 == 0 {
        failures.push(format!("not one block fits an SM of {}", arch.name));
    }
    failures
}

/// Every failure of [`gate_failures`] on each architecture, for one record.
pub fn record_failures(tile: &TileConfig, record: &GateRecord) -> Vec<String> {
    ARCHITECTURES
        .iter()
        .zip(&record.resources)
        .flat_map(|(arch, used)| gate_failures(tile, arch, used))
        .collect()
}

const GATE_FILE_HEADER: &str =
    "# The ptxas gate: every PTX entry's resources from `ptxas -O3 -v`, for each architecture.\n\
# Written by `flash-attn-configs --write-gate host/ptxas-gate.tsv`; `cargo test` re-derives it\n\
# and fails where it is stale. The build exposes the entries whose resources pass the gate\n\
# (build-support/src/gate.rs: no spill, no stack frame, at most 255 registers, one block per SM).\n";

/// The gate file's text: a header, the ptxas version line, then one tab-separated line per
/// entry: name, then registers, stack frame, spill stores and spill loads for each architecture.
pub fn format_gate_file(ptxas_version: &str, records: &[GateRecord]) -> String {
    let mut text = format!("{GATE_FILE_HEADER}ptxas\t{ptxas_version}\n");
    text.push_str("# entry");
    for arch in &ARCHITECTURES {
        for column in ["registers", "stack", "spill_stores", "spill_loads"] {
            text.push_str(&format!("\t{}_{column}", arch.name));
        }
    }
    text.push('\n');
    for record in records {
        text.push_str(&record.entry);
        for used in &record.resources {
            text.push_str(&format!(
                "\t{}\t{}\t{}\t{}",
                used.registers, used.stack_frame, used.spill_stores, used.spill_loads
            ));
        }
        text.push('\n');
    }
    text
}

/// The ptxas version that measured a gate file, and its records.
pub type Gate = (String, Vec<GateRecord>);

/// Parses [`format_gate_file`]'s text into the ptxas version and the records.
pub fn parse_gate_file(text: &str) -> Result<Gate, String> {
    let mut version = None;
    let mut records = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields[0] == "ptxas" && fields.len() == 2 {
            version = Some(fields[1].to_owned());
            continue;
        }
        let numbers: Result<Vec<usize>, _> = fields[1..].iter().map(|f| f.parse()).collect();
        match numbers {
            Ok(numbers) if numbers.len() == 4 * ARCHITECTURES.len() => {
                let resources = |i: usize| Resources {
                    registers: numbers[4 * i],
                    stack_frame: numbers[4 * i + 1],
                    spill_stores: numbers[4 * i + 2],
                    spill_loads: numbers[4 * i + 3],
                };
                records.push(GateRecord {
                    entry: fields[0].to_owned(),
                    resources: std::array::from_fn(resources),
                });
            }
            _ => {
                return Err(format!(
                    "line {}: unparsable gate record {line:?}",
                    number + 1
                ))
            }
        }
    }
    let version = version.ok_or("no `ptxas<TAB>version` line")?;
    Ok((version, records))
}

/// The single-entry modules of one entry to assemble for each of [`ARCHITECTURES`], in order:
/// each architecture's is that of the PTX target it runs ([`ptx_target_for`]).
pub type EntryModules = (String, [PathBuf; ARCHITECTURES.len()]);

/// The ptxas version and the gate records of the single-entry modules `modules`, each
/// assembled for its architecture, in parallel. A module already assembled by the same ptxas
/// is read from the `cache` folder instead ([`cache_file_name`]).
pub fn gate_records(ptxas: &Path, modules: &[EntryModules], cache: &Path) -> Result<Gate, String> {
    let version = ptxas_version(ptxas)?;
    let scratch = std::env::temp_dir().join(format!("flash-attn-gate-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|error| error.to_string())?;
    std::fs::create_dir_all(cache).map_err(|error| error.to_string())?;
    let jobs: Vec<(usize, usize)> = (0..modules.len())
        .flat_map(|module| (0..ARCHITECTURES.len()).map(move |arch| (module, arch)))
        .collect();
    let results = run_in_parallel(&jobs, |&(module, arch)| -> Result<Resources, String> {
        let (entry, paths) = &modules[module];
        let path = &paths[arch];
        let arch = ARCHITECTURES[arch].name;
        let text = std::fs::read(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let cached = cache.join(cache_file_name(entry, arch, &text, &version));
        if let Ok(line) = std::fs::read_to_string(&cached) {
            let numbers: Vec<usize> = line
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            if let [registers, stack_frame, spill_stores, spill_loads] = numbers[..] {
                return Ok(Resources {
                    registers,
                    stack_frame,
                    spill_stores,
                    spill_loads,
                });
            }
        }
        let used = assemble_module(
            ptxas,
            arch,
            path,
            &scratch.join(format!("{entry}.{arch}.cubin")),
        )?;
        let line = format!(
            "{} {} {} {}",
            used.registers, used.stack_frame, used.spill_stores, used.spill_loads
        );
        std::fs::write(cached, line).map_err(|error| error.to_string())?;
        Ok(used)
    });
    std::fs::remove_dir_all(&scratch).ok();
    let mut results = results.into_iter();
    let mut records = Vec::new();
    for (entry, _) in modules {
        let mut resources = [Resources::default(); ARCHITECTURES.len()];
        for used in &mut resources {
            *used = results.next().expect("one result per job")?;
        }
        records.push(GateRecord {
            entry: entry.clone(),
            resources,
        });
    }
    Ok((version, records))
}

/// Runs the ptxas gate over every entry the build compiled, each architecture on the PTX of its
/// PTX target
/// ([`BUILT_CONFIGS`](flash_attn_params::BUILT_CONFIGS): the shipping set, or the whole search
/// space with `FLASH_ATTN_KERNELS=all`), from the modules it wrote into `ptx_dir` (so only on
/// the machine that built the runtime), in entry order: the ptxas version and one record per
/// entry, as the gate file holds them. Results are cached next to the modules, keyed by module
/// text, ptxas version and architecture.
pub fn measure_gate(ptxas: &Path, ptx_dir: &Path) -> Result<Gate, String> {
    let modules: Vec<EntryModules> = flash_attn_params::BUILT_CONFIGS
        .iter()
        .map(|spec| {
            let entry = spec.to_string();
            let paths = ARCHITECTURES.map(|arch| {
                let ptx = ptx_target_for(arch.compute_capability)
                    .expect("the oldest architecture is a PTX target");
                module_path(ptx_dir, ptx.name, &entry)
            });
            (entry, paths)
        })
        .collect();
    if let Some(missing) = modules
        .iter()
        .flat_map(|(_, paths)| paths)
        .find(|path| !path.is_file())
    {
        return Err(format!(
            "{} is missing: the gate needs the PTX modules of the build on this machine",
            missing.display()
        ));
    }
    gate_records(ptxas, &modules, &ptx_dir.with_file_name("ptxas-cache"))
}
