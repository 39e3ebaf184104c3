//! The serving calls (KV cache, paged cache, variable-length batches and both against a cache)
//! at every head dim, without a GPU: which head dims they accept and reject, the kernel each
//! plan runs (its head dim, whether it pads, its tile), and the parts of a plan that depend on
//! the head dim (the problem's head dim in the parameters, the buffers at the problem's width,
//! the split-KV workspace at the kernel's).

use flash_attn::{
    dispatch_kernel, kernel_by_name, kernel_head_dim, padded_head_dim, plan_kv_cache,
    plan_paged_kv_cache, plan_varlen, plan_varlen_kv_cache, serving_kernel, AttentionShape, Dtype,
    Error, ForwardKernel, ForwardOptions, LaunchPlan, Layout, PagedKvCache, SmemLayout, TileConfig,
    Variant, VarlenCacheShape, VarlenShape, BUILT_CONFIGS, CANDIDATE_DTYPES, FORWARD_KERNELS,
    HEAD_DIM_GRANULE, MAX_HEAD_DIM, SERVING_TILES, SUPPORTED_HEAD_DIMS,
};

use crate::H100_SM_COUNT;

/// Every head dim the API accepts: the multiples of 8 from 8 to 256.
fn head_dims() -> impl Iterator<Item = usize> {
    (HEAD_DIM_GRANULE..=MAX_HEAD_DIM).step_by(HEAD_DIM_GRANULE)
}

fn bshd() -> ForwardOptions {
    ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    }
}

/// Decode against caches of 1024 keys: 2 sequences, 8 query heads over 2 K/V heads.
fn decode(head_dim: usize) -> AttentionShape {
    AttentionShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        seq_len_q: 1,
        seq_len_kv: 1024,
        head_dim,
    }
}

/// Pages of 64 keys, 16 per sequence (the capacity of [`decode`]).
const PAGED: PagedKvCache = PagedKvCache {
    num_pages: 40,
    page_size: 64,
    pages_per_sequence: 16,
};

const CU_SEQLENS_Q: [u32; 4] = [0, 5, 6, 77];
const CU_SEQLENS_KV: [u32; 4] = [0, 63, 64, 200];

/// The plans of every serving call at `head_dim` for `dtype`, named: the KV cache, the paged
/// cache, the variable-length batch, and the variable-length queries against a contiguous and a
/// paged cache.
fn serving_plans(dtype: Dtype, head_dim: usize) -> Vec<(&'static str, Result<LaunchPlan, Error>)> {
    let options = bshd();
    let shape = decode(head_dim);
    let varlen = VarlenShape {
        cu_seqlens_q: &CU_SEQLENS_Q,
        cu_seqlens_kv: &CU_SEQLENS_KV,
        heads_q: 8,
        heads_kv: 2,
        head_dim,
    };
    let varlen_cache = VarlenCacheShape {
        cu_seqlens_q: &CU_SEQLENS_Q,
        heads_q: 8,
        heads_kv: 2,
        seq_len_kv: 1024,
        head_dim,
    };
    let sm = H100_SM_COUNT;
    vec![
        ("kv_cache", plan_kv_cache(dtype, &shape, &options, sm)),
        (
            "paged_kv_cache",
            plan_paged_kv_cache(dtype, &shape, &PAGED, &options, sm),
        ),
        (
            "varlen",
            varlen
                .extents()
                .and_then(|extents| plan_varlen(dtype, &extents, &options, sm)),
        ),
        (
            "varlen_kv_cache",
            varlen_cache
                .extents()
                .and_then(|extents| plan_varlen_kv_cache(dtype, &extents, None, &options, sm)),
        ),
        (
            "varlen_paged_kv_cache",
            varlen_cache.extents().and_then(|extents| {
                plan_varlen_kv_cache(dtype, &extents, Some(&PAGED), &options, sm)
            }),
        ),
    ]
}

/// `serving_kernel` for a decode step ([`decode`]) at `head_dim`.
fn decode_kernel(
    dtype: Dtype,
    head_dim: usize,
    variant: Variant,
) -> Result<&'static ForwardKernel, Error> {
    serving_kernel(dtype, &decode(head_dim), false, variant, H100_SM_COUNT)
}

/// The variant a serving call of this name runs.
fn variant_of(call: &str) -> Variant {
    if call.contains("paged") {
        Variant::Paged
    } else {
        Variant::Serving
    }
}

