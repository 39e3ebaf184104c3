//! Variable-length batches of queries against a KV cache (`forward_varlen_kv_cache`,
//! `forward_varlen_paged_kv_cache`, `forward_varlen_kv_cache_raw`): a chunked prefill whose
//! sequences have ragged query counts (empty ones, single tokens, odd lengths) and cache
//! lengths, contiguous and paged caches (scrambled tables, several page sizes), causal or not,
//! GQA and MQA, fp16 and bf16, both head dims, with and without split-KV, against the f64
//! reference; a page outside the cache; every serving and paged kernel on small problems (for
//! compute-sanitizer). Outputs and logsumexps are poisoned with NaN before every run.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_varlen_kv_cache, attention_varlen_paged_kv_cache, error_stats, random_normal,
    relayout, within_tolerance, Precision, ReferenceOutput, Scoring,
};
use flash_attn::{
    plan_varlen_kv_cache_on, Dtype, Element, Error, FlashAttention, ForwardKernel, ForwardOptions,
    Layout, RawTensors, RawWorkspace, SlidingWindow, VarlenCacheShape,
};
use half::{bf16, f16};

use crate::paged::ScrambledPages;
use crate::support::{
    assert_logsumexps, fresh_seed, gpu, modifiers_for, selected_kernels, SERVING_HEAD_DIMS,
    SERVING_MODIFIERS,
};

/// One problem: packed queries `[tokens_q, heads_q, head_dim]` (mean 0.5) and a cache, either
/// contiguous (`[batch, heads_kv, capacity, head_dim]`, stored in the options' layout; the
/// keys past a sequence's used length hold NaN: reading one would show) or paged.
struct VarlenCacheProblem<T: Element> {
    cu_seqlens_q: Vec<u32>,
    cache_lens: Vec<u32>,
    heads_q: usize,
    heads_kv: usize,
    capacity: usize,
    head_dim: usize,
    causal: bool,
    layout: Layout,
    kernel: Option<&'static ForwardKernel>,
    /// `ForwardOptions::num_splits`: `None`, the plan's own count.
    num_splits: Option<usize>,
    /// `ForwardOptions::window` and `ForwardOptions::softcap`: `None` in `new`.
    window: Option<SlidingWindow>,
    softcap: Option<f32>,
    seed: u64,
    q: Vec<T>,
    /// The contiguous cache (`[batch, heads_kv, capacity, head_dim]`), or the pages.
    k: Vec<T>,
    v: Vec<T>,
    pages: Option<ScrambledPages<T>>,
}

/// Offsets `0, l0, l0 + l1, ...` of these query counts.
fn offsets(lengths: &[usize]) -> Vec<u32> {
    std::iter::once(0)
        .chain(lengths.iter().scan(0, |end, &length| {
            *end += length as u32;
            Some(*end)
        }))
        .collect()
}

impl<T: Element> VarlenCacheProblem<T> {
    /// Sequences of `(queries, used keys)`; `page_size` `None` for a contiguous cache.
    fn new(
        sequences: &[(usize, u32)],
        (heads_q, heads_kv): (usize, usize),
        capacity: usize,
        head_dim: usize,
        page_size: Option<usize>,
        causal: bool,
    ) -> Self {
        let seed = fresh_seed();
        let cu_seqlens_q = offsets(&sequences.iter().map(|&(q, _)| q).collect::<Vec<_>>());
        let cache_lens: Vec<u32> = sequences.iter().map(|&(_, used)| used).collect();
        let batch = sequences.len();
        let tokens_q = *cu_seqlens_q.last().unwrap() as usize;
        let q = random_normal(tokens_q * heads_q * head_dim, 0.5, 1.0, seed);
        let dims = (batch, heads_kv, capacity, head_dim);
        let (k, v, pages) = match page_size {
            Some(page_size) => {
                let pages = ScrambledPages::new(dims, page_size, &cache_lens, seed);
                (Vec::new(), Vec::new(), Some(pages))
            }
            None => {
                let cache = |salt: u64| {
                    let mut values =
                        random_normal::<T>(batch * heads_kv * capacity * head_dim, 0.5, 1.0, salt);
                    for (b, &used) in cache_lens.iter().enumerate() {
                        for h in 0..heads_kv {
                            let slice = (b * heads_kv + h) * capacity;
                            values
                                [(slice + used as usize) * head_dim..(slice + capacity) * head_dim]
                                .fill(T::from_f64(f64::NAN));
                        }
                    }
                    values
                };
                (cache(seed ^ 0x5555), cache(seed ^ 0xAAAA), None)
            }
        };
        Self {
            cu_seqlens_q,
            cache_lens,
            heads_q,
            heads_kv,
            capacity,
            head_dim,
            causal,
            layout: Layout::Bshd,
            kernel: None,
            num_splits: None,
            window: None,
            softcap: None,
            seed,
            q,
            k,
            v,
            pages,
        }
    }

