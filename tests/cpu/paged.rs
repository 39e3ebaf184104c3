//! Paged KV-cache planning without a GPU: page sizes, the K/V extents of the pages, the block
//! table's length, each error; and the reference's page semantics (a shuffled table reads the
//! same keys as a contiguous cache; a page outside the cache makes its sequence NaN).

use flash_attn::reference::{
    attention_kv_cache, attention_paged_kv_cache, random_normal, Precision, Scoring,
};
use flash_attn::{
    plan_kv_cache, plan_paged_kv_cache, AttentionShape, Dtype, Error, ForwardOptions,
    ForwardStrides, Layout, PagedKvCache, QSource, TensorStrides, Variant,
};
use half::f16;

use crate::H100_SM_COUNT;

fn decode(batch: usize, capacity: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: capacity,
        head_dim: 128,
    }
}

fn bshd() -> ForwardOptions {
    ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    }
}

fn paged(num_pages: usize, page_size: usize, pages_per_sequence: usize) -> PagedKvCache {
    PagedKvCache {
        num_pages,
        page_size,
        pages_per_sequence,
    }
}

#[test]
fn every_power_of_two_page_size_from_16_to_256_plans_like_the_contiguous_cache() {
    let contiguous = plan_kv_cache(Dtype::F16, &decode(4, 4096), &bshd(), H100_SM_COUNT).unwrap();
    for shift in 4..=8 {
        let page_size = 1 << shift;
        let cache = paged(1000, page_size, 4096 / page_size);
        let plan =
            plan_paged_kv_cache(Dtype::F16, &decode(4, 4096), &cache, &bshd(), H100_SM_COUNT)
                .unwrap();
        let sequences = plan.sequences().unwrap();
        assert_eq!(sequences.page_shift, shift);
        assert_eq!(sequences.num_pages, 1000);
        assert_eq!(sequences.pages_per_sequence as usize, 4096 / page_size);
        assert_eq!(plan.block_table_len(), 4 * 4096 / page_size);
        // K and V: every row of every page, 8 heads of 128 elements per row.
        let elements = 1000 * page_size * 8 * 128;
        assert_eq!((plan.required().k, plan.required().v), (elements, elements));
        let strides = TensorStrides {
            batch: (page_size * 8 * 128) as u64,
            head: 128,
            seq: 8 * 128,
        };
        assert_eq!(plan.params().k_strides, strides);
        assert_eq!(plan.params().v_strides, strides);
        // The paged kernel: the contiguous one's rows (Q re-read from shared memory) with
        // blocks of 32 keys and three stages at D=128 (the per-tile page lookup needs the
        // registers that 64-key blocks use), and the same packing, grid and split.
        let (spec, contiguous_spec) = (plan.kernel().spec, contiguous.kernel().spec);
        assert_eq!(spec.variant, Variant::Paged);
        assert_eq!(contiguous_spec.variant, Variant::Serving);
        assert_eq!(spec.tile.q_source, QSource::SharedMemory);
        assert_eq!(spec.tile.block_m, contiguous_spec.tile.block_m);
        assert_eq!(
            (spec.tile.block_n, spec.tile.stages),
            (32, 3),
            "{}",
            plan.kernel().entry
        );
        assert_eq!(plan.grid(), contiguous.grid());
        assert_eq!(plan.splits(), contiguous.splits());
        assert_eq!(plan.params().q_strides, contiguous.params().q_strides);
        assert_eq!(plan.required().q, contiguous.required().q);
    }
    assert_eq!(contiguous.block_table_len(), 0);
}

#[test]
fn page_sizes_outside_16_to_256_or_not_powers_of_two_are_errors() {
    for page_size in [0, 1, 8, 24, 48, 100, 512, 1024] {
        let cache = PagedKvCache {
            pages_per_sequence: 4096usize.checked_div(page_size).unwrap_or(1),
            ..paged(64, page_size, 1)
        };
        assert_eq!(
            plan_paged_kv_cache(Dtype::F16, &decode(2, 4096), &cache, &bshd(), H100_SM_COUNT)
                .unwrap_err(),
            Error::UnsupportedPageSize { page_size }
        );
    }
}

#[test]
fn the_capacity_must_be_the_pages_of_a_sequence() {
    let error = plan_paged_kv_cache(
        Dtype::F16,
        &decode(2, 4000),
        &paged(64, 64, 63),
        &bshd(),
        H100_SM_COUNT,
    )
    .unwrap_err();
    assert_eq!(
        error,
        Error::PagedCapacityMismatch {
            seq_len_kv: 4000,
            pages_per_sequence: 63,
            page_size: 64
        }
    );
    // An overflowing product is the same error, not a wrap.
    let huge = paged(64, 64, usize::MAX / 32);
    assert!(matches!(
        plan_paged_kv_cache(Dtype::F16, &decode(2, 4096), &huge, &bshd(), H100_SM_COUNT),
        Err(Error::PagedCapacityMismatch { .. })
    ));
}