/// The tile of `variant` at kernel head dim `head_dim` that the host runs for decode and short
/// queries: of its 64-row entries in `SERVING_TILES`, the one with the most stages.
fn expected_tile(variant: Variant, head_dim: usize) -> TileConfig {
    SERVING_TILES
        .iter()
        .filter(|(tile_variant, tile)| {
            *tile_variant == variant && tile.head_dim == head_dim && tile.block_m == 64
        })
        .map(|&(_, tile)| tile)
        .max_by_key(|tile| tile.stages)
        .unwrap_or_else(|| panic!("no {variant:?} tile at head dim {head_dim}"))
}

/// Every serving call accepts every multiple of 8 up to 256, at both element types: a kernel head
/// dim on its own kernel, any other padded on the kernel of the next kernel head dim whose
/// kernels pad (the rule of `padded_head_dim`, the same as the dense API's), and the kernel is
/// the variant's tile with the most stages there.
#[test]
fn every_serving_call_plans_every_head_dim_on_the_kernel_it_pads_to() {
    for dtype in CANDIDATE_DTYPES {
        for head_dim in head_dims() {
            let runs_on = padded_head_dim(head_dim).unwrap();
            for (call, plan) in serving_plans(dtype, head_dim) {
                let plan = plan.unwrap_or_else(|error| panic!("{call} at D={head_dim}: {error}"));
                let spec = plan.kernel().spec;
                let variant = variant_of(call);
                assert_eq!(
                    (spec.variant, spec.dtype),
                    (variant, dtype),
                    "{call} D={head_dim}"
                );
                assert_eq!(spec.tile.head_dim, runs_on, "{call} D={head_dim}");
                assert_eq!(spec.tile, expected_tile(variant, runs_on));
                // Only the kernels of 64 and 128 run whole rows only.
                assert_eq!(
                    spec.pads_head_dim(),
                    runs_on != 64 && runs_on != 128,
                    "{call} D={head_dim}"
                );
                assert_eq!(plan.params().head_dim as usize, head_dim);
                assert_eq!(kernel_head_dim(dtype, variant, head_dim), Ok(runs_on));
                assert_eq!(
                    decode_kernel(dtype, head_dim, variant).map(|kernel| kernel.spec.tile),
                    Ok(spec.tile)
                );
            }
        }
    }
}

/// The head dims that are not multiples of 8 from 8 to 256 are `InvalidHeadDim` on every serving
/// call (0 is a zero-sized dimension), never `UnsupportedHeadDim`.
#[test]
fn every_serving_call_rejects_the_head_dims_the_dense_api_rejects() {
    for head_dim in [1, 4, 12, 36, 100, 257, 264, 512] {
        for (call, plan) in serving_plans(Dtype::F16, head_dim) {
            assert_eq!(
                plan.map(|plan| plan.kernel().entry),
                Err(Error::InvalidHeadDim { head_dim }),
                "{call}"
            );
        }
        for variant in [Variant::Serving, Variant::Paged] {
            assert_eq!(
                decode_kernel(Dtype::Bf16, head_dim, variant).map(|kernel| kernel.entry),
                Err(Error::InvalidHeadDim { head_dim })
            );
        }
    }
    for (call, plan) in serving_plans(Dtype::F16, 0) {
        assert!(
            matches!(
                plan,
                Err(Error::ZeroSizedDimension { .. } | Error::InvalidHeadDim { head_dim: 0 })
            ),
            "{call}: {:?}",
            plan.map(|plan| plan.kernel().entry)
        );
    }
}

