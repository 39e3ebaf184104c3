//! The ptxas gate: the rule that rejects a configuration after the build (spills, a stack
//! frame, over-limit registers, or not one block per SM) on any architecture of its family
//! ([`architectures_of`]: sm_80, sm_89 and sm_90 for the sm80 family, sm_90a for the sm90
//! one), the gate file that records every entry's resources (`host/ptxas-gate.tsv`), and its
//! measurement with ptxas.
//!
//! The file holds a record for every configuration of the search space (every one that passes
//! the compile-time gates), whichever set a build compiles. The build reads it to decide which
//! of the entries it compiled the runtime exposes, without running ptxas over them;
//! `flash-attn-configs --write-gate` (from a `FLASH_ATTN_KERNELS=all` build) writes it, and
//! `cargo test` measures again the entries the build compiled and fails where their records
//! are stale. All three go through this module, so the rule and the
//! format are written once.

use std::path::{Path, PathBuf};

use flash_attn_params::{
    architecture_named, architectures_of, ptx_target_for, Architecture, KernelSpec, TileConfig,
    CANDIDATE_FAMILIES,
};

use crate::modules::module_path;
use crate::ptxas::{
    assemble_module, cache_file_name, digest, ptxas_version, run_in_parallel, Resources,
};

/// Shared memory the driver reserves per resident block.
const RESERVED_SMEM_PER_BLOCK: usize = 1024;

/// One line of the gate file: an entry's resources on each architecture of its family
/// ([`architectures_of`]), in order, and the digest ([`digest`]) of the PTX module each was
/// measured on. ptxas gives the same resources for the same text, so a record whose digests
/// match the modules a build compiled is current for that build without running ptxas
/// ([`built_module_digests`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRecord {
    /// The PTX entry name.
    pub entry: String,
    /// One column per architecture of the entry's family, in table order.
    pub columns: Vec<GateColumn>,
}

/// What ptxas reported for one entry on one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateColumn {
    /// The architecture (ptxas's `-arch`).
    pub arch: &'static Architecture,
    /// What ptxas reported.
    pub resources: Resources,
    /// The [`digest`] of the single-entry module the resources were measured on (the module
    /// of the PTX target the architecture runs for the entry's family).
    pub ptx_digest: u64,
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

/// Every failure of [`gate_failures`] on each architecture, for the record of `spec`; a record
/// whose columns are not the architectures of `spec`'s family fails as a whole.
pub fn record_failures(spec: &KernelSpec, record: &GateRecord) -> Vec<String> {
    let expected: Vec<&str> = architectures_of(spec.family)
        .map(|arch| arch.name)
        .collect();
    let recorded: Vec<&str> = record
        .columns
        .iter()
        .map(|column| column.arch.name)
        .collect();
    if recorded != expected {
        return vec![format!(
            "the record's columns are {recorded:?}, not the {:?} family's {expected:?}",
            spec.family
        )];
    }
    record
        .columns
        .iter()
        .flat_map(|column| gate_failures(&spec.tile, column.arch, &column.resources))
        .collect()
}

const GATE_FILE_HEADER: &str =
    "# The ptxas gate: every PTX entry's resources from `ptxas -O3 -v`, for each architecture of its family.\n\
# Written by `flash-attn-configs --write-gate host/ptxas-gate.tsv`; `cargo test` fails where it is\n\
# stale (a `_ptx` digest that is not the built module's, or resources ptxas no longer reports).\n\
# The build exposes the entries whose resources pass the gate (build-support/src/gate.rs: no\n\
# spill, no stack frame, at most 255 registers, one block per SM).\n";

/// The names of the five fields of one architecture's column.
const COLUMN_FIELDS: [&str; 5] = ["registers", "stack", "spill_stores", "spill_loads", "ptx"];

/// The header line of the records whose columns are `architectures`:
/// `# entry<TAB>sm_80_registers<TAB>...`; the parser reads the columns from it.
fn columns_header(architectures: &[&Architecture]) -> String {
    let mut line = String::from("# entry");
    for arch in architectures {
        for field in COLUMN_FIELDS {
            line.push_str(&format!("\t{}_{field}", arch.name));
        }
    }
    line
}

/// The gate file's text: a header, the ptxas version line, then per family (in
/// [`CANDIDATE_FAMILIES`] order) the header of its columns (`columns_header`) and one
/// tab-separated line per entry: name, then registers, stack frame, spill stores, spill loads
/// and the PTX digest (16 hex digits) for each architecture of the family.
pub fn format_gate_file(ptxas_version: &str, records: &[GateRecord]) -> String {
    let mut text = format!("{GATE_FILE_HEADER}ptxas\t{ptxas_version}\n");
    for family in CANDIDATE_FAMILIES {
        let architectures: Vec<&Architecture> = architectures_of(family).collect();
        let of_family = records.iter().filter(|record| {
            record.columns.len() == architectures.len()
                && record
                    .columns
                    .iter()
                    .zip(&architectures)
                    .all(|(column, arch)| column.arch == *arch)
        });
        let mut header = Some(columns_header(&architectures));
        for record in of_family {
            if let Some(header) = header.take() {
                text.push_str(&header);
                text.push('\n');
            }
            text.push_str(&record.entry);
            for GateColumn {
                resources: used,
                ptx_digest,
                ..
            } in &record.columns
            {
                text.push_str(&format!(
                    "\t{}\t{}\t{}\t{}\t{ptx_digest:016x}",
                    used.registers, used.stack_frame, used.spill_stores, used.spill_loads
                ));
            }
            text.push('\n');
        }
    }
    text
}

