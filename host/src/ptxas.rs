//! The ptxas gate: assembling each kernel entry with NVIDIA's `ptxas -v`, reading its resources,
//! and the rule that rejects a configuration after the build (spills, a stack frame, over-limit
//! registers, or not one block per SM) on sm_89 or sm_90. Needs no GPU, only a `ptxas` binary.
//!
//! The verdicts live in `host/ptxas-gate.tsv`, which `flash-attn-configs --write-gate` writes
//! and `cargo test` re-derives with ptxas: the build reads it to decide which entries the crate
//! exposes ([`crate::FORWARD_KERNELS`]), without running ptxas over every entry.
//!
//! Only `std` and `flash_attn_params`: `build.rs` includes this file with `#[path]`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use flash_attn_params::TileConfig;

/// The per-SM and per-block limits of one architecture that decide occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Architecture {
    pub name: &'static str,
    pub max_smem_per_block: usize,
    pub smem_per_sm: usize,
    pub max_warps_per_sm: usize,
    pub max_blocks_per_sm: usize,
}

/// Ada (sm_89), the PTX target, and Hopper (sm_90): the architectures the gate covers and the
/// build assembles cubins for.
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: usize,
    pub stack_frame: usize,
    pub spill_stores: usize,
    pub spill_loads: usize,
}

/// One line of the gate file: an entry's resources on each of [`ARCHITECTURES`], in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRecord {
    pub entry: String,
    pub resources: [Resources; 2],
}

/// `$PTXAS`, else `ptxas` on `PATH`, else `/usr/local/cuda/bin/ptxas`.
pub fn find_ptxas() -> Option<PathBuf> {
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
    if used.registers > MAX_REGISTERS_PER_THREAD {
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
    "# The ptxas gate: every PTX entry's resources from `ptxas -O3 -v`, for sm_89 then sm_90.\n\
# Written by `flash-attn-configs --write-gate host/ptxas-gate.tsv`; `cargo test` re-derives it\n\
# and fails where it is stale. The build exposes the entries whose resources pass the gate\n\
# (host/src/ptxas.rs: no spill, no stack frame, at most 255 registers, one block per SM).\n";

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

/// Parses [`format_gate_file`]'s text into the ptxas version and the records.
pub fn parse_gate_file(text: &str) -> Result<(String, Vec<GateRecord>), String> {
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
                    resources: [resources(0), resources(1)],
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

/// The release line of `ptxas --version` (`Cuda compilation tools, release 12.9, V12.9.86`).
pub fn ptxas_version(ptxas: &Path) -> Result<String, String> {
    let output = Command::new(ptxas)
        .arg("--version")
        .output()
        .map_err(|error| format!("could not run {}: {error}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find(|line| line.contains("release"))
        .or_else(|| text.lines().last())
        .map(|line| line.trim().to_owned())
        .ok_or_else(|| format!("{} --version printed nothing", ptxas.display()))
}

/// Assembles the single-entry module at `module` for `arch` with `ptxas -O3 -v`, writing the
/// cubin to `cubin`, and returns the entry's resources.
pub fn assemble_module(
    ptxas: &Path,
    arch: &str,
    module: &Path,
    cubin: &Path,
) -> Result<Resources, String> {
    let output = Command::new(ptxas)
        .args(["-O3", "-v", &format!("-arch={arch}")])
        .arg(module)
        .arg("-o")
        .arg(cubin)
        .output()
        .map_err(|error| format!("could not run {}: {error}", ptxas.display()))?;
    let report = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "ptxas failed on {} for {arch} ({}):\n{}{report}",
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout)
        ));
    }
    match parse_report(&report)?.as_slice() {
        [(_, used)] => Ok(*used),
        other => Err(format!(
            "{}: ptxas reported {} entries, expected one",
            module.display(),
            other.len()
        )),
    }
}

/// Runs `job` on every item, as many at once as there are cores (ptxas is single-threaded),
/// and returns the results in item order.
pub fn run_in_parallel<T: Sync, R: Send>(items: &[T], job: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |cores| cores.get())
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                let result = job(item);
                results
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())[index] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .into_iter()
        .map(|result| result.expect("every item ran"))
        .collect()
}

/// The file name under which a cache keeps what ptxas made of the single-entry module `text`
/// of `entry` for `arch`: the hash covers the module text, the ptxas version and the
/// architecture, so a changed kernel or another ptxas misses the cache.
pub fn cache_file_name(entry: &str, arch: &str, text: &[u8], ptxas_version: &str) -> String {
    let mut hasher = DefaultHasher::new();
    (text, ptxas_version, arch).hash(&mut hasher);
    format!("{entry}.{arch}.{:016x}", hasher.finish())
}

/// The ptxas version and the gate records of the single-entry modules `modules`
/// (`(entry, module path)`), assembled for each of [`ARCHITECTURES`] in parallel. A module
/// already assembled by the same ptxas is read from the `cache` folder instead
/// ([`cache_file_name`]).
pub fn gate_records(
    ptxas: &Path,
    modules: &[(String, PathBuf)],
    cache: &Path,
) -> Result<(String, Vec<GateRecord>), String> {
    let version = ptxas_version(ptxas)?;
    let scratch = std::env::temp_dir().join(format!("flash-attn-gate-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|error| error.to_string())?;
    std::fs::create_dir_all(cache).map_err(|error| error.to_string())?;
    let jobs: Vec<(usize, usize)> = (0..modules.len())
        .flat_map(|module| (0..ARCHITECTURES.len()).map(move |arch| (module, arch)))
        .collect();
    let results = run_in_parallel(&jobs, |&(module, arch)| -> Result<Resources, String> {
        let (entry, path) = &modules[module];
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
        let mut resources = [Resources::default(); 2];
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
