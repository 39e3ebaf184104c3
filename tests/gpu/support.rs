use cust::memory::{CopyDestination, DeviceBuffer};
pub use flash_attn::reference::ABSOLUTE_TOLERANCE;
use flash_attn::reference::{
    attention, error_stats, random_normal, relayout, within_tolerance, ErrorStats, Precision,
    ReferenceOutput,
};
use flash_attn::{
    architecture_named, AttentionShape, Element, Error, FlashAttention, ForwardKernel,
    ForwardOptions, Layout, LoadOptions, FORWARD_KERNELS, PTX_TARGETS,
};

/// The head dims of the serving sweeps: every kernel head dim, and head dims that run padded
/// on one (8 on 32, 40 and 80 on 96, 200 on 224, 248 on 256).
pub const SERVING_HEAD_DIMS: [usize; 13] =
    [8, 32, 40, 64, 80, 96, 128, 160, 192, 200, 224, 248, 256];

/// The GPU. The harness (`main.rs`) runs the tests that call this only where
/// [`FlashAttention::with_options`] succeeded (or where `FLASH_ATTN_REQUIRE_GPU` is set, so
/// that a missing GPU fails them).
pub fn gpu() -> FlashAttention {
    FlashAttention::with_options(&load_options())
        .unwrap_or_else(|error| panic!("could not set up the GPU: {error}"))
}

/// The options every test's instance is made with: the defaults, or with
/// `FLASH_ATTN_PTX_TARGET=sm_80` (any of `flash_attn::PTX_TARGETS`) that PTX target forced, and
/// with `FLASH_ATTN_FORCE_PTX=1` every kernel loaded from its PTX through the driver's JIT
/// (`LoadOptions::force_ptx`), not from a cubin: the bundle's `sm80` phase sets both, so that
/// the whole suite runs the sm_80 PTX through the JIT on an H100 as an A100 would.
pub fn load_options() -> LoadOptions {
    let ptx_target = std::env::var("FLASH_ATTN_PTX_TARGET").ok().map(|name| {
        *architecture_named(&name).unwrap_or_else(|| {
            panic!("FLASH_ATTN_PTX_TARGET={name:?}: expected one of {PTX_TARGETS:?}")
        })
    });
    LoadOptions {
        ptx_target,
        force_ptx: std::env::var_os("FLASH_ATTN_FORCE_PTX").is_some_and(|value| value == "1"),
        ..LoadOptions::default()
    }
}

/// Whether the tests that run every kernel run `kernel` in this process: all of them, unless
/// `FLASH_ATTN_KERNEL_SHARD=i/n` (0 <= i < n) keeps only those whose index is `i` modulo `n`,
/// so that n processes (compute-sanitizer runs, say) can split the kernels between them, or
/// `FLASH_ATTN_KERNEL_FILTER=text` only those whose entry name contains `text` (say `_s1`,
/// the kernels a change to the one-stage pipeline touches).
pub fn in_kernel_shard(kernel: &ForwardKernel) -> bool {
    if let Ok(text) = std::env::var("FLASH_ATTN_KERNEL_FILTER") {
        if !kernel.entry.contains(&text) {
            return false;
        }
    }
    let Ok(shard) = std::env::var("FLASH_ATTN_KERNEL_SHARD") else {
        return true;
    };
    let parsed = shard
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
    match parsed {
        Some((i, n)) if i < n => kernel.index() % n == i,
        _ => panic!("FLASH_ATTN_KERNEL_SHARD={shard:?}: expected i/n with 0 <= i < n"),
    }
}