/// The tiles: one rule per head dim, in one list. Every kernel head dim has exactly one serving
/// and one paged tile of 64 rows (two each at D=64), of 16 rows per warp, swizzled where the
/// rows are whole 128-byte groups and padded elsewhere, the paged ones with Q in shared memory;
/// head dims 64 and 128 add one 128-row serving tile each (4 warps of 32 rows, padded: the
/// dense table's long-prefill tile or its nearest that ptxas assembles without a spill); the
/// default build exposes all of them at both element types.
#[test]
fn the_serving_tiles_cover_every_kernel_head_dim_once() {
    for &head_dim in SUPPORTED_HEAD_DIMS {
        for variant in [Variant::Serving, Variant::Paged] {
            let tiles: Vec<TileConfig> = SERVING_TILES
                .iter()
                .filter(|(tile_variant, tile)| {
                    *tile_variant == variant && tile.head_dim == head_dim
                })
                .map(|&(_, tile)| tile)
                .collect();
            let long = |tile: &&TileConfig| tile.block_m == 128;
            let expected = if head_dim == 64 { 2 } else { 1 };
            let short = tiles.iter().filter(|tile| !long(tile)).count();
            assert_eq!(short, expected, "{variant:?} D={head_dim}");
            let expected_long =
                usize::from(variant == Variant::Serving && head_dim % 64 == 0 && head_dim <= 128);
            assert_eq!(
                tiles.iter().filter(long).count(),
                expected_long,
                "{variant:?} D={head_dim}"
            );
            for tile in tiles {
                if tile.block_m == 128 {
                    assert_eq!(
                        (tile.warps, tile.layout),
                        (4, SmemLayout::Padded),
                        "{tile:?}"
                    );
                } else {
                    assert_eq!(tile.rows_per_warp(), 16, "{tile:?}");
                    let layout = if head_dim.is_multiple_of(64) {
                        SmemLayout::Swizzled
                    } else {
                        SmemLayout::Padded
                    };
                    assert_eq!(tile.layout, layout, "{tile:?}");
                }
                if variant == Variant::Paged {
                    assert_eq!(tile.q_source, flash_attn::QSource::SharedMemory);
                }
                for dtype in CANDIDATE_DTYPES {
                    let exposed = FORWARD_KERNELS.iter().find(|kernel| {
                        kernel.spec.variant == variant
                            && kernel.spec.dtype == dtype
                            && kernel.spec.tile == tile
                    });
                    let kernel = exposed
                        .unwrap_or_else(|| panic!("{variant:?} {dtype:?} {tile:?} is not exposed"));
                    assert!(BUILT_CONFIGS.contains(&kernel.spec));
                }
            }
        }
    }
    // In entry order within each variant: head dim, block_m, block_n, warps, stages.
    for variant in [Variant::Serving, Variant::Paged] {
        let keys: Vec<_> = SERVING_TILES
            .iter()
            .filter(|(tile_variant, _)| *tile_variant == variant)
            .map(|(_, tile)| {
                (
                    tile.head_dim,
                    tile.block_m,
                    tile.block_n,
                    tile.warps,
                    tile.stages,
                )
            })
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:?}");
    }
}

/// The picks at the head dims the models decode at, spelled out.
#[test]
fn the_serving_kernels_of_the_new_head_dims_are_these() {
    for (head_dim, variant, entry) in [
        (
            8,
            Variant::Serving,
            "flash_fwd_f16_d32_m64_n64_w4_s3_pad_serving",
        ),
        (
            32,
            Variant::Paged,
            "flash_fwd_f16_d32_m64_n64_w4_s3_pad_qsmem_paged",
        ),
        (
            64,
            Variant::Serving,
            "flash_fwd_f16_d64_m64_n64_w4_s3_serving",
        ),
        (
            64,
            Variant::Paged,
            "flash_fwd_f16_d64_m64_n64_w4_s3_qsmem_paged",
        ),
        (
            80,
            Variant::Serving,
            "flash_fwd_f16_d96_m64_n64_w4_s3_pad_serving",
        ),
        (
            96,
            Variant::Paged,
            "flash_fwd_f16_d96_m64_n64_w4_s3_pad_qsmem_paged",
        ),
        (
            128,
            Variant::Serving,
            "flash_fwd_f16_d128_m64_n64_w4_s2_serving",
        ),
        (
            136,
            Variant::Serving,
            "flash_fwd_f16_d160_m64_n32_w4_s3_pad_qsmem_serving",
        ),
        (
            160,
            Variant::Paged,
            "flash_fwd_f16_d160_m64_n32_w4_s3_pad_qsmem_paged",
        ),
        (
            192,
            Variant::Serving,
            "flash_fwd_f16_d192_m64_n16_w4_s3_qsmem_serving",
        ),
        (
            176,
            Variant::Paged,
            "flash_fwd_f16_d192_m64_n16_w4_s3_qsmem_paged",
        ),
        (
            200,
            Variant::Serving,
            "flash_fwd_f16_d224_m64_n32_w4_s2_pad_qsmem_serving",
        ),
        (
            224,
            Variant::Paged,
            "flash_fwd_f16_d224_m64_n32_w4_s2_pad_qsmem_paged",
        ),
        (
            256,
            Variant::Serving,
            "flash_fwd_f16_d256_m64_n16_w4_s3_qsmem_serving",
        ),
        (
            248,
            Variant::Paged,
            "flash_fwd_f16_d256_m64_n16_w4_s1_qsmem_paged",
        ),
    ] {
        assert_eq!(
            decode_kernel(Dtype::F16, head_dim, variant).map(|kernel| kernel.entry),
            Ok(entry),
            "{variant:?} D={head_dim}"
        );
    }
}

