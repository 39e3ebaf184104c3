//! ALiBi on the serving calls (`forward_kv_cache_alibi`, `forward_paged_kv_cache_alibi`,
//! `forward_varlen_alibi`, `forward_varlen_kv_cache_alibi`,
//! `forward_varlen_paged_kv_cache_alibi` and their raw forms) against the f64 reference, whose
//! bias is each sequence's own (`-slope * |i + keys - queries - j|` with that sequence's query
//! count and used keys): alone and with a window and a softcap, causal or not, fp16 and bf16,
//! GQA, odd and empty sequences, one slope per head and per (sequence, head), split-KV decode
//! on a long cache, with the logsumexp; the raw and safe calls' bits; errors before launch;
//! every modified serving and paged kernel on small problems (for compute-sanitizer). Outputs
//! and logsumexps are poisoned with NaN before every run.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_kv_cache, attention_paged_kv_cache, attention_varlen, attention_varlen_kv_cache,
    attention_varlen_paged_kv_cache, error_stats, random_normal, relayout, within_tolerance,
    Precision, ReferenceOutput, Scoring,
};
use flash_attn::{
    plan_kv_cache_alibi, plan_paged_kv_cache_alibi, plan_varlen_alibi, plan_varlen_kv_cache_alibi,
    AlibiLayout, AlibiSlopes, AttentionShape, Dtype, Element, Error, FlashAttention, ForwardKernel,
    ForwardOptions, LaunchPlan, Layout, PagedKvCache, RawAlibiSlopes, RawSeqOffsets, RawTensors,
    RawWorkspace, SlidingWindow, Variant, VarlenCacheShape, VarlenShape,
};
use half::{bf16, f16};

use crate::modifiers::slopes;
use crate::paged::ScrambledPages;
use crate::support::{
    assert_logsumexps, fresh_seed, gpu, modifiers_for, selected_kernels, SERVING_MODIFIERS,
};

/// The serving calls that take ALiBi slopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    KvCache,
    PagedKvCache,
    Varlen,
    VarlenKvCache,
    VarlenPagedKvCache,
}

pub(crate) const CALLS: [Call; 5] = [
    Call::KvCache,
    Call::PagedKvCache,
    Call::Varlen,
    Call::VarlenKvCache,
    Call::VarlenPagedKvCache,
];

impl Call {
    /// Whether Q and O hold the sequences packed (`[tokens, heads, head_dim]`).
    fn is_packed(self) -> bool {
        matches!(
            self,
            Call::Varlen | Call::VarlenKvCache | Call::VarlenPagedKvCache
        )
    }

    /// The sequences of one test problem of the call, `(queries, keys)` each (the keys a
    /// cache's used ones): odd lengths around the tiles; for the packed calls also a sequence
    /// without queries, one of a single token and one with queries but no visible key under
    /// causal masking (or none at all).
    pub(crate) fn sequences(self, decode: bool) -> Vec<(usize, u32)> {
        match (self, decode) {
            (Call::KvCache | Call::PagedKvCache, true) => vec![(1, 1), (1, 517), (1, 999)],
            (Call::KvCache | Call::PagedKvCache, false) => vec![(7, 7), (7, 300), (7, 1000)],
            (Call::Varlen, _) => vec![(0, 5), (7, 63), (65, 1000), (1, 1), (130, 129), (3, 0)],
            (Call::VarlenKvCache | Call::VarlenPagedKvCache, _) => {
                vec![(0, 17), (7, 7), (1, 999), (9, 500), (4, 1)]
            }
        }
    }
}

/// Keys per page of the paged problems.
const PAGE_SIZE: usize = 64;

/// Which entry point runs a problem: the safe call (host slopes, checked and uploaded), or the
/// raw one on the instance's stream with the slopes on the device (at their buffer, or at an
/// address of the test's choosing).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry {
    Safe,
    Raw,
    RawSlopesAt(u64),
}