/// The kernels of `FORWARD_KERNELS` that `keep` picks and this process runs
/// ([`in_kernel_shard`]), for the every-kernel tests (those whose kernels this device may not
/// run say so themselves). None panics, naming `what`: a filter or shard that selects nothing
/// (a sanitizer run whose filter names no kernel of the test) must fail, not pass having
/// checked nothing.
pub fn selected_kernels(
    what: &str,
    keep: impl Fn(&ForwardKernel) -> bool,
) -> Vec<&'static ForwardKernel> {
    let kernels: Vec<_> = FORWARD_KERNELS
        .iter()
        .filter(|kernel| keep(kernel) && in_kernel_shard(kernel))
        .collect();
    assert!(
        !kernels.is_empty(),
        "no {what} kernel selected: check FLASH_ATTN_KERNEL_FILTER and FLASH_ATTN_KERNEL_SHARD"
    );
    kernels
}

/// A fresh seed per call (time-based), or `FLASH_ATTN_SEED` to replay a failure.
pub fn fresh_seed() -> u64 {
    if let Some(seed) = std::env::var("FLASH_ATTN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    (nanos as u64) ^ (nanos >> 64) as u64
}

/// What every output element holds before a run: NaN, so that an element the kernel never
/// writes cannot pass.
fn poisoned<T: Element>(len: usize) -> Vec<T> {
    vec![T::from_f64(f64::NAN); len]
}

/// Random dense `[B, H, S, D]` inputs with nonzero mean (0.5) and unit spread, and their f64
/// reference results.
pub struct Problem<T: Element> {
    pub shape: AttentionShape,
    pub causal: bool,
    pub seed: u64,
    pub softmax_scale: f32,
    pub q: Vec<T>,
    pub k: Vec<T>,
    pub v: Vec<T>,
    pub reference: ReferenceOutput,
    /// Error of a plain 16-bit implementation against `reference`.
    pub plain_error: ErrorStats,
}

/// What one run returned, in `[B, H, S, D]` order whatever the layout.
pub struct RunOutput {
    pub output: Vec<f64>,
    pub logsumexp: Vec<f64>,
}

impl<T: Element> Problem<T> {
    pub fn new(shape: AttentionShape, causal: bool, softmax_scale: Option<f32>) -> Self {
        let seed = fresh_seed();
        let q = random_normal::<T>(shape.q_elements().unwrap(), 0.5, 1.0, seed);
        let k = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0x5555);
        let v = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0xAAAA);
        Self::with_inputs(shape, causal, softmax_scale, seed, q, k, v)
    }

    pub fn with_inputs(
        shape: AttentionShape,
        causal: bool,
        softmax_scale: Option<f32>,
        seed: u64,
        q: Vec<T>,
        k: Vec<T>,
        v: Vec<T>,
    ) -> Self {
        let softmax_scale = softmax_scale.unwrap_or(shape.default_softmax_scale());
        let scale = softmax_scale as f64;
        let reference = attention(&q, &k, &v, shape, scale, causal, Precision::F64);
        let plain = attention(&q, &k, &v, shape, scale, causal, Precision::Plain(T::DTYPE));
        let plain_error = error_stats(plain.output, &reference.output);
        Self {
            shape,
            causal,
            seed,
            softmax_scale,
            q,
            k,
            v,
            reference,
            plain_error,
        }
    }

    pub fn options(
        &self,
        layout: Layout,
        kernel: Option<&'static flash_attn::ForwardKernel>,
    ) -> ForwardOptions {
        ForwardOptions {
            softmax_scale: Some(self.softmax_scale),
            causal: self.causal,
            layout,
            kernel,
            ..ForwardOptions::default()
        }
    }

    /// Runs on poisoned output and LSE buffers, with the inputs stored in `layout`.
    pub fn run(&self, gpu: &FlashAttention, options: &ForwardOptions) -> Result<RunOutput, Error> {
        let s = self.shape;
        let q_dims = (s.batch, s.heads_q, s.seq_len_q, s.head_dim);
        let kv_dims = (s.batch, s.heads_kv, s.seq_len_kv, s.head_dim);
        let layout = options.layout;
        let (q, k, v) = (
            DeviceBuffer::from_slice(&relayout(&self.q, q_dims, Layout::Bhsd, layout))?,
            DeviceBuffer::from_slice(&relayout(&self.k, kv_dims, Layout::Bhsd, layout))?,
            DeviceBuffer::from_slice(&relayout(&self.v, kv_dims, Layout::Bhsd, layout))?,
        );
        let mut output = DeviceBuffer::from_slice(&poisoned::<T>(s.q_elements().unwrap()))?;
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; s.lse_elements().unwrap()])?;
        gpu.forward(&q, &k, &v, &mut output, Some(&mut lse), s, options)?;
        gpu.synchronize()?;
        let mut host = poisoned::<T>(s.q_elements().unwrap());
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; s.lse_elements().unwrap()];
        lse.copy_to(&mut host_lse[..])?;
        Ok(RunOutput {
            output: relayout(&host, q_dims, layout, Layout::Bhsd)
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            logsumexp: host_lse.iter().map(|&x| x as f64).collect(),
        })
    }

    /// Runs and asserts the tolerance rule ([`within_tolerance`]: no NaN, and max and mean
    /// absolute error at most twice the plain 16-bit error plus [`ABSOLUTE_TOLERANCE`]); the
    /// logsumexp within 1e-3 (relative) and -inf exactly where the reference has it.
    pub fn check(&self, gpu: &FlashAttention, options: &ForwardOptions) -> ErrorStats {
        let context = format!(
            "{:?} causal={} {:?} kernel={:?}, seed {} (replay with FLASH_ATTN_SEED={})",
            self.shape,
            self.causal,
            options.layout,
            options.kernel.map(|k| k.entry),
            self.seed,
            self.seed
        );
        let run = self
            .run(gpu, options)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let ours = error_stats(run.output.iter().copied(), &self.reference.output);
        let plain = self.plain_error;
        assert!(
            within_tolerance(&ours, &plain),
            "error beyond tolerance: {context}: ours {ours:?}, plain {plain:?}"
        );
        assert_logsumexps(
            run.logsumexp.iter().copied(),
            &self.reference.logsumexp,
            &context,
        );
        ours
    }
}

