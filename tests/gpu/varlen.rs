//! Variable-length batches (`forward_varlen`, `forward_varlen_raw`) against the f64 reference:
//! ragged sequences of odd lengths (queries and keys of different lengths per sequence, empty
//! ones too), causal or not, MHA, GQA and MQA, fp16 and bf16, both head dims, with the
//! logsumexp; both layouts; every serving kernel; the raw entry point against the safe one;
//! back-to-back calls that share the instance's offsets buffer; and the errors. Outputs and
//! logsumexps are poisoned with NaN before every run, and NaN never passes.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_varlen, error_stats, random_normal, relayout, within_tolerance, ErrorStats,
    Precision, ReferenceOutput, Scoring,
};
use flash_attn::{
    plan_varlen_on, Dtype, Element, Error, FlashAttention, ForwardKernel, ForwardOptions, Layout,
    RawSeqOffsets, RawTensors, Variant, VarlenShape,
};
use half::{bf16, f16};

use crate::support::{
    assert_logsumexps, fresh_seed, gpu, modifiers_for, selected_kernels, SERVING_HEAD_DIMS,
    SERVING_MODIFIERS,
};

/// Offsets `0, l0, l0 + l1, ...` of these sequence lengths.
fn offsets(lengths: impl Iterator<Item = usize>) -> Vec<u32> {
    std::iter::once(0)
        .chain(lengths.scan(0, |end, length| {
            *end += length as u32;
            Some(*end)
        }))
        .collect()
}

/// The options of a causal or non-causal problem without score modifiers.
fn causal_only(causal: bool) -> ForwardOptions {
    ForwardOptions {
        causal,
        ..ForwardOptions::default()
    }
}

/// Random packed `[tokens, heads, head_dim]` inputs (mean 0.5, unit spread, as the dense tests'
/// `Problem`) and their f64 reference results.
struct VarlenProblem<T: Element> {
    cu_seqlens_q: Vec<u32>,
    cu_seqlens_kv: Vec<u32>,
    heads_q: usize,
    heads_kv: usize,
    head_dim: usize,
    /// The options' causal masking and score modifiers (window, softcap).
    scoring: ForwardOptions,
    seed: u64,
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    reference: ReferenceOutput,
    /// Error of a plain 16-bit implementation against `reference`.
    plain_error: ErrorStats,
}

/// One run's results: the output packed `[tokens, heads, head_dim]` whatever the layout, and
/// the logsumexp `[heads_q, tokens_q]`.
struct VarlenRun<T> {
    output: Vec<T>,
    logsumexp: Vec<f32>,
}

impl<T: Element> VarlenProblem<T> {
    /// Sequences of `(queries, keys)` lengths.
    fn new(
        lengths: &[(usize, usize)],
        heads: (usize, usize),
        head_dim: usize,
        causal: bool,
    ) -> Self {
        Self::with_scoring(lengths, heads, head_dim, causal_only(causal))
    }

    /// [`Self::new`] with the causal masking and score modifiers of `scoring`.
    fn with_scoring(
        lengths: &[(usize, usize)],
        heads: (usize, usize),
        head_dim: usize,
        scoring: ForwardOptions,
    ) -> Self {
        Self::build(lengths, heads, head_dim, scoring, false)
    }

