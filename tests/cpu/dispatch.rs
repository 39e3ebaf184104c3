//! The default API's kernel choice, without a GPU: the dispatch key (key-length bucket and grid
//! size), the lookup and its fallbacks, and the committed dispatch table (coverage, consistency
//! with the compiled kernels, the data file).

use flash_attn::{
    default_kernel, dispatch_entry, dispatch_kernel, dispatch_table, kernel_named, supports,
    AttentionShape, DispatchEntry, Dtype, Error, ForwardKernel, ForwardOptions, GridSize,
    SeqBucket, FORWARD_KERNELS, NOT_TUNED, SMALL_GRID_TILES_PER_SM, SUPPORTED_HEAD_DIMS,
};

use flash_attn_build::dispatch::parse_dispatch_table;
use flash_attn_tools::tuning::{render_dispatch_table, updated_table};

use crate::H100_SM_COUNT;

#[test]
fn key_length_buckets_have_inclusive_upper_bounds() {
    for (seq_len_kv, bucket) in [
        (1, SeqBucket::UpTo128),
        (128, SeqBucket::UpTo128),
        (129, SeqBucket::UpTo256),
        (256, SeqBucket::UpTo256),
        (257, SeqBucket::UpTo512),
        (512, SeqBucket::UpTo512),
        (513, SeqBucket::UpTo1024),
        (1024, SeqBucket::UpTo1024),
        (1025, SeqBucket::UpTo2048),
        (2048, SeqBucket::UpTo2048),
        (2049, SeqBucket::Above2048),
        (1 << 30, SeqBucket::Above2048),
    ] {
        assert_eq!(SeqBucket::of(seq_len_kv), bucket, "seq_len_kv {seq_len_kv}");
    }
    assert_eq!(SeqBucket::Above2048.upper_bound(), None);
}

#[test]
fn the_seed_shape_is_a_small_grid_on_an_h100_and_the_larger_s512_shapes_large() {
    let seed = AttentionShape::new(4, 8, 512, 64);
    assert_eq!(GridSize::query_tiles(&seed), 256);
    assert_eq!(GridSize::of(&seed, H100_SM_COUNT), GridSize::Small);
    for (batch, heads, tiles) in [(16, 16, 2048), (32, 16, 4096)] {
        let shape = AttentionShape::new(batch, heads, 512, 64);
        assert_eq!(GridSize::query_tiles(&shape), tiles);
        assert_eq!(GridSize::of(&shape, H100_SM_COUNT), GridSize::Large);
    }
}

#[test]
fn the_grid_is_small_up_to_four_query_tiles_per_sm() {
    assert_eq!(SMALL_GRID_TILES_PER_SM, 4);
    let grid = |heads_q, seq_len_q| {
        let shape = AttentionShape {
            heads_q,
            seq_len_q,
            ..AttentionShape::new(1, 1, 512, 64)
        };
        GridSize::of(&shape, H100_SM_COUNT)
    };
    // 4 x 132 = 528 tiles; a part of a 64-row tile counts as a whole one.
    assert_eq!(grid(528, 64), GridSize::Small);
    assert_eq!(grid(529, 64), GridSize::Large);
    assert_eq!(grid(264, 128), GridSize::Small);
    assert_eq!(grid(264, 129), GridSize::Large);
    assert_eq!(grid(528, 1), GridSize::Small);
    // The boundary moves with the device.
    let shape = AttentionShape::new(1, 529, 64, 64);
    assert_eq!(GridSize::of(&shape, H100_SM_COUNT + 1), GridSize::Small);
    // Only the queries make tiles: a decode step over long keys is a small grid.
    let decode = AttentionShape {
        seq_len_q: 1,
        seq_len_kv: 1 << 20,
        ..AttentionShape::new(8, 32, 1, 128)
    };
    assert_eq!(GridSize::of(&decode, H100_SM_COUNT), GridSize::Small);
    // Sizes beyond what a launch accepts saturate instead of overflowing.
    let huge = AttentionShape::new(usize::MAX, usize::MAX, usize::MAX, 64);
    assert_eq!(GridSize::of(&huge, H100_SM_COUNT), GridSize::Large);
}

fn entry(grid: GridSize, kernel: &'static ForwardKernel) -> DispatchEntry {
    DispatchEntry {
        head_dim: 64,
        dtype: Dtype::F16,
        causal: false,
        bucket: SeqBucket::UpTo512,
        grid,
        kernel,
        margin_percent: 0.0,
        confirmed: false,
        measured_on: "test",
    }
}