/// One serving problem with ALiBi: random inputs (mean 0.5), the sequences' lengths, the
/// options and the slopes. Q is `[batch, heads_q, seq_len_q, head_dim]` for the cache calls
/// (Bhsd), packed `[tokens_q, heads_q, head_dim]` (Bshd) for the others; a contiguous cache is
/// kept `[batch, heads_kv, capacity, head_dim]` (the reference's order) with NaN past each
/// sequence's used keys; a paged one scrambled ([`ScrambledPages`]).
pub(crate) struct Problem<T: Element> {
    pub(crate) call: Call,
    pub(crate) sequences: Vec<(usize, u32)>,
    pub(crate) heads_q: usize,
    pub(crate) heads_kv: usize,
    pub(crate) head_dim: usize,
    /// The cache's keys per sequence (the cache calls).
    pub(crate) capacity: usize,
    pub(crate) options: ForwardOptions,
    pub(crate) layout: AlibiLayout,
    pub(crate) slopes: Vec<f32>,
    pub(crate) seed: u64,
    pub(crate) cu_seqlens_q: Vec<u32>,
    pub(crate) cu_seqlens_kv: Vec<u32>,
    pub(crate) q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    pub(crate) pages: Option<ScrambledPages<T>>,
}

/// Offsets `0, l0, l0 + l1, ...` of these lengths.
fn offsets(lengths: impl Iterator<Item = usize>) -> Vec<u32> {
    std::iter::once(0)
        .chain(lengths.scan(0, |end, length| {
            *end += length as u32;
            Some(*end)
        }))
        .collect()
}

impl<T: Element> Problem<T> {
    /// `(heads_q, heads_kv)` heads, caches of `capacity` keys; the options' layout is the
    /// call's (Bhsd for the cache calls, Bshd for the packed ones).
    pub(crate) fn new(
        call: Call,
        sequences: &[(usize, u32)],
        (heads_q, heads_kv): (usize, usize),
        head_dim: usize,
        capacity: usize,
        options: ForwardOptions,
        layout: AlibiLayout,
    ) -> Self {
        let seed = fresh_seed();
        let batch = sequences.len();
        let cu_seqlens_q = offsets(sequences.iter().map(|&(q, _)| q));
        let cu_seqlens_kv = offsets(sequences.iter().map(|&(_, k)| k as usize));
        if !call.is_packed() {
            assert!(sequences.iter().all(|&(q, _)| q == sequences[0].0));
        }
        let tokens_q = *cu_seqlens_q.last().unwrap() as usize;
        let q = random_normal(tokens_q * heads_q * head_dim, 0.5, 1.0, seed);
        let cache_lens: Vec<u32> = sequences.iter().map(|&(_, used)| used).collect();
        let dims = (batch, heads_kv, capacity, head_dim);
        let (k, v, pages) = match call {
            Call::Varlen => {
                let tokens_kv = *cu_seqlens_kv.last().unwrap() as usize;
                let keys = |salt| random_normal(tokens_kv * heads_kv * head_dim, 0.5, 1.0, salt);
                (keys(seed ^ 0x5555), keys(seed ^ 0xAAAA), None)
            }
            Call::KvCache | Call::VarlenKvCache => {
                let cache = |salt: u64| {
                    let mut values: Vec<T> =
                        random_normal(batch * heads_kv * capacity * head_dim, 0.5, 1.0, salt);
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
            Call::PagedKvCache | Call::VarlenPagedKvCache => {
                let pages = ScrambledPages::new(dims, PAGE_SIZE, &cache_lens, seed);
                (Vec::new(), Vec::new(), Some(pages))
            }
        };
        let slopes = slopes(
            &AttentionShape {
                batch,
                heads_q,
                ..AttentionShape::new(1, 1, 1, head_dim)
            },
            layout,
        );
        let layout_of_tensors = if call.is_packed() {
            Layout::Bshd
        } else {
            Layout::Bhsd
        };
        Self {
            call,
            sequences: sequences.to_vec(),
            heads_q,
            heads_kv,
            head_dim,
            capacity,
            options: ForwardOptions {
                layout: layout_of_tensors,
                ..options
            },
            layout,
            slopes,
            seed,
            cu_seqlens_q,
            cu_seqlens_kv,
            q,
            k,
            v,
            pages,
        }
    }

    pub(crate) fn alibi(&self) -> AlibiSlopes<'_> {
        AlibiSlopes {
            slopes: &self.slopes,
            layout: self.layout,
        }
    }

    pub(crate) fn cache_lens(&self) -> Vec<u32> {
        self.sequences.iter().map(|&(_, used)| used).collect()
    }

    pub(crate) fn cache_shape(&self) -> AttentionShape {
        AttentionShape {
            batch: self.sequences.len(),
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            seq_len_q: self.sequences[0].0,
            seq_len_kv: self.capacity,
            head_dim: self.head_dim,
        }
    }

    pub(crate) fn varlen_shape(&self) -> VarlenShape<'_> {
        VarlenShape {
            cu_seqlens_q: &self.cu_seqlens_q,
            cu_seqlens_kv: &self.cu_seqlens_kv,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            head_dim: self.head_dim,
        }
    }