    /// The problem of [`Self::with_scoring`]; where `poison_gaps`, the sequences without
    /// queries hold non-finite keys and values, and those without keys non-finite queries (NaN
    /// and infinities in turn): rows that no result depends on, between the others' in the
    /// packed tensors, which a kernel that reads past its own sequence's rows would carry into
    /// its neighbours' outputs.
    fn build(
        lengths: &[(usize, usize)],
        (heads_q, heads_kv): (usize, usize),
        head_dim: usize,
        scoring: ForwardOptions,
        poison_gaps: bool,
    ) -> Self {
        let seed = fresh_seed();
        let cu_seqlens_q = offsets(lengths.iter().map(|&(queries, _)| queries));
        let cu_seqlens_kv = offsets(lengths.iter().map(|&(_, keys)| keys));
        let tokens = |offsets: &[u32]| *offsets.last().unwrap() as usize;
        let mut q = random_normal(tokens(&cu_seqlens_q) * heads_q * head_dim, 0.5, 1.0, seed);
        let kv_elements = tokens(&cu_seqlens_kv) * heads_kv * head_dim;
        let mut k = random_normal(kv_elements, 0.5, 1.0, seed ^ 0x5555);
        let mut v = random_normal(kv_elements, 0.5, 1.0, seed ^ 0xAAAA);
        if poison_gaps {
            let poison = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY].map(T::from_f64);
            // The elements of sequence `b`'s tokens in a packed tensor of `heads` heads.
            let elements = |offsets: &[u32], b: usize, heads: usize| {
                let row = heads * head_dim;
                offsets[b] as usize * row..offsets[b + 1] as usize * row
            };
            for (b, &(queries, keys)) in lengths.iter().enumerate() {
                if queries == 0 {
                    for tensor in [&mut k, &mut v] {
                        let gap = &mut tensor[elements(&cu_seqlens_kv, b, heads_kv)];
                        for (i, x) in gap.iter_mut().enumerate() {
                            *x = poison[i % 3];
                        }
                    }
                }
                if keys == 0 {
                    for (i, x) in q[elements(&cu_seqlens_q, b, heads_q)]
                        .iter_mut()
                        .enumerate()
                    {
                        *x = poison[i % 3];
                    }
                }
            }
        }
        let shape = VarlenShape {
            cu_seqlens_q: &cu_seqlens_q,
            cu_seqlens_kv: &cu_seqlens_kv,
            heads_q,
            heads_kv,
            head_dim,
        };
        let scale = 1.0 / (head_dim as f64).sqrt();
        let reference_in = |precision| {
            attention_varlen(
                &q,
                &k,
                &v,
                &shape,
                &Scoring::of_options(&scoring, scale),
                precision,
            )
        };
        let reference = reference_in(Precision::F64);
        let plain = reference_in(Precision::Plain(T::DTYPE));
        let plain_error = error_stats(plain.output, &reference.output);
        Self {
            cu_seqlens_q,
            cu_seqlens_kv,
            heads_q,
            heads_kv,
            head_dim,
            scoring,
            seed,
            q,
            k,
            v,
            reference,
            plain_error,
        }
    }

    fn shape(&self) -> VarlenShape<'_> {
        VarlenShape {
            cu_seqlens_q: &self.cu_seqlens_q,
            cu_seqlens_kv: &self.cu_seqlens_kv,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            head_dim: self.head_dim,
        }
    }

    fn options(&self, layout: Layout, kernel: Option<&'static ForwardKernel>) -> ForwardOptions {
        ForwardOptions {
            layout,
            kernel,
            ..self.scoring
        }
    }

    /// The packed tensor of `heads` and these offsets as one dense batch, for [`relayout`].
    fn dims(&self, heads: usize, offsets: &[u32]) -> (usize, usize, usize, usize) {
        (1, heads, *offsets.last().unwrap() as usize, self.head_dim)
    }

    /// The inputs on the device, stored in `layout`.
    fn upload(&self, layout: Layout) -> Result<[DeviceBuffer<T>; 3], Error> {
        let q_dims = self.dims(self.heads_q, &self.cu_seqlens_q);
        let kv_dims = self.dims(self.heads_kv, &self.cu_seqlens_kv);
        let upload = |data: &[T], dims| {
            DeviceBuffer::from_slice(&relayout(data, dims, Layout::Bshd, layout))
        };
        Ok([
            upload(&self.q, q_dims)?,
            upload(&self.k, kv_dims)?,
            upload(&self.v, kv_dims)?,
        ])
    }

    /// NaN-poisoned output and logsumexp buffers.
    fn poisoned_outputs(&self) -> Result<(DeviceBuffer<T>, DeviceBuffer<f32>), Error> {
        Ok((
            DeviceBuffer::from_slice(&vec![T::from_f64(f64::NAN); self.q.len()])?,
            DeviceBuffer::from_slice(&vec![f32::NAN; self.reference.logsumexp.len()])?,
        ))
    }

    /// Downloads a run's results, the output back in the packed layout.
    fn download(
        &self,
        output: &DeviceBuffer<T>,
        lse: &DeviceBuffer<f32>,
        layout: Layout,
    ) -> Result<VarlenRun<T>, Error> {
        let mut host = vec![T::from_f64(0.0); self.q.len()];
        output.copy_to(&mut host[..])?;
        let mut logsumexp = vec![0f32; self.reference.logsumexp.len()];
        lse.copy_to(&mut logsumexp[..])?;
        let q_dims = self.dims(self.heads_q, &self.cu_seqlens_q);
        Ok(VarlenRun {
            output: relayout(&host, q_dims, layout, Layout::Bshd),
            logsumexp,
        })
    }

    /// Runs `forward_varlen` on poisoned buffers, the inputs stored in `options.layout`.
    fn run(&self, gpu: &FlashAttention, options: &ForwardOptions) -> Result<VarlenRun<T>, Error> {
        let [q, k, v] = self.upload(options.layout)?;
        let (mut output, mut lse) = self.poisoned_outputs()?;
        gpu.forward_varlen(
            &q,
            &k,
            &v,
            &mut output,
            Some(&mut lse),
            &self.shape(),
            options,
        )?;
        gpu.synchronize()?;
        self.download(&output, &lse, options.layout)
    }

    fn context(&self, options: &ForwardOptions) -> String {
        format!(
            "offsets q {:?} kv {:?} heads {}/{} d={} causal={} window={:?} softcap={:?} {:?} \
             kernel={:?}, seed {} (replay with FLASH_ATTN_SEED={})",
            self.cu_seqlens_q,
            self.cu_seqlens_kv,
            self.heads_q,
            self.heads_kv,
            self.head_dim,
            options.causal,
            options.window,
            options.softcap,
            options.layout,
            options.kernel.map(|k| k.entry),
            self.seed,
            self.seed
        )
    }

    /// Asserts the tolerance rule on a run's output (no NaN; max and mean error within twice
    /// the plain 16-bit error plus the absolute budget) and its logsumexp (within 1e-3
    /// relative, -inf exactly where the reference has it), as the KV-cache tests do.
    fn assert_matches(&self, run: &VarlenRun<T>, context: &str) {
        let ours = error_stats(
            run.output.iter().map(|x| x.to_f64()),
            &self.reference.output,
        );
        assert!(
            within_tolerance(&ours, &self.plain_error),
            "error beyond tolerance: {context}: ours {ours:?}, plain {:?}",
            self.plain_error
        );
        assert_eq!(run.logsumexp.len(), self.reference.logsumexp.len());
        assert_logsumexps(
            run.logsumexp.iter().map(|&x| x as f64),
            &self.reference.logsumexp,
            context,
        );
    }

    /// Runs and asserts the tolerance rule against the reference.
    fn check(&self, gpu: &FlashAttention, options: &ForwardOptions) {
        let context = self.context(options);
        let run = self
            .run(gpu, options)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        self.assert_matches(&run, &context);
    }
}

