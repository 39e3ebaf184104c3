//! NVIDIA's `ptxas`: finding it, asking its version, assembling one single-entry PTX module and
//! reading the resources it reports, and running many such jobs on every core.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What `ptxas -v` reports for one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Registers per thread (`Used N registers`).
    pub registers: usize,
    /// Bytes of stack frame per thread (local memory).
    pub stack_frame: usize,
    /// Bytes of register spill stores.
    pub spill_stores: usize,
    /// Bytes of register spill loads.
    pub spill_loads: usize,
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

/// A stable 64-bit digest (FNV-1a) of `parts`, each followed by a 0 byte so that the split
/// between parts counts: the same on every machine and toolchain (std's `DefaultHasher` is not
/// promised to be), so that the gate file can record it ([`crate::gate::GateRecord`]).
pub fn digest(parts: &[&[u8]]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut hash = OFFSET_BASIS;
    for part in parts {
        for &byte in part.iter().chain(&[0]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(PRIME);
        }
    }
    hash
}

/// The file name under which a cache keeps what ptxas made of the single-entry module `text`
/// of `entry` for `arch`: the digest covers the module text, the ptxas version and the
/// architecture, so a changed kernel or another ptxas misses the cache.
pub fn cache_file_name(entry: &str, arch: &str, text: &[u8], ptxas_version: &str) -> String {
    let key = digest(&[text, ptxas_version.as_bytes(), arch.as_bytes()]);
    format!("{entry}.{arch}.{key:016x}")
}