    pub(crate) fn varlen_cache_shape(&self) -> VarlenCacheShape<'_> {
        VarlenCacheShape {
            cu_seqlens_q: &self.cu_seqlens_q,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            seq_len_kv: self.capacity,
            head_dim: self.head_dim,
        }
    }

    pub(crate) fn paged(&self) -> PagedKvCache {
        self.pages.as_ref().expect("a paged problem").paged
    }

    /// The block table of a paged problem; one unread entry otherwise (the contiguous calls
    /// take none).
    pub(crate) fn table(&self) -> Vec<u32> {
        self.pages
            .as_ref()
            .map_or(vec![u32::MAX], |pages| pages.table.clone())
    }

    /// K and V as the call takes them: the pages, the packed keys, or the contiguous cache in
    /// the options' layout.
    pub(crate) fn device_kv(&self) -> (Vec<T>, Vec<T>) {
        match &self.pages {
            Some(pages) => (pages.k_pages.clone(), pages.v_pages.clone()),
            None if self.call == Call::VarlenKvCache => {
                let dims = (
                    self.sequences.len(),
                    self.heads_kv,
                    self.capacity,
                    self.head_dim,
                );
                let to_layout = |cache: &[T]| relayout(cache, dims, Layout::Bhsd, Layout::Bshd);
                (to_layout(&self.k), to_layout(&self.v))
            }
            None => (self.k.clone(), self.v.clone()),
        }
    }

    /// Elements of Q and O, and of the logsumexp.
    pub(crate) fn output_lengths(&self) -> (usize, usize) {
        let tokens_q = *self.cu_seqlens_q.last().unwrap() as usize;
        (
            tokens_q * self.heads_q * self.head_dim,
            tokens_q * self.heads_q,
        )
    }

    /// The plan of the call's ALiBi planner.
    pub(crate) fn plan(&self, sm_count: usize) -> Result<LaunchPlan, Error> {
        let (dtype, options, layout) = (T::DTYPE, &self.options, self.layout);
        match self.call {
            Call::KvCache => {
                plan_kv_cache_alibi(dtype, &self.cache_shape(), options, layout, sm_count)
            }
            Call::PagedKvCache => plan_paged_kv_cache_alibi(
                dtype,
                &self.cache_shape(),
                &self.paged(),
                options,
                layout,
                sm_count,
            ),
            Call::Varlen => {
                let extents = self.varlen_shape().extents()?;
                plan_varlen_alibi(dtype, &extents, options, layout, sm_count)
            }
            Call::VarlenKvCache | Call::VarlenPagedKvCache => {
                let extents = self.varlen_cache_shape().extents()?;
                let paged = self.pages.as_ref().map(|pages| &pages.paged);
                plan_varlen_kv_cache_alibi(dtype, &extents, paged, options, layout, sm_count)
            }
        }
    }

    /// The f64 reference (or a plain 16-bit model of it) of the problem, in the output's order.
    fn reference(&self, precision: Precision) -> ReferenceOutput {
        let scoring = Scoring {
            alibi: Some(self.alibi()),
            ..Scoring::of_options(&self.options, 1.0 / (self.head_dim as f64).sqrt())
        };
        let lens = self.cache_lens();
        match (self.call, &self.pages) {
            (Call::KvCache, _) => attention_kv_cache(
                &self.q,
                &self.k,
                &self.v,
                &lens,
                self.cache_shape(),
                &scoring,
                precision,
            ),
            (Call::PagedKvCache, Some(pages)) => attention_paged_kv_cache(
                &self.q,
                &pages.k_pages,
                &pages.v_pages,
                &pages.table,
                &lens,
                self.cache_shape(),
                &pages.paged,
                &scoring,
                precision,
            ),
            (Call::Varlen, _) => attention_varlen(
                &self.q,
                &self.k,
                &self.v,
                &self.varlen_shape(),
                &scoring,
                precision,
            ),
            (Call::VarlenKvCache, _) => attention_varlen_kv_cache(
                &self.q,
                &self.k,
                &self.v,
                &lens,
                &self.varlen_cache_shape(),
                &scoring,
                precision,
            ),
            (Call::VarlenPagedKvCache, Some(pages)) => attention_varlen_paged_kv_cache(
                &self.q,
                &pages.k_pages,
                &pages.v_pages,
                &pages.table,
                &lens,
                &self.varlen_cache_shape(),
                &pages.paged,
                &scoring,
                precision,
            ),
            (call, None) => unreachable!("{call:?} has pages"),
        }
    }

    /// Runs the call through `entry` on NaN-poisoned output and logsumexp buffers; the output
    /// and the logsumexp in the reference's order.
    pub(crate) fn run(
        &self,
        gpu: &FlashAttention,
        entry: Entry,
    ) -> Result<(Vec<T>, Vec<f32>), Error> {
        let (result, output, lse) = self.launch(gpu, entry)?;
        result.map(|()| (output, lse))
    }

    /// What the call returned through `entry`, and the output and logsumexp buffers after the
    /// stream has finished, whether it launched or not. The outer error is the test's own
    /// (an allocation or a copy).
    #[allow(clippy::type_complexity)]
    fn launch(
        &self,
        gpu: &FlashAttention,
        entry: Entry,
    ) -> Result<(Result<(), Error>, Vec<T>, Vec<f32>), Error> {
        let (k, v) = self.device_kv();
        let q = DeviceBuffer::from_slice(&self.q)?;
        let (k, v) = (DeviceBuffer::from_slice(&k)?, DeviceBuffer::from_slice(&v)?);
        let lens = DeviceBuffer::from_slice(&self.cache_lens())?;
        let table = DeviceBuffer::from_slice(&self.table())?;
        let cu_seqlens_q = DeviceBuffer::from_slice(&self.cu_seqlens_q)?;
        let cu_seqlens_kv = DeviceBuffer::from_slice(&self.cu_seqlens_kv)?;
        let device_slopes = DeviceBuffer::from_slice(&self.slopes)?;
        let (output_len, lse_len) = self.output_lengths();
        let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(f64::NAN); output_len])?;
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; lse_len])?;
        // The raw calls' workspace: the plan's, zeroed.
        let plan = self.plan(gpu.sm_count());
        let (partial_bytes, counter_count) = plan
            .as_ref()
            .map_or((0, 0), |plan| (plan.workspace_bytes(), plan.counters()));
        let partials = DeviceBuffer::<u8>::zeroed(partial_bytes.max(16))?;
        let counters = DeviceBuffer::<u32>::zeroed(counter_count.max(4))?;
        let workspace = (partial_bytes > 0).then(|| RawWorkspace {
            partials: partials.as_device_ptr().as_raw(),
            partial_bytes,
            counters: counters.as_device_ptr().as_raw(),
            counter_count,
        });
        let address = |buffer: &DeviceBuffer<u32>| buffer.as_device_ptr().as_raw();
        let raw_slopes = |address| RawAlibiSlopes {
            address,
            layout: self.layout,
        };
        let (alibi, shape) = (self.alibi(), self.cache_shape());
        let options = &self.options;
        let result = match entry {
            Entry::Safe => match self.call {
                Call::KvCache => gpu.forward_kv_cache_alibi(
                    &q,
                    &k,
                    &v,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    alibi,
                    shape,
                    options,
                ),
                Call::PagedKvCache => gpu.forward_paged_kv_cache_alibi(
                    &q,
                    &k,
                    &v,
                    &table,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    alibi,
                    shape,
                    &self.paged(),
                    options,
                ),
                Call::Varlen => gpu.forward_varlen_alibi(
                    &q,
                    &k,
                    &v,
                    &mut output,
                    Some(&mut lse),
                    alibi,
                    &self.varlen_shape(),
                    options,
                ),
                Call::VarlenKvCache => gpu.forward_varlen_kv_cache_alibi(
                    &q,
                    &k,
                    &v,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    alibi,
                    &self.varlen_cache_shape(),
                    options,
                ),
                Call::VarlenPagedKvCache => gpu.forward_varlen_paged_kv_cache_alibi(
                    &q,
                    &k,
                    &v,
                    &table,
                    &lens,
                    &mut output,
                    Some(&mut lse),
                    alibi,
                    &self.varlen_cache_shape(),
                    &self.paged(),
                    options,
                ),
            },
            Entry::Raw | Entry::RawSlopesAt(_) => {
                let slopes = raw_slopes(match entry {
                    Entry::RawSlopesAt(address) => address,
                    _ => device_slopes.as_device_ptr().as_raw(),
                });
                let tensors = RawTensors {
                    q: q.as_device_ptr().as_raw(),
                    k: k.as_device_ptr().as_raw(),
                    v: v.as_device_ptr().as_raw(),
                    o: output.as_device_ptr().as_raw(),
                    lse: Some(lse.as_device_ptr().as_raw()),
                };
                let stream = gpu.stream().as_inner();
                let dtype = T::DTYPE;
                // SAFETY: every buffer holds what the plan requires (the safe call's checks
                // pass on the same buffers: `raw_and_safe_calls_agree_bit_for_bit`), the
                // offsets, lengths, table and slopes are this problem's, the workspace is the
                // plan's, zeroed, and all of them live until the synchronisation below, on the
                // instance's own stream.
                unsafe {
                    match self.call {
                        Call::KvCache => gpu.forward_kv_cache_alibi_raw(
                            stream,
                            dtype,
                            tensors,
                            address(&lens),
                            workspace,
                            slopes,
                            shape,
                            options,
                        ),
                        Call::PagedKvCache => gpu.forward_paged_kv_cache_alibi_raw(
                            stream,
                            dtype,
                            tensors,
                            address(&table),
                            address(&lens),
                            workspace,
                            slopes,
                            shape,
                            &self.paged(),
                            options,
                        ),
                        Call::Varlen => gpu.forward_varlen_alibi_raw(
                            stream,
                            dtype,
                            tensors,
                            RawSeqOffsets {
                                cu_seqlens_q: address(&cu_seqlens_q),
                                cu_seqlens_kv: address(&cu_seqlens_kv),
                            },
                            slopes,
                            &self.varlen_shape().extents()?,
                            options,
                        ),
                        Call::VarlenKvCache | Call::VarlenPagedKvCache => {
                            let paged = self.pages.as_ref().map(|pages| &pages.paged);
                            let block_table = if paged.is_some() { address(&table) } else { 0 };
                            gpu.forward_varlen_kv_cache_alibi_raw(
                                stream,
                                dtype,
                                tensors,
                                address(&cu_seqlens_q),
                                address(&lens),
                                block_table,
                                workspace,
                                slopes,
                                &self.varlen_cache_shape().extents()?,
                                paged,
                                options,
                            )
                        }
                    }
                }
            }
        };
        gpu.synchronize()?;
        let mut host = vec![T::from_f64(0.0); output_len];
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; lse_len];
        lse.copy_to(&mut host_lse[..])?;
        Ok((result, host, host_lse))
    }

    fn context(&self, gpu: &FlashAttention) -> String {
        let plan = self.plan(gpu.sm_count()).map(|plan| {
            let kernel = plan.kernel().entry;
            format!("kernel {kernel}, {} splits", plan.splits())
        });
        format!(
            "{:?} sequences {:?} heads {}/{} D={} {:?} {:?} {:?} ({plan:?}), seed {} (replay \
             with FLASH_ATTN_SEED={})",
            self.call,
            self.sequences,
            self.heads_q,
            self.heads_kv,
            self.head_dim,
            T::DTYPE,
            self.layout,
            self.options,
            self.seed,
            self.seed
        )
    }

    /// Runs the safe call and asserts the suite's tolerance rule on the output
    /// ([`within_tolerance`]) and the logsumexps ([`assert_logsumexps`]); returns the run.
    pub(crate) fn check(&self, gpu: &FlashAttention) -> (Vec<T>, Vec<f32>) {
        let context = self.context(gpu);
        let exact = self.reference(Precision::F64);
        let plain = error_stats(
            self.reference(Precision::Plain(T::DTYPE)).output,
            &exact.output,
        );
        let (output, lse) = self
            .run(gpu, Entry::Safe)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let ours = error_stats(output.iter().map(|x| x.to_f64()), &exact.output);
        assert!(
            within_tolerance(&ours, &plain),
            "error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
        );
        assert_logsumexps(lse.iter().map(|&x| x as f64), &exact.logsumexp, &context);
        (output, lse)
    }
}