    fn shape(&self) -> VarlenCacheShape<'_> {
        VarlenCacheShape {
            cu_seqlens_q: &self.cu_seqlens_q,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            seq_len_kv: self.capacity,
            head_dim: self.head_dim,
        }
    }

    fn options(&self) -> ForwardOptions {
        ForwardOptions {
            causal: self.causal,
            layout: self.layout,
            kernel: self.kernel,
            num_splits: self.num_splits,
            window: self.window,
            softcap: self.softcap,
            ..ForwardOptions::default()
        }
    }

    fn tokens_q(&self) -> usize {
        *self.cu_seqlens_q.last().unwrap() as usize
    }

    fn q_dims(&self) -> (usize, usize, usize, usize) {
        (1, self.heads_q, self.tokens_q(), self.head_dim)
    }

    fn reference(&self, precision: Precision) -> ReferenceOutput {
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        match &self.pages {
            Some(pages) => attention_varlen_paged_kv_cache(
                &self.q,
                &pages.k_pages,
                &pages.v_pages,
                &pages.table,
                &self.cache_lens,
                &self.shape(),
                &pages.paged,
                &Scoring::of_options(&self.options(), scale),
                precision,
            ),
            None => attention_varlen_kv_cache(
                &self.q,
                &self.k,
                &self.v,
                &self.cache_lens,
                &self.shape(),
                &Scoring::of_options(&self.options(), scale),
                precision,
            ),
        }
    }

    /// Runs the safe call (or, with `raw`, the raw one on the instance's stream with its own
    /// workspace) on poisoned buffers; the output packed `[tokens_q, heads_q, head_dim]`.
    fn run(&self, gpu: &FlashAttention, raw: bool) -> Result<(Vec<T>, Vec<f32>), Error> {
        let layout = self.layout;
        let q = DeviceBuffer::from_slice(&relayout(&self.q, self.q_dims(), Layout::Bshd, layout))?;
        let (k, v) = match &self.pages {
            Some(pages) => (
                DeviceBuffer::from_slice(&pages.k_pages)?,
                DeviceBuffer::from_slice(&pages.v_pages)?,
            ),
            None => {
                let dims = (
                    self.cache_lens.len(),
                    self.heads_kv,
                    self.capacity,
                    self.head_dim,
                );
                (
                    DeviceBuffer::from_slice(&relayout(&self.k, dims, Layout::Bhsd, layout))?,
                    DeviceBuffer::from_slice(&relayout(&self.v, dims, Layout::Bhsd, layout))?,
                )
            }
        };
        let table = DeviceBuffer::from_slice(
            self.pages
                .as_ref()
                .map_or(&[0][..], |pages| &pages.table[..]),
        )?;
        let lens = DeviceBuffer::from_slice(&self.cache_lens)?;
        let cu_seqlens_q = DeviceBuffer::from_slice(&self.cu_seqlens_q)?;
        let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(f64::NAN); self.q.len()])?;
        let lse_elements = self.heads_q * self.tokens_q();
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; lse_elements])?;
        let shape = self.shape();
        let options = self.options();
        let paged = self.pages.as_ref().map(|pages| &pages.paged);
        if raw {
            let extents = shape.extents()?;
            let plan = plan_varlen_kv_cache_on(
                T::DTYPE,
                &extents,
                paged,
                &options,
                gpu.sm_count(),
                gpu.compute_capability(),
            )?;
            let partials = DeviceBuffer::<u8>::zeroed(plan.workspace_bytes().max(16))?;
            let counters = DeviceBuffer::<u32>::zeroed(plan.counters().max(1))?;
            let workspace = RawWorkspace {
                partials: partials.as_device_ptr().as_raw(),
                partial_bytes: partials.len(),
                counters: counters.as_device_ptr().as_raw(),
                counter_count: counters.len(),
            };
            let tensors = RawTensors {
                q: q.as_device_ptr().as_raw(),
                k: k.as_device_ptr().as_raw(),
                v: v.as_device_ptr().as_raw(),
                o: output.as_device_ptr().as_raw(),
                lse: Some(lse.as_device_ptr().as_raw()),
            };
            let block_table = paged.map_or(0, |_| table.as_device_ptr().as_raw());
            // SAFETY: every buffer holds what the plan requires (built for this problem) and
            // lives until the synchronisation below; the stream is the instance's.
            unsafe {
                gpu.forward_varlen_kv_cache_raw(
                    gpu.stream().as_inner(),
                    T::DTYPE,
                    tensors,
                    cu_seqlens_q.as_device_ptr().as_raw(),
                    lens.as_device_ptr().as_raw(),
                    block_table,
                    Some(workspace),
                    &extents,
                    paged,
                    &options,
                )?;
            }
            gpu.synchronize()?;
        } else {
            match paged {
                Some(paged) => gpu.forward_varlen_paged_kv_cache(
                    &q,
                    &k,
                    &v,
                    &table,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    &shape,
                    paged,
                    &options,
                )?,
                None => gpu.forward_varlen_kv_cache(
                    &q,
                    &k,
                    &v,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    &shape,
                    &options,
                )?,
            }
            gpu.synchronize()?;
        }
        let mut host = vec![T::from_f64(0.0); self.q.len()];
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; lse_elements];
        lse.copy_to(&mut host_lse[..])?;
        Ok((
            relayout(&host, self.q_dims(), layout, Layout::Bshd),
            host_lse,
        ))
    }

    /// The plan of the safe call on `gpu`'s device, as it plans.
    fn plan(&self, gpu: &FlashAttention) -> flash_attn::LaunchPlan {
        let extents = self.shape().extents().unwrap();
        let paged = self.pages.as_ref().map(|pages| &pages.paged);
        plan_varlen_kv_cache_on(
            T::DTYPE,
            &extents,
            paged,
            &self.options(),
            gpu.sm_count(),
            gpu.compute_capability(),
        )
        .unwrap()
    }

    /// [`Self::check`] of the safe call, after checking that the plan runs the kernels of the
    /// head dim the problem pads to; the plan's split count.
    fn check_splits(&self, gpu: &FlashAttention) -> u32 {
        let plan = self.plan(gpu);
        assert_eq!(
            plan.kernel().spec.tile.head_dim,
            flash_attn::padded_head_dim(self.head_dim).unwrap()
        );
        self.check(gpu, false);
        plan.splits()
    }

    /// The tolerance rule per sequence; a sequence whose reference is NaN (a page outside the
    /// cache) must be NaN, output and logsumexps.
    fn check(&self, gpu: &FlashAttention, raw: bool) {
        let plan = self.plan(gpu);
        let paged = self.pages.as_ref().map(|pages| &pages.paged);
        let context = format!(
            "offsets q {:?} lens {:?} heads {}/{} capacity {} d={} causal={} {:?} paged {:?} \
             kernel {} ({} splits) raw={raw}, seed {} (replay with FLASH_ATTN_SEED={})",
            self.cu_seqlens_q,
            self.cache_lens,
            self.heads_q,
            self.heads_kv,
            self.capacity,
            self.head_dim,
            self.causal,
            self.layout,
            paged,
            plan.kernel().entry,
            plan.splits(),
            self.seed,
            self.seed
        );
        let exact = self.reference(Precision::F64);
        let plain = self.reference(Precision::Plain(T::DTYPE));
        let (output, lse) = self
            .run(gpu, raw)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let (heads_q, d, tokens_q) = (self.heads_q, self.head_dim, self.tokens_q());
        for (b, queries) in self.cu_seqlens_q.windows(2).enumerate() {
            let queries = queries[0] as usize..queries[1] as usize;
            let rows = queries.start * heads_q * d..queries.end * heads_q * d;
            let logsumexps = |lse: &[f64]| -> Vec<f64> {
                (0..heads_q)
                    .flat_map(|head| lse[head * tokens_q..][queries.clone()].to_vec())
                    .collect()
            };
            let ours_lse: Vec<f64> = logsumexps(&lse.iter().map(|&x| x as f64).collect::<Vec<_>>());
            let want = &exact.output[rows.clone()];
            let got = &output[rows.clone()];
            if want.iter().any(|x| x.is_nan()) {
                assert!(
                    got.iter().all(|x| x.to_f64().is_nan()) && ours_lse.iter().all(|x| x.is_nan()),
                    "sequence {b} names a page outside the cache but is not all NaN: {context}"
                );
                continue;
            }
            let ours = error_stats(got.iter().map(|x| x.to_f64()), want);
            let plain = error_stats(plain.output[rows].iter().copied(), want);
            assert!(
                within_tolerance(&ours, &plain),
                "sequence {b}: error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
            );
            assert_logsumexps(
                ours_lse,
                &logsumexps(&exact.logsumexp),
                &format!("sequence {b}: {context}"),
            );
        }
    }
}

