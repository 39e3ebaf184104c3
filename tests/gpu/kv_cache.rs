//! Attention against a KV cache (`forward_kv_cache`): decode with grouped-query packing and
//! split-KV, short query chunks, odd cache lengths, both layouts, against the f64 reference.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_kv_cache, attention_paged_kv_cache, error_stats, random_normal, relayout,
    within_tolerance, Precision, Scoring,
};
use flash_attn::{
    plan_kv_cache, plan_kv_cache_on, AttentionShape, Element, Error, FlashAttention,
    ForwardOptions, ForwardStrides, Layout, TensorStrides,
};
use half::{bf16, f16};

use crate::support::{
    assert_logsumexps, fresh_seed, gpu, modifiers_for, selected_kernels, SERVING_HEAD_DIMS,
    SERVING_MODIFIERS,
};

/// One KV-cache problem: random inputs (mean 0.5), cache lengths, and the check of one run.
struct CacheProblem<T: Element> {
    shape: AttentionShape,
    cache_lens: Vec<u32>,
    causal: bool,
    seed: u64,
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
}

impl<T: Element> CacheProblem<T> {
    fn new(shape: AttentionShape, cache_lens: &[u32], causal: bool) -> Self {
        let seed = fresh_seed();
        Self {
            shape,
            cache_lens: cache_lens.to_vec(),
            causal,
            seed,
            q: random_normal::<T>(shape.q_elements().unwrap(), 0.5, 1.0, seed),
            k: random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0x5555),
            v: random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0xAAAA),
        }
    }

    fn options(&self, layout: Layout) -> ForwardOptions {
        ForwardOptions {
            causal: self.causal,
            layout,
            ..ForwardOptions::default()
        }
    }

    /// Runs on NaN-poisoned output and logsumexp buffers; results in `[B, H, S, D]` order.
    fn run(&self, gpu: &FlashAttention, layout: Layout) -> Result<(Vec<T>, Vec<f32>), Error> {
        self.run_with(gpu, &self.options(layout))
    }

    fn run_with(
        &self,
        gpu: &FlashAttention,
        options: &ForwardOptions,
    ) -> Result<(Vec<T>, Vec<f32>), Error> {
        let layout = options.layout;
        let s = self.shape;
        let q_dims = (s.batch, s.heads_q, s.seq_len_q, s.head_dim);
        let kv_dims = (s.batch, s.heads_kv, s.seq_len_kv, s.head_dim);
        let q = DeviceBuffer::from_slice(&relayout(&self.q, q_dims, Layout::Bhsd, layout))?;
        let k = DeviceBuffer::from_slice(&relayout(&self.k, kv_dims, Layout::Bhsd, layout))?;
        let v = DeviceBuffer::from_slice(&relayout(&self.v, kv_dims, Layout::Bhsd, layout))?;
        let lens = DeviceBuffer::from_slice(&self.cache_lens)?;
        let elements = s.q_elements().unwrap();
        let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(f64::NAN); elements])?;
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; s.lse_elements().unwrap()])?;
        gpu.forward_kv_cache(&q, &k, &v, &lens, &mut output, Some(&mut lse), s, options)?;
        gpu.synchronize()?;
        let mut host = vec![T::from_f64(0.0); elements];
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; s.lse_elements().unwrap()];
        lse.copy_to(&mut host_lse[..])?;
        Ok((relayout(&host, q_dims, layout, Layout::Bhsd), host_lse))
    }

    /// Asserts the tolerance rule on the output and the logsumexp (as the dense tests do).
    fn check(&self, gpu: &FlashAttention, layout: Layout) {
        self.check_with(gpu, &self.options(layout))
    }

    /// The plan of the safe call with `options` on `gpu`'s device, as it plans.
    fn plan(&self, gpu: &FlashAttention, options: &ForwardOptions) -> flash_attn::LaunchPlan {
        plan_kv_cache_on(
            T::DTYPE,
            &self.shape,
            options,
            gpu.sm_count(),
            gpu.compute_capability(),
        )
        .unwrap()
    }

    fn check_with(&self, gpu: &FlashAttention, options: &ForwardOptions) {
        let (s, layout) = (self.shape, options.layout);
        let plan = self.plan(gpu, options);
        let context = format!(
            "{s:?} lens {:?} causal={} {layout:?} ({} splits, kernel {}), seed {} (replay with \
             FLASH_ATTN_SEED={})",
            self.cache_lens,
            self.causal,
            plan.splits(),
            plan.kernel().entry,
            self.seed,
            self.seed
        );
        let scale = s.default_softmax_scale() as f64;
        let reference = |precision| {
            attention_kv_cache(
                &self.q,
                &self.k,
                &self.v,
                &self.cache_lens,
                s,
                &Scoring::of_options(options, scale),
                precision,
            )
        };
        let exact = reference(Precision::F64);
        let plain = error_stats(reference(Precision::Plain(T::DTYPE)).output, &exact.output);
        let (output, lse) = self
            .run_with(gpu, options)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let ours = error_stats(output.iter().map(|x| x.to_f64()), &exact.output);
        assert!(
            within_tolerance(&ours, &plain),
            "error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
        );
        assert_logsumexps(lse.iter().map(|&x| x as f64), &exact.logsumexp, &context);
    }
}