/// Caches of 1,024 keys: 16 pages of [`PAGE_SIZE`].
const CAPACITY: usize = 1024;

/// No modifier besides ALiBi, then the serving tests' windows and softcaps
/// ([`SERVING_MODIFIERS`]).
fn with_and_without_modifiers() -> impl Iterator<Item = (Option<SlidingWindow>, Option<f32>)> {
    std::iter::once((None, None)).chain(SERVING_MODIFIERS)
}

/// Every serving call with ALiBi, both slope layouts, alone and with each window and softcap,
/// causal or not, decode and chunks (the cache calls), GQA 4:1, split-KV forced in three where
/// not causal; at `head_dim`.
fn check_every_call<T: Element>(head_dim: usize) {
    let gpu = gpu();
    for call in CALLS {
        for decode in [true, false] {
            // The packed calls' sequences mix decode and chunks already.
            if call.is_packed() && !decode {
                continue;
            }
            for layout in [AlibiLayout::PerHead, AlibiLayout::PerBatchAndHead] {
                for (window, softcap) in with_and_without_modifiers() {
                    for causal in [false, true] {
                        let splittable = !causal && call != Call::Varlen;
                        let options = ForwardOptions {
                            causal,
                            window,
                            softcap,
                            num_splits: splittable.then_some(3),
                            ..ForwardOptions::default()
                        };
                        let sequences = call.sequences(decode);
                        Problem::<T>::new(
                            call,
                            &sequences,
                            (8, 2),
                            head_dim,
                            CAPACITY,
                            options,
                            layout,
                        )
                        .check(&gpu);
                    }
                }
            }
        }
    }
}