/// A chunked prefill: ragged query chunks (an empty one, single tokens, odd lengths) against
/// caches that hold them and more (one holds fewer keys than its queries: under causal masking
/// its first queries see none, and one uses no key at all), contiguous and paged at 16, 64 and
/// 256 keys per page, both layouts for the contiguous cache, with and without split-KV.
pub(crate) fn chunked_prefill_over_contiguous_and_paged_caches() {
    let gpu = gpu();
    // (queries, used keys): the first batch splits the key range (a small grid), the second
    // does not (16 heads x 4 sequences x 5 query blocks).
    let small_grid: &[(usize, u32)] = &[(7, 1000), (0, 512), (1, 1), (65, 65), (130, 4001)];
    let large_grid: &[(usize, u32)] = &[(300, 3000), (63, 2048), (1, 0), (257, 200)];
    for head_dim in [64, 128] {
        for causal in [false, true] {
            for page_size in [None, Some(16), Some(64), Some(256)] {
                for (sequences, heads) in [(small_grid, (8, 2)), (large_grid, (16, 1))] {
                    VarlenCacheProblem::<f16>::new(
                        sequences, heads, 4096, head_dim, page_size, causal,
                    )
                    .check(&gpu, false);
                    VarlenCacheProblem::<bf16>::new(
                        sequences, heads, 4096, head_dim, page_size, causal,
                    )
                    .check(&gpu, false);
                }
            }
            let mut bhsd =
                VarlenCacheProblem::<f16>::new(small_grid, (8, 2), 4096, head_dim, None, causal);
            bhsd.layout = Layout::Bhsd;
            bhsd.check(&gpu, false);
        }
    }
}