fn check_both<F: Fn(bool) -> Vec<(AttentionShape, Vec<u32>)>>(cases: F, layout: Layout) {
    let gpu = gpu();
    for causal in [false, true] {
        for (shape, lens) in cases(causal) {
            CacheProblem::<f16>::new(shape, &lens, causal).check(&gpu, layout);
            CacheProblem::<bf16>::new(shape, &lens, causal).check(&gpu, layout);
        }
    }
}

fn shape(
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    seq_len_q: usize,
    capacity: usize,
    head_dim: usize,
) -> AttentionShape {
    AttentionShape {
        batch,
        heads_q,
        heads_kv,
        seq_len_q,
        seq_len_kv: capacity,
        head_dim,
    }
}

pub(crate) fn decode_with_grouped_heads_and_odd_cache_lengths() {
    for layout in [Layout::Bshd, Layout::Bhsd] {
        check_both(
            |_| {
                let mut cases = Vec::new();
                for head_dim in [64, 128] {
                    // GQA 4:1 (packed rows, split-KV over a small grid), MQA, and MHA.
                    cases.push((shape(3, 8, 2, 1, 4097, head_dim), vec![1, 1000, 4097]));
                    cases.push((shape(2, 6, 1, 1, 1000, head_dim), vec![63, 65]));
                    cases.push((shape(2, 4, 4, 1, 300, head_dim), vec![7, 300]));
                }
                cases
            },
            layout,
        );
    }
}

pub(crate) fn short_query_chunks_against_a_cache() {
    check_both(
        |_| {
            [64, 128]
                .into_iter()
                .flat_map(|d| {
                    [
                        (shape(2, 8, 2, 7, 1000, d), vec![7, 999]),
                        (shape(1, 4, 4, 65, 4097, d), vec![4097]),
                        (shape(3, 2, 1, 63, 200, d), vec![63, 64, 200]),
                    ]
                })
                .collect()
        },
        Layout::Bshd,
    );
}

pub(crate) fn decode_at_a_large_batch_has_no_split() {
    let gpu = gpu();
    let shape = shape(64, 32, 8, 1, 2048, 128);
    let lens: Vec<u32> = (0..64).map(|b| 2048 - 31 * b).collect();
    let problem = CacheProblem::<f16>::new(shape, &lens, false);
    problem.check(&gpu, Layout::Bshd);
}

