//! Variable-length batches of queries against a KV cache, planned without a GPU
//! (`plan_varlen_kv_cache`): the packed queries' strides, lengths and logsumexp layout, the
//! cache's as for the KV-cache plans, split-KV over the packed tokens, each error; and the
//! reference (the same sequences through the KV-cache reference; a paged cache reads as the
//! contiguous one).

use flash_attn::reference::{
    attention_kv_cache, attention_varlen_kv_cache, attention_varlen_paged_kv_cache, random_normal,
    relayout, Precision, Scoring,
};
use flash_attn::{
    plan_kv_cache, plan_varlen_kv_cache, AttentionShape, Dtype, Error, ForwardOptions,
    ForwardStrides, Layout, PagedKvCache, TensorStrides, Variant, VarlenCacheExtents,
    VarlenCacheShape,
};
use half::f16;

use crate::H100_SM_COUNT;

fn bshd() -> ForwardOptions {
    ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    }
}

/// GQA 32:8, D=128, a cache of `capacity` keys per sequence.
fn shape(cu_seqlens_q: &[u32], capacity: usize) -> VarlenCacheShape<'_> {
    VarlenCacheShape {
        cu_seqlens_q,
        heads_q: 32,
        heads_kv: 8,
        seq_len_kv: capacity,
        head_dim: 128,
    }
}

fn plan_of(
    shape: &VarlenCacheShape,
    paged: Option<&PagedKvCache>,
) -> Result<flash_attn::LaunchPlan, Error> {
    plan_varlen_kv_cache(Dtype::F16, &shape.extents()?, paged, &bshd(), H100_SM_COUNT)
}

#[test]
fn the_extents_are_the_batch_its_longest_query_chunk_and_its_tokens() {
    let offsets = [0, 7, 7, 107, 108];
    let extents = shape(&offsets, 4096).extents().unwrap();
    assert_eq!(
        extents,
        VarlenCacheExtents {
            longest: AttentionShape {
                batch: 4,
                heads_q: 32,
                heads_kv: 8,
                seq_len_q: 100,
                seq_len_kv: 4096,
                head_dim: 128,
            },
            tokens_q: 108,
        }
    );
}

#[test]
fn packed_queries_run_against_the_cache_in_its_layout() {
    let offsets = [0, 7, 7, 107, 108];
    let plan = plan_of(&shape(&offsets, 4096), None).unwrap();
    let params = plan.params();
    let sequences = plan.sequences().unwrap();
    assert_eq!(plan.kernel().spec.variant, Variant::Serving);
    // Q and O: `[tokens, heads_q, d]`, batch stride unused; K and V: `[batch, capacity,
    // heads_kv, d]`.
    let packed = TensorStrides {
        batch: 0,
        head: 128,
        seq: 32 * 128,
    };
    assert_eq!((params.q_strides, params.o_strides), (packed, packed));
    let cache = Layout::Bshd.strides(8, 4096, 128).unwrap();
    assert_eq!((params.k_strides, params.v_strides), (cache, cache));
    // No packing of grouped heads into rows, even where every chunk is one token: the rows are
    // the sequences' tokens.
    assert_eq!(
        (params.heads_q, params.seq_len_q, params.kv_group_size),
        (32, 100, 4)
    );
    assert_eq!(
        sequences.lse_strides,
        TensorStrides {
            batch: 0,
            head: 108,
            seq: 1,
        }
    );
    let tile = plan.kernel().spec.tile;
    let query_blocks = 100usize.div_ceil(tile.block_m) as u32;
    assert_eq!(sequences.query_blocks, query_blocks);
    assert_eq!(
        plan.grid(),
        (query_blocks * sequences.splits, 32, 4),
        "{sequences:?}"
    );
    let required = plan.required();
    // The last token's row of the last head, and every key of the cache.
    assert_eq!(required.q, 107 * 32 * 128 + 31 * 128 + 128);
    assert_eq!(required.o, required.q);
    assert_eq!(required.lse, Some(32 * 108));
    assert_eq!(
        (required.k, required.v),
        (4 * 4096 * 8 * 128, 4 * 4096 * 8 * 128)
    );

    let one_token_each = [0, 1, 2, 3];
    let plan = plan_of(&shape(&one_token_each, 4096), None).unwrap();
    assert_eq!(plan.params().heads_q, 32);
    assert_eq!(plan.params().seq_len_q, 1);
}

