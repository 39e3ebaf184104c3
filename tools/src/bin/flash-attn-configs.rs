//! Lists the candidate space of the forward kernel's specs and both of its gates (the table
//! shows each spec's element type and tile; an sm90 family spec has only its sm_90a column): for
//! each candidate, whether the compile-time gates accept it (and if not, the limit it breaks);
//! for each accepted one, its registers, spills and theoretical occupancy on sm_89 and sm_90
//! from the ptxas gate (`host/ptxas-gate.tsv`, read at compile time, so no ptxas is needed),
//! and whether the crate exposes it, why the ptxas gate rejects it, or that this build did not
//! compile it (a default build compiles only the shipping set: build with
//! `FLASH_ATTN_KERNELS=all` for the whole space).
//!
//! ```text
//! flash-attn-configs                      # the table
//! flash-attn-configs --write-gate FILE    # re-measure the ptxas gate (needs ptxas) into FILE
//! ```

use std::process::ExitCode;

use flash_attn::{
    for_each_candidate, Architecture, KernelSet, QSource, TileConfig, ARCHITECTURES, BUILT_CONFIGS,
    FORWARD_KERNELS, KERNEL_SET,
};
use flash_attn_build::gate::{blocks_per_sm, format_gate_file, record_failures, GateRecord};
use flash_attn_build::ptxas::{find_ptxas, ptxas_version, Resources};
use flash_attn_tools::gate::{built_ptx_digests, committed_gate, measure_ptxas_gate};

