//! Attention against a paged KV cache (`forward_paged_kv_cache`): every page size from 16 to
//! 256, scrambled block tables, decode (packed GQA, split-KV) and short query chunks, against
//! the f64 reference; a page index outside the cache.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_paged_kv_cache, error_stats, random_normal, relayout, within_tolerance, Precision,
    Scoring,
};
use flash_attn::{
    plan_paged_kv_cache, plan_paged_kv_cache_on, AttentionShape, Dtype, Element, Error, Family,
    FlashAttention, ForwardKernel, ForwardOptions, LaunchPlan, Layout, PagedKvCache, SlidingWindow,
    Variant,
};
use half::{bf16, f16};

use crate::support::{
    assert_logsumexps, fresh_seed, gpu, modifiers_for, selected_kernels, SERVING_HEAD_DIMS,
    SERVING_MODIFIERS,
};

/// One paged problem: random Q (mean 0.5) and [`ScrambledPages`].
struct PagedProblem<T: Element> {
    shape: AttentionShape,
    paged: PagedKvCache,
    cache_lens: Vec<u32>,
    table: Vec<u32>,
    causal: bool,
    /// `None`: the default paged kernel.
    kernel: Option<&'static ForwardKernel>,
    /// `ForwardOptions::num_splits`: `None`, the plan's own count.
    num_splits: Option<usize>,
    /// `ForwardOptions::window` and `ForwardOptions::softcap`: `None` in `new`.
    window: Option<SlidingWindow>,
    softcap: Option<f32>,
    seed: u64,
    q: Vec<T>,
    k_pages: Vec<T>,
    v_pages: Vec<T>,
}

/// A paged cache for `batch` sequences of `capacity` keys each, of which sequence `b` uses
/// `cache_lens[b]`: random pages (mean 0.5) and a block table that scatters each sequence's
/// pages over the cache in a seeded order. The pages no sequence uses hold NaN, and the
/// entries past a sequence's used pages hold `u32::MAX`: neither may be read.
pub(crate) struct ScrambledPages<T> {
    pub(crate) paged: PagedKvCache,
    pub(crate) table: Vec<u32>,
    pub(crate) k_pages: Vec<T>,
    pub(crate) v_pages: Vec<T>,
}

impl<T: Element> ScrambledPages<T> {
    pub(crate) fn new(
        (batch, heads_kv, capacity, head_dim): (usize, usize, usize, usize),
        page_size: usize,
        cache_lens: &[u32],
        seed: u64,
    ) -> Self {
        let pages_per_sequence = capacity / page_size;
        // A few more pages than the sequences name, so that some are never used.
        let num_pages = batch * pages_per_sequence + 3;
        let paged = PagedKvCache {
            num_pages,
            page_size,
            pages_per_sequence,
        };
        // A seeded permutation of the pages (an LCG's Fisher-Yates).
        let mut order: Vec<u32> = (0..num_pages as u32).collect();
        let mut state = seed | 1;
        for i in (1..num_pages).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let mut table = order[..batch * pages_per_sequence].to_vec();
        for (b, &used) in cache_lens.iter().enumerate() {
            let used_pages = (used as usize).min(capacity).div_ceil(page_size);
            table[b * pages_per_sequence + used_pages..(b + 1) * pages_per_sequence].fill(u32::MAX);
        }
        let elements = paged.elements(heads_kv, head_dim).unwrap();
        let pages = |salt: u64| {
            let mut values = random_normal::<T>(elements, 0.5, 1.0, seed ^ salt);
            let rows = page_size * heads_kv * head_dim;
            for page in 0..num_pages as u32 {
                if !table.contains(&page) {
                    values[page as usize * rows..][..rows].fill(T::from_f64(f64::NAN));
                }
            }
            values
        };
        Self {
            paged,
            k_pages: pages(0x5555),
            v_pages: pages(0xAAAA),
            table,
        }
    }
}