/// A padded problem's buffers hold only its own columns, while the split-KV workspace holds the
/// kernel's (its partial outputs are as wide as the tile); decode still packs the query heads
/// of a K/V head into one tile, and the keys of a split are whole key blocks of the tile.
#[test]
fn a_padded_decode_sizes_its_buffers_by_the_problem_and_its_workspace_by_the_kernel() {
    for (head_dim, kernel_head_dim) in [(80, 96), (200, 224), (248, 256), (40, 96), (8, 32)] {
        let shape = AttentionShape {
            batch: 1,
            heads_q: 8,
            heads_kv: 2,
            seq_len_q: 1,
            seq_len_kv: 4096,
            head_dim,
        };
        let options = ForwardOptions {
            num_splits: Some(4),
            ..bshd()
        };
        for paged in [
            None,
            Some(PagedKvCache {
                num_pages: 64,
                page_size: 64,
                pages_per_sequence: 64,
            }),
        ] {
            let plan = match paged {
                None => plan_kv_cache(Dtype::Bf16, &shape, &options, H100_SM_COUNT),
                Some(paged) => {
                    plan_paged_kv_cache(Dtype::Bf16, &shape, &paged, &options, H100_SM_COUNT)
                }
            }
            .unwrap();
            let tile = plan.kernel().spec.tile;
            assert_eq!(tile.head_dim, kernel_head_dim);
            assert!(plan.kernel().spec.pads_head_dim());
            let params = plan.params();
            assert_eq!(params.head_dim as usize, head_dim);
            // 4 query heads per K/V head become the rows of one tile; Bshd rows `head_dim`
            // apart.
            assert_eq!((params.heads_q, params.seq_len_q), (2, 4));
            assert_eq!(params.q_strides.seq, head_dim as u64);
            assert_eq!(params.q_strides.head, 4 * head_dim as u64);
            let required = plan.required();
            assert_eq!(required.q, shape.q_elements().unwrap());
            assert_eq!(required.o, shape.q_elements().unwrap());
            match paged {
                None => assert_eq!(required.k, shape.kv_elements().unwrap()),
                Some(paged) => assert_eq!(Some(required.k), paged.elements(2, head_dim)),
            }
            assert_eq!(plan.splits(), 4);
            let sequences = plan.sequences().unwrap();
            assert!((sequences.keys_per_split as usize).is_multiple_of(tile.block_n));
            // [splits, heads, rows] partial outputs of the kernel's width and their logsumexps.
            assert_eq!(
                plan.workspace_bytes(),
                4 * 2 * 4 * (kernel_head_dim + 1) * 4
            );
        }
    }
}

/// A kernel named in the options must hold the problem's rows: its own head dim, or a larger
/// one that pads. The D=64 and D=128 serving kernels run their own head dim only.
#[test]
fn a_named_serving_kernel_runs_smaller_head_dims_only_where_it_pads() {
    let with = |name| ForwardOptions {
        kernel: Some(kernel_by_name(name).unwrap()),
        ..bshd()
    };
    let plan_of = |head_dim, name| {
        plan_kv_cache(Dtype::F16, &decode(head_dim), &with(name), H100_SM_COUNT)
            .map(|plan| plan.kernel().entry)
    };
    let d96 = "flash_fwd_f16_d96_m64_n64_w4_s3_pad_serving";
    for head_dim in [8, 40, 72, 96] {
        assert_eq!(plan_of(head_dim, d96), Ok(d96));
    }
    let d256 = "flash_fwd_f16_d256_m64_n16_w4_s3_qsmem_serving";
    assert_eq!(plan_of(136, d256), Ok(d256));
    for (head_dim, name) in [
        (104, d96),
        (56, "flash_fwd_f16_d64_m64_n64_w4_s3_serving"),
        (120, "flash_fwd_f16_d128_m64_n64_w4_s2_serving"),
        (64, "flash_fwd_f16_d128_m64_n64_w4_s2_serving"),
    ] {
        assert!(
            matches!(
                plan_of(head_dim, name),
                Err(Error::KernelHeadDimMismatch { .. })
            ),
            "{name} at D={head_dim}"
        );
    }
    // The paged call takes the paged kernels only.
    assert!(matches!(
        plan_paged_kv_cache(Dtype::F16, &decode(80), &PAGED, &with(d96), H100_SM_COUNT),
        Err(Error::KernelVariantMismatch {
            needed: Variant::Paged,
            ..
        })
    ));
}

/// Offsets of `count` sequences of `length(i)` tokens each.
fn offsets(count: u32, length: impl Fn(u32) -> u32) -> Vec<u32> {
    let mut offsets = vec![0];
    for sequence in 0..count {
        offsets.push(offsets[sequence as usize] + length(sequence));
    }
    offsets
}

