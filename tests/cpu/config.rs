use flash_attn::QSource::{Registers, SharedMemory};
use flash_attn::SmemLayout::{Padded, Swizzled};
use flash_attn::{
    architectures_of, default_kernel, for_each_candidate, for_each_gated_config,
    max_smem_per_block_of, sm90_overlaps_blocks, Dtype, Family, KernelSpec, TileConfig, Variant,
    CANDIDATE_BLOCK_M, CANDIDATE_BLOCK_N, CANDIDATE_DTYPES, CANDIDATE_FAMILIES,
    CANDIDATE_HEAD_DIMS, CANDIDATE_LAYOUTS, CANDIDATE_Q_SOURCES, CANDIDATE_STAGES,
    CANDIDATE_VARIANTS, CANDIDATE_WARPS, FORWARD_KERNELS, MODIFIED_TILES, SERVING_TILES,
    SM89_MAX_SMEM_PER_BLOCK, SM90_MAX_SMEM_PER_BLOCK, SM90_MODIFIED_TILES, SM90_ONE_MODIFIER_TILES,
    SM90_PAGED_TILES, SM90_PRODUCER_WARPS, SM90_SERVING_TILES, SUPPORTED_HEAD_DIMS,
};
use flash_attn::{default_api_kernels, KernelSet, BUILT_CONFIGS, KERNEL_SET};
use flash_attn_build::dispatch::{parse_dispatch_table, parse_fallback_kernels, shipping_set};
use flash_attn_build::gate::record_failures;
use flash_attn_tools::gate::committed_gate;

/// The data files the build read the shipping set from.
const DISPATCH_TABLE_FILE: &str = include_str!("../../host/dispatch-table.tsv");
const DISPATCH_TABLE_SM90A_FILE: &str = include_str!("../../host/dispatch-table-sm90a.tsv");
const FALLBACK_KERNELS_FILE: &str = include_str!("../../host/fallback-kernels.txt");

/// A default build compiles exactly the kernels the data files name (and the default API
/// runs); `FLASH_ATTN_KERNELS=all`, every configuration that passes the compile-time gates.
#[test]
fn the_build_compiled_the_set_it_says_it_did() {
    let mut gated = Vec::new();
    for_each_candidate(|_, verdict| {
        if let Ok(spec) = verdict {
            gated.push(spec);
        }
    });
    let names = |specs: &[KernelSpec]| -> Vec<String> {
        let mut names: Vec<String> = specs.iter().map(KernelSpec::to_string).collect();
        names.sort();
        names
    };
    let mut rows = parse_dispatch_table(DISPATCH_TABLE_FILE).unwrap();
    rows.extend(parse_dispatch_table(DISPATCH_TABLE_SM90A_FILE).unwrap());
    let mut shipping = shipping_set(&rows, &parse_fallback_kernels(FALLBACK_KERNELS_FILE));
    shipping.sort();
    match KERNEL_SET {
        KernelSet::Shipping => {
            // The dense kernels the data files name, and the whole space of the other variants
            // (serving, paged, modified).
            let whole: Vec<&KernelSpec> = gated
                .iter()
                .filter(|spec| spec.variant.ships_whole())
                .collect();
            let (built_whole, built_dense): (Vec<KernelSpec>, Vec<KernelSpec>) = BUILT_CONFIGS
                .iter()
                .partition(|spec| spec.variant.ships_whole());
            assert_eq!(names(&built_dense), shipping);
            assert_eq!(built_whole.iter().collect::<Vec<_>>(), whole);
            assert!(built_dense
                .iter()
                .all(|spec| spec.variant == Variant::Dense));
        }
        KernelSet::All => assert_eq!(BUILT_CONFIGS, gated.as_slice()),
    }
    // Either way, in entry order, and the default API's kernels are all in it and exposed.
    assert!(BUILT_CONFIGS.iter().all(|spec| gated.contains(spec)));
    let positions: Vec<usize> = BUILT_CONFIGS
        .iter()
        .map(|spec| gated.iter().position(|gated| gated == spec).unwrap())
        .collect();
    assert!(positions.windows(2).all(|pair| pair[0] < pair[1]));
    let mut default_api: Vec<String> = default_api_kernels()
        .iter()
        .map(|kernel| kernel.entry.to_owned())
        .collect();
    default_api.sort();
    assert_eq!(
        default_api, shipping,
        "the default API runs the shipping set"
    );
    assert!(FORWARD_KERNELS.len() >= shipping.len());
    assert_eq!(
        gated.len(),
        916,
        "the search space changed: update the README's counts"
    );
}

