//! The ptxas gate: the rule that rejects a configuration after the build (spills, a stack
//! frame, over-limit registers, or not one block per SM) on any of the
//! [`ARCHITECTURES`], the gate file that records every
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
use crate::ptxas::{
    assemble_module, cache_file_name, digest, ptxas_version, run_in_parallel, Resources,
};

/// Shared memory the driver reserves per resident block.
const RESERVED_SMEM_PER_BLOCK: usize = 1024;

/// One line of the gate file: an entry's resources on each of [`ARCHITECTURES`], in order, and
/// the digest ([`digest`]) of the PTX module each was measured on. ptxas gives the same
/// resources for the same text, so a record whose digests match the modules a build compiled
/// is current for that build without running ptxas ([`built_module_digests`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRecord {
    /// The PTX entry name.
    pub entry: String,
    /// What ptxas reported for the entry on each of [`ARCHITECTURES`], in order.
    pub resources: [Resources; ARCHITECTURES.len()],
    /// The [`digest`] of the single-entry module each architecture's resources were measured
    /// on (the module of the PTX target it runs), in the same order.
    pub ptx_digests: [u64; ARCHITECTURES.len()],
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
# Written by `flash-attn-configs --write-gate host/ptxas-gate.tsv`; `cargo test` fails where it is\n\
# stale (a `_ptx` digest that is not the built module's, or resources ptxas no longer reports).\n\
# The build exposes the entries whose resources pass the gate (build-support/src/gate.rs: no\n\
# spill, no stack frame, at most 255 registers, one block per SM).\n";

/// The gate file's text: a header, the ptxas version line, then one tab-separated line per
/// entry: name, then registers, stack frame, spill stores, spill loads and the PTX digest (16
/// hex digits) for each architecture.
pub fn format_gate_file(ptxas_version: &str, records: &[GateRecord]) -> String {
    let mut text = format!("{GATE_FILE_HEADER}ptxas\t{ptxas_version}\n");
    text.push_str("# entry");
    for arch in &ARCHITECTURES {
        for column in ["registers", "stack", "spill_stores", "spill_loads", "ptx"] {
            text.push_str(&format!("\t{}_{column}", arch.name));
        }
    }
    text.push('\n');
    for record in records {
        text.push_str(&record.entry);
        for (used, ptx) in record.resources.iter().zip(&record.ptx_digests) {
            text.push_str(&format!(
                "\t{}\t{}\t{}\t{}\t{ptx:016x}",
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
        // Five columns per architecture: four resources in decimal, the digest in hex.
        let numbers: Result<Vec<u64>, _> = fields[1..]
            .iter()
            .enumerate()
            .map(|(column, field)| match column % 5 {
                4 => u64::from_str_radix(field, 16),
                _ => field.parse(),
            })
            .collect();
        match numbers {
            Ok(numbers) if numbers.len() == 5 * ARCHITECTURES.len() => {
                let resources = |i: usize| Resources {
                    registers: numbers[5 * i] as usize,
                    stack_frame: numbers[5 * i + 1] as usize,
                    spill_stores: numbers[5 * i + 2] as usize,
                    spill_loads: numbers[5 * i + 3] as usize,
                };
                records.push(GateRecord {
                    entry: fields[0].to_owned(),
                    resources: std::array::from_fn(resources),
                    ptx_digests: std::array::from_fn(|i| numbers[5 * i + 4]),
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
    let results = run_in_parallel(
        &jobs,
        |&(module, arch)| -> Result<(Resources, u64), String> {
            let (entry, paths) = &modules[module];
            let path = &paths[arch];
            let arch = ARCHITECTURES[arch].name;
            let text = std::fs::read(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let ptx_digest = digest(&[&text]);
            let cached = cache.join(cache_file_name(entry, arch, &text, &version));
            if let Ok(line) = std::fs::read_to_string(&cached) {
                let numbers: Vec<usize> = line
                    .split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect();
                if let [registers, stack_frame, spill_stores, spill_loads] = numbers[..] {
                    let used = Resources {
                        registers,
                        stack_frame,
                        spill_stores,
                        spill_loads,
                    };
                    return Ok((used, ptx_digest));
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
            Ok((used, ptx_digest))
        },
    );
    std::fs::remove_dir_all(&scratch).ok();
    let mut results = results.into_iter();
    let mut records = Vec::new();
    for (entry, _) in modules {
        let mut resources = [Resources::default(); ARCHITECTURES.len()];
        let mut ptx_digests = [0; ARCHITECTURES.len()];
        for (used, ptx) in resources.iter_mut().zip(&mut ptx_digests) {
            (*used, *ptx) = results.next().expect("one result per job")?;
        }
        records.push(GateRecord {
            entry: entry.clone(),
            resources,
            ptx_digests,
        });
    }
    Ok((version, records))
}

/// The single-entry modules of every entry the build compiled
/// ([`BUILT_CONFIGS`](flash_attn_params::BUILT_CONFIGS): the shipping set, or the whole search
/// space with `FLASH_ATTN_KERNELS=all`), from the folder it wrote them into, `ptx_dir` (so only
/// on the machine that built the runtime), in entry order.
fn built_entry_modules(ptx_dir: &Path) -> Result<Vec<EntryModules>, String> {
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
    match modules
        .iter()
        .flat_map(|(_, paths)| paths)
        .find(|path| !path.is_file())
    {
        Some(missing) => Err(format!(
            "{} is missing: the gate needs the PTX modules of the build on this machine",
            missing.display()
        )),
        None => Ok(modules),
    }
}

/// Runs the ptxas gate over the entries the build compiled that `measured` accepts, each
/// architecture on the PTX of its PTX target (`built_entry_modules`), in entry order: the
/// ptxas version and one record per entry, as the gate file holds them. Results are cached
/// next to the modules, keyed by module text, ptxas version and architecture.
pub fn measure_gate(
    ptxas: &Path,
    ptx_dir: &Path,
    measured: impl Fn(&str) -> bool,
) -> Result<Gate, String> {
    let mut modules = built_entry_modules(ptx_dir)?;
    modules.retain(|(entry, _)| measured(entry));
    gate_records(ptxas, &modules, &ptx_dir.with_file_name("ptxas-cache"))
}

/// The digest of each module the build compiled, per architecture as in [`GateRecord`], for
/// every entry in entry order: what the gate file's `_ptx` columns must hold for its records
/// to be current. Needs no ptxas.
pub fn built_module_digests(
    ptx_dir: &Path,
) -> Result<Vec<(String, [u64; ARCHITECTURES.len()])>, String> {
    built_entry_modules(ptx_dir)?
        .into_iter()
        .map(|(entry, paths)| {
            let mut digests = [0; ARCHITECTURES.len()];
            for (ptx, path) in digests.iter_mut().zip(&paths) {
                let text = std::fs::read(path)
                    .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
                *ptx = digest(&[&text]);
            }
            Ok((entry, digests))
        })
        .collect()
}
