//! KV-cache planning without a GPU: the serving kernel, grouped-query packing, the split
//! count, the workspace, and the errors; and the reference's cache semantics.

use flash_attn::reference::{attention, attention_kv_cache, random_normal, Precision, Scoring};
use flash_attn::{
    kernel_by_name, plan, plan_kv_cache, plan_kv_cache_on, plan_paged_kv_cache,
    plan_paged_kv_cache_on, plan_varlen_kv_cache, plan_varlen_kv_cache_on, split_count,
    AttentionShape, Dtype, Error, Family, ForwardOptions, Layout, PagedKvCache, Variant,
    VarlenCacheShape, MAX_SPLITS, SM90_PAGED_TILES,
};
use half::f16;

use crate::H100_SM_COUNT;

fn decode(batch: usize, heads_q: usize, heads_kv: usize, capacity: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads_q,
        heads_kv,
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

#[test]
fn decode_packs_the_query_heads_of_a_kv_head_into_one_tile() {
    let plan = plan_kv_cache(Dtype::F16, &decode(8, 32, 8, 8192), &bshd(), H100_SM_COUNT).unwrap();
    assert_eq!(plan.kernel().spec.variant, Variant::Serving);
    let params = plan.params();
    // 8 K/V heads of 4 rows each; row j of K/V head h is query head 4h + j.
    assert_eq!(
        (params.heads_q, params.seq_len_q, params.kv_group_size),
        (8, 4, 1)
    );
    let head = 128; // Bshd: heads are 128 elements apart.
    assert_eq!(params.q_strides.seq, head);
    assert_eq!(params.q_strides.head, 4 * head);
    assert_eq!(params.o_strides, params.q_strides);
    let sequences = plan.sequences().unwrap();
    assert_eq!(
        (sequences.lse_strides.batch, sequences.lse_strides.head),
        (32, 4)
    );
    assert_eq!(plan.grid().1, 8);
    assert_eq!(plan.grid().2, 8);
}

#[test]
fn a_causal_decode_step_sees_every_cached_key() {
    let options = ForwardOptions {
        causal: true,
        ..bshd()
    };
    let plan = plan_kv_cache(Dtype::F16, &decode(2, 8, 2, 100), &options, H100_SM_COUNT).unwrap();
    assert_eq!(
        plan.params().causal,
        0,
        "packed rows are one query position"
    );
    let chunk = AttentionShape {
        seq_len_q: 5,
        ..decode(2, 8, 2, 100)
    };
    let plan = plan_kv_cache(Dtype::F16, &chunk, &options, H100_SM_COUNT).unwrap();
    assert_eq!(plan.params().causal, 1, "a chunk of queries keeps its mask");
    assert_eq!(plan.params().heads_q, 8, "a chunk of queries is not packed");
}

#[test]
fn small_grids_split_the_key_range_and_large_ones_do_not() {
    // B=1, 8 K/V heads: 8 blocks for 132 SMs.
    let plan = plan_kv_cache(Dtype::F16, &decode(1, 32, 8, 32768), &bshd(), H100_SM_COUNT).unwrap();
    let splits = plan.splits() as usize;
    assert!(splits > 1 && splits <= MAX_SPLITS, "{splits} splits");
    assert_eq!(plan.grid().0 as usize, splits);
    let sequences = plan.sequences().unwrap();
    // Every split has keys, and together they cover the cache.
    let per_split = sequences.keys_per_split as usize;
    assert!(per_split.is_multiple_of(64));
    assert!((splits - 1) * per_split < 32768 && splits * per_split >= 32768);
    assert!(plan.workspace_bytes() >= splits * 8 * 4 * (128 + 1) * 4);
    // B=64 x 8 K/V heads = 512 blocks: no split, no workspace.
    let plan = plan_kv_cache(Dtype::F16, &decode(64, 32, 8, 2048), &bshd(), H100_SM_COUNT).unwrap();
    assert_eq!((plan.splits(), plan.workspace_bytes()), (1, 0));
}

#[test]
fn split_count_follows_the_wave_rule() {
    assert_eq!(split_count(1000, 64, 132), 1, "a full grid");
    assert_eq!(split_count(8, 1, 132), 1, "one key block");
    let splits = split_count(8, 512, 132);
    assert!(splits >= 16, "{splits}");
    for (blocks, key_blocks) in [(1, 10), (8, 128), (32, 33), (100, 7)] {
        let splits = split_count(blocks, key_blocks, 132);
        assert!((1..=key_blocks.min(MAX_SPLITS)).contains(&splits));
    }
}

#[test]
fn the_variants_do_not_mix() {
    let serving = kernel_by_name("flash_fwd_f16_d128_m64_n64_w4_s2_serving").unwrap();
    let dense = kernel_by_name("flash_fwd_f16_d128_m64_n64_w4_s2").unwrap();
    let shape = decode(2, 8, 2, 256);
    let with = |kernel| ForwardOptions {
        kernel: Some(kernel),
        ..bshd()
    };
    assert!(matches!(
        plan(Dtype::F16, &shape, &with(serving), H100_SM_COUNT),
        Err(Error::KernelVariantMismatch {
            needed: Variant::Dense,
            ..
        })
    ));
    assert!(matches!(
        plan_kv_cache(Dtype::F16, &shape, &with(dense), H100_SM_COUNT),
        Err(Error::KernelVariantMismatch {
            needed: Variant::Serving,
            ..
        })
    ));
    assert!(matches!(
        plan_kv_cache(Dtype::Bf16, &shape, &with(serving), H100_SM_COUNT),
        Err(Error::KernelDtypeMismatch { .. })
    ));
}

#[test]
fn kv_cache_plans_check_the_dense_rules_too() {
    let zero = AttentionShape {
        batch: 0,
        ..decode(1, 8, 2, 64)
    };
    assert!(matches!(
        plan_kv_cache(Dtype::F16, &zero, &bshd(), H100_SM_COUNT),
        Err(Error::ZeroSizedDimension { dimension: "batch" })
    ));
    let gqa = AttentionShape {
        heads_kv: 3,
        ..decode(1, 8, 2, 64)
    };
    assert!(matches!(
        plan_kv_cache(Dtype::F16, &gqa, &bshd(), H100_SM_COUNT),
        Err(Error::InvalidGqaRatio { .. })
    ));
}

#[test]
fn the_cache_reference_is_attention_over_each_used_prefix() {
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 3,
        seq_len_kv: 9,
        head_dim: 64,
    };
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 1);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 2);
    let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 3);
    // Full caches: the dense reference.
    let full = attention_kv_cache(
        &q,
        &k,
        &v,
        &[9, 9],
        shape,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    let dense = attention(&q, &k, &v, shape, 0.125, true, Precision::F64);
    assert_eq!(full.output, dense.output);
    // A length past the capacity reads as the capacity; 0 gives zeros and -inf.
    let clamped = attention_kv_cache(
        &q,
        &k,
        &v,
        &[u32::MAX, 0],
        shape,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    let per_sequence = shape.heads_q * shape.seq_len_q * shape.head_dim;
    assert_eq!(clamped.output[..per_sequence], dense.output[..per_sequence]);
    assert!(clamped.output[per_sequence..].iter().all(|&x| x == 0.0));
    assert!(clamped.logsumexp[12..]
        .iter()
        .all(|&x| x == f64::NEG_INFINITY));
    // A shorter prefix differs from the full cache, and causal rows see their own prefix.
    let short = attention_kv_cache(
        &q,
        &k,
        &v,
        &[5, 9],
        shape,
        &Scoring::plain(0.125, true),
        Precision::F64,
    );
    assert_ne!(short.output[..per_sequence], dense.output[..per_sequence]);
}

/// `num_splits` pins the split count of the KV-cache plans (fewer where the keys fill fewer key
/// blocks); 0 and more than `MAX_SPLITS` are errors, as is more than 1 for the calls that do
/// not split.
#[test]
fn an_explicit_split_count_is_honoured_within_its_limits() {
    let decode = AttentionShape {
        batch: 1,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: 32768,
        head_dim: 128,
    };
    let with_splits = |num_splits| ForwardOptions {
        num_splits,
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    // 512 key blocks of 64: `ceil(512 / n)` per split, as many splits as that takes (33 asks
    // for 16 per split: 32 splits).
    for (asked, splits) in [(1, 1), (7, 7), (32, 32), (33, 32), (128, 128)] {
        let plan = plan_kv_cache(Dtype::F16, &decode, &with_splits(Some(asked)), 132).unwrap();
        assert_eq!(plan.splits(), splits);
        assert_eq!(plan.grid().0, splits);
    }
    // 128 splits of a 4-key-block cache: one split per key block.
    let short = AttentionShape {
        seq_len_kv: 256,
        ..decode
    };
    let one_per_key_block =
        plan_kv_cache(Dtype::F16, &short, &with_splits(Some(128)), 132).unwrap();
    assert_eq!(one_per_key_block.splits(), 4);
    for (splits, limit) in [(0, MAX_SPLITS), (MAX_SPLITS + 1, MAX_SPLITS)] {
        assert_eq!(
            plan_kv_cache(Dtype::F16, &decode, &with_splits(Some(splits)), 132).map(|p| p.grid()),
            Err(Error::InvalidSplitCount { splits, limit })
        );
    }
    let dense = AttentionShape::new(1, 8, 512, 64);
    assert!(plan(Dtype::F16, &dense, &with_splits(Some(1)), 132).is_ok());
    assert_eq!(
        plan(Dtype::F16, &dense, &with_splits(Some(2)), 132).map(|p| p.grid()),
        Err(Error::InvalidSplitCount {
            splits: 2,
            limit: 1
        })
    );
}

/// On compute capability 9.0 a KV-cache call runs the sm90 family's serving kernel exactly
/// where that kernel takes it and the rule prefers it: a contiguous cache, more than one query
/// per sequence, no score modifier, and a grid of its tile that needs no split. Everywhere
/// else, and on other devices, the plan is the device-blind one's.
#[test]
fn hopper_runs_the_sm90_serving_kernel_on_the_cache_calls_it_takes() {
    let hopper = |shape: &AttentionShape, options: &ForwardOptions| {
        plan_kv_cache_on(Dtype::Bf16, shape, options, H100_SM_COUNT, (9, 0)).unwrap()
    };
    let blind = |shape: &AttentionShape, options: &ForwardOptions| {
        plan_kv_cache(Dtype::Bf16, shape, options, H100_SM_COUNT).unwrap()
    };
    let causal = ForwardOptions {
        causal: true,
        ..bshd()
    };
    let chunk = |batch, seq_len_q, head_dim| AttentionShape {
        seq_len_q,
        head_dim,
        ..decode(batch, 32, 8, 8192)
    };
    // Chunked prefills whose grids fill the GPU at one block per SM: the sm90 kernel, unsplit,
    // with the grid of its tile; head dim 80 padded to 96. B=1 at 512 queries is 128 blocks
    // of 128 rows, which the sm80 kernels' rule (two blocks per SM) would split.
    for (shape, block_m) in [
        (chunk(1, 512, 128), 128),
        (chunk(4, 2048, 128), 128),
        (chunk(4, 2048, 64), 192),
        (chunk(16, 300, 80), 128),
    ] {
        let plan = hopper(&shape, &causal);
        let spec = plan.kernel().spec;
        assert_eq!(
            (spec.family, spec.variant),
            (Family::Sm90, Variant::Serving)
        );
        assert_eq!(spec.tile.block_m, block_m, "{shape:?}");
        assert_eq!((plan.splits(), plan.workspace_bytes()), (1, 0));
        let rows = shape.seq_len_q.div_ceil(block_m) as u32;
        assert_eq!(plan.grid(), (rows, 32, shape.batch as u32));
        // The same call on Ada: the device-blind plan.
        let ada = plan_kv_cache_on(Dtype::Bf16, &shape, &causal, 128, (8, 9)).unwrap();
        assert_eq!(ada.kernel(), blind(&shape, &causal).kernel());
        assert_eq!(ada.kernel().spec.family, Family::Sm80);
    }
    let sm80 = |shape: &AttentionShape, options: &ForwardOptions| {
        let plan = hopper(shape, options);
        assert_eq!(plan.kernel().spec.family, Family::Sm80, "{shape:?}");
        let blind = blind(shape, options);
        assert_eq!(
            (plan.kernel(), plan.splits()),
            (blind.kernel(), blind.splits())
        );
    };
    // A small grid (1 x 2 query blocks x 32 heads) splits on the sm90 tile: the sm80 kernel.
    sm80(&chunk(1, 256, 128), &causal);
    // Decode with grouped heads packs them, and without them stays on the sm80 kernels (which
    // ran it faster); an explicit split; head dim 32 has no sm90 kernel; a softcap is a
    // modifier.
    sm80(&decode(64, 32, 8, 4096), &causal);
    sm80(&decode(64, 32, 32, 4096), &causal);
    let split = ForwardOptions {
        num_splits: Some(2),
        ..causal
    };
    sm80(&chunk(4, 2048, 128), &split);
    sm80(&chunk(4, 2048, 32), &causal);
    let softcap = ForwardOptions {
        softcap: Some(30.0),
        ..causal
    };
    sm80(&chunk(4, 2048, 128), &softcap);
}

/// The paged calls follow the same rule on the sm90 family's paged kernels: the serving
/// kernel's tile, but at D=64 on large grids the `m128` tile where the dense table picks
/// `m192` (which has no paged kernel); pages shorter and longer than the key blocks alike.
#[test]
fn hopper_runs_the_sm90_paged_kernel_on_the_paged_cache_calls_it_takes() {
    let causal = ForwardOptions {
        causal: true,
        ..bshd()
    };
    let chunk = |batch, seq_len_q, head_dim| AttentionShape {
        seq_len_q,
        head_dim,
        ..decode(batch, 32, 8, 8192)
    };
    let pages = |page_size: usize| PagedKvCache {
        num_pages: 4 * 8192 / page_size,
        page_size,
        pages_per_sequence: 8192 / page_size,
    };
    let on = |shape: &AttentionShape, paged: &PagedKvCache, options: &ForwardOptions, cc| {
        plan_paged_kv_cache_on(Dtype::Bf16, shape, paged, options, H100_SM_COUNT, cc).unwrap()
    };
    for (shape, block_m) in [
        (chunk(1, 512, 128), 128),
        (chunk(4, 2048, 128), 128),
        (chunk(4, 2048, 64), 128),
        (chunk(16, 300, 80), 128),
        (chunk(4, 2048, 192), 128),
        (chunk(4, 2048, 256), 128),
    ] {
        for page_size in [16, 64, 256] {
            let paged = pages(page_size);
            let plan = on(&shape, &paged, &causal, (9, 0));
            let spec = plan.kernel().spec;
            assert_eq!((spec.family, spec.variant), (Family::Sm90, Variant::Paged));
            assert_eq!(spec.tile.block_m, block_m, "{shape:?}");
            assert_eq!((plan.splits(), plan.workspace_bytes()), (1, 0));
            assert_eq!(
                plan.block_table_len(),
                shape.batch * paged.pages_per_sequence
            );
            // The contiguous call's tile where it has a paged kernel (not D=64's m192).
            let contiguous = plan_kv_cache_on(Dtype::Bf16, &shape, &causal, H100_SM_COUNT, (9, 0));
            let contiguous = contiguous.unwrap().kernel().spec;
            assert_eq!(contiguous.variant, Variant::Serving);
            assert_eq!(
                contiguous.tile == spec.tile,
                SM90_PAGED_TILES.contains(&contiguous.tile)
            );
            // Elsewhere the device-blind plan.
            let ada = on(&shape, &paged, &causal, (8, 9)).kernel();
            let blind = plan_paged_kv_cache(Dtype::Bf16, &shape, &paged, &causal, H100_SM_COUNT);
            assert_eq!(ada, blind.unwrap().kernel());
            assert_eq!(
                (ada.spec.family, ada.spec.variant),
                (Family::Sm80, Variant::Paged)
            );
        }
    }
    let sm80 = |shape: &AttentionShape, options: &ForwardOptions| {
        let plan = on(shape, &pages(64), options, (9, 0));
        assert_eq!(plan.kernel().spec.family, Family::Sm80, "{shape:?}");
    };
    // A small grid, a decode step, an explicit split, head dim 32 and a softcap: sm80.
    sm80(&chunk(1, 256, 128), &causal);
    sm80(&decode(64, 32, 8, 8192), &causal);
    sm80(&decode(64, 32, 32, 8192), &causal);
    sm80(
        &chunk(4, 2048, 128),
        &ForwardOptions {
            num_splits: Some(2),
            ..causal
        },
    );
    sm80(&chunk(4, 2048, 32), &causal);
    sm80(
        &chunk(4, 2048, 128),
        &ForwardOptions {
            softcap: Some(30.0),
            ..causal
        },
    );
    // A named sm90 paged kernel runs an unsplit call, and is refused one it cannot run.
    let kernel = on(&chunk(4, 2048, 128), &pages(64), &causal, (9, 0)).kernel();
    let named = ForwardOptions {
        kernel: Some(kernel),
        ..causal
    };
    assert_eq!(
        on(&chunk(4, 2048, 128), &pages(64), &named, (9, 0)).kernel(),
        kernel
    );
    let split = ForwardOptions {
        num_splits: Some(2),
        ..named
    };
    for (shape, options) in [
        (chunk(4, 2048, 128), split),
        (decode(8, 32, 8, 8192), named),
    ] {
        let refused = plan_paged_kv_cache_on(
            Dtype::Bf16,
            &shape,
            &pages(64),
            &options,
            H100_SM_COUNT,
            (9, 0),
        );
        assert_eq!(
            refused.unwrap_err(),
            Error::KernelNotForKvCache {
                kernel: kernel.entry
            }
        );
    }
}

/// From D=160 a paged call runs the dense table's warp-specialised tile at its own head dim,
/// and the 8-warp tile, which pads, at the head dims that pad to it; a named warp-specialised
/// paged kernel is refused a head dim it would pad.
#[test]
fn hopper_runs_the_warp_specialised_paged_kernels_at_their_own_head_dims() {
    let causal = ForwardOptions {
        causal: true,
        ..bshd()
    };
    let chunk = |head_dim| AttentionShape {
        seq_len_q: 2048,
        head_dim,
        ..decode(4, 32, 8, 8192)
    };
    let paged = PagedKvCache {
        num_pages: 4 * 8192 / 64,
        page_size: 64,
        pages_per_sequence: 8192 / 64,
    };
    let on = |head_dim, options: &ForwardOptions| {
        plan_paged_kv_cache_on(
            Dtype::F16,
            &chunk(head_dim),
            &paged,
            options,
            H100_SM_COUNT,
            (9, 0),
        )
    };
    for (head_dim, kernel_head_dim, tile) in [
        (160, 160, (128, 12)),
        (152, 160, (64, 8)),
        (192, 192, (64, 12)),
        (176, 192, (64, 8)),
        (224, 224, (64, 12)),
        (200, 224, (64, 8)),
        (256, 256, (64, 12)),
        (248, 256, (64, 8)),
    ] {
        let spec = on(head_dim, &causal).unwrap().kernel().spec;
        assert_eq!((spec.family, spec.variant), (Family::Sm90, Variant::Paged));
        assert_eq!(spec.tile.head_dim, kernel_head_dim, "head dim {head_dim}");
        assert_eq!(
            (spec.tile.block_n, spec.tile.warps),
            tile,
            "head dim {head_dim}"
        );
        assert_eq!(spec.pads_head_dim(), tile.1 == 8, "head dim {head_dim}");
    }
    let warp_specialised = "flash_fwd_f16_d224_m128_n64_w12_s2_paged_sm90a";
    let named = |kernel| ForwardOptions {
        kernel: Some(kernel_by_name(kernel).unwrap()),
        ..causal
    };
    assert_eq!(
        on(224, &named(warp_specialised)).unwrap().kernel().entry,
        warp_specialised
    );
    assert!(matches!(
        on(200, &named(warp_specialised)),
        Err(Error::KernelHeadDimMismatch {
            kernel_head_dim: 224,
            head_dim: 200,
            ..
        })
    ));
    let eight_warps = "flash_fwd_f16_d224_m128_n64_w8_s1_paged_sm90a";
    assert_eq!(
        on(200, &named(eight_warps)).unwrap().kernel().entry,
        eight_warps
    );
}

/// The variable-length form follows the same rule on its longest sequence and the mean chunk.
#[test]
fn hopper_runs_the_sm90_serving_kernel_on_a_chunked_prefill_batch() {
    let offsets = [0, 1000, 1500, 3500, 4096];
    let shape = VarlenCacheShape {
        cu_seqlens_q: &offsets,
        heads_q: 32,
        heads_kv: 8,
        seq_len_kv: 8192,
        head_dim: 128,
    };
    let extents = shape.extents().unwrap();
    let options = ForwardOptions {
        causal: true,
        ..bshd()
    };
    let plan = plan_varlen_kv_cache_on(Dtype::F16, &extents, None, &options, H100_SM_COUNT, (9, 0))
        .unwrap();
    assert_eq!(plan.kernel().spec.family, Family::Sm90);
    assert_eq!(plan.splits(), 1);
    assert_eq!(plan.grid(), (2000u32.div_ceil(128), 32, 4));
    let blind_tile_on_hopper = plan.kernel().spec.tile;
    let blind = plan_varlen_kv_cache(Dtype::F16, &extents, None, &options, H100_SM_COUNT).unwrap();
    assert_eq!(blind.kernel().spec.family, Family::Sm80);
    // In pages: the sm90 family's paged kernel of the same tile.
    let paged = PagedKvCache {
        num_pages: 512,
        page_size: 64,
        pages_per_sequence: 128,
    };
    let plan = plan_varlen_kv_cache_on(
        Dtype::F16,
        &extents,
        Some(&paged),
        &options,
        H100_SM_COUNT,
        (9, 0),
    )
    .unwrap();
    let spec = plan.kernel().spec;
    assert_eq!((spec.family, spec.variant), (Family::Sm90, Variant::Paged));
    assert_eq!(spec.tile, blind_tile_on_hopper);
    assert_eq!(plan.splits(), 1);
}