/// Short odd lengths, queries and keys of different lengths per sequence, single tokens.
const SHORT: &[(usize, usize)] = &[
    (1, 1),
    (7, 63),
    (63, 7),
    (65, 65),
    (1000, 1),
    (1, 1000),
    (65, 1000),
    (1000, 63),
];

/// Empty sequences between others: no query (no output), no key (output 0, logsumexp -inf),
/// neither.
const WITH_EMPTY: &[(usize, usize)] =
    &[(0, 5), (7, 0), (65, 63), (0, 0), (1, 0), (130, 7), (0, 64)];

/// Sequences longer than a few tiles beside short ones.
const LONG: &[(usize, usize)] = &[(2049, 2049), (7, 2049), (2049, 65), (1, 1), (1000, 3001)];

/// A ragged batch: its `(queries, keys)` lengths, `(heads_q, heads_kv)`, head dim and scoring.
type Batch<'a> = (&'a [(usize, usize)], (usize, usize), usize, ForwardOptions);

/// The problem of `(lengths, heads, head_dim, scoring)` at `dtype` ([`VarlenProblem::build`],
/// its gaps poisoned where `poison_gaps`), checked on `kernel` (the default one where `None`),
/// packed `[tokens, heads, head_dim]`.
fn check_on(
    gpu: &FlashAttention,
    dtype: Dtype,
    (lengths, heads, head_dim, scoring): Batch,
    poison_gaps: bool,
    kernel: Option<&'static ForwardKernel>,
) {
    fn check<T: Element>(
        gpu: &FlashAttention,
        problem: VarlenProblem<T>,
        kernel: Option<&'static ForwardKernel>,
    ) {
        problem.check(gpu, &problem.options(Layout::Bshd, kernel));
    }
    match dtype {
        Dtype::F16 => check(
            gpu,
            VarlenProblem::<f16>::build(lengths, heads, head_dim, scoring, poison_gaps),
            kernel,
        ),
        Dtype::Bf16 => check(
            gpu,
            VarlenProblem::<bf16>::build(lengths, heads, head_dim, scoring, poison_gaps),
            kernel,
        ),
    }
}