#[test]
fn a_missing_grid_size_falls_back_to_the_other_one_of_the_same_key() {
    let small_kernel = kernel_named("flash_fwd_f16_d64_m64_n128_w4_s2");
    let large_kernel = kernel_named("flash_fwd_f16_d64_m64_n64_w4_s3");
    let (seed, wide) = (
        AttentionShape::new(4, 8, 512, 64),
        AttentionShape::new(16, 16, 512, 64),
    );
    let lookup = |table, shape: &AttentionShape| {
        dispatch_entry(table, Dtype::F16, shape, false, H100_SM_COUNT).map(|e| e.kernel)
    };
    let both = [
        entry(GridSize::Small, small_kernel),
        entry(GridSize::Large, large_kernel),
    ];
    assert_eq!(lookup(&both, &seed), Some(small_kernel));
    assert_eq!(lookup(&both, &wide), Some(large_kernel));
    let large_only = [entry(GridSize::Large, large_kernel)];
    assert_eq!(lookup(&large_only, &seed), Some(large_kernel));
    let small_only = [entry(GridSize::Small, small_kernel)];
    assert_eq!(lookup(&small_only, &wide), Some(small_kernel));
    // No fallback across the other dimensions of the key.
    for (dtype, shape, causal) in [
        (Dtype::Bf16, seed, false),
        (Dtype::F16, seed, true),
        (Dtype::F16, AttentionShape::new(4, 8, 1024, 64), false),
        (Dtype::F16, AttentionShape::new(4, 8, 512, 128), false),
    ] {
        assert_eq!(
            dispatch_entry(&both, dtype, &shape, causal, H100_SM_COUNT),
            None,
            "{dtype:?} {shape:?} causal={causal}"
        );
    }
    // Where the compiled table has no entry at all: the default kernel, or its error.
    assert!(matches!(
        dispatch_kernel(
            Dtype::F16,
            &AttentionShape::new(4, 8, 512, 100),
            false,
            H100_SM_COUNT
        ),
        Err(Error::InvalidHeadDim { head_dim: 100 })
    ));
}

#[test]
fn kernels_named_in_const_tables_are_the_compiled_ones() {
    // A fallback: in every build's set.
    const NAMED: &ForwardKernel = kernel_named("flash_fwd_bf16_d128_m64_n64_w4_s2");
    assert_eq!(NAMED.entry, "flash_fwd_bf16_d128_m64_n64_w4_s2");
    for (index, kernel) in FORWARD_KERNELS.iter().enumerate() {
        assert_eq!(kernel.index(), index);
        assert_eq!(kernel_named(kernel.entry), kernel);
    }
}