pub(crate) fn split_kv_runs_are_bitwise_identical() {
    let gpu = gpu();
    let shape = shape(1, 32, 8, 1, 32768, 128);
    let problem = CacheProblem::<f16>::new(shape, &[32768], false);
    let plan = plan_kv_cache(
        f16::DTYPE,
        &shape,
        &problem.options(Layout::Bshd),
        gpu.sm_count(),
    )
    .unwrap();
    assert!(
        plan.splits() > 1,
        "B=1 decode must split: {} splits",
        plan.splits()
    );
    let first = problem.run(&gpu, Layout::Bshd).unwrap();
    for _ in 0..20 {
        let again = problem.run(&gpu, Layout::Bshd).unwrap();
        let bits = |values: &[f16]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&first.0),
            bits(&again.0),
            "output differs between runs"
        );
        assert_eq!(
            first.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            again.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            "logsumexp differs between runs"
        );
    }
    problem.check(&gpu, Layout::Bshd);
}

pub(crate) fn cache_lengths_past_the_capacity_read_as_the_capacity() {
    let gpu = gpu();
    let shape = shape(2, 8, 2, 1, 500, 64);
    let over = CacheProblem::<bf16>::new(shape, &[u32::MAX, 501], true);
    let clamped = CacheProblem {
        cache_lens: vec![500, 500],
        ..CacheProblem::<bf16>::new(shape, &[1], true)
    };
    let clamped = CacheProblem {
        q: over.q.clone(),
        k: over.k.clone(),
        v: over.v.clone(),
        ..clamped
    };
    assert_eq!(
        over.run(&gpu, Layout::Bshd)
            .unwrap()
            .0
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>(),
        clamped
            .run(&gpu, Layout::Bshd)
            .unwrap()
            .0
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    );
    over.check(&gpu, Layout::Bshd);
}

pub(crate) fn too_few_cache_lengths_are_rejected() {
    let gpu = gpu();
    let shape = shape(3, 8, 2, 1, 64, 64);
    let problem = CacheProblem::<f16>::new(shape, &[64, 64], false);
    match problem.run(&gpu, Layout::Bshd) {
        Err(Error::CacheLengthsTooShort {
            lengths: 2,
            batch: 3,
        }) => {}
        other => panic!("expected CacheLengthsTooShort, got {:?}", other.map(|_| ())),
    }
}

/// Every serving kernel, split and not, on problems small enough for compute-sanitizer (split
/// over processes with `FLASH_ATTN_KERNEL_SHARD`).
pub(crate) fn every_serving_kernel_on_a_small_cache() {
    let gpu = gpu();
    // The sm80 family's, and the sm90 family's unmodified ones where the device runs them
    // (compute capability 9.0), on the calls they take: no packed heads, no split.
    for kernel in selected_kernels("serving", |k| {
        k.spec.variant.with_modifiers() == flash_attn::Variant::ServingModified
            && (k.spec.family == flash_attn::Family::Sm80 || k.runs_on(gpu.compute_capability()))
    }) {
        let d = kernel.spec.tile.head_dim;
        let (window, softcap) = modifiers_for(kernel);
        let sm80 = kernel.spec.family == flash_attn::Family::Sm80;
        let cases = [
            (shape(1, 8, 2, 1, 1000, d), vec![999], true),
            // 8 heads: at least 320 blocks, enough not to split on the 128-row tiles too.
            (
                shape(40, 8, 8, 65, 100, d),
                (0..40).map(|b| 61 + b).collect(),
                false,
            ),
            // Decode without grouped heads, no packing: 240 blocks of one row each.
            (
                shape(60, 4, 4, 1, 333, d),
                (0..60).map(|b| 1 + 5 * b).collect(),
                false,
            ),
        ];
        for (shape, lens, splits) in cases.into_iter().filter(|case| sm80 || !case.2) {
            for causal in [false, true] {
                let check = |problem_splits: u32| {
                    assert_eq!(
                        problem_splits > 1,
                        splits,
                        "{shape:?}: {problem_splits} splits"
                    )
                };
                let options = ForwardOptions {
                    causal,
                    layout: Layout::Bshd,
                    kernel: Some(kernel),
                    window,
                    softcap,
                    ..ForwardOptions::default()
                };
                check(
                    plan_kv_cache(kernel.spec.dtype, &shape, &options, gpu.sm_count())
                        .unwrap()
                        .splits(),
                );
                match kernel.spec.dtype {
                    flash_attn::Dtype::F16 => {
                        CacheProblem::<f16>::new(shape, &lens, causal).check_with(&gpu, &options)
                    }
                    flash_attn::Dtype::Bf16 => {
                        CacheProblem::<bf16>::new(shape, &lens, causal).check_with(&gpu, &options)
                    }
                }
            }
        }
    }
}