pub(crate) fn each_serving_call_with_alibi_fp16() {
    check_every_call::<f16>(128);
}

pub(crate) fn each_serving_call_with_alibi_bf16() {
    check_every_call::<bf16>(64);
}

/// A padded head dim (80, on the kernels of 96) and the largest (256), on the decode and
/// chunked-prefill problems of every call with ALiBi and a window and softcap.
pub(crate) fn each_serving_call_with_alibi_at_other_head_dims() {
    let gpu = gpu();
    let (window, softcap) = SERVING_MODIFIERS[2];
    for call in CALLS {
        for (head_dim, causal) in [(80, true), (256, false)] {
            let options = ForwardOptions {
                causal,
                window,
                softcap,
                ..ForwardOptions::default()
            };
            let sequences = call.sequences(true);
            let (heads, layout) = ((8, 2), AlibiLayout::PerBatchAndHead);
            Problem::<f16>::new(call, &sequences, heads, head_dim, CAPACITY, options, layout)
                .check(&gpu);
            Problem::<bf16>::new(call, &sequences, heads, head_dim, CAPACITY, options, layout)
                .check(&gpu);
        }
    }
}

/// Decode of one sequence against a long cache (32 query heads over 8 K/V heads, 30,001 of
/// 32,768 keys used) splits its key range, with ALiBi as without: contiguous, paged and as a
/// variable-length batch of one, fp16 and bf16, both layouts; the results within the reference
/// rule and the same bits on every run.
pub(crate) fn split_kv_decode_with_alibi_on_a_long_cache() {
    let gpu = gpu();
    fn check<T: Element>(gpu: &FlashAttention, call: Call, layout: AlibiLayout) {
        let options = ForwardOptions::default();
        let problem = Problem::<T>::new(call, &[(1, 30001)], (32, 8), 128, 32768, options, layout);
        let plan = problem.plan(gpu.sm_count()).unwrap();
        assert!(plan.splits() > 1, "{call:?}: {} splits", plan.splits());
        assert_eq!(plan.alibi_slopes_len(), 32, "{call:?}");
        let (first, first_lse) = problem.check(gpu);
        for _ in 0..3 {
            let (again, again_lse) = problem.run(gpu, Entry::Safe).unwrap();
            let bits = |values: &[T]| {
                values
                    .iter()
                    .map(|x| x.to_f64().to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&again), bits(&first), "{call:?}: output differs");
            let lse_bits = |values: &[f32]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(lse_bits(&again_lse), lse_bits(&first_lse), "{call:?}");
        }
    }
    for call in [Call::KvCache, Call::PagedKvCache, Call::VarlenKvCache] {
        for layout in [AlibiLayout::PerHead, AlibiLayout::PerBatchAndHead] {
            check::<f16>(&gpu, call, layout);
            check::<bf16>(&gpu, call, layout);
        }
    }
}