#[test]
fn entry_names_spell_out_their_spec() {
    for kernel in FORWARD_KERNELS {
        let KernelSpec {
            family,
            dtype,
            variant,
            tile,
        } = kernel.spec;
        let variant = match variant {
            Variant::Dense => "",
            Variant::Serving => "_serving",
            Variant::Paged => "_paged",
            Variant::Modified => "_mod",
            Variant::ServingModified => "_serving_mod",
            Variant::PagedModified => "_paged_mod",
            Variant::Alibi => "_alibi",
            Variant::Softcap => "_softcap",
        };
        let dtype = match dtype {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        };
        let layout = match tile.layout {
            Swizzled => "",
            Padded => "_pad",
        };
        let q_source = match tile.q_source {
            Registers => "",
            SharedMemory => "_qsmem",
        };
        let expected = match family {
            Family::Sm80 => format!(
                "flash_fwd_{dtype}_d{}_m{}_n{}_w{}_s{}{layout}{q_source}{variant}",
                tile.head_dim, tile.block_m, tile.block_n, tile.warps, tile.stages
            ),
            // Its tiles are always swizzled with Q in shared memory: the name leaves those out.
            Family::Sm90 => format!(
                "flash_fwd_{dtype}_d{}_m{}_n{}_w{}_s{}{variant}_sm90a",
                tile.head_dim, tile.block_m, tile.block_n, tile.warps, tile.stages
            ),
        };
        assert_eq!(kernel.entry, expected);
        assert_eq!(kernel.spec.to_string(), expected);
    }
}

/// Every gated spec has a name of its own (the data files and the gate name kernels by it),
/// the sm90 family's end in `_sm90a`, and the sm80 family's never do.
#[test]
fn entry_names_are_unique_and_the_sm90_familys_end_in_sm90a() {
    let mut names = std::collections::HashMap::new();
    for_each_gated_config(|spec| {
        let name = spec.to_string();
        assert_eq!(
            name.ends_with("_sm90a"),
            spec.family == Family::Sm90,
            "{name}"
        );
        if let Some(other) = names.insert(name.clone(), spec) {
            panic!("{name} names both {other:?} and {spec:?}");
        }
    });
    let tile = TileConfig::check_sm90(128, 128, 8, 2, 128, Swizzled, SharedMemory).unwrap();
    let spec = KernelSpec {
        family: Family::Sm90,
        dtype: Dtype::F16,
        variant: Variant::Dense,
        tile,
    };
    assert_eq!(spec.to_string(), "flash_fwd_f16_d128_m128_n128_w8_s2_sm90a");
    assert_eq!(
        names.get("flash_fwd_f16_d128_m128_n128_w8_s2_sm90a"),
        Some(&spec)
    );
}

