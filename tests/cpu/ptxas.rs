//! The ptxas gate. The committed `host/ptxas-gate.tsv` records the whole search space and
//! decides which of the built entries are exposed. Each record names the PTX it was measured on
//! (a digest per architecture): every entry this build compiled (the shipping set by default,
//! all 320 with `FLASH_ATTN_KERNELS=all`) must have a record of its PTX, which needs no ptxas.
//! ptxas is deterministic, so such a record stays what ptxas reports; that is checked again
//! with ptxas on the shipping set wherever ptxas is found. ptxas is looked up in `$PTXAS`, then
//! on `PATH`, then under `/usr/local/cuda/bin`. Without it that check says so and passes, unless
//! `FLASH_ATTN_REQUIRE_PTXAS` is set (CI sets it).

use flash_attn::QSource::Registers;
use flash_attn::SmemLayout::Swizzled;
use flash_attn::{
    architecture_named, default_api_kernels, Dtype, Family, KernelSpec, QSource, SmemLayout,
    TileConfig, Variant, ARCHITECTURES, FORWARD_KERNELS,
};
use flash_attn_build::gate::{
    blocks_per_sm, format_gate_file, gate_failures, parse_gate_file, record_failures, GateColumn,
    GateRecord,
};
use flash_attn_build::ptxas::{digest, find_ptxas, parse_report, Resources};
use flash_attn_tools::gate::{built_ptx_digests, committed_gate, measure_ptxas_gate};

const REGENERATE: &str =
    "regenerate it with `FLASH_ATTN_KERNELS=all cargo run -p flash-attn-tools \
    --bin flash-attn-configs -- --write-gate host/ptxas-gate.tsv` and rebuild";

#[test]
fn every_built_entry_has_a_gate_record_of_the_ptx_this_build_compiled() {
    let (_, committed) = committed_gate();
    let mut stale = Vec::new();
    for (entry, digests) in built_ptx_digests().unwrap() {
        match committed.iter().find(|record| record.entry == entry) {
            Some(record) if record.ptx_digests() == digests => {}
            Some(record) => stale.push(format!(
                "{entry}: recorded from PTX {:x?}, built {digests:x?}",
                record.ptx_digests()
            )),
            None => stale.push(format!("{entry}: no record")),
        }
    }
    assert!(
        stale.is_empty(),
        "host/ptxas-gate.tsv records other PTX than this build compiled: {REGENERATE}\n{}",
        stale.join("\n")
    );
}