/// The raw calls, with the slopes on the device, compute the bits of the safe calls (split-KV
/// where the call splits), with ALiBi, a window and a softcap.
pub(crate) fn raw_and_safe_calls_agree_bit_for_bit() {
    let gpu = gpu();
    let (window, softcap) = SERVING_MODIFIERS[2];
    for call in CALLS {
        for causal in [false, true] {
            let options = ForwardOptions {
                causal,
                window,
                softcap,
                num_splits: (call != Call::Varlen).then_some(3),
                ..ForwardOptions::default()
            };
            let problem = Problem::<f16>::new(
                call,
                &call.sequences(true),
                (8, 2),
                64,
                CAPACITY,
                options,
                AlibiLayout::PerBatchAndHead,
            );
            let context = problem.context(&gpu);
            let (safe, safe_lse) = problem.check(&gpu);
            let (raw, raw_lse) = problem
                .run(&gpu, Entry::Raw)
                .unwrap_or_else(|error| panic!("{context}: raw: {error}"));
            let bits = |values: &[f16]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&raw), bits(&safe), "{context}: output bits");
            let lse_bits = |values: &[f32]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(lse_bits(&raw_lse), lse_bits(&safe_lse), "{context}");
        }
    }
}

/// Bad slopes are rejected before anything is launched, by every serving call: too few for
/// the layout (for the packed calls, one per sequence and head), one that is not finite, and
/// for the raw calls none (address 0) or a misaligned address; the output and the logsumexp
/// stay NaN.
pub(crate) fn alibi_errors_come_before_any_launch() {
    let gpu = gpu();
    for call in CALLS {
        let mut problem = Problem::<f16>::new(
            call,
            &call.sequences(true),
            (8, 2),
            64,
            CAPACITY,
            ForwardOptions::default(),
            AlibiLayout::PerBatchAndHead,
        );
        let required = problem.sequences.len() * problem.heads_q;
        assert_eq!(problem.slopes.len(), required);
        let slopes = problem.slopes.clone();
        let device_slopes = DeviceBuffer::from_slice(&slopes).unwrap();
        let misaligned = device_slopes.as_device_ptr().as_raw() + 2;
        let mut cases = vec![
            (
                Entry::Safe,
                slopes[..required - 1].to_vec(),
                Error::AlibiSlopesTooShort {
                    length: required - 1,
                    required,
                },
            ),
            (
                Entry::RawSlopesAt(0),
                slopes.clone(),
                Error::MisalignedBuffer {
                    tensor: "alibi_slopes",
                    address: 0,
                },
            ),
            (
                Entry::RawSlopesAt(misaligned),
                slopes.clone(),
                Error::MisalignedBuffer {
                    tensor: "alibi_slopes",
                    address: misaligned,
                },
            ),
        ];
        for (index, bad) in [(0, f32::NAN), (required - 1, f32::INFINITY)] {
            let mut with_bad = slopes.clone();
            with_bad[index] = bad;
            let error = Error::InvalidAlibiSlope { index, slope: bad };
            cases.push((Entry::Safe, with_bad, error));
        }
        for (entry, case_slopes, expected) in cases {
            problem.slopes = case_slopes;
            let (result, output, lse) = problem.launch(&gpu, entry).unwrap();
            // NaN slopes compare by their bits.
            assert_eq!(
                format!("{:?}", result.unwrap_err()),
                format!("{expected:?}"),
                "{call:?} {entry:?}"
            );
            assert!(
                output.iter().all(|x| x.is_nan()) && lse.iter().all(|x| x.is_nan()),
                "{call:?} {entry:?}: a rejected call wrote its outputs"
            );
        }
    }
}