/// The sm90 family's space: dense only, one warpgroup per 64 rows, swizzled with Q in shared
/// memory, every tile 1024-byte aligned and within sm_90a's 227 KiB (not the sm80 family's 99).
#[test]
fn the_sm90_family_has_dense_warpgroup_tiles_within_sm_90a_limits() {
    let mut sm90 = Vec::new();
    let mut rejected = Vec::new();
    for_each_candidate(|candidate, verdict| {
        if candidate.family != Family::Sm90 || candidate.variant != Variant::Dense {
            return;
        }
        match verdict {
            Ok(spec) => sm90.push(spec),
            Err(limit) => rejected.push((candidate, limit)),
        }
    });
    // 2 dtypes x head dims {32, 64, 96, 128, 160, 192, 224, 256} x block_m {64, 128, 192} x
    // block_n {64, 128} x stages {1, 2, 3}, and the warp-specialised tiles (a producer
    // warpgroup): 2 dtypes x head dims {64, 128, ..., 256} x block_m 128 x block_n {64, 128} x
    // stages {2, 3}, and 2 dtypes x head dim 64 x block_m 192 x block_n {64, 128} x stages {2,
    // 3}.
    assert_eq!(
        sm90.len() + rejected.len(),
        2 * 8 * 3 * 2 * 3 + 2 * 6 * 2 * 2 + 2 * 2 * 2
    );
    // Rejected only where sm_90a's shared memory is too small, where 12 warps (block_m 192)
    // cannot split a tile into whole passes of 16-byte copies, or for three stages where the
    // loop runs one block at a time (at most two slots: head dims 32 and 96).
    assert!(rejected.iter().all(|(candidate, limit)| {
        let tile = candidate.tile;
        let too_big = limit.contains("227 KiB") && tile.smem_bytes() > SM90_MAX_SMEM_PER_BLOCK;
        let no_split =
            limit.contains("whole passes") && tile.block_m == 192 && tile.producer_warps() == 0;
        let three_slots = limit.contains("three stages")
            && tile.stages == 3
            && !sm90_overlaps_blocks(tile.head_dim, tile.stages);
        too_big || no_split || three_slots
    }));
    assert!(sm90.iter().any(|spec| spec.tile.stages == 3));
    assert_eq!(SM90_MAX_SMEM_PER_BLOCK, 227 * 1024);
    assert_eq!(max_smem_per_block_of(Family::Sm90), SM90_MAX_SMEM_PER_BLOCK);
    assert_eq!(max_smem_per_block_of(Family::Sm80), SM89_MAX_SMEM_PER_BLOCK);
    assert!(sm90
        .iter()
        .any(|spec| spec.tile.smem_bytes() > SM89_MAX_SMEM_PER_BLOCK));
    for spec in &sm90 {
        let tile = spec.tile;
        assert_eq!(spec.variant, Variant::Dense);
        assert_eq!((tile.layout, tile.q_source), (Swizzled, SharedMemory));
        // One warp per 16 rows, or a producer warpgroup more where two consumer warpgroups
        // overlap their blocks, or at D=64 three.
        assert_eq!(tile.consumer_warps(), tile.block_m / 16);
        assert!(
            tile.producer_warps() == 0
                || (tile.producer_warps() == SM90_PRODUCER_WARPS
                    && (tile.block_m == 128 || (tile.block_m == 192 && tile.head_dim == 64))
                    && sm90_overlaps_blocks(tile.head_dim, tile.stages)),
            "{spec}"
        );
        for stage in 0..tile.stages {
            assert_eq!(tile.k_tile_offset(stage) % 1024, 0, "{spec}");
            assert_eq!(tile.v_tile_offset(stage) % 1024, 0, "{spec}");
        }
    }
    // D=96 is a swizzled sm90 tile (a 64-byte swizzle in that kernel); the sm80 family's
    // swizzle still needs multiples of 64.
    assert!(TileConfig::check_sm90(64, 64, 4, 2, 96, Swizzled, SharedMemory).is_ok());
    assert!(TileConfig::check(64, 64, 4, 2, 96, Swizzled, SharedMemory).is_err());
    assert!(TileConfig::check_sm90(64, 64, 4, 2, 96, Padded, SharedMemory).is_err());
    assert!(TileConfig::check_sm90(64, 64, 4, 2, 96, Swizzled, Registers).is_err());
    assert!(TileConfig::check_sm90(128, 64, 4, 2, 128, Swizzled, SharedMemory).is_err());
    // Its gate columns and PTX target: sm_90a alone.
    let columns: Vec<&str> = architectures_of(Family::Sm90)
        .map(|arch| arch.name)
        .collect();
    assert_eq!(columns, ["sm_90a"]);
    let sm80: Vec<&str> = architectures_of(Family::Sm80)
        .map(|arch| arch.name)
        .collect();
    assert_eq!(sm80, ["sm_80", "sm_89", "sm_90"]);
}