/// The KV-cache call at every kernel head dim and at head dims padded to one: decode with GQA
/// 4:1 (packed rows) over odd cache lengths (one of a single key), the key range split in three
/// and not, and a causal chunk of 7 queries; fp16 and bf16, the layouts alternating by head
/// dim.
pub(crate) fn decode_and_chunks_at_every_head_dim() {
    let gpu = gpu();
    for (index, &head_dim) in SERVING_HEAD_DIMS.iter().enumerate() {
        let layout = [Layout::Bshd, Layout::Bhsd][index % 2];
        let cases = [
            (shape(3, 8, 2, 1, 1000, head_dim), vec![1, 999, 517], false),
            (shape(2, 4, 2, 7, 300, head_dim), vec![7, 299], true),
        ];
        for num_splits in [Some(1), Some(3)] {
            for (shape, lens, causal) in &cases {
                fn check<T: Element>(
                    gpu: &FlashAttention,
                    shape: AttentionShape,
                    lens: &[u32],
                    causal: bool,
                    layout: Layout,
                    num_splits: Option<usize>,
                ) {
                    let problem = CacheProblem::<T>::new(shape, lens, causal);
                    let options = ForwardOptions {
                        num_splits,
                        ..problem.options(layout)
                    };
                    let plan = problem.plan(gpu, &options);
                    assert_eq!(
                        plan.splits() > 1,
                        num_splits > Some(1),
                        "{shape:?}: {} splits",
                        plan.splits()
                    );
                    assert_eq!(
                        plan.kernel().spec.tile.head_dim,
                        flash_attn::padded_head_dim(shape.head_dim).unwrap()
                    );
                    problem.check_with(gpu, &options);
                }
                check::<f16>(&gpu, *shape, lens, *causal, layout, num_splits);
                check::<bf16>(&gpu, *shape, lens, *causal, layout, num_splits);
            }
        }
    }
}

/// The split combine reads its partials 8 splits at a time: split counts of 9, 13, 22 and 33
/// (the last chunk of 1, 5, 6 and 1 splits, past it none read as weight) against a cache of
/// 4,097 keys, with one sequence at full length, one short and one of a single key; decode with
/// GQA 4:1 and a causal chunk of 7 queries, D=64 and 128, fp16 and bf16.
pub(crate) fn split_counts_across_the_combine_chunks() {
    let gpu = gpu();
    for head_dim in [64, 128] {
        for (seq_len_q, causal) in [(1, false), (7, true)] {
            let shape = shape(3, 8, 2, seq_len_q, 4097, head_dim);
            let lens = [4097, 1500, 1];
            for (num_splits, expected) in [(9, 9), (13, 13), (29, 22), (40, 33)] {
                fn check<T: Element>(
                    gpu: &FlashAttention,
                    shape: AttentionShape,
                    lens: &[u32],
                    causal: bool,
                    num_splits: usize,
                    expected: u32,
                ) {
                    let problem = CacheProblem::<T>::new(shape, lens, causal);
                    let options = ForwardOptions {
                        num_splits: Some(num_splits),
                        ..problem.options(Layout::Bshd)
                    };
                    let plan = problem.plan(gpu, &options);
                    // 65 key blocks of 64 keys: the counts that leave no split empty.
                    assert_eq!(plan.kernel().spec.tile.block_n, 64, "{shape:?}");
                    assert_eq!(plan.splits(), expected, "{shape:?}: {num_splits} asked");
                    problem.check_with(gpu, &options);
                }
                check::<f16>(&gpu, shape, &lens, causal, num_splits, expected);
                check::<bf16>(&gpu, shape, &lens, causal, num_splits, expected);
            }
        }
    }
}