#[test]
fn the_dispatch_table_has_one_entry_per_key_with_a_matching_compiled_kernel() {
    let table = dispatch_table();
    let mut expected = 0;
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for &head_dim in SUPPORTED_HEAD_DIMS {
            for causal in [false, true] {
                for bucket in SeqBucket::ALL {
                    for grid in GridSize::ALL {
                        expected += 1;
                        let key = (dtype, head_dim, causal, bucket, grid);
                        let matching: Vec<_> = table
                            .iter()
                            .filter(|e| (e.dtype, e.head_dim, e.causal, e.bucket, e.grid) == key)
                            .collect();
                        assert_eq!(matching.len(), 1, "{key:?}");
                        let entry = matching[0];
                        let kernel = entry.kernel;
                        assert_eq!(FORWARD_KERNELS[kernel.index()], *kernel);
                        assert_eq!(
                            (kernel.spec.dtype, kernel.spec.tile.head_dim),
                            (dtype, head_dim)
                        );
                        assert!(entry.margin_percent >= 0.0, "{entry:?}");
                        assert!(!entry.measured_on.is_empty(), "{entry:?}");
                        assert!(
                            !entry.confirmed || entry.measured_on != NOT_TUNED,
                            "{entry:?}"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(table.len(), expected, "entries outside the supported set");
}

#[test]
fn untuned_entries_hold_what_the_lookup_would_fall_back_to() {
    // What the generated file's header promises for entries no tuner run has measured: the
    // kernel of the same key with the other grid size where that one is tuned, else the first
    // compiled kernel.
    let table = dispatch_table();
    for entry in table.iter().filter(|e| e.measured_on == NOT_TUNED) {
        let other = table
            .iter()
            .find(|o| {
                (o.dtype, o.head_dim, o.causal, o.bucket, o.grid)
                    == (
                        entry.dtype,
                        entry.head_dim,
                        entry.causal,
                        entry.bucket,
                        entry.grid.other(),
                    )
            })
            .unwrap();
        let expected = if other.measured_on == NOT_TUNED {
            default_kernel(entry.dtype, entry.head_dim).unwrap()
        } else {
            other.kernel
        };
        assert_eq!(
            entry.kernel.entry, expected.entry,
            "{entry:?}: the kernel list changed: tune again on a GPU, or reset the table with \
             `cargo run -p flash-attn-tools --bin flash-attn-tune -- --reset-table \
             host/dispatch-table.tsv`"
        );
        assert_eq!((entry.margin_percent, entry.confirmed), (0.0, false));
    }
}

#[test]
fn the_default_api_runs_the_dispatch_table_entry() {
    for entry in dispatch_table() {
        let seq_len_kv = entry.bucket.upper_bound().unwrap_or(4096);
        // Three queries: one tile per head, so the heads set the grid size.
        let heads_q = match entry.grid {
            GridSize::Small => 2,
            GridSize::Large => SMALL_GRID_TILES_PER_SM * H100_SM_COUNT + 1,
        };
        let shape = AttentionShape {
            batch: 1,
            heads_q,
            heads_kv: 1,
            seq_len_q: 3,
            seq_len_kv,
            head_dim: entry.head_dim,
        };
        assert_eq!(GridSize::of(&shape, H100_SM_COUNT), entry.grid);
        let kernel = dispatch_kernel(entry.dtype, &shape, entry.causal, H100_SM_COUNT).unwrap();
        assert_eq!(kernel, entry.kernel, "{entry:?}");
        let options = ForwardOptions {
            causal: entry.causal,
            ..Default::default()
        };
        assert_eq!(
            supports(entry.dtype, &shape, &options, H100_SM_COUNT).unwrap(),
            kernel
        );
    }
}

/// The committed data file the build compiled the table from.
const DISPATCH_TABLE_FILE: &str = include_str!("../../host/dispatch-table.tsv");

#[test]
fn the_compiled_dispatch_table_holds_every_row_of_the_committed_file() {
    let rows = parse_dispatch_table(DISPATCH_TABLE_FILE).unwrap();
    let table = dispatch_table();
    // dtype x head dim x causal x bucket x grid size.
    assert_eq!(rows.len(), 2 * SUPPORTED_HEAD_DIMS.len() * 2 * 6 * 2);
    assert_eq!(table.len(), rows.len());
    for (entry, row) in table.iter().zip(&rows) {
        let compiled = (
            entry.head_dim,
            format!("{:?}", entry.dtype),
            entry.causal,
            format!("{:?}", entry.bucket),
            format!("{:?}", entry.grid),
            entry.kernel.entry,
            entry.margin_percent,
            entry.confirmed,
            entry.measured_on,
        );
        let committed = (
            row.head_dim,
            row.dtype.clone(),
            row.causal,
            row.bucket.clone(),
            row.grid.clone(),
            row.kernel.as_str(),
            row.margin_percent,
            row.confirmed,
            row.measured_on.as_str(),
        );
        assert_eq!(compiled, committed);
    }
    let bad_margin = "64\tF16\tfalse\tUpTo128\tSmall\tk\twide\ttrue\tday\n";
    assert_eq!(
        parse_dispatch_table(bad_margin),
        Err("line 1: margin_percent: cannot parse \"wide\"".to_owned())
    );
    assert!(parse_dispatch_table("64\tF16\tfalse\n")
        .unwrap_err()
        .starts_with("line 1: expected 9 tab-separated fields"));
}

#[test]
fn the_dispatch_table_file_is_exactly_what_the_tuner_writes() {
    // The file is generated: a hand edit, or a renderer change without regenerating, fails here.
    assert_eq!(render_dispatch_table(dispatch_table()), DISPATCH_TABLE_FILE);
    // A run without decisions keeps every entry.
    assert_eq!(
        updated_table(dispatch_table(), &[], "unused"),
        dispatch_table()
    );
}

#[test]
fn what_the_tuner_writes_the_build_reads_back() {
    // The untuned table, and one whose device name would break a tab-separated row.
    let untuned = updated_table(&[], &[], NOT_TUNED);
    let renamed: Vec<DispatchEntry> = untuned
        .iter()
        .map(|entry| DispatchEntry {
            measured_on: "2026-11-23, GPU\twith a tab",
            ..*entry
        })
        .collect();
    for table in [untuned, renamed] {
        let rows = parse_dispatch_table(&render_dispatch_table(&table)).unwrap();
        assert_eq!(rows.len(), table.len());
        for (row, entry) in rows.iter().zip(&table) {
            assert_eq!(row.kernel, entry.kernel.entry);
            assert_eq!(row.measured_on, entry.measured_on.replace('\t', " "));
        }
    }
}