fn check_ragged<T: Element>(
    gpu: &FlashAttention,
    lengths: &[(usize, usize)],
    heads: &[(usize, usize)],
    head_dims: &[usize],
) {
    for &head_dim in head_dims {
        for causal in [false, true] {
            for &heads in heads {
                let problem = VarlenProblem::<T>::new(lengths, heads, head_dim, causal);
                problem.check(gpu, &problem.options(Layout::Bshd, None));
            }
        }
    }
}

pub(crate) fn ragged_batches_fp16_and_bf16() {
    let gpu = gpu();
    // MHA, GQA and MQA.
    let heads = [(4, 4), (6, 2), (3, 1)];
    check_ragged::<f16>(&gpu, SHORT, &heads, &[64, 128]);
    check_ragged::<bf16>(&gpu, SHORT, &heads, &[64, 128]);
}

/// A ragged batch at every kernel head dim and at head dims padded to one: odd lengths, an
/// empty sequence of each kind, GQA 2:1 (fp16) and MQA (bf16), causal or not.
pub(crate) fn ragged_batches_at_every_head_dim() {
    let gpu = gpu();
    let lengths = [(1, 1), (7, 63), (0, 3), (65, 130), (5, 0), (130, 7)];
    check_ragged::<f16>(&gpu, &lengths, &[(4, 2)], &SERVING_HEAD_DIMS);
    check_ragged::<bf16>(&gpu, &lengths, &[(3, 1)], &SERVING_HEAD_DIMS);
}

pub(crate) fn empty_sequences_are_skipped_or_zero() {
    let gpu = gpu();
    check_ragged::<f16>(&gpu, WITH_EMPTY, &[(4, 2)], &[64, 128]);
    check_ragged::<bf16>(&gpu, WITH_EMPTY, &[(2, 2)], &[64]);
}

pub(crate) fn ragged_batches_with_long_sequences() {
    let gpu = gpu();
    check_ragged::<f16>(&gpu, LONG, &[(2, 1)], &[128]);
    check_ragged::<bf16>(&gpu, LONG, &[(2, 2)], &[64]);
}

pub(crate) fn a_heads_first_layout_is_honoured() {
    let gpu = gpu();
    for causal in [false, true] {
        let problem = VarlenProblem::<f16>::new(SHORT, (4, 2), 64, causal);
        problem.check(&gpu, &problem.options(Layout::Bhsd, None));
        let problem = VarlenProblem::<bf16>::new(WITH_EMPTY, (2, 1), 128, causal);
        problem.check(&gpu, &problem.options(Layout::Bhsd, None));
    }
}