/// Asserts the logsumexp rule on `got` against the reference's `want`, row by row: within
/// 1e-3 (relative, and absolute below 1), and -inf exactly where the reference has it (so NaN
/// never passes).
pub fn assert_logsumexps(got: impl IntoIterator<Item = f64>, want: &[f64], context: &str) {
    for (row, (got, &want)) in got.into_iter().zip(want).enumerate() {
        let ok = if want == f64::NEG_INFINITY {
            got == f64::NEG_INFINITY
        } else {
            (got - want).abs() <= 1e-3 * want.abs().max(1.0)
        };
        assert!(ok, "logsumexp of row {row}: {got} vs {want}: {context}");
    }
}

/// The score modifiers that the tests of every serving kernel give `kernel`: for a modified
/// serving or paged kernel a sliding window of 50 keys left and 3 right of the diagonal (some
/// key blocks skipped, some masked at both ends) and a softcap of 20, none for the others.
pub(crate) fn modifiers_for(
    kernel: &ForwardKernel,
) -> (Option<flash_attn::SlidingWindow>, Option<f32>) {
    if kernel.spec.variant.is_modified() {
        let window = flash_attn::SlidingWindow {
            left: Some(50),
            right: Some(3),
        };
        (Some(window), Some(20.0))
    } else {
        (None, None)
    }
}

/// The score modifiers the serving tests run each problem under: a window bounded on the left
/// (Mistral's), a softcap alone (decode still packs its query heads), and a window bounded on
/// both sides with a softcap.
pub(crate) const SERVING_MODIFIERS: [(Option<flash_attn::SlidingWindow>, Option<f32>); 3] = [
    (
        Some(flash_attn::SlidingWindow {
            left: Some(100),
            right: Some(0),
        }),
        None,
    ),
    (None, Some(30.0)),
    (
        Some(flash_attn::SlidingWindow {
            left: Some(37),
            right: Some(5),
        }),
        Some(5.0),
    ),
];