#[test]
fn a_paged_cache_plans_its_pages_and_block_table() {
    let offsets = [0, 30, 31];
    let pages = PagedKvCache {
        num_pages: 100,
        page_size: 64,
        pages_per_sequence: 32,
    };
    let plan = plan_of(&shape(&offsets, 2048), Some(&pages)).unwrap();
    assert_eq!(plan.kernel().spec.variant, Variant::Paged);
    assert_eq!(plan.block_table_len(), 2 * 32);
    let elements = 100 * 64 * 8 * 128;
    assert_eq!((plan.required().k, plan.required().v), (elements, elements));
    assert_eq!(plan.sequences().unwrap().page_shift, 6);
    assert_eq!(plan.params().q_strides.batch, 0);
    // The capacity must be the pages of a sequence.
    assert!(matches!(
        plan_of(&shape(&offsets, 4096), Some(&pages)),
        Err(Error::PagedCapacityMismatch { .. })
    ));
    let odd_pages = PagedKvCache {
        page_size: 48,
        ..pages
    };
    assert!(matches!(
        plan_of(&shape(&offsets, 2048), Some(&odd_pages)),
        Err(Error::UnsupportedPageSize { page_size: 48 })
    ));
}

#[test]
fn a_small_grid_splits_the_keys_with_a_workspace_row_per_token() {
    // 2 sequences x 32 heads x 1 query block: far below two blocks per SM.
    let offsets = [0, 5, 9];
    let plan = plan_of(&shape(&offsets, 16384), None).unwrap();
    let sequences = plan.sequences().unwrap();
    assert!(sequences.splits > 1);
    assert_eq!(sequences.partial_rows, 9);
    assert_eq!(
        plan.workspace_bytes(),
        sequences.splits as usize * 32 * 9 * (128 + 1) * 4
    );
    assert_eq!(plan.counters(), 2 * 32);
    // The same as a KV-cache plan with as many blocks.
    let cache = AttentionShape {
        batch: 2,
        heads_q: 32,
        heads_kv: 32,
        seq_len_q: 5,
        seq_len_kv: 16384,
        head_dim: 128,
    };
    let contiguous = plan_kv_cache(Dtype::F16, &cache, &bshd(), H100_SM_COUNT).unwrap();
    assert_eq!(contiguous.splits(), sequences.splits);

    // Many long chunks fill the GPU: no split.
    let long = [0, 300, 600, 900, 1200];
    assert_eq!(plan_of(&shape(&long, 4096), None).unwrap().splits(), 1);
}

#[test]
fn invalid_offsets_and_extents_are_rejected() {
    assert_eq!(
        shape(&[1, 5], 64).extents(),
        Err(Error::SeqOffsetsStart {
            offsets: "cu_seqlens_q",
            first: 1,
        })
    );
    assert_eq!(
        shape(&[0, 5, 4], 64).extents(),
        Err(Error::SeqOffsetsDecrease {
            offsets: "cu_seqlens_q",
            sequence: 1,
            start: 5,
            end: 4,
        })
    );
    assert_eq!(
        shape(&[0], 64).extents(),
        Err(Error::ZeroSizedDimension { dimension: "batch" })
    );
    assert_eq!(
        plan_of(&shape(&[0, 0, 0], 64), None).map(|plan| plan.grid()),
        Err(Error::ZeroSizedDimension {
            dimension: "seq_len_q"
        })
    );
    let raw = |batch, seq_len_q, tokens_q| VarlenCacheExtents {
        longest: AttentionShape {
            batch,
            heads_q: 8,
            heads_kv: 8,
            seq_len_q,
            seq_len_kv: 64,
            head_dim: 64,
        },
        tokens_q,
    };
    let plan_raw = |extents: VarlenCacheExtents| {
        plan_varlen_kv_cache(Dtype::F16, &extents, None, &bshd(), H100_SM_COUNT)
            .map(|plan| plan.grid())
    };
    assert_eq!(
        plan_raw(raw(2, 10, 9)),
        Err(Error::VarlenExtentsMismatch {
            longest: "max_seq_len_q",
            value: 10,
            tokens: 9,
        })
    );
    assert_eq!(
        plan_raw(raw(2, 10, u32::MAX as usize + 1)),
        Err(Error::ProblemTooLarge {
            dimension: "tokens_q",
            value: u32::MAX as usize + 1,
            limit: u32::MAX as usize,
        })
    );
    assert_eq!(
        plan_raw(raw(65_536, 1, 65_536)),
        Err(Error::ProblemTooLarge {
            dimension: "batch",
            value: 65_536,
            limit: 65_535,
        })
    );
    // Output rows of distinct tokens that share elements.
    let overlapping = ForwardOptions {
        strides: Some(ForwardStrides {
            q: TensorStrides {
                batch: 0,
                head: 64,
                seq: 64,
            },
            k: Layout::Bhsd.strides(8, 64, 64).unwrap(),
            v: Layout::Bhsd.strides(8, 64, 64).unwrap(),
            o: TensorStrides {
                batch: 0,
                head: 64 * 100,
                seq: 8,
            },
        }),
        ..ForwardOptions::default()
    };
    assert!(matches!(
        plan_varlen_kv_cache(
            Dtype::F16,
            &raw(2, 10, 20),
            None,
            &overlapping,
            H100_SM_COUNT
        ),
        Err(Error::OverlappingOutput { .. })
    ));
}