/// Every serving kernel (of this process's shard), on a small ragged batch with an empty
/// sequence of each kind.
pub(crate) fn every_serving_kernel_on_a_small_ragged_batch() {
    let gpu = gpu();
    let lengths = [
        (1, 1),
        (7, 63),
        (63, 7),
        (0, 3),
        (65, 130),
        (5, 0),
        (200, 65),
    ];
    for kernel in selected_kernels("serving", |k| {
        k.spec.variant.with_modifiers() == Variant::ServingModified
            && k.runs_on(gpu.compute_capability())
    }) {
        let head_dim = kernel.spec.tile.head_dim;
        let (window, softcap) = modifiers_for(kernel);
        for causal in [false, true] {
            let scoring = ForwardOptions {
                causal,
                window,
                softcap,
                ..ForwardOptions::default()
            };
            let problem = (&lengths[..], (4, 2), head_dim, scoring);
            check_on(&gpu, kernel.spec.dtype, problem, false, Some(kernel));
        }
    }
}

/// Between sequences of odd lengths, sequences without queries whose keys and values are NaN
/// and infinities, and one without keys whose queries are: every other sequence's output and
/// logsumexp match the reference (no NaN), on the default kernel and on every unmodified
/// serving kernel that runs on the device (the sm90 family's on compute capability 9.0: its
/// tiles of 128 keys end past each sequence's last key, where the next sequence's rows lie).
pub(crate) fn sequences_never_read_their_neighbours() {
    let gpu = gpu();
    let lengths = [
        (129, 129),
        (0, 61),
        (1, 63),
        (0, 200),
        (300, 1),
        (65, 0),
        (7, 257),
        (0, 5),
    ];
    let kernels = selected_kernels("serving", |k| {
        k.spec.variant == Variant::Serving && k.runs_on(gpu.compute_capability())
    });
    for causal in [false, true] {
        for kernel in std::iter::once(None).chain(kernels.iter().copied().map(Some)) {
            let head_dim = kernel.map_or(128, |kernel| kernel.spec.tile.head_dim);
            let dtype = kernel.map_or(Dtype::F16, |kernel| kernel.spec.dtype);
            let problem = (&lengths[..], (4, 2), head_dim, causal_only(causal));
            check_on(&gpu, dtype, problem, true, kernel);
        }
    }
}

/// The raw entry point with the caller's offsets on the device gives the safe call's bits,
/// output and logsumexp.
pub(crate) fn the_raw_entry_point_matches_the_safe_one() {
    let gpu = gpu();
    let problem = VarlenProblem::<bf16>::new(SHORT, (4, 2), 128, true);
    let options = problem.options(Layout::Bshd, None);
    let [q, k, v] = problem.upload(Layout::Bshd).unwrap();
    let (output, lse) = problem.poisoned_outputs().unwrap();
    let (cu_seqlens_q, cu_seqlens_kv) = (
        DeviceBuffer::from_slice(&problem.cu_seqlens_q).unwrap(),
        DeviceBuffer::from_slice(&problem.cu_seqlens_kv).unwrap(),
    );
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: Some(lse.as_device_ptr().as_raw()),
    };
    let offsets = RawSeqOffsets {
        cu_seqlens_q: cu_seqlens_q.as_device_ptr().as_raw(),
        cu_seqlens_kv: cu_seqlens_kv.as_device_ptr().as_raw(),
    };
    let extents = problem.shape().extents().unwrap();
    // SAFETY: the buffers are the packed tensors of the extents (and the logsumexp
    // `[heads_q, tokens_q]`), the offsets those the extents were computed from, all alive until
    // the synchronisation below; the stream is the instance's own (primary context). The
    // uploads above ran on the legacy default stream, which the instance's blocking stream
    // waits for.
    unsafe {
        gpu.forward_varlen_raw(
            gpu.stream().as_inner(),
            Dtype::Bf16,
            tensors,
            offsets,
            &extents,
            &options,
        )
    }
    .unwrap();
    gpu.synchronize().unwrap();
    let raw = problem.download(&output, &lse, Layout::Bshd).unwrap();
    problem.assert_matches(&raw, &problem.context(&options));
    let safe = problem.run(&gpu, &options).unwrap();
    let bits = |values: &[bf16]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&raw.output), bits(&safe.output), "output bits differ");
    assert_eq!(
        raw.logsumexp
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>(),
        safe.logsumexp
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>(),
        "logsumexp bits differ"
    );
}