/// The split shared-memory address (a lane's part, then a compile-time XOR and add per row
/// group and chunk) is the layout's own chunk offset for every lane, step and row width, and
/// the swizzle is a permutation of each row's chunks.
#[test]
fn the_split_fragment_offset_is_the_layouts_chunk_offset() {
    for layout in CANDIDATE_LAYOUTS {
        for row_chunks in (4..=32).step_by(4) {
            if layout == Swizzled && row_chunks % 8 != 0 {
                continue;
            }
            for lane_row in 0..64 {
                let mut slots: Vec<usize> = (0..row_chunks)
                    .map(|chunk| layout.chunk_offset(lane_row, chunk, row_chunks))
                    .collect();
                slots.sort_unstable();
                let row_bytes = 16 * row_chunks + if layout == Padded { 16 } else { 0 };
                let row_start = lane_row * row_bytes;
                let expected: Vec<usize> = (0..row_chunks).map(|c| row_start + 16 * c).collect();
                assert_eq!(
                    slots, expected,
                    "{layout:?} row {lane_row} of {row_chunks} chunks"
                );
                for lane_chunk in 0..row_chunks {
                    let lane = layout.lane_offset(lane_row, lane_chunk, row_chunks);
                    for row_group in 0..8 {
                        for chunk in (0..row_chunks).filter(|chunk| {
                            chunk & lane_chunk == 0 && chunk + lane_chunk < row_chunks
                        }) {
                            let step = layout.step_offset(row_group, chunk, row_chunks);
                            let whole = layout.chunk_offset(
                                8 * row_group + lane_row,
                                chunk + lane_chunk,
                                row_chunks,
                            );
                            assert_eq!(
                                ((lane ^ step.flip) + step.add) as usize,
                                whole,
                                "{layout:?}, {row_chunks} chunks, lane row {lane_row}, lane \
                                 chunk {lane_chunk}, row group {row_group}, chunk {chunk}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn derived_quantities_of_the_default_tile() {
    let tile = TileConfig::new(64, 64, 4, 2, 64, Swizzled, Registers);
    assert_eq!(tile.threads(), 128);
    assert_eq!(tile.m_tiles(), 1);
    assert_eq!(tile.q_copies_per_thread(), 4);
    assert_eq!(tile.kv_copies_per_thread(), 4);
    // Q 8 KiB, then two stages of K and V at 8 KiB each.
    assert_eq!(tile.k_tile_offset(0), 8192);
    assert_eq!(tile.v_tile_offset(1), 8192 + 3 * 8192);
    assert_eq!(tile.smem_bytes(), 40 * 1024);
}

#[test]
fn every_exposed_tile_is_aligned_and_fits_its_familys_limit() {
    for kernel in FORWARD_KERNELS {
        let tile = kernel.spec.tile;
        assert!(
            tile.smem_bytes() <= max_smem_per_block_of(kernel.spec.family),
            "{}",
            kernel.entry
        );
        for stage in 0..tile.stages {
            assert_eq!(tile.k_tile_offset(stage) % 128, 0, "{}", kernel.entry);
            assert_eq!(tile.v_tile_offset(stage) % 128, 0, "{}", kernel.entry);
        }
    }
}

#[test]
#[should_panic(expected = "block_m must be a multiple of 16 * warps")]
fn a_block_m_that_leaves_a_warp_a_partial_tile_is_rejected() {
    TileConfig::new(48, 64, 2, 2, 64, Swizzled, Registers);
}

#[test]
#[should_panic(expected = "shared memory exceeds the sm_89 per-block limit")]
fn a_tile_over_the_shared_memory_limit_is_rejected() {
    TileConfig::new(128, 256, 8, 4, 128, Swizzled, Registers);
}

#[test]
#[should_panic(expected = "head_dim must be a multiple of 64 when swizzled")]
fn a_head_dim_that_breaks_the_swizzle_is_rejected() {
    TileConfig::new(64, 64, 4, 2, 80, Swizzled, Registers);
}

#[test]
#[should_panic(expected = "must split into whole passes of 16-byte copies per thread")]
fn a_tile_that_does_not_split_into_chunks_per_thread_is_rejected() {
    // 16 rows x 8 chunks = 128 chunks over 16 warps (512 threads).
    TileConfig::new(256, 16, 16, 2, 64, Swizzled, Registers);
}

#[test]
fn every_dtype_has_a_default_kernel_for_every_supported_head_dim_and_no_other() {
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for &head_dim in SUPPORTED_HEAD_DIMS {
            let kernel = default_kernel(dtype, head_dim).unwrap();
            assert_eq!(
                (kernel.spec.dtype, kernel.spec.tile.head_dim),
                (dtype, head_dim)
            );
        }
    }
    for kernel in FORWARD_KERNELS {
        assert!(
            SUPPORTED_HEAD_DIMS.contains(&kernel.spec.tile.head_dim),
            "{}",
            kernel.entry
        );
    }
}

#[test]
fn the_forward_pass_can_move_between_and_be_shared_by_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<flash_attn::FlashAttention>();
}

#[test]
fn a_padded_tile_adds_one_chunk_per_row() {
    let swizzled = TileConfig::new(64, 64, 4, 3, 64, Swizzled, Registers);
    let padded = TileConfig::new(64, 64, 4, 3, 64, Padded, Registers);
    assert_eq!(padded.smem_row_bytes(), swizzled.smem_row_bytes() + 16);
    // Q plus three stages of K and V: 64 rows each, 16 bytes of padding per row.
    assert_eq!(padded.smem_bytes(), swizzled.smem_bytes() + 7 * 64 * 16);
    // The padded layout needs no 128-byte swizzle groups, only whole MMA k-steps.
    assert!(TileConfig::check(64, 64, 4, 2, 32, Padded, Registers).is_ok());
    assert!(TileConfig::check(64, 64, 4, 2, 32, Swizzled, Registers).is_err());
    assert_eq!(
        TileConfig::check(64, 64, 4, 2, 72, Padded, Registers),
        Err("head_dim must be a multiple of 16 (the Q.K MMA k-step)")
    );
}

#[test]
fn one_stage_is_accepted_and_five_are_not() {
    assert!(TileConfig::check(64, 64, 4, 1, 64, Swizzled, SharedMemory).is_ok());
    assert!(TileConfig::check(64, 64, 4, 0, 64, Swizzled, Registers).is_err());
    assert!(TileConfig::check(64, 32, 4, 5, 64, Swizzled, Registers).is_err());
}

#[test]
fn the_space_spans_every_value_the_issue_asks_for() {
    assert_eq!(CANDIDATE_BLOCK_M, [64, 128]);
    assert_eq!(CANDIDATE_BLOCK_N, [32, 64, 128]);
    assert_eq!(CANDIDATE_WARPS, [4, 8]);
    assert_eq!(CANDIDATE_STAGES, [1, 2, 3]);
    assert_eq!(CANDIDATE_LAYOUTS, [Swizzled, Padded]);
    assert_eq!(CANDIDATE_Q_SOURCES, [Registers, SharedMemory]);
    assert_eq!(CANDIDATE_HEAD_DIMS, SUPPORTED_HEAD_DIMS);
    assert_eq!(CANDIDATE_DTYPES, [Dtype::F16, Dtype::Bf16]);
    assert_eq!(CANDIDATE_FAMILIES, [Family::Sm80, Family::Sm90]);
    assert_eq!(
        CANDIDATE_VARIANTS,
        [
            Variant::Dense,
            Variant::Serving,
            Variant::Paged,
            Variant::Modified,
            Variant::ServingModified,
            Variant::PagedModified,
            Variant::Alibi,
            Variant::Softcap
        ]
    );
}

/// Every candidate is accounted for: rejected by a compile-time gate with the limit it breaks,
/// or gated by ptxas (the committed file records the whole space) and then exposed if this
/// build compiled it and its record passes. Exposure is decided by the build; this re-derives
/// it from the same record.
#[test]
fn every_gated_configuration_is_exposed_unless_its_ptxas_record_fails() {
    let (_, gate) = committed_gate();
    let (mut candidates, mut gated) = (0, 0);
    for_each_candidate(|candidate, verdict| {
        candidates += 1;
        let Ok(spec) = verdict else { return };
        gated += 1;
        assert_eq!(spec, candidate);
        let entry = spec.to_string();
        let record = gate
            .iter()
            .find(|record| record.entry == entry)
            .unwrap_or_else(|| panic!("{entry} has no record in host/ptxas-gate.tsv"));
        let failures = record_failures(&spec, record);
        let exposed = FORWARD_KERNELS.iter().find(|kernel| kernel.entry == entry);
        match exposed {
            Some(kernel) => {
                assert!(
                    failures.is_empty(),
                    "{entry} is exposed but fails {failures:?}"
                );
                assert_eq!(kernel.spec, spec);
            }
            None => assert!(
                !failures.is_empty() || !BUILT_CONFIGS.contains(&spec),
                "{entry} was built and passes the gate but is not exposed"
            ),
        }
    });
    // Dense: dtype x (the full grid at head dims 64 and 128: block_m x block_n x warps x
    // stages x layout x Q source; the narrower space of each other head dim, counted by its
    // rule); serving and paged: dtype x their tiles (each of one variant and head dim);
    // modified: dtype x its tiles (each of one head dim).
    let narrower: usize = [32, 96, 160, 192, 224, 256]
        .into_iter()
        .map(|head_dim| {
            let block_ns: &[usize] = if head_dim <= 96 {
                &[32, 64, 128]
            } else {
                &[32, 64]
            };
            // (block_m, warps) with at most 32 * 128 / head_dim rows per warp.
            let block_m_warps = [(64, 4), (64, 8), (128, 4), (128, 8)]
                .into_iter()
                .filter(|&(block_m, warps)| block_m / warps * head_dim <= 32 * 128)
                .count();
            block_m_warps * block_ns.len() * CANDIDATE_STAGES.len() * 2
        })
        .sum();
    // The serving and paged tiles are a list of their own (each at both element types); the
    // sm90 family's dense tiles: head dim x block_m x block_n x stages (1 to 3), and the
    // warp-specialised ones (a producer warpgroup more): two consumer warpgroups at six head
    // dims, three at D=64, each x block_n x stages (2 and 3).
    assert_eq!(
        candidates,
        2 * (2 * 2 * 3 * 2 * 3 * 2 * 2 + narrower)
            + 2 * SERVING_TILES.len()
            + 2 * MODIFIED_TILES.len()
            + 2 * (8 * 3 * 2 * 3 + 6 * 2 * 2 + 2 * 2)
            + 2 * SM90_MODIFIED_TILES.len()
            + 2 * 2 * SM90_ONE_MODIFIER_TILES.len()
            + 2 * SM90_SERVING_TILES.len()
            + 2 * SM90_PAGED_TILES.len()
    );
    assert_eq!(gate.len(), gated, "one gate record per compiled entry");
    // The exposed kernels are in entry order, each at its index.
    for (index, kernel) in FORWARD_KERNELS.iter().enumerate() {
        assert_eq!(kernel.index(), index);
    }
}

#[test]
fn a_raw_stream_is_the_driver_handle_from_any_binding() {
    use std::ffi::c_void;

    use flash_attn::RawStream;
    let handle = 0x1000 as *mut c_void;
    assert_eq!(RawStream::from(handle), RawStream(handle));
    let cust_handle: cust::sys::CUstream = handle.cast();
    assert_eq!(RawStream::from(cust_handle), RawStream(handle));
}