/// A chunked prefill at every kernel head dim and at head dims padded to one: ragged query
/// chunks (an empty one, a single token, odd lengths) against a contiguous cache (fp16, the
/// layouts alternating by head dim) and one paged at 32 keys (bf16), causal, GQA 4:1, the key
/// range split in three and not.
pub(crate) fn chunked_prefill_at_every_head_dim() {
    let gpu = gpu();
    let sequences: &[(usize, u32)] = &[(7, 1000), (0, 512), (1, 1), (65, 65), (30, 999)];
    for (index, &head_dim) in SERVING_HEAD_DIMS.iter().enumerate() {
        for num_splits in [Some(1), Some(3)] {
            let mut contiguous =
                VarlenCacheProblem::<f16>::new(sequences, (8, 2), 1024, head_dim, None, true);
            contiguous.layout = [Layout::Bshd, Layout::Bhsd][index % 2];
            contiguous.num_splits = num_splits;
            let mut paged =
                VarlenCacheProblem::<bf16>::new(sequences, (8, 2), 1024, head_dim, Some(32), true);
            paged.num_splits = num_splits;
            for splits in [contiguous.check_splits(&gpu), paged.check_splits(&gpu)] {
                assert_eq!(splits > 1, num_splits > Some(1));
            }
        }
    }
}