/// The rows per block of the dense kernel the dispatch table picks for `shape`.
fn dense_rows(dtype: Dtype, shape: &AttentionShape, causal: bool) -> usize {
    dispatch_kernel(dtype, shape, causal, H100_SM_COUNT)
        .unwrap()
        .spec
        .tile
        .block_m
}

/// The tile choice between the 64-row and 128-row serving tiles: a long variable-length prefill
/// (the timing tool's batch: 16 sequences of 128 to 4096 tokens, 32 query heads over 8) runs the
/// serving tile with the rows of the dense kernel at the batch's mean length, which at D=128
/// non-causal is the 128-row tile; decode, short chunks and paged caches keep the 64-row tile;
/// both element types.
#[test]
fn long_prefills_run_the_128_row_serving_tile_and_decode_keeps_64_rows() {
    let ragged = offsets(16, |i| 128 + i * (4096 - 128) / 15);
    let short = offsets(64, |i| 64 + i % 64);
    for dtype in CANDIDATE_DTYPES {
        let name = dtype.name();
        for head_dim in [64, 128] {
            let varlen = |cu_seqlens: &[u32], causal| {
                let shape = VarlenShape {
                    cu_seqlens_q: cu_seqlens,
                    cu_seqlens_kv: cu_seqlens,
                    heads_q: 32,
                    heads_kv: 8,
                    head_dim,
                };
                let options = ForwardOptions { causal, ..bshd() };
                let extents = shape.extents().unwrap();
                plan_varlen(dtype, &extents, &options, H100_SM_COUNT)
                    .unwrap()
                    .kernel()
            };
            for causal in [false, true] {
                // The dense problem of the batch's mean lengths, as the timing tool compares.
                let tokens = *ragged.last().unwrap() as usize;
                let mean = AttentionShape {
                    batch: 16,
                    heads_q: 32,
                    heads_kv: 8,
                    seq_len_q: tokens.div_ceil(16),
                    seq_len_kv: tokens.div_ceil(16),
                    head_dim,
                };
                let kernel = varlen(&ragged, causal);
                assert_eq!(kernel.spec.variant, Variant::Serving);
                assert_eq!(
                    kernel.spec.tile.block_m,
                    dense_rows(dtype, &mean, causal),
                    "{name} D={head_dim} causal={causal}"
                );
                // Fewer than 128 queries per sequence: 64 rows, whatever the dense table says.
                assert_eq!(varlen(&short, causal).spec.tile.block_m, 64);
            }
            // The goal's batch: the dense table's long-prefill tile at D=128, non-causal.
            if head_dim == 128 {
                assert_eq!(
                    varlen(&ragged, false).entry,
                    format!("flash_fwd_{name}_d128_m128_n32_w4_s3_pad_qsmem_serving")
                );
            }
            // Decode of a large batch (a large grid): 64 rows, contiguous cache or paged.
            let decode = AttentionShape {
                batch: 256,
                heads_q: 32,
                heads_kv: 8,
                seq_len_q: 1,
                seq_len_kv: 4096,
                head_dim,
            };
            let paged = PagedKvCache {
                num_pages: 256 * 64,
                page_size: 64,
                pages_per_sequence: 64,
            };
            for plan in [
                plan_kv_cache(dtype, &decode, &bshd(), H100_SM_COUNT),
                plan_paged_kv_cache(dtype, &decode, &paged, &bshd(), H100_SM_COUNT),
            ] {
                let spec = plan.unwrap().kernel().spec;
                assert_eq!(spec.tile, expected_tile(spec.variant, head_dim));
                assert_eq!(spec.tile.block_m, 64);
            }
            // A chunked prefill against a cache: 128-row tile where its mean chunk is long and
            // the dense table's pick has 128 rows, never on a paged cache.
            let chunks = offsets(8, |_| 2048);
            let cache = VarlenCacheShape {
                cu_seqlens_q: &chunks,
                heads_q: 32,
                heads_kv: 8,
                seq_len_kv: 4096,
                head_dim,
            };
            let extents = cache.extents().unwrap();
            let like = AttentionShape {
                seq_len_q: 2048,
                ..extents.longest
            };
            let contiguous = plan_varlen_kv_cache(dtype, &extents, None, &bshd(), H100_SM_COUNT);
            assert_eq!(
                contiguous.unwrap().kernel().spec.tile.block_m,
                dense_rows(dtype, &like, false)
            );
            let paged_chunks = PagedKvCache {
                num_pages: 8 * 64,
                ..paged
            };
            let paged_plan =
                plan_varlen_kv_cache(dtype, &extents, Some(&paged_chunks), &bshd(), H100_SM_COUNT);
            assert_eq!(paged_plan.unwrap().kernel().spec.tile.block_m, 64);
        }
    }
}