/// A padded head dim's output rows hold only its own columns: with O's rows 8 elements apart
/// more than the head dim, filled with a sentinel before the run, the kernels (decode with GQA
/// 4:1, its output written directly, through the split-KV combine, and as NaN rows for a
/// sequence whose paged cache names a page outside the cache) leave every gap as it was, and
/// the rows match the reference. fp16, Bhsd Q and a contiguous cache, or pages of 16 keys.
pub(crate) fn padded_head_dims_write_only_their_columns() {
    const GAP: usize = 8;
    const SENTINEL: f64 = 3.0;
    let gpu = gpu();
    for head_dim in [8, 40, 80, 200, 248] {
        let shape = shape(2, 8, 2, 1, 512, head_dim);
        let lens = [511, 300];
        let seed = fresh_seed();
        let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, seed);
        let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0x5555);
        let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0xAAAA);
        let dims = (shape.batch, shape.heads_kv, shape.seq_len_kv, head_dim);
        let mut pages = crate::paged::ScrambledPages::<f16>::new(dims, 16, &lens, seed);
        // The first sequence's first page lies outside the cache: its rows are NaN.
        pages.table[0] = pages.paged.num_pages as u32;
        let row = (head_dim + GAP) as u64;
        let o = TensorStrides {
            batch: shape.heads_q as u64 * row,
            head: row,
            seq: row,
        };
        let dense = |heads| Layout::Bhsd.strides(heads, 1, head_dim).unwrap();
        let q_strides = dense(shape.heads_q);
        let scale = shape.default_softmax_scale() as f64;
        for paged in [false, true] {
            let reference = |precision| match paged {
                false => attention_kv_cache(
                    &q,
                    &k,
                    &v,
                    &lens,
                    shape,
                    &Scoring::plain(scale, false),
                    precision,
                ),
                true => attention_paged_kv_cache(
                    &q,
                    &pages.k_pages,
                    &pages.v_pages,
                    &pages.table,
                    &lens,
                    shape,
                    &pages.paged,
                    &Scoring::plain(scale, false),
                    precision,
                ),
            };
            let exact = reference(Precision::F64);
            let plain = reference(Precision::Plain(f16::DTYPE));
            for num_splits in [Some(1), Some(4)] {
                let kv = match paged {
                    false => Layout::Bhsd
                        .strides(shape.heads_kv, shape.seq_len_kv, head_dim)
                        .unwrap(),
                    true => pages.paged.strides(shape.heads_kv, head_dim).unwrap(),
                };
                let options = ForwardOptions {
                    strides: Some(ForwardStrides {
                        q: q_strides,
                        k: kv,
                        v: kv,
                        o,
                    }),
                    num_splits,
                    ..ForwardOptions::default()
                };
                let context = format!(
                    "D={head_dim} paged={paged} {num_splits:?} splits, seed {seed} (replay with \
                     FLASH_ATTN_SEED={seed})"
                );
                let rows = shape.batch * shape.heads_q;
                let run = || -> Result<(Vec<f16>, Vec<f32>), Error> {
                    let q = DeviceBuffer::from_slice(&q)?;
                    let (k, v) = match paged {
                        false => (DeviceBuffer::from_slice(&k)?, DeviceBuffer::from_slice(&v)?),
                        true => (
                            DeviceBuffer::from_slice(&pages.k_pages)?,
                            DeviceBuffer::from_slice(&pages.v_pages)?,
                        ),
                    };
                    let table = DeviceBuffer::from_slice(&pages.table)?;
                    let cache_lens = DeviceBuffer::from_slice(&lens)?;
                    let mut output = DeviceBuffer::from_slice(&vec![
                        f16::from_f64(SENTINEL);
                        rows * (head_dim + GAP)
                    ])?;
                    let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; rows])?;
                    match paged {
                        false => gpu.forward_kv_cache(
                            &q,
                            &k,
                            &v,
                            &cache_lens,
                            &mut output,
                            Some(&mut lse),
                            shape,
                            &options,
                        )?,
                        true => gpu.forward_paged_kv_cache(
                            &q,
                            &k,
                            &v,
                            &table,
                            &cache_lens,
                            &mut output,
                            Some(&mut lse),
                            shape,
                            &pages.paged,
                            &options,
                        )?,
                    }
                    gpu.synchronize()?;
                    let mut host = vec![f16::from_f64(0.0); rows * (head_dim + GAP)];
                    output.copy_to(&mut host[..])?;
                    let mut host_lse = vec![0f32; rows];
                    lse.copy_to(&mut host_lse[..])?;
                    Ok((host, host_lse))
                };
                let (output, lse) =
                    run().unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
                let mut got = Vec::new();
                for (index, row) in output.chunks(head_dim + GAP).enumerate() {
                    assert!(
                        row[head_dim..].iter().all(|x| x.to_f64() == SENTINEL),
                        "row {index}: a column past the head dim was written: {context}"
                    );
                    got.extend(row[..head_dim].iter().map(|x| x.to_f64()));
                }
                // The first sequence's rows: NaN where its pages are outside the cache.
                let first = shape.heads_q * head_dim;
                if paged {
                    assert!(
                        got[..first].iter().all(|x| x.is_nan())
                            && lse[..shape.heads_q].iter().all(|x| x.is_nan()),
                        "the sequence with a page outside the cache is not all NaN: {context}"
                    );
                }
                let checked = if paged { first } else { 0 };
                let ours = error_stats(got[checked..].iter().copied(), &exact.output[checked..]);
                let plain = error_stats(
                    plain.output[checked..].iter().copied(),
                    &exact.output[checked..],
                );
                assert!(
                    within_tolerance(&ours, &plain),
                    "error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
                );
                let lse_checked = if paged { shape.heads_q } else { 0 };
                assert_logsumexps(
                    lse[lse_checked..].iter().map(|&x| x as f64),
                    &exact.logsumexp[lse_checked..],
                    &context,
                );
            }
        }
    }
}