impl<T: Element> PagedProblem<T> {
    fn new(shape: AttentionShape, page_size: usize, cache_lens: &[u32], causal: bool) -> Self {
        let seed = fresh_seed();
        let dims = (
            shape.batch,
            shape.heads_kv,
            shape.seq_len_kv,
            shape.head_dim,
        );
        let pages = ScrambledPages::new(dims, page_size, cache_lens, seed);
        Self {
            shape,
            paged: pages.paged,
            cache_lens: cache_lens.to_vec(),
            causal,
            kernel: None,
            num_splits: None,
            window: None,
            softcap: None,
            seed,
            q: random_normal::<T>(shape.q_elements().unwrap(), 0.5, 1.0, seed),
            k_pages: pages.k_pages,
            v_pages: pages.v_pages,
            table: pages.table,
        }
    }

    fn options(&self) -> ForwardOptions {
        ForwardOptions {
            causal: self.causal,
            layout: Layout::Bshd,
            kernel: self.kernel,
            num_splits: self.num_splits,
            window: self.window,
            softcap: self.softcap,
            ..ForwardOptions::default()
        }
    }

    /// Runs on NaN-poisoned output and logsumexp buffers; output in `[B, H, S, D]` order.
    fn run(&self, gpu: &FlashAttention) -> Result<(Vec<T>, Vec<f32>), Error> {
        let s = self.shape;
        let q_dims = (s.batch, s.heads_q, s.seq_len_q, s.head_dim);
        let q = DeviceBuffer::from_slice(&relayout(&self.q, q_dims, Layout::Bhsd, Layout::Bshd))?;
        let k = DeviceBuffer::from_slice(&self.k_pages)?;
        let v = DeviceBuffer::from_slice(&self.v_pages)?;
        let table = DeviceBuffer::from_slice(&self.table)?;
        let lens = DeviceBuffer::from_slice(&self.cache_lens)?;
        let elements = s.q_elements().unwrap();
        let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(f64::NAN); elements])?;
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; s.lse_elements().unwrap()])?;
        gpu.forward_paged_kv_cache(
            &q,
            &k,
            &v,
            &table,
            &lens,
            &mut output,
            Some(&mut lse),
            s,
            &self.paged,
            &self.options(),
        )?;
        gpu.synchronize()?;
        let mut host = vec![T::from_f64(0.0); elements];
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; s.lse_elements().unwrap()];
        lse.copy_to(&mut host_lse[..])?;
        Ok((
            relayout(&host, q_dims, Layout::Bshd, Layout::Bhsd),
            host_lse,
        ))
    }

    /// The plan of the call on `gpu`, as `forward_paged_kv_cache` makes it.
    fn plan(&self, gpu: &FlashAttention) -> LaunchPlan {
        let capability = gpu.compute_capability();
        let (shape, options) = (&self.shape, &self.options());
        plan_paged_kv_cache_on(
            T::DTYPE,
            shape,
            &self.paged,
            options,
            gpu.sm_count(),
            capability,
        )
        .unwrap()
    }

    /// The tolerance rule on the sequences whose pages are all inside the cache; NaN (and
    /// nothing else) on the others.
    fn check(&self, gpu: &FlashAttention) {
        let s = self.shape;
        let plan = self.plan(gpu);
        let context = format!(
            "{s:?} {:?} lens {:?} causal={} ({} splits, kernel {}), seed {} (replay with \
             FLASH_ATTN_SEED={})",
            self.paged,
            self.cache_lens,
            self.causal,
            plan.splits(),
            plan.kernel().entry,
            self.seed,
            self.seed
        );
        let scale = s.default_softmax_scale() as f64;
        let reference = |precision| {
            attention_paged_kv_cache(
                &self.q,
                &self.k_pages,
                &self.v_pages,
                &self.table,
                &self.cache_lens,
                s,
                &self.paged,
                &Scoring::of_options(&self.options(), scale),
                precision,
            )
        };
        let exact = reference(Precision::F64);
        let plain = reference(Precision::Plain(T::DTYPE));
        let (output, lse) = self
            .run(gpu)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let rows = s.heads_q * s.seq_len_q;
        let d = s.head_dim;
        for b in 0..s.batch {
            let range = b * rows * d..(b + 1) * rows * d;
            let want = &exact.output[range.clone()];
            let got = &output[range.clone()];
            if want.iter().any(|x| x.is_nan()) {
                assert!(
                    got.iter().all(|x| x.to_f64().is_nan())
                        && lse[b * rows..(b + 1) * rows].iter().all(|x| x.is_nan()),
                    "sequence {b} names a page outside the cache but is not all NaN: {context}"
                );
                continue;
            }
            let ours = error_stats(got.iter().map(|x| x.to_f64()), want);
            let plain = error_stats(plain.output[range].iter().copied(), want);
            assert!(
                within_tolerance(&ours, &plain),
                "sequence {b}: error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
            );
            let rows_of_b = b * rows..(b + 1) * rows;
            assert_logsumexps(
                lse[rows_of_b.clone()].iter().map(|&x| x as f64),
                &exact.logsumexp[rows_of_b],
                &format!("sequence {b}: {context}"),
            );
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

pub(crate) fn every_page_size_with_scrambled_tables() {
    let gpu = gpu();
    for page_size in [16, 32, 64, 128, 256] {
        for head_dim in [64, 128] {
            for causal in [false, true] {
                // Decode with GQA 4:1 (packed rows), MQA, and a short query chunk; odd lengths.
                let cases = [
                    (shape(3, 8, 2, 1, 4096, head_dim), vec![1, 1000, 4096]),
                    (shape(2, 6, 1, 1, 1024, head_dim), vec![63, 65]),
                    (shape(2, 4, 2, 7, 1024, head_dim), vec![7, 1023]),
                ];
                for (shape, lens) in cases {
                    PagedProblem::<f16>::new(shape, page_size, &lens, causal).check(&gpu);
                    PagedProblem::<bf16>::new(shape, page_size, &lens, causal).check(&gpu);
                }
            }
        }
    }
}

pub(crate) fn split_kv_over_pages() {
    let gpu = gpu();
    for page_size in [16, 256] {
        let problem =
            PagedProblem::<f16>::new(shape(1, 32, 8, 1, 32768, 128), page_size, &[32001], false);
        let plan = plan_paged_kv_cache(
            f16::DTYPE,
            &problem.shape,
            &problem.paged,
            &problem.options(),
            gpu.sm_count(),
        )
        .unwrap();
        assert!(plan.splits() > 1, "B=1 decode must split");
        problem.check(&gpu);
    }
}

/// A used page outside the cache: that sequence's rows are NaN, the others are right, with
/// and without split-KV; an index in an unused entry (u32::MAX in every problem) is ignored.
pub(crate) fn a_page_outside_the_cache_makes_its_sequence_nan() {
    let gpu = gpu();
    for (shape, lens) in [
        (shape(3, 8, 2, 1, 1024, 128), vec![1024, 500, 17]),
        (shape(2, 8, 8, 5, 4096, 64), vec![4000, 4096]),
        (shape(1, 32, 8, 1, 16384, 128), vec![16000]),
    ] {
        for first_past_the_cache in [true, false] {
            let mut problem = PagedProblem::<bf16>::new(shape, 16, &lens, true);
            let pages_per_sequence = problem.paged.pages_per_sequence;
            // The last used page of the last sequence: the first index past the cache, or
            // u32::MAX.
            let b = shape.batch - 1;
            let used = (lens[b] as usize).div_ceil(16);
            problem.table[b * pages_per_sequence + used - 1] = if first_past_the_cache {
                problem.paged.num_pages as u32
            } else {
                u32::MAX
            };
            problem.check(&gpu);
        }
    }
}

pub(crate) fn a_short_block_table_is_rejected() {
    let gpu = gpu();
    let mut problem = PagedProblem::<f16>::new(shape(2, 8, 2, 1, 256, 64), 64, &[256, 256], false);
    problem.table.pop();
    match problem.run(&gpu) {
        Err(Error::BlockTableTooShort {
            length: 7,
            required: 8,
        }) => {}
        other => panic!("expected BlockTableTooShort, got {:?}", other.map(|_| ())),
    }
}

/// Every paged kernel (the default picks one per dtype and head dim) of this process's shard
/// on problems small enough for compute-sanitizer, with a page outside the cache in one
/// sequence: the sm80 family's split and not, and the sm90 family's where the device runs
/// them (compute capability 9.0) on the calls they take (no packed heads, no split), over
/// pages shorter than their key blocks (a lookup per row) and longer (one per tile).
pub(crate) fn every_paged_kernel_on_a_small_cache() {
    let gpu = gpu();
    for kernel in selected_kernels("paged", |k| {
        k.spec.variant.with_modifiers() == Variant::PagedModified
            && (k.spec.family == Family::Sm80 || k.runs_on(gpu.compute_capability()))
    }) {
        let d = kernel.spec.tile.head_dim;
        let ragged = |batch: u32| (0..batch).map(|b| 61 + 5 * b).collect::<Vec<u32>>();
        let cases = if kernel.spec.family == Family::Sm80 {
            [
                (shape(1, 8, 2, 1, 1024, d), 16, vec![999]),
                (shape(3, 4, 4, 65, 256, d), 32, vec![61, 256, 200]),
            ]
        } else {
            // 320 and 160 blocks of 128 rows: enough not to split.
            [
                (shape(40, 8, 2, 65, 256, d), 16, ragged(40)),
                (shape(40, 4, 4, 65, 256, d), 256, ragged(40)),
            ]
        };
        for (shape, page_size, lens) in cases {
            for causal in [false, true] {
                fn run<T: Element>(
                    gpu: &FlashAttention,
                    kernel: &'static ForwardKernel,
                    shape: AttentionShape,
                    page_size: usize,
                    lens: &[u32],
                    causal: bool,
                ) {
                    let mut problem = PagedProblem::<T>::new(shape, page_size, lens, causal);
                    problem.kernel = Some(kernel);
                    (problem.window, problem.softcap) = modifiers_for(kernel);
                    assert_eq!(problem.plan(gpu).kernel(), kernel);
                    problem.check(gpu);
                    // The first page of the last sequence past the cache.
                    let b = shape.batch - 1;
                    problem.table[b * problem.paged.pages_per_sequence] =
                        problem.paged.num_pages as u32;
                    problem.check(gpu);
                }
                match kernel.spec.dtype {
                    Dtype::F16 => run::<f16>(&gpu, kernel, shape, page_size, &lens, causal),
                    Dtype::Bf16 => run::<bf16>(&gpu, kernel, shape, page_size, &lens, causal),
                }
            }
        }
    }
}

/// The paged call at every kernel head dim and at head dims padded to one: pages of 16 keys
/// (fp16) and 64 keys (bf16) in scrambled tables, a key block over several pages and a page
/// over several key blocks; decode with GQA 4:1 over odd lengths and a causal chunk of 9
/// queries (MHA), the key range split in four and not. Then, in the decode case, a page outside
/// the cache in the first sequence, whose rows must be NaN, and only its rows: with a padded
/// head dim, its NaN rows must not reach past their columns into the next sequence's.
pub(crate) fn paged_decode_at_every_head_dim() {
    let gpu = gpu();
    for head_dim in SERVING_HEAD_DIMS {
        for num_splits in [Some(1), Some(4)] {
            let cases = [
                (shape(2, 8, 2, 1, 1024, head_dim), vec![1000, 33], false),
                (shape(2, 4, 4, 9, 512, head_dim), vec![9, 511], true),
            ];
            for (shape, lens, causal) in cases {
                fn check<T: Element>(
                    gpu: &FlashAttention,
                    shape: AttentionShape,
                    page_size: usize,
                    lens: &[u32],
                    causal: bool,
                    num_splits: Option<usize>,
                ) {
                    let mut problem = PagedProblem::<T>::new(shape, page_size, lens, causal);
                    problem.num_splits = num_splits;
                    let plan = plan_paged_kv_cache(
                        T::DTYPE,
                        &shape,
                        &problem.paged,
                        &problem.options(),
                        gpu.sm_count(),
                    )
                    .unwrap();
                    assert_eq!(plan.splits() > 1, num_splits > Some(1), "{shape:?}");
                    assert_eq!(
                        plan.kernel().spec.tile.head_dim,
                        flash_attn::padded_head_dim(shape.head_dim).unwrap()
                    );
                    problem.check(gpu);
                    if shape.seq_len_q == 1 {
                        problem.table[0] = problem.paged.num_pages as u32;
                        problem.check(gpu);
                    }
                }
                check::<f16>(&gpu, shape, 16, &lens, causal, num_splits);
                check::<bf16>(&gpu, shape, 64, &lens, causal, num_splits);
            }
        }
    }
}

/// Chunked prefill over a paged cache through the default API at every kernel head dim and at
/// head dims padded to one: 130 new queries per sequence (two query blocks of 128 rows, the
/// second of two rows) over ragged used lengths, pages of 16, 64 and 256 keys by head dim,
/// causal and not. On compute capability 9.0 these run the sm90 family's paged kernels from
/// kernel head dim 64 on (asserted), elsewhere the sm80 family's.
pub(crate) fn chunked_prefill_over_pages_at_every_head_dim() {
    let gpu = gpu();
    let hopper = gpu.compute_capability() == (9, 0);
    for (index, &head_dim) in SERVING_HEAD_DIMS.iter().enumerate() {
        let page_size = [16, 64, 256][index % 3];
        // 8 sequences x 16 heads x 2 query blocks: 256 blocks, no split on either family.
        let shape = shape(8, 16, 4, 130, 512, head_dim);
        let lens: Vec<u32> = (0..8).map(|b| 130 + 54 * b + b % 2).collect();
        fn check<T: Element>(
            gpu: &FlashAttention,
            shape: AttentionShape,
            page_size: usize,
            lens: &[u32],
            causal: bool,
            sm90: bool,
        ) {
            let problem = PagedProblem::<T>::new(shape, page_size, lens, causal);
            let plan = problem.plan(gpu);
            let spec = plan.kernel().spec;
            assert_eq!(
                spec.family == Family::Sm90,
                sm90,
                "{shape:?}: {}",
                plan.kernel().entry
            );
            assert_eq!(
                (spec.variant, plan.splits()),
                (Variant::Paged, 1),
                "{shape:?}"
            );
            problem.check(gpu);
        }
        let sm90 = hopper && flash_attn::padded_head_dim(head_dim).unwrap() >= 64;
        check::<f16>(&gpu, shape, page_size, &lens, index % 2 == 0, sm90);
        check::<bf16>(&gpu, shape, page_size, &lens, index % 2 == 1, sm90);
    }
}

/// The score modifiers over a paged cache ([`SERVING_MODIFIERS`]): pages of 16, 64 and 256 keys
/// in scrambled tables, decode with GQA 4:1 and a causal chunk of 7 queries, at head dims 128
/// and 96, fp16 and bf16.
pub(crate) fn a_window_and_a_softcap_over_pages() {
    let gpu = gpu();
    for (page_size, head_dim) in [(16, 128), (64, 128), (256, 128), (16, 96)] {
        for (window, softcap) in SERVING_MODIFIERS {
            for (shape, lens) in [
                (shape(3, 8, 2, 1, 4096, head_dim), vec![1, 1000, 4096]),
                (shape(2, 4, 2, 7, 1024, head_dim), vec![7, 1023]),
            ] {
                let mut problem = PagedProblem::<f16>::new(shape, page_size, &lens, true);
                (problem.window, problem.softcap) = (window, softcap);
                problem.check(&gpu);
                let mut problem = PagedProblem::<bf16>::new(shape, page_size, &lens, false);
                (problem.window, problem.softcap) = (window, softcap);
                problem.check(&gpu);
            }
        }
    }
}