/// Calls of different batches enqueued back to back, with no synchronisation between them,
/// share the instance's offsets buffer (on a fresh instance, grown by the second call): each
/// upload is ordered after the kernels before it, so each call gets the bits it gets alone.
pub(crate) fn back_to_back_calls_of_different_batches_are_ordered() {
    let gpu = gpu();
    let problems = [
        VarlenProblem::<f16>::new(&[(65, 65), (7, 1000)], (4, 2), 64, true),
        VarlenProblem::<f16>::new(SHORT, (4, 2), 64, true),
        VarlenProblem::<f16>::new(&[(300, 5), (1, 1), (64, 64)], (4, 2), 64, false),
    ];
    let options: Vec<ForwardOptions> = problems
        .iter()
        .map(|problem| problem.options(Layout::Bshd, None))
        .collect();
    let alone: Vec<VarlenRun<f16>> = problems
        .iter()
        .zip(&options)
        .map(|(problem, options)| problem.run(&gpu, options).unwrap())
        .collect();
    for (problem, (run, options)) in problems.iter().zip(alone.iter().zip(&options)) {
        problem.assert_matches(run, &problem.context(options));
    }
    let inputs: Vec<[DeviceBuffer<f16>; 3]> = problems
        .iter()
        .map(|problem| problem.upload(Layout::Bshd).unwrap())
        .collect();
    // Ten rounds of the three, all enqueued before one synchronisation, on an instance whose
    // offsets buffer starts empty: the first call makes it, the second grows it.
    let gpu = crate::support::gpu();
    let mut outputs = Vec::new();
    for _ in 0..10 {
        for ((problem, [q, k, v]), options) in problems.iter().zip(&inputs).zip(&options) {
            let (mut output, mut lse) = problem.poisoned_outputs().unwrap();
            gpu.forward_varlen(
                q,
                k,
                v,
                &mut output,
                Some(&mut lse),
                &problem.shape(),
                options,
            )
            .unwrap();
            outputs.push((output, lse));
        }
    }
    gpu.synchronize().unwrap();
    let bits = |values: &[f16]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (index, (output, lse)) in outputs.iter().enumerate() {
        let which = index % problems.len();
        let run = problems[which].download(output, lse, Layout::Bshd).unwrap();
        assert_eq!(
            bits(&run.output),
            bits(&alone[which].output),
            "call {index} (batch {which}) differs from its run alone"
        );
        assert_eq!(
            run.logsumexp
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
            alone[which]
                .logsumexp
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
            "call {index} (batch {which}): logsumexp differs from its run alone"
        );
    }
}