/// The score modifiers against a KV cache ([`SERVING_MODIFIERS`]): decode with GQA 4:1 (a
/// window runs it unpacked, a softcap alone packed) and a chunk of 7 queries, odd cache
/// lengths, causal or not, the key range split as the plan picks and in three, at head dims 64,
/// 128 and 80 (padded to 96), fp16 and bf16.
pub(crate) fn a_window_and_a_softcap_against_a_cache() {
    let gpu = gpu();
    for head_dim in [64, 80, 128] {
        for (window, softcap) in SERVING_MODIFIERS {
            for causal in [false, true] {
                for (shape, lens) in [
                    (shape(3, 8, 2, 1, 4097, head_dim), vec![1, 1000, 4097]),
                    (shape(2, 8, 2, 7, 1000, head_dim), vec![7, 999]),
                ] {
                    for num_splits in [None, Some(3)] {
                        let options = ForwardOptions {
                            causal,
                            layout: Layout::Bshd,
                            window,
                            softcap,
                            num_splits,
                            ..ForwardOptions::default()
                        };
                        CacheProblem::<f16>::new(shape, &lens, causal).check_with(&gpu, &options);
                        CacheProblem::<bf16>::new(shape, &lens, causal).check_with(&gpu, &options);
                    }
                }
            }
        }
    }
}