/// The ptxas version that measured a gate file, and its records.
pub type Gate = (String, Vec<GateRecord>);

/// Parses [`format_gate_file`]'s text into the ptxas version and the records. The records after
/// a column header (`# entry<TAB>sm_80_registers...`) have its columns.
pub fn parse_gate_file(text: &str) -> Result<Gate, String> {
    let mut version = None;
    let mut records = Vec::new();
    let mut architectures: Vec<&'static Architecture> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let at = |message: String| format!("line {}: {message}", number + 1);
        if let Some(columns) = line.strip_prefix("# entry\t") {
            architectures = columns
                .split('\t')
                .step_by(COLUMN_FIELDS.len())
                .map(|field| {
                    field
                        .strip_suffix("_registers")
                        .and_then(architecture_named)
                        .ok_or_else(|| at(format!("unknown architecture column {field:?}")))
                })
                .collect::<Result<_, _>>()?;
            continue;
        }
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
            .map(|(column, field)| match column % COLUMN_FIELDS.len() {
                4 => u64::from_str_radix(field, 16),
                _ => field.parse(),
            })
            .collect();
        match numbers {
            Ok(numbers) if numbers.len() == COLUMN_FIELDS.len() * architectures.len() => {
                let columns = architectures
                    .iter()
                    .zip(numbers.chunks(COLUMN_FIELDS.len()))
                    .map(|(&arch, fields)| GateColumn {
                        arch,
                        resources: Resources {
                            registers: fields[0] as usize,
                            stack_frame: fields[1] as usize,
                            spill_stores: fields[2] as usize,
                            spill_loads: fields[3] as usize,
                        },
                        ptx_digest: fields[4],
                    })
                    .collect();
                records.push(GateRecord {
                    entry: fields[0].to_owned(),
                    columns,
                });
            }
            _ => return Err(at(format!("unparsable gate record {line:?}"))),
        }
    }
    let version = version.ok_or("no `ptxas<TAB>version` line")?;
    Ok((version, records))
}

/// The single-entry modules of one entry to assemble for each architecture of its family, in
/// order: each architecture's is that of the PTX target it runs ([`ptx_target_for`]).
pub type EntryModules = (String, Vec<(&'static Architecture, PathBuf)>);

/// The ptxas version and the gate records of the single-entry modules `modules`, each
/// assembled for its architecture, in parallel. A module already assembled by the same ptxas
/// is read from the `cache` folder instead ([`cache_file_name`]).
pub fn gate_records(ptxas: &Path, modules: &[EntryModules], cache: &Path) -> Result<Gate, String> {
    let version = ptxas_version(ptxas)?;
    let scratch = std::env::temp_dir().join(format!("flash-attn-gate-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|error| error.to_string())?;
    std::fs::create_dir_all(cache).map_err(|error| error.to_string())?;
    let jobs: Vec<(&str, &Architecture, &Path)> = modules
        .iter()
        .flat_map(|(entry, paths)| {
            paths
                .iter()
                .map(move |(arch, path)| (entry.as_str(), *arch, path.as_path()))
        })
        .collect();
    let results = run_in_parallel(
        &jobs,
        |&(entry, arch, path)| -> Result<(Resources, u64), String> {
            let arch = arch.name;
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
    for (entry, paths) in modules {
        let mut columns = Vec::new();
        for &(arch, _) in paths {
            let (resources, ptx_digest) = results.next().expect("one result per job")?;
            columns.push(GateColumn {
                arch,
                resources,
                ptx_digest,
            });
        }
        records.push(GateRecord {
            entry: entry.clone(),
            columns,
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
            let paths = architectures_of(spec.family)
                .map(|arch| {
                    let ptx = ptx_target_for(spec.family, arch.compute_capability)
                        .expect("each family's oldest architecture is a PTX target");
                    (arch, module_path(ptx_dir, ptx.name, &entry))
                })
                .collect();
            (entry, paths)
        })
        .collect();
    match modules
        .iter()
        .flat_map(|(_, paths)| paths.iter().map(|(_, path)| path))
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

/// The digest of each module the build compiled, per architecture of the entry's family as in
/// [`GateRecord`], for every entry in entry order: what the gate file's `_ptx` columns must
/// hold for its records to be current. Needs no ptxas.
pub fn built_module_digests(ptx_dir: &Path) -> Result<Vec<(String, Vec<u64>)>, String> {
    built_entry_modules(ptx_dir)?
        .into_iter()
        .map(|(entry, paths)| {
            let digests = paths
                .iter()
                .map(|(_, path)| {
                    let text = std::fs::read(path)
                        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
                    Ok(digest(&[&text]))
                })
                .collect::<Result<_, String>>()?;
            Ok((entry, digests))
        })
        .collect()
}

impl GateRecord {
    /// The PTX digests of the record's columns, in order (as [`built_module_digests`] gives a
    /// build's).
    pub fn ptx_digests(&self) -> Vec<u64> {
        self.columns
            .iter()
            .map(|column| column.ptx_digest)
            .collect()
    }
}