/// Invalid offsets, short buffers and bad raw offsets are errors before any launch: the
/// poisoned output is left as it was.
pub(crate) fn invalid_calls_are_rejected_before_launching() {
    let gpu = gpu();
    let problem = VarlenProblem::<f16>::new(&[(7, 63), (65, 5)], (4, 2), 64, false);
    let options = problem.options(Layout::Bshd, None);
    let [q, k, v] = problem.upload(Layout::Bshd).unwrap();
    let (mut output, mut lse) = problem.poisoned_outputs().unwrap();
    let mut call = |shape: &VarlenShape, short: bool| {
        let q_len = if short { q.len() - 1 } else { q.len() };
        gpu.forward_varlen(
            &q.index(..q_len),
            &k,
            &v,
            &mut output,
            Some(&mut lse),
            shape,
            &options,
        )
    };
    let not_at_zero = [1u32, 7, 72];
    assert_eq!(
        call(
            &VarlenShape {
                cu_seqlens_q: &not_at_zero,
                ..problem.shape()
            },
            false
        ),
        Err(Error::SeqOffsetsStart {
            offsets: "cu_seqlens_q",
            first: 1
        })
    );
    let decreasing = [0u32, 63, 60];
    assert_eq!(
        call(
            &VarlenShape {
                cu_seqlens_kv: &decreasing,
                ..problem.shape()
            },
            false
        ),
        Err(Error::SeqOffsetsDecrease {
            offsets: "cu_seqlens_kv",
            sequence: 1,
            start: 63,
            end: 60
        })
    );
    // More tokens than the buffers hold.
    let past_the_buffers = [0u32, 7, 73];
    assert!(matches!(
        call(
            &VarlenShape {
                cu_seqlens_q: &past_the_buffers,
                ..problem.shape()
            },
            false
        ),
        Err(Error::BufferTooSmall { tensor: "q", .. })
    ));
    assert!(matches!(
        call(&problem.shape(), true),
        Err(Error::BufferTooSmall { tensor: "q", .. })
    ));
    let extents = problem.shape().extents().unwrap();
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: None,
    };
    let offsets = DeviceBuffer::from_slice(&[0u32, 7, 72, 0, 63, 68]).unwrap();
    let at = |index: u64| offsets.as_device_ptr().as_raw() + 4 * index;
    for (raw, tensor, address) in [
        (
            RawSeqOffsets {
                cu_seqlens_q: 0,
                cu_seqlens_kv: at(3),
            },
            "cu_seqlens_q",
            0,
        ),
        (
            RawSeqOffsets {
                cu_seqlens_q: at(0),
                cu_seqlens_kv: 0,
            },
            "cu_seqlens_kv",
            0,
        ),
        (
            RawSeqOffsets {
                cu_seqlens_q: at(0) + 2,
                cu_seqlens_kv: at(3),
            },
            "cu_seqlens_q",
            at(0) + 2,
        ),
    ] {
        // SAFETY: every call is rejected before the launch (the assertion checks it).
        let result = unsafe {
            gpu.forward_varlen_raw(
                gpu.stream().as_inner(),
                Dtype::F16,
                tensors,
                raw,
                &extents,
                &options,
            )
        };
        assert_eq!(result, Err(Error::MisalignedBuffer { tensor, address }));
    }
    // A plan of the raw call agrees with the safe call's.
    assert_eq!(
        plan_varlen_on(
            Dtype::F16,
            &extents,
            &options,
            gpu.sm_count(),
            gpu.compute_capability()
        )
        .unwrap()
        .required()
        .q,
        q.len()
    );
    gpu.synchronize().unwrap();
    let mut host = vec![f16::ZERO; problem.q.len()];
    output.copy_to(&mut host[..]).unwrap();
    assert!(host.iter().all(|x| x.is_nan()), "a rejected call wrote");
}

/// The score modifiers on variable-length batches ([`SERVING_MODIFIERS`]), each window in its
/// sequence's own bottom-right coordinates: short odd lengths and empty sequences (a window can
/// leave a sequence's queries without a key: output 0, logsumexp -inf), causal or not, at head
/// dims 64, 128 and 40 (padded to 96), fp16 and bf16.
pub(crate) fn ragged_batches_with_a_window_and_a_softcap() {
    let gpu = gpu();
    for head_dim in [64, 40, 128] {
        for (window, softcap) in SERVING_MODIFIERS {
            for causal in [false, true] {
                let scoring = ForwardOptions {
                    causal,
                    window,
                    softcap,
                    ..ForwardOptions::default()
                };
                for lengths in [SHORT, WITH_EMPTY] {
                    let problem =
                        VarlenProblem::<f16>::with_scoring(lengths, (4, 2), head_dim, scoring);
                    problem.check(&gpu, &problem.options(Layout::Bshd, None));
                    let problem =
                        VarlenProblem::<bf16>::with_scoring(lengths, (4, 1), head_dim, scoring);
                    problem.check(&gpu, &problem.options(Layout::Bhsd, None));
                }
            }
        }
    }
}