#[test]
fn explicit_kv_strides_must_be_the_pages_layout() {
    let shape = decode(2, 4096);
    let cache = paged(64, 64, 64);
    let q = Layout::Bshd.strides(32, 1, 128).unwrap();
    let pages = cache.strides(8, 128).unwrap();
    let options = |k, v| ForwardOptions {
        strides: Some(ForwardStrides { q, k, v, o: q }),
        ..ForwardOptions::default()
    };
    plan_paged_kv_cache(
        Dtype::F16,
        &shape,
        &cache,
        &options(pages, pages),
        H100_SM_COUNT,
    )
    .unwrap();
    let other = Layout::Bhsd.strides(8, 4096, 128).unwrap();
    for (k, v, tensor) in [(other, pages, "k"), (pages, other, "v")] {
        assert_eq!(
            plan_paged_kv_cache(Dtype::F16, &shape, &cache, &options(k, v), H100_SM_COUNT)
                .unwrap_err(),
            Error::PagedStridesMismatch { tensor }
        );
    }
}

#[test]
fn page_counts_past_u32_and_pages_past_the_address_space_are_errors() {
    let shape = decode(1, 256);
    let too_many = paged(u32::MAX as usize + 1, 16, 16);
    assert!(matches!(
        plan_paged_kv_cache(Dtype::F16, &shape, &too_many, &bshd(), H100_SM_COUNT),
        Err(Error::ProblemTooLarge {
            dimension: "num_pages",
            ..
        })
    ));
    // 2^32 - 1 pages of 256 rows of 65535 heads of 128 elements: past 2^63 bytes.
    let wide = AttentionShape {
        heads_q: 65_535,
        heads_kv: 65_535,
        ..shape
    };
    assert_eq!(
        plan_paged_kv_cache(
            Dtype::F16,
            &wide,
            &paged(u32::MAX as usize, 256, 1),
            &bshd(),
            H100_SM_COUNT
        )
        .unwrap_err(),
        Error::TensorTooLarge {
            tensor: "k",
            dimension: "num_pages"
        }
    );
}

/// Pages `[num_pages, page_size, heads_kv, d]` holding a contiguous `[batch, heads_kv,
/// capacity, d]` cache through `table` (sequence-major), unused pages filled with `fill`.
fn scatter(
    cache: &[f16],
    shape: &AttentionShape,
    pages: &PagedKvCache,
    table: &[u32],
    fill: f16,
) -> Vec<f16> {
    let (d, heads) = (shape.head_dim, shape.heads_kv);
    let mut out = vec![fill; pages.elements(heads, d).unwrap()];
    for b in 0..shape.batch {
        for key in 0..shape.seq_len_kv {
            let page = table[b * pages.pages_per_sequence + key / pages.page_size] as usize;
            for h in 0..heads {
                let to = ((page * pages.page_size + key % pages.page_size) * heads + h) * d;
                let from = ((b * heads + h) * shape.seq_len_kv + key) * d;
                out[to..to + d].copy_from_slice(&cache[from..from + d]);
            }
        }
    }
    out
}

#[test]
fn the_paged_reference_reads_a_shuffled_table_as_the_contiguous_cache() {
    let shape = AttentionShape {
        batch: 3,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 2,
        seq_len_kv: 64,
        head_dim: 64,
    };
    let cache = paged(13, 16, 4);
    // 12 of 13 pages used, in a scrambled order.
    let table: Vec<u32> = (0..12).map(|i| (i * 5 + 3) % 13).collect();
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 1);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 2);
    let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 3);
    let lens = [64, 17, 1];
    let nan = f16::NAN;
    let (k_pages, v_pages) = (
        scatter(&k, &shape, &cache, &table, nan),
        scatter(&v, &shape, &cache, &table, nan),
    );
    let contiguous = attention_kv_cache(
        &q,
        &k,
        &v,
        &lens,
        shape,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    let mut table_with_garbage = table.clone();
    // Entries past a sequence's used pages are never read: sequence 1 uses 2 pages, 2 one.
    table_with_garbage[4 + 2..8].fill(u32::MAX);
    table_with_garbage[8 + 1..12].fill(u32::MAX);
    let paged_result = attention_paged_kv_cache(
        &q,
        &k_pages,
        &v_pages,
        &table_with_garbage,
        &lens,
        shape,
        &cache,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    assert_eq!(paged_result.output, contiguous.output);
    assert_eq!(paged_result.logsumexp, contiguous.logsumexp);

    // A used page outside the cache: that sequence is NaN, the others unchanged.
    let mut bad = table.clone();
    bad[4 + 1] = 13;
    let result = attention_paged_kv_cache(
        &q,
        &k_pages,
        &v_pages,
        &bad,
        &lens,
        shape,
        &cache,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    let rows = shape.heads_q * shape.seq_len_q;
    let d = shape.head_dim;
    for b in 0..3 {
        let output = &result.output[b * rows * d..(b + 1) * rows * d];
        let lse = &result.logsumexp[b * rows..(b + 1) * rows];
        if b == 1 {
            assert!(output.iter().chain(lse).all(|x| x.is_nan()));
        } else {
            assert_eq!(output, &contiguous.output[b * rows * d..(b + 1) * rows * d]);
            assert_eq!(lse, &contiguous.logsumexp[b * rows..(b + 1) * rows]);
        }
    }
}