/// The varlen-cache reference, defined through packed used prefixes, against the KV-cache
/// reference (one dense batch per sequence, an independent path); a paged cache reads as the
/// contiguous one it scatters, and a page outside the cache makes its sequence NaN.
#[test]
fn the_reference_is_the_kv_cache_reference_per_sequence() {
    let (heads_q, heads_kv, capacity, d) = (4, 2, 64, 32);
    let chunks = [3usize, 0, 5, 1];
    let lens = [64u32, 9, 2, 0];
    let offsets: Vec<u32> = std::iter::once(0)
        .chain(chunks.iter().scan(0, |end, &c| {
            *end += c as u32;
            Some(*end)
        }))
        .collect();
    let tokens = *offsets.last().unwrap() as usize;
    let shape = VarlenCacheShape {
        cu_seqlens_q: &offsets,
        heads_q,
        heads_kv,
        seq_len_kv: capacity,
        head_dim: d,
    };
    let q = random_normal::<f16>(tokens * heads_q * d, 0.5, 1.0, 7);
    let kv_elements = chunks.len() * heads_kv * capacity * d;
    let k = random_normal::<f16>(kv_elements, 0.5, 1.0, 8);
    let v = random_normal::<f16>(kv_elements, 0.5, 1.0, 9);
    let result = attention_varlen_kv_cache(
        &q,
        &k,
        &v,
        &lens,
        &shape,
        &Scoring::plain(0.2, true),
        Precision::F64,
    );
    for (b, &chunk) in chunks.iter().enumerate() {
        let start = offsets[b] as usize;
        let sequence = AttentionShape {
            batch: 1,
            heads_q,
            heads_kv,
            seq_len_q: chunk,
            seq_len_kv: capacity,
            head_dim: d,
        };
        if chunk == 0 {
            continue;
        }
        let q_b = relayout(
            &q[start * heads_q * d..(start + chunk) * heads_q * d],
            (1, heads_q, chunk, d),
            Layout::Bshd,
            Layout::Bhsd,
        );
        let cache =
            |all: &[f16]| all[b * heads_kv * capacity * d..][..heads_kv * capacity * d].to_vec();
        let want = attention_kv_cache(
            &q_b,
            &cache(&k),
            &cache(&v),
            &lens[b..b + 1],
            sequence,
            &Scoring::plain(0.2, true),
            Precision::F64,
        );
        let got = &result.output[start * heads_q * d..(start + chunk) * heads_q * d];
        assert_eq!(
            got,
            &relayout(
                &want.output,
                (1, heads_q, chunk, d),
                Layout::Bhsd,
                Layout::Bshd
            )[..],
            "sequence {b}"
        );
        for head in 0..heads_q {
            assert_eq!(
                &result.logsumexp[head * tokens + start..][..chunk],
                &want.logsumexp[head * chunk..][..chunk],
                "sequence {b} head {head}"
            );
        }
    }

    // The same cache in pages of 16, scattered in reverse order; unused pages hold NaN.
    let pages = PagedKvCache {
        num_pages: 17,
        page_size: 16,
        pages_per_sequence: 4,
    };
    let table: Vec<u32> = (0..16).rev().collect();
    let scatter = |cache: &[f16]| {
        let mut out = vec![f16::NAN; pages.elements(heads_kv, d).unwrap()];
        for b in 0..chunks.len() {
            for key in 0..capacity {
                let page = table[b * 4 + key / 16] as usize;
                for h in 0..heads_kv {
                    let to = ((page * 16 + key % 16) * heads_kv + h) * d;
                    let from = ((b * heads_kv + h) * capacity + key) * d;
                    out[to..to + d].copy_from_slice(&cache[from..from + d]);
                }
            }
        }
        out
    };
    let (k_pages, v_pages) = (scatter(&k), scatter(&v));
    let paged = |table: &[u32]| {
        attention_varlen_paged_kv_cache(
            &q,
            &k_pages,
            &v_pages,
            table,
            &lens,
            &shape,
            &pages,
            &Scoring::plain(0.2, true),
            Precision::F64,
        )
    };
    let from_pages = paged(&table);
    assert_eq!(from_pages, result);
    // Sequence 2 (2 used keys) names page 17 (past the 17 pages) for its first page.
    let mut bad = table.clone();
    bad[2 * 4] = 17;
    let with_bad_page = paged(&bad);
    for (b, &chunk) in chunks.iter().enumerate() {
        let start = offsets[b] as usize;
        let rows = start * heads_q * d..(start + chunk) * heads_q * d;
        let output = &with_bad_page.output[rows.clone()];
        if b == 2 {
            assert!(output.iter().all(|x| x.is_nan()));
            for head in 0..heads_q {
                assert!(with_bad_page.logsumexp[head * tokens + start..][..chunk]
                    .iter()
                    .all(|x| x.is_nan()));
            }
        } else {
            assert_eq!(output, &result.output[rows]);
        }
    }
}