/// The raw entry point, contiguous and paged, with a caller's workspace.
pub(crate) fn the_raw_call_matches_the_reference() {
    let gpu = gpu();
    let sequences: &[(usize, u32)] = &[(5, 3000), (33, 100), (1, 4096)];
    for page_size in [None, Some(32)] {
        for causal in [false, true] {
            VarlenCacheProblem::<bf16>::new(sequences, (8, 8), 4096, 128, page_size, causal)
                .check(&gpu, true);
        }
    }
}

/// A used page outside the cache: that sequence's rows are NaN, the others right, split and
/// not.
pub(crate) fn a_page_outside_the_cache_makes_its_sequence_nan() {
    let gpu = gpu();
    for sequences in [&[(3, 900), (17, 2000)][..], &[(40, 4000); 8][..]] {
        let mut problem =
            VarlenCacheProblem::<f16>::new(sequences, (8, 2), 4096, 64, Some(16), true);
        let pages = problem.pages.as_mut().unwrap();
        let per_sequence = pages.paged.pages_per_sequence;
        pages.table[per_sequence] = pages.paged.num_pages as u32;
        problem.check(&gpu, false);
    }
}

/// Every serving and paged kernel on small problems (split and not; a bad page in one paged
/// sequence), for compute-sanitizer.
pub(crate) fn every_cache_kernel_on_a_small_batch() {
    let gpu = gpu();
    // The sm80 family's, and the sm90 family's where the device runs them (compute capability
    // 9.0), unsplit: the calls they take.
    for kernel in selected_kernels("serving or paged", |kernel| {
        kernel.spec.variant.is_serving()
            && (kernel.spec.family == flash_attn::Family::Sm80
                || kernel.runs_on(gpu.compute_capability()))
    }) {
        let d = kernel.spec.tile.head_dim;
        let page_size = kernel.spec.variant.is_paged().then_some(16);
        for sequences in [&[(1, 700), (9, 1024)][..], &[(70, 80), (0, 3), (5, 1)][..]] {
            fn run<T: Element>(
                gpu: &FlashAttention,
                kernel: &'static ForwardKernel,
                sequences: &[(usize, u32)],
                d: usize,
                page_size: Option<usize>,
            ) {
                let mut problem =
                    VarlenCacheProblem::<T>::new(sequences, (4, 2), 1024, d, page_size, true);
                problem.kernel = Some(kernel);
                if kernel.spec.family == flash_attn::Family::Sm90 {
                    problem.num_splits = Some(1);
                }
                (problem.window, problem.softcap) = modifiers_for(kernel);
                problem.check(gpu, false);
                if let Some(pages) = problem.pages.as_mut() {
                    pages.table[0] = pages.paged.num_pages as u32;
                    problem.check(gpu, false);
                }
            }
            match kernel.spec.dtype {
                Dtype::F16 => run::<f16>(&gpu, kernel, sequences, d, page_size),
                Dtype::Bf16 => run::<bf16>(&gpu, kernel, sequences, d, page_size),
            }
        }
    }
}

/// The score modifiers on a chunked prefill ([`SERVING_MODIFIERS`]): ragged query chunks
/// against contiguous caches and caches paged at 16 and 64 keys, causal, split and not, fp16
/// and bf16.
pub(crate) fn chunked_prefill_with_a_window_and_a_softcap() {
    let gpu = gpu();
    let sequences: &[(usize, u32)] = &[(7, 1000), (0, 512), (1, 1), (65, 65), (130, 4001)];
    for (window, softcap) in SERVING_MODIFIERS {
        for page_size in [None, Some(16), Some(64)] {
            for num_splits in [None, Some(3)] {
                let mut problem =
                    VarlenCacheProblem::<f16>::new(sequences, (8, 2), 4096, 128, page_size, true);
                (problem.window, problem.softcap) = (window, softcap);
                problem.num_splits = num_splits;
                problem.check(&gpu, false);
                let mut problem =
                    VarlenCacheProblem::<bf16>::new(sequences, (8, 2), 4096, 64, page_size, true);
                (problem.window, problem.softcap) = (window, softcap);
                problem.num_splits = num_splits;
                problem.check(&gpu, false);
            }
        }
    }
}
