//! The default API's kernel choice, without a GPU: the key-length buckets of the dispatch key,
//! and the committed dispatch table (coverage, consistency with the compiled kernels, the
//! generated source).

use flash_attn::tuning::{render_dispatch_table, updated_table};
use flash_attn::{
    default_kernel, dispatch_kernel, dispatch_table, kernel_named, supports, AttentionShape, Dtype,
    Error, ForwardKernel, ForwardOptions, SeqBucket, FORWARD_KERNELS, NOT_TUNED,
    SUPPORTED_HEAD_DIMS,
};

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
fn the_dispatch_table_covers_every_supported_problem_with_a_matching_kernel() {
    let table = dispatch_table();
    let mut expected = 0;
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for &head_dim in SUPPORTED_HEAD_DIMS {
            for causal in [false, true] {
                for bucket in SeqBucket::ALL {
                    expected += 1;
                    let matching: Vec<_> = table
                        .iter()
                        .filter(|e| {
                            (e.dtype, e.head_dim, e.causal, e.bucket)
                                == (dtype, head_dim, causal, bucket)
                        })
                        .collect();
                    assert_eq!(
                        matching.len(),
                        1,
                        "{dtype:?} D={head_dim} causal={causal} {bucket:?}"
                    );
                    let entry = matching[0];
                    let kernel = entry.kernel;
                    assert_eq!(FORWARD_KERNELS[kernel.index()], *kernel);
                    assert_eq!((kernel.dtype, kernel.tile.head_dim), (dtype, head_dim));
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
    assert_eq!(table.len(), expected, "entries outside the supported set");
}

#[test]
fn untuned_entries_name_the_first_compiled_kernel() {
    // What the generated file's header promises for entries no tuner run has measured.
    for entry in dispatch_table()
        .iter()
        .filter(|e| e.measured_on == NOT_TUNED)
    {
        let first = default_kernel(entry.dtype, entry.head_dim).unwrap();
        assert_eq!(
            entry.kernel.entry, first.entry,
            "the kernel list changed: tune again on a GPU, or reset the table with \
             `cargo run -p flash-attn --bin flash-attn-tune -- --reset-table \
             host/src/dispatch_table.rs`"
        );
        assert_eq!((entry.margin_percent, entry.confirmed), (0.0, false));
    }
}

#[test]
fn the_default_api_runs_the_dispatch_table_entry() {
    for entry in dispatch_table() {
        let seq_len = entry.bucket.upper_bound().unwrap_or(4096);
        let kernel = dispatch_kernel(entry.dtype, entry.head_dim, entry.causal, seq_len).unwrap();
        assert_eq!(kernel, entry.kernel, "{entry:?}");
        let shape = AttentionShape {
            seq_len_q: 3,
            seq_len_kv: seq_len,
            ..AttentionShape::new(1, 2, seq_len, entry.head_dim)
        };
        let options = ForwardOptions {
            causal: entry.causal,
            ..Default::default()
        };
        assert_eq!(supports(entry.dtype, &shape, &options).unwrap(), kernel);
    }
    assert!(matches!(
        dispatch_kernel(Dtype::F16, 96, false, 512),
        Err(Error::UnsupportedHeadDim { head_dim: 96, .. })
    ));
}

#[test]
fn kernels_named_in_const_tables_are_the_compiled_ones() {
    const NAMED: &ForwardKernel = kernel_named("flash_fwd_bf16_d128_m64_n32_w4_s3");
    assert_eq!(NAMED.entry, "flash_fwd_bf16_d128_m64_n32_w4_s3");
    for (index, kernel) in FORWARD_KERNELS.iter().enumerate() {
        assert_eq!(kernel.index(), index);
        assert_eq!(kernel_named(kernel.entry), kernel);
    }
}

#[test]
fn the_dispatch_table_source_is_exactly_what_the_tuner_writes() {
    // The file is generated: a hand edit, or a renderer change without regenerating, fails here.
    let source = include_str!("../../host/src/dispatch_table.rs");
    assert_eq!(render_dispatch_table(dispatch_table()), source);
    // A run without decisions keeps every entry.
    assert_eq!(
        updated_table(dispatch_table(), &[], "unused"),
        dispatch_table()
    );
}