const USAGE: &str = "usage: flash-attn-configs [--write-gate FILE]
  (no argument)      list every candidate configuration, its gates and its resources
  --write-gate FILE  assemble every entry with ptxas ($PTXAS, PATH or /usr/local/cuda/bin) for
                     every architecture of its family and write the gate file
                     (host/ptxas-gate.tsv); rebuild to apply it. Entries whose committed record is
                     of the same PTX and ptxas are kept, not measured again. Needs a build of the
                     whole space (FLASH_ATTN_KERNELS=all)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            list();
            ExitCode::SUCCESS
        }
        [flag, path] if flag == "--write-gate" => match write_gate(path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("flash-attn-configs: {error}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn write_gate(path: &str) -> Result<(), String> {
    if KERNEL_SET != KernelSet::All {
        return Err(format!(
            "this build compiled only the {KERNEL_SET:?} set ({} entries), and the gate file \
             records the whole space: rebuild with FLASH_ATTN_KERNELS=all (`FLASH_ATTN_KERNELS=all \
             cargo run -p flash-attn-tools --bin flash-attn-configs -- --write-gate {path}`)",
            BUILT_CONFIGS.len()
        ));
    }
    let ptxas = find_ptxas().ok_or("no ptxas found: set PTXAS=/path/to/ptxas")?;
    let start = std::time::Instant::now();
    // ptxas gives the same resources for the same module text: a committed record of this
    // ptxas whose PTX digests are the built modules' is kept as it is, so that a new family or
    // a changed kernel costs ptxas time only for the entries whose PTX changed.
    let (committed_version, committed) = committed_gate();
    let current: Vec<GateRecord> = if committed_version == ptxas_version(&ptxas)? {
        let built = built_ptx_digests()?;
        committed
            .into_iter()
            .filter(|record| {
                built.iter().any(|(entry, digests)| {
                    *entry == record.entry && *digests == record.ptx_digests()
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let is_current = |entry: &str| current.iter().any(|record| record.entry == entry);
    let (version, measured) = measure_ptxas_gate(&ptxas, |entry| !is_current(entry))?;
    let measured_count = measured.len();
    // In entry order, as the build lists them.
    let mut records: Vec<GateRecord> = current.into_iter().chain(measured).collect();
    let order: Vec<String> = BUILT_CONFIGS.iter().map(|spec| spec.to_string()).collect();
    records.sort_by_key(|record| order.iter().position(|entry| *entry == record.entry));
    eprintln!(
        "measured {measured_count} entries with ptxas; kept {} records of unchanged PTX",
        records.len() - measured_count
    );
    std::fs::write(path, format_gate_file(&version, &records))
        .map_err(|error| format!("cannot write {path}: {error}"))?;
    eprintln!(
        "wrote {} records ({version}) to {path} in {:.0} s; rebuild to expose what it accepts",
        records.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn list() {
    println!(
        "{:<5} {:>4} {:>4} {:>5} {:>6} {:>4} {:<8} {:<9} {:>8}  {:<8} {}  entry, or why rejected",
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
        ARCHITECTURES
            .map(|arch| format!("{:<24}", format!("{} regs/spill/blocks", arch.name)))
            .join(" ")
    );
    let (gate_version, gate) = committed_gate();
    let (mut candidates, mut compile_rejected, mut ptxas_rejected, mut ungated, mut not_built) =
        (0, 0, 0, 0, 0);
    for_each_candidate(|candidate, verdict| {
        candidates += 1;
        let none = || "-".to_owned();
        let (smem, columns, status, reason) = match verdict {
            Err(limit) => {
                compile_rejected += 1;
                (
                    none(),
                    ARCHITECTURES.map(|_| none()),
                    "rejected",
                    limit.to_owned(),
                )
            }
            Ok(spec) => {
                let (entry, tile) = (spec.to_string(), spec.tile);
                let record = gate.iter().find(|record| record.entry == entry);
                // A column per architecture of the table; `-` for those of another family.
                let columns = ARCHITECTURES.map(|arch| {
                    record
                        .and_then(|record| {
                            record
                                .columns
                                .iter()
                                .find(|column| column.arch.name == arch.name)
                        })
                        .map_or_else(none, |column| {
                            resources(&tile, &column.resources, column.arch)
                        })
                });
                let exposed = FORWARD_KERNELS.iter().any(|kernel| kernel.entry == entry);
                let built = BUILT_CONFIGS.contains(&spec);
                let (status, reason) = match (record, exposed) {
                    (_, true) => ("exposed", entry),
                    (Some(record), false) if !record_failures(&spec, record).is_empty() => {
                        ptxas_rejected += 1;
                        ("ptxas", record_failures(&spec, record).join("; "))
                    }
                    (_, false) if !built => {
                        not_built += 1;
                        (
                            "unbuilt",
                            format!("{entry}: not in this build's {KERNEL_SET:?} set"),
                        )
                    }
                    (_, false) => {
                        ungated += 1;
                        ("ungated", format!("{entry}: not in host/ptxas-gate.tsv"))
                    }
                };
                let smem = format!("{:.0}", tile.smem_bytes() as f64 / 1024.0);
                (smem, columns, status, reason)
            }
        };
        println!(
            "{:<5} {:>4} {:>4} {:>5} {:>6} {:>4} {:<8} {:<9} {smem:>8}  {status:<8} {}  {reason}",
            format!("{:?}", candidate.dtype),
            candidate.tile.head_dim,
            candidate.tile.block_m,
            candidate.tile.block_n,
            candidate.tile.warps,
            candidate.tile.stages,
            format!("{:?}", candidate.tile.layout),
            match candidate.tile.q_source {
                QSource::Registers => "registers",
                QSource::SharedMemory => "shared",
            },
            columns.map(|column| format!("{column:<24}")).join(" ")
        );
    });
    println!(
        "{candidates} candidates: {compile_rejected} rejected by the compile-time gates, {} \
         pass them; of those, {ptxas_rejected} rejected by the ptxas gate ({gate_version}), \
         {ungated} not gated, {not_built} passing it but not compiled by this build (the \
         {KERNEL_SET:?} set, {} entries; FLASH_ATTN_KERNELS=all compiles them all), {} exposed \
         (FORWARD_KERNELS).",
        candidates - compile_rejected,
        BUILT_CONFIGS.len(),
        FORWARD_KERNELS.len()
    );
}

/// `registers/spill bytes/blocks per SM (limiting resource)` of a gated entry on `arch`.
fn resources(tile: &TileConfig, used: &Resources, arch: &Architecture) -> String {
    let (blocks, limit) = blocks_per_sm(tile, used.registers, arch);
    format!(
        "{}/{}/{} ({})",
        used.registers,
        used.spill_stores + used.spill_loads,
        blocks,
        limit
    )
}