/// Every modified serving and paged kernel with ALiBi (and the window and softcap the serving
/// kernel tests give it), causal or not, one slope per head and per sequence and head by turns:
/// decode of one sequence with its keys split (three splits asked), and a ragged batch of queries against
/// the cache (and, on the serving kernels, a variable-length batch). Small problems: the
/// compute-sanitizer runs' (split over processes with `FLASH_ATTN_KERNEL_SHARD`).
pub(crate) fn every_modified_serving_kernel_with_alibi_on_a_small_batch() {
    let gpu = gpu();
    for kernel in selected_kernels("modified serving or paged", |kernel| {
        matches!(
            kernel.spec.variant,
            Variant::ServingModified | Variant::PagedModified
        )
    }) {
        let paged = kernel.spec.variant == Variant::PagedModified;
        let calls: &[Call] = if paged {
            &[Call::PagedKvCache, Call::VarlenPagedKvCache]
        } else {
            &[Call::KvCache, Call::VarlenKvCache, Call::Varlen]
        };
        for &call in calls {
            for causal in [false, true] {
                let layout = if causal {
                    AlibiLayout::PerBatchAndHead
                } else {
                    AlibiLayout::PerHead
                };
                match kernel.spec.dtype {
                    Dtype::F16 => check_kernel::<f16>(&gpu, kernel, call, causal, layout),
                    Dtype::Bf16 => check_kernel::<bf16>(&gpu, kernel, call, causal, layout),
                }
            }
        }
    }
}

fn check_kernel<T: Element>(
    gpu: &FlashAttention,
    kernel: &'static ForwardKernel,
    call: Call,
    causal: bool,
    layout: AlibiLayout,
) {
    let (window, softcap) = modifiers_for(kernel);
    let decode = !call.is_packed();
    let options = ForwardOptions {
        causal,
        window,
        softcap,
        kernel: Some(kernel),
        num_splits: decode.then_some(3),
        ..ForwardOptions::default()
    };
    let sequences = if decode {
        vec![(1, 999)]
    } else {
        call.sequences(true)
    };
    let head_dim = kernel.spec.tile.head_dim;
    let problem = Problem::<T>::new(
        call,
        &sequences,
        (8, 2),
        head_dim,
        CAPACITY,
        options,
        layout,
    );
    let plan = problem.plan(gpu.sm_count()).unwrap();
    assert_eq!(plan.kernel(), kernel);
    // Three splits asked; fewer where the window's few key blocks leave the last one empty.
    assert!(!decode || plan.splits() > 1, "{}", kernel.entry);
    problem.check(gpu);
}