#[test]
fn ptxas_reports_now_what_the_committed_gate_records_for_the_shipping_set() {
    let Some(ptxas) = find_ptxas() else {
        assert!(
            std::env::var_os("FLASH_ATTN_REQUIRE_PTXAS").is_none(),
            "FLASH_ATTN_REQUIRE_PTXAS is set but no ptxas was found (set PTXAS or PATH)"
        );
        eprintln!("skipping the ptxas gate check: no ptxas found (set PTXAS=/path/to/ptxas)");
        return;
    };
    let shipping: Vec<&str> = default_api_kernels()
        .iter()
        .map(|kernel| kernel.entry)
        .collect();
    let (version, measured) =
        measure_ptxas_gate(&ptxas, |entry| shipping.contains(&entry)).unwrap();
    assert_eq!(measured.len(), shipping.len());
    let (committed_version, committed) = committed_gate();
    let mut stale = Vec::new();
    for new in &measured {
        let old = committed
            .iter()
            .find(|old| old.entry == new.entry)
            .unwrap_or_else(|| panic!("{}: no record in host/ptxas-gate.tsv", new.entry));
        let spec = spec_of(&new.entry);
        let verdict_changed =
            record_failures(&spec, old).is_empty() != record_failures(&spec, new).is_empty();
        // Another ptxas may allocate registers differently: then only the verdicts must agree.
        if verdict_changed || (version == committed_version && old != new) {
            stale.push(format!(
                "{}: committed {:?}, measured {:?}",
                new.entry, old, new
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "host/ptxas-gate.tsv (from {committed_version}) is stale against {version}: {REGENERATE}\n{}",
        stale.join("\n")
    );
}

/// The spec of a gated entry, found by name in the space.
fn spec_of(entry: &str) -> KernelSpec {
    let mut found = None;
    flash_attn::for_each_gated_config(|spec| {
        if spec.to_string() == entry {
            found = Some(spec);
        }
    });
    found.unwrap_or_else(|| panic!("{entry} is not a gated configuration"))
}

#[test]
fn every_exposed_kernel_has_no_spill_no_stack_and_fits_on_every_architecture_of_its_family() {
    let (_, gate) = committed_gate();
    for kernel in FORWARD_KERNELS {
        let record = gate
            .iter()
            .find(|record| record.entry == kernel.entry)
            .unwrap();
        let columns: Vec<&str> = record
            .columns
            .iter()
            .map(|column| column.arch.name)
            .collect();
        let family: Vec<&str> = flash_attn::architectures_of(kernel.spec.family)
            .map(|arch| arch.name)
            .collect();
        assert_eq!(columns, family, "{}", kernel.entry);
        for GateColumn {
            arch,
            resources: used,
            ..
        } in &record.columns
        {
            assert_eq!(
                (used.spill_stores, used.spill_loads, used.stack_frame),
                (0, 0, 0),
                "{} on {}",
                kernel.entry,
                arch.name
            );
            assert!(
                used.registers <= arch.max_registers_per_thread && used.registers > 0,
                "{}",
                kernel.entry
            );
            assert!(blocks_per_sm(&kernel.spec.tile, used.registers, arch).0 >= 1);
        }
    }
}

/// The split-KV rule counts the sm90 family's serving and paged kernels as one resident block
/// per SM (the host's `split_blocks_per_sm`): on the committed gate each fits exactly one on
/// sm_90a, so a grid of one block per SM fills the GPU.
#[test]
fn every_sm90_serving_kernel_keeps_one_block_per_sm() {
    let (_, gate) = committed_gate();
    let serving = FORWARD_KERNELS.iter().filter(|kernel| {
        kernel.spec.family == Family::Sm90
            && matches!(kernel.spec.variant, Variant::Serving | Variant::Paged)
    });
    let mut count = 0;
    for kernel in serving {
        let record = gate
            .iter()
            .find(|record| record.entry == kernel.entry)
            .unwrap();
        for column in &record.columns {
            let blocks = blocks_per_sm(&kernel.spec.tile, column.resources.registers, column.arch);
            assert_eq!(
                blocks.0, 1,
                "{} on {}: {blocks:?}",
                kernel.entry, column.arch.name
            );
        }
        count += 1;
    }
    assert_eq!(
        count, 46,
        "two element types, twelve serving tiles and eleven paged"
    );
}

/// A modified kernel runs a problem in its dense twin's place (the dense kernel of its tile),
/// so it must not lose the blocks per SM its twin keeps resident: the 8-warp sm90 modified
/// kernels at D=64 and D=96 took one block per SM to their twins' two (131 and 156 registers
/// against 123 and 121), and the sm80 D=32 modified and serving kernels three to their twins'
/// four (141-157 against 121-126), until their launch bounds asked for their twins' count
/// (`KernelSpec::min_blocks_per_sm`, BENCHMARKS.md logs 50 and 51). Checked on the committed
/// gate, which records the whole search space.
#[test]
fn every_kernel_bounded_above_one_block_per_sm_fits_as_many_as_its_dense_twin() {
    let (_, gate) = committed_gate();
    let blocks = |spec: KernelSpec| -> Vec<usize> {
        let entry = spec.to_string();
        let record = gate
            .iter()
            .find(|record| record.entry == entry)
            .unwrap_or_else(|| panic!("{entry} has no record in host/ptxas-gate.tsv"));
        record
            .columns
            .iter()
            .map(|column| blocks_per_sm(&spec.tile, column.resources.registers, column.arch).0)
            .collect()
    };
    let mut bounded = Vec::new();
    flash_attn::for_each_gated_config(|spec| {
        if spec.min_blocks_per_sm() > 1 {
            bounded.push(spec);
        }
    });
    // The sm90 modified tiles up to D=96 but the warp-specialised one (two dtypes), the sm90
    // ALiBi and softcap tile of that kind (D=64), and the sm80 D=32 modified, serving,
    // serving-modified and paged-modified kernels.
    assert_eq!(bounded.len(), 2 * 2 + 2 * 2 + 2 * 4, "{bounded:?}");
    for spec in bounded {
        let dense = KernelSpec {
            variant: Variant::Dense,
            ..spec
        };
        assert_eq!(
            blocks(spec),
            blocks(dense),
            "{spec} against {dense} (blocks per SM per architecture)"
        );
    }
}

#[test]
fn the_gate_rejects_spills_stack_frames_and_register_overruns() {
    let tile = TileConfig::new(64, 64, 4, 3, 64, Swizzled, Registers);
    let [_, ada, hopper, _] = &ARCHITECTURES;
    let clean = Resources {
        registers: 168,
        ..Resources::default()
    };
    assert!(gate_failures(&tile, hopper, &clean).is_empty());
    let spilled = Resources {
        spill_stores: 8,
        spill_loads: 12,
        stack_frame: 24,
        ..clean
    };
    assert_eq!(
        gate_failures(&tile, ada, &spilled),
        ["spills on sm_89 (8 B stores, 12 B loads)"]
    );
    let stacked = Resources {
        stack_frame: 16,
        ..clean
    };
    assert_eq!(
        gate_failures(&tile, hopper, &stacked),
        ["a 16 B stack frame on sm_90"]
    );
    let overrun = Resources {
        registers: 256,
        ..clean
    };
    assert_eq!(
        gate_failures(&tile, hopper, &overrun),
        ["256 registers on sm_90"]
    );
}

#[test]
fn the_gate_file_round_trips_with_each_familys_columns() {
    let arch = |name| architecture_named(name).unwrap();
    let column = |name, registers, ptx_digest| GateColumn {
        arch: arch(name),
        resources: Resources {
            registers,
            ..Resources::default()
        },
        ptx_digest,
    };
    let records = vec![
        GateRecord {
            entry: "flash_fwd_f16_d64_m64_n64_w4_s3".to_owned(),
            columns: vec![
                column("sm_80", 168, digest(&[b"sm_80 text"])),
                column("sm_89", 166, digest(&[b"sm_89 text"])),
                GateColumn {
                    resources: Resources {
                        registers: 167,
                        stack_frame: 8,
                        spill_stores: 4,
                        spill_loads: 12,
                    },
                    ..column("sm_90", 0, u64::MAX)
                },
            ],
        },
        GateRecord {
            entry: "flash_fwd_bf16_d128_m128_n32_w4_s2_qsmem".to_owned(),
            columns: vec![
                column("sm_80", 255, 0),
                column("sm_89", 255, 1),
                column("sm_90", 255, 0x0123_4567_89ab_cdef),
            ],
        },
        GateRecord {
            entry: "flash_fwd_f16_d128_m128_n128_w8_s2_sm90a".to_owned(),
            columns: vec![column("sm_90a", 154, 7)],
        },
    ];
    let text = format_gate_file("Cuda compilation tools, release 12.9, V12.9.86", &records);
    // The sm80 family's records keep their 15 columns under the header they always had.
    assert!(text.contains("\n# entry\tsm_80_registers\t"));
    assert!(text.contains("\n# entry\tsm_90a_registers\tsm_90a_stack\tsm_90a_spill_stores\tsm_90a_spill_loads\tsm_90a_ptx\n"));
    let (version, parsed) = parse_gate_file(&text).unwrap();
    assert_eq!(version, "Cuda compilation tools, release 12.9, V12.9.86");
    assert_eq!(parsed, records);
    let header = "ptxas\tv\n# entry\tsm_90a_registers\tsm_90a_stack\tsm_90a_spill_stores\tsm_90a_spill_loads\tsm_90a_ptx\n";
    assert!(parse_gate_file(&format!("{header}flash_fwd_x\t1\t0\t0\t0\t0\n")).is_ok());
    assert!(
        parse_gate_file(&format!("{header}flash_fwd_x\t1\t2\n")).is_err(),
        "fewer fields than the header's columns"
    );
    assert!(
        parse_gate_file(&format!(
            "{}flash_fwd_x\t1\t0\t0\t0\t0\n",
            header.replace("ptxas\tv\n", "")
        ))
        .is_err(),
        "no version line"
    );
    assert!(
        parse_gate_file(&format!("{header}flash_fwd_x\t1\t0\t0\t0\tzz\n")).is_err(),
        "a digest that is not hex"
    );
    assert!(
        parse_gate_file("ptxas\tv\n# entry\tsm_99_registers\n").is_err(),
        "a column of an unknown architecture"
    );
}

#[test]
fn an_sm90_record_is_gated_on_sm_90a_alone_with_its_227_kib() {
    let tile = TileConfig::check_sm90(
        128,
        64,
        8,
        2,
        256,
        SmemLayout::Swizzled,
        QSource::SharedMemory,
    )
    .unwrap();
    let spec = KernelSpec {
        family: Family::Sm90,
        dtype: Dtype::F16,
        variant: Variant::Dense,
        tile,
    };
    let sm90a = architecture_named("sm_90a").unwrap();
    let used = Resources {
        registers: 128,
        ..Resources::default()
    };
    let record = GateRecord {
        entry: spec.to_string(),
        columns: vec![GateColumn {
            arch: sm90a,
            resources: used,
            ptx_digest: 0,
        }],
    };
    // 192 KiB: over every sm80 architecture's 99 to 163 KiB, within sm_90a's 227.
    assert!(tile.smem_bytes() > 163 * 1024);
    assert_eq!(record_failures(&spec, &record), Vec::<String>::new());
    assert_eq!(blocks_per_sm(&tile, 128, sm90a), (1, "shared memory"));
    // An sm80 family's columns are not an sm90 entry's record.
    let sm80_columns = GateRecord {
        columns: ["sm_80", "sm_89", "sm_90"]
            .map(|name| GateColumn {
                arch: architecture_named(name).unwrap(),
                resources: used,
                ptx_digest: 0,
            })
            .to_vec(),
        ..record.clone()
    };
    assert_eq!(record_failures(&spec, &sm80_columns).len(), 1);
    let spilled = GateRecord {
        columns: vec![GateColumn {
            resources: Resources {
                spill_stores: 4,
                ..used
            },
            ..record.columns[0]
        }],
        ..record
    };
    assert_eq!(
        record_failures(&spec, &spilled),
        ["spills on sm_90a (4 B stores, 0 B loads)"]
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
    let [ampere, ada, hopper, _] = ARCHITECTURES;
    // 168 registers: 21504 per block, 3 blocks in 65536; shared memory allows 4 on Hopper.
    assert_eq!(blocks_per_sm(&tile, 168, &hopper), (3, "registers"));
    // 169 rounds up to 176: 22528 per block, only 2 fit.
    assert_eq!(blocks_per_sm(&tile, 169, &hopper), (2, "registers"));
    // Ada has 100 KiB per SM: one 57 KiB block.
    assert_eq!(blocks_per_sm(&tile, 64, &ada), (1, "shared memory"));
    // The A100 has 164 KiB per SM: two.
    assert_eq!(blocks_per_sm(&tile, 64, &ampere), (2, "shared memory"));
}

#[test]
fn the_digest_is_fnv_1a_over_each_part_and_a_separator() {
    // FNV-1a 64 of the bytes "a\0".
    assert_eq!(digest(&[b"a"]), 0x089b_e207_b544_f1e4);
    assert_eq!(digest(&[]), 0xcbf2_9ce4_8422_2325, "the offset basis");
    assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
}
