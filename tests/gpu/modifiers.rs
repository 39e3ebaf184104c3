//! The score modifiers on the GPU against the f64 reference ([`attention_with`]): sliding
//! windows, softcap and ALiBi, each alone and combined, causal or not, on odd lengths, fp16 and
//! bf16, D = 64 and 128 (and padded and larger head dims), MHA and GQA, both layouts, with the logsumexp; the skipped key blocks;
//! the ALiBi calls (safe, host and raw) against each other; errors before launch.

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_rows_with, attention_with, error_stats, random_normal, relayout, within_tolerance,
    ErrorStats, Precision, QueryRow, ReferenceOutput, Scoring,
};
use std::collections::BTreeSet;

use flash_attn::{
    plan, AlibiLayout, AlibiSlopes, AttentionShape, Dtype, Element, Error, Family, FlashAttention,
    ForwardKernel, ForwardOptions, Layout, RawAlibiSlopes, RawTensors, SlidingWindow, Variant,
    FORWARD_KERNELS,
};
use half::{bf16, f16};

use crate::forward::report_not_applicable;
use crate::support::{assert_logsumexps, fresh_seed, gpu, in_kernel_shard, selected_kernels};

/// The modifiers of one problem: the options' window and softcap, and ALiBi's layout (the
/// slopes themselves come from [`slopes`]).
#[derive(Clone, Copy, Debug)]
struct Modifiers {
    window: Option<SlidingWindow>,
    softcap: Option<f32>,
    alibi: Option<AlibiLayout>,
}

const fn window(left: Option<i64>, right: Option<i64>) -> Option<SlidingWindow> {
    Some(SlidingWindow { left, right })
}

/// Each modifier alone and the combinations models use (Gemma 2: window and softcap), with
/// windows of both signs of offset and a cap small enough to bend the scores of unit-spread
/// inputs.
const COMBINATIONS: [Modifiers; 9] = [
    Modifiers {
        window: window(Some(47), Some(0)),
        softcap: None,
        alibi: None,
    },
    Modifiers {
        window: window(Some(100), Some(30)),
        softcap: None,
        alibi: None,
    },
    Modifiers {
        window: window(Some(20), Some(-3)),
        softcap: None,
        alibi: None,
    },
    Modifiers {
        window: None,
        softcap: Some(2.0),
        alibi: None,
    },
    Modifiers {
        window: None,
        softcap: None,
        alibi: Some(AlibiLayout::PerHead),
    },
    Modifiers {
        window: window(Some(64), Some(0)),
        softcap: Some(30.0),
        alibi: None,
    },
    Modifiers {
        window: window(Some(33), None),
        softcap: None,
        alibi: Some(AlibiLayout::PerBatchAndHead),
    },
    Modifiers {
        window: None,
        softcap: Some(5.0),
        alibi: Some(AlibiLayout::PerHead),
    },
    Modifiers {
        window: window(Some(90), Some(7)),
        softcap: Some(3.0),
        alibi: Some(AlibiLayout::PerBatchAndHead),
    },
];

/// ALiBi slopes as BLOOM's: `2^(-8 (h + 1) / heads_q)` per head, each batch's scaled a little
/// differently (so that a per-batch layout read per head fails).
pub(crate) fn slopes(shape: &AttentionShape, layout: AlibiLayout) -> Vec<f32> {
    let per_head = |h: usize| 2f32.powf(-8.0 * (h + 1) as f32 / shape.heads_q as f32);
    match layout {
        AlibiLayout::PerHead => (0..shape.heads_q).map(per_head).collect(),
        AlibiLayout::PerBatchAndHead => (0..shape.batch * shape.heads_q)
            .map(|i| per_head(i % shape.heads_q) * (1.0 + 0.25 * (i / shape.heads_q) as f32))
            .collect(),
    }
}

/// Random inputs (nonzero mean, unit spread), the modifiers, and the f64 reference with the
/// error of a plain 16-bit implementation.
struct ModifiedProblem<T: Element> {
    shape: AttentionShape,
    causal: bool,
    modifiers: Modifiers,
    slopes: Vec<f32>,
    seed: u64,
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    reference: ReferenceOutput,
    plain_error: ErrorStats,
}

/// What a run returned, in `[B, H, S, D]` order.
struct Run {
    output: Vec<f64>,
    logsumexp: Vec<f64>,
}

impl<T: Element> ModifiedProblem<T> {
    fn new(shape: AttentionShape, causal: bool, modifiers: Modifiers) -> Self {
        let seed = fresh_seed();
        let q = random_normal::<T>(shape.q_elements().unwrap(), 0.5, 1.0, seed);
        let k = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0x5555);
        let v = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0xAAAA);
        let slopes = modifiers
            .alibi
            .map_or(Vec::new(), |layout| slopes(&shape, layout));
        let mut problem = Self {
            shape,
            causal,
            modifiers,
            slopes,
            seed,
            q,
            k,
            v,
            reference: ReferenceOutput {
                output: Vec::new(),
                logsumexp: Vec::new(),
            },
            plain_error: ErrorStats {
                max_abs: 0.0,
                mean_abs: 0.0,
                non_finite: 0,
            },
        };
        let scoring = problem.scoring();
        let reference = attention_with(
            &problem.q,
            &problem.k,
            &problem.v,
            shape,
            &scoring,
            Precision::F64,
        );
        let plain = attention_with(
            &problem.q,
            &problem.k,
            &problem.v,
            shape,
            &scoring,
            Precision::Plain(T::DTYPE),
        );
        problem.plain_error = error_stats(plain.output, &reference.output);
        problem.reference = reference;
        problem
    }

    fn scoring(&self) -> Scoring<'_> {
        Scoring {
            softmax_scale: self.shape.default_softmax_scale() as f64,
            causal: self.causal,
            window: self.modifiers.window,
            softcap: self.modifiers.softcap.map(f64::from),
            alibi: self.alibi(),
        }
    }

    fn alibi(&self) -> Option<AlibiSlopes<'_>> {
        self.modifiers.alibi.map(|layout| AlibiSlopes {
            slopes: &self.slopes,
            layout,
        })
    }

    fn options(&self, layout: Layout, kernel: Option<&'static ForwardKernel>) -> ForwardOptions {
        ForwardOptions {
            causal: self.causal,
            window: self.modifiers.window,
            softcap: self.modifiers.softcap,
            layout,
            kernel,
            ..ForwardOptions::default()
        }
    }

    /// Runs on NaN-poisoned output and logsumexp buffers, with the tensors stored in `layout`,
    /// through `forward` or, with ALiBi, `forward_alibi`.
    fn run(&self, gpu: &FlashAttention, options: &ForwardOptions) -> Result<Run, Error> {
        let s = self.shape;
        let q_dims = (s.batch, s.heads_q, s.seq_len_q, s.head_dim);
        let kv_dims = (s.batch, s.heads_kv, s.seq_len_kv, s.head_dim);
        let layout = options.layout;
        let q = DeviceBuffer::from_slice(&relayout(&self.q, q_dims, Layout::Bhsd, layout))?;
        let k = DeviceBuffer::from_slice(&relayout(&self.k, kv_dims, Layout::Bhsd, layout))?;
        let v = DeviceBuffer::from_slice(&relayout(&self.v, kv_dims, Layout::Bhsd, layout))?;
        let poisoned = vec![T::from_f64(f64::NAN); s.q_elements()?];
        let mut output = DeviceBuffer::from_slice(&poisoned)?;
        let mut lse = DeviceBuffer::from_slice(&vec![f32::NAN; s.lse_elements()?])?;
        match self.alibi() {
            None => gpu.forward(&q, &k, &v, &mut output, Some(&mut lse), s, options)?,
            Some(alibi) => {
                gpu.forward_alibi(&q, &k, &v, &mut output, Some(&mut lse), alibi, s, options)?
            }
        }
        gpu.synchronize()?;
        let mut host = poisoned;
        output.copy_to(&mut host[..])?;
        let mut host_lse = vec![0f32; s.lse_elements()?];
        lse.copy_to(&mut host_lse[..])?;
        Ok(Run {
            output: relayout(&host, q_dims, layout, Layout::Bhsd)
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            logsumexp: host_lse.iter().map(|&x| x as f64).collect(),
        })
    }

    /// Runs and asserts the suite's tolerance rule ([`within_tolerance`]) and the logsumexps
    /// ([`assert_logsumexps`]).
    fn check(&self, gpu: &FlashAttention, options: &ForwardOptions) {
        let context = format!(
            "{:?} causal={} {:?} {:?} kernel={:?}, seed {} (replay with FLASH_ATTN_SEED={})",
            self.shape,
            self.causal,
            self.modifiers,
            options.layout,
            options.kernel.map(|k| k.entry),
            self.seed,
            self.seed
        );
        let run = self
            .run(gpu, options)
            .unwrap_or_else(|error| panic!("{context}: failed to run: {error}"));
        let ours = error_stats(run.output.iter().copied(), &self.reference.output);
        assert!(
            within_tolerance(&ours, &self.plain_error),
            "error beyond tolerance: {context}: ours {ours:?}, plain {:?}",
            self.plain_error
        );
        assert_logsumexps(run.logsumexp, &self.reference.logsumexp, &context);
    }
}

/// `(seq_len_q, seq_len_kv)`: single rows, odd lengths around the tiles, either longer.
const ODD_PAIRS: [(usize, usize); 6] = [
    (1, 1),
    (7, 63),
    (65, 1000),
    (1000, 65),
    (63, 4097),
    (257, 257),
];

fn check_combinations<T: Element>(gpu: &FlashAttention, head_dim: usize) {
    check_combinations_on::<T>(gpu, head_dim, None);
}

/// The problems of [`ODD_PAIRS`] at `head_dim`, each with its layout: MHA and GQA by turns, as
/// the layouts.
fn odd_problems(head_dim: usize) -> impl Iterator<Item = (AttentionShape, Layout)> {
    ODD_PAIRS
        .into_iter()
        .enumerate()
        .map(move |(index, (seq_len_q, seq_len_kv))| {
            let ((batch, heads_q, heads_kv), layout) = if index % 2 == 0 {
                ((2, 2, 2), Layout::Bhsd)
            } else {
                ((1, 4, 2), Layout::Bshd)
            };
            let shape = AttentionShape {
                batch,
                heads_q,
                heads_kv,
                seq_len_q,
                seq_len_kv,
                head_dim,
            };
            (shape, layout)
        })
}

/// [`check_combinations`] on `kernel` where it names one, else on the default API's kernel.
fn check_combinations_on<T: Element>(
    gpu: &FlashAttention,
    head_dim: usize,
    kernel: Option<&'static ForwardKernel>,
) {
    for (shape, layout) in odd_problems(head_dim) {
        for modifiers in COMBINATIONS {
            for causal in [false, true] {
                let options = ForwardOptions {
                    causal,
                    window: modifiers.window,
                    ..ForwardOptions::default()
                };
                // A window that leaves every query of these lengths without a key is an error
                // (`errors_come_before_any_launch`).
                if options.mask(&shape).is_err() {
                    continue;
                }
                // A named modified kernel runs only problems that need one: with no softcap or
                // ALiBi, a window that bounds nothing more than causal masking at these lengths
                // runs the dense kernel (`a_window_no_wider_than_causal_is_the_dense_kernel`).
                let plain = ForwardOptions {
                    softcap: modifiers.softcap,
                    ..options
                };
                let runs_dense = modifiers.alibi.is_none()
                    && plan(T::DTYPE, &shape, &plain, gpu.sm_count())
                        .is_ok_and(|plan| plan.kernel().spec.variant == Variant::Dense);
                if kernel.is_some() && runs_dense {
                    continue;
                }
                let problem = ModifiedProblem::<T>::new(shape, causal, modifiers);
                problem.check(gpu, &problem.options(layout, kernel));
            }
        }
    }
}

/// Whether `kernel` is one of the sm90 family's modified kernels.
fn is_sm90_modified(kernel: &ForwardKernel) -> bool {
    kernel.spec.variant == Variant::Modified && kernel.spec.family == Family::Sm90
}

/// Those of `kernels` this device runs; the others named in one line.
fn runnable_on(
    gpu: &FlashAttention,
    kernels: impl IntoIterator<Item = &'static ForwardKernel>,
) -> Vec<&'static ForwardKernel> {
    let (runnable, not_applicable): (Vec<&ForwardKernel>, Vec<_>) = kernels
        .into_iter()
        .partition(|kernel| kernel.runs_on(gpu.compute_capability()));
    report_not_applicable(
        gpu,
        &not_applicable
            .iter()
            .map(|k: &&ForwardKernel| k.entry)
            .collect(),
    );
    runnable
}

/// The exposed modified kernels of the sm90 family (in this run's kernel shard); on a device
/// that cannot run them, none, after one line saying so. None selected is no failure here:
/// the default-API test that reads them runs under every filter.
fn sm90_modified_kernels(gpu: &FlashAttention) -> Vec<&'static ForwardKernel> {
    runnable_on(
        gpu,
        FORWARD_KERNELS
            .iter()
            .filter(|kernel| is_sm90_modified(kernel) && in_kernel_shard(kernel)),
    )
}

/// The sm90 modified kernels that `keep` picks, for a test of every one of them: selected by
/// `selected_kernels` (a filter or shard that selects none fails, so that a run that checked
/// nothing does not pass), then those this device runs.
fn selected_sm90_modified_kernels(
    gpu: &FlashAttention,
    keep: impl Fn(&ForwardKernel) -> bool,
) -> Vec<&'static ForwardKernel> {
    runnable_on(
        gpu,
        selected_kernels("sm90 modified", |kernel| {
            is_sm90_modified(kernel) && keep(kernel)
        }),
    )
}

/// Every modified kernel of the sm90 family (wgmma; each warpgroup computes its own rows' key
/// blocks) with each modifier alone and combined, causal or not, at [`ODD_PAIRS`], MHA and
/// GQA, both layouts: the small problems the default API runs on the sm80 family. A problem
/// of the kernel's own head dim and, where the kernel pads, one padded to it (8 less) by turns.
pub(crate) fn every_sm90_modified_kernel_with_each_modifier() {
    let gpu = gpu();
    let kernels = selected_sm90_modified_kernels(&gpu, |_| true);
    for (index, kernel) in kernels.into_iter().enumerate() {
        let padded = index % 2 == 1 && kernel.spec.pads_head_dim();
        let head_dim = kernel.spec.tile.head_dim - if padded { 8 } else { 0 };
        match kernel.spec.dtype {
            Dtype::F16 => check_combinations_on::<f16>(&gpu, head_dim, Some(kernel)),
            Dtype::Bf16 => check_combinations_on::<bf16>(&gpu, head_dim, Some(kernel)),
        }
    }
}

/// ALiBi alone, with slopes per head and per batch and head: the problems of the ALiBi kernels.
const ALIBI_ALONE: [Modifiers; 2] = [
    COMBINATIONS[4],
    Modifiers {
        window: None,
        softcap: None,
        alibi: Some(AlibiLayout::PerBatchAndHead),
    },
];

/// Every ALiBi kernel ([`Variant::Alibi`]: the sm90 family's dense loop with ALiBi's bias,
/// its key blocks from the last to the first) with slopes per head and per batch and head,
/// causal or not, at [`ODD_PAIRS`] (rows that see no key among them), MHA and GQA, both
/// layouts; also the sanitizer runs' problem for these kernels.
pub(crate) fn every_alibi_kernel_with_alibi_alone() {
    check_every_kernel_of(Variant::Alibi, &ALIBI_ALONE);
}

/// The softcap alone, one that bends unit-spread scores and Gemma 2's: the problems of the
/// softcap kernels.
const SOFTCAP_ALONE: [Modifiers; 2] = [
    COMBINATIONS[3],
    Modifiers {
        window: None,
        softcap: Some(30.0),
        alibi: None,
    },
];

/// Every softcap kernel ([`Variant::Softcap`]: the sm90 family's dense loop with the softcap
/// on every block) with [`SOFTCAP_ALONE`], causal or not, at [`ODD_PAIRS`], MHA and GQA, both
/// layouts; also the sanitizer runs' problem for these kernels.
pub(crate) fn every_softcap_kernel_with_the_softcap_alone() {
    check_every_kernel_of(Variant::Softcap, &SOFTCAP_ALONE);
}

/// Every selected kernel of `variant` that this device runs, on the problems of
/// [`odd_problems`] under each of `alone`, causal and not.
fn check_every_kernel_of(variant: Variant, alone: &[Modifiers]) {
    let gpu = gpu();
    let what = format!("{variant:?}");
    let kernels = runnable_on(
        &gpu,
        selected_kernels(&what, |kernel| kernel.spec.variant == variant),
    );
    for kernel in kernels {
        match kernel.spec.dtype {
            Dtype::F16 => check_alone_on::<f16>(&gpu, kernel, alone),
            Dtype::Bf16 => check_alone_on::<bf16>(&gpu, kernel, alone),
        }
    }
}

/// [`check_every_kernel_of`]'s problems on `kernel`, of element type `T`.
fn check_alone_on<T: Element>(
    gpu: &FlashAttention,
    kernel: &'static ForwardKernel,
    alone: &[Modifiers],
) {
    for (shape, layout) in odd_problems(kernel.spec.tile.head_dim) {
        for &modifiers in alone {
            for causal in [false, true] {
                let problem = ModifiedProblem::<T>::new(shape, causal, modifiers);
                problem.check(gpu, &problem.options(layout, Some(kernel)));
            }
        }
    }
}

/// `(batch, heads_q, heads_kv)` of [`every_persistent_modified_kernel_over_more_tiles_than_sms`]: 24
/// query heads over 8 K/V heads (GQA) in 6 sequences, 144 (batch, head) slices.
const MANY_TILES_HEADS: (usize, usize, usize) = (6, 24, 8);

/// `(seq_len_q, seq_len_kv)` of the same: more queries than keys, so that under a causal mask
/// the first tile of each slice sees no key (a tile with no key block in a block's walk), and
/// more keys than queries, tiles of different key block counts either way.
const MANY_TILES_SEQ_PAIRS: [(usize, usize); 2] = [(300, 100), (200, 333)];

/// The shape of [`MANY_TILES_HEADS`] at `(seq_len_q, seq_len_kv)` and `head_dim`, after
/// checking that it has more than two tiles of `block_m` rows per SM of `gpu`: each block of a
/// persistent kernel walks two or more.
fn many_tiles_shape(
    gpu: &FlashAttention,
    (seq_len_q, seq_len_kv): (usize, usize),
    block_m: usize,
    head_dim: usize,
) -> AttentionShape {
    let (batch, heads_q, heads_kv) = MANY_TILES_HEADS;
    let tiles = seq_len_q.div_ceil(block_m) * heads_q * batch;
    assert!(
        tiles > 2 * gpu.sm_count(),
        "{tiles} tiles on {} SMs: a block would walk fewer than two",
        gpu.sm_count()
    );
    AttentionShape {
        batch,
        heads_q,
        heads_kv,
        seq_len_q,
        seq_len_kv,
        head_dim,
    }
}

/// A fresh problem of `shape` under `modifiers` (causal or not) on `kernel`, in its element
/// type, checked against the reference.
fn check_on_kernel(
    gpu: &FlashAttention,
    kernel: &'static ForwardKernel,
    shape: AttentionShape,
    causal: bool,
    modifiers: Modifiers,
) {
    match kernel.spec.dtype {
        Dtype::F16 => {
            let problem = ModifiedProblem::<f16>::new(shape, causal, modifiers);
            problem.check(gpu, &problem.options(Layout::Bhsd, Some(kernel)));
        }
        Dtype::Bf16 => {
            let problem = ModifiedProblem::<bf16>::new(shape, causal, modifiers);
            problem.check(gpu, &problem.options(Layout::Bhsd, Some(kernel)));
        }
    }
}

/// Every exposed persistent modified kernel (the warp-specialised sm90 tiles: one block per
/// SM, each walking its share of the tiles) on problems of more than two tiles per SM, at
/// [`MANY_TILES_SEQ_PAIRS`]: every modifier together, the window alone, the softcap alone,
/// ALiBi alone and ALiBi within a window (slopes of every head, and of every batch and head:
/// each of a block's tiles takes its own (batch, head)'s slope), causal and not (a
/// window's tiles compute few key blocks, some none; the softcap's causal problems take one
/// tile per block, `TileConfig::walk_grid`).
pub(crate) fn every_persistent_modified_kernel_over_more_tiles_than_sms() {
    let gpu = gpu();
    let kernels = selected_sm90_modified_kernels(&gpu, |kernel| kernel.spec.is_persistent());
    for kernel in kernels {
        let tile = kernel.spec.tile;
        for pair in MANY_TILES_SEQ_PAIRS {
            let shape = many_tiles_shape(&gpu, pair, tile.block_m, tile.head_dim);
            let modifiers = [0, 3, 4, 6, 8].map(|index| COMBINATIONS[index]);
            for modifiers in modifiers {
                for causal in [false, true] {
                    check_on_kernel(&gpu, kernel, shape, causal, modifiers);
                }
            }
        }
    }
}

pub(crate) fn each_modifier_alone_and_combined_fp16() {
    let gpu = gpu();
    for head_dim in [64, 128] {
        check_combinations::<f16>(&gpu, head_dim);
    }
}

pub(crate) fn each_modifier_alone_and_combined_bf16() {
    let gpu = gpu();
    for head_dim in [64, 128] {
        check_combinations::<bf16>(&gpu, head_dim);
    }
}

/// The other head dims: padded ones (40 and 200 run on the kernels of 64 and 224) and kernel
/// head dims of their own (96, 256), fp16 and bf16 by turns.
pub(crate) fn each_modifier_alone_and_combined_at_other_head_dims() {
    let gpu = gpu();
    check_combinations::<f16>(&gpu, 40);
    check_combinations::<bf16>(&gpu, 96);
    check_combinations::<f16>(&gpu, 200);
    check_combinations::<bf16>(&gpu, 256);
}

/// Every modified kernel with all three modifiers and with each alone, causal and not, on a
/// small problem with a tail: the sanitizer runs' problem.
pub(crate) fn every_modified_kernel_on_a_small_problem() {
    let gpu = gpu();
    let everything = COMBINATIONS[8];
    let mut not_applicable = BTreeSet::new();
    let mut checked = 0;
    for kernel in FORWARD_KERNELS
        .iter()
        .filter(|k| k.spec.variant == Variant::Modified && in_kernel_shard(k))
    {
        if !kernel.runs_on(gpu.compute_capability()) {
            not_applicable.insert(kernel.entry);
            continue;
        }
        checked += 1;
        let shape = AttentionShape {
            batch: 2,
            heads_q: 4,
            heads_kv: 2,
            seq_len_q: 200,
            seq_len_kv: 231,
            head_dim: kernel.spec.tile.head_dim,
        };
        for modifiers in [
            everything,
            COMBINATIONS[0],
            COMBINATIONS[3],
            COMBINATIONS[4],
        ] {
            for causal in [false, true] {
                check_on_kernel(&gpu, kernel, shape, causal, modifiers);
            }
        }
    }
    report_not_applicable(&gpu, &not_applicable);
    assert!(
        checked > 0,
        "no modified kernel was checked (FLASH_ATTN_KERNEL_FILTER / FLASH_ATTN_KERNEL_SHARD \
         select none)"
    );
}

/// The window at a long sequence: 4097 queries and keys (a tail), causal, a window of
/// 1024 keys, fp16 and bf16, D = 128, with and without softcap and ALiBi, checked on sampled
/// rows (the first, around the window's width, the tail): through the default API, and on each
/// modified sm90 kernel of D = 128 the device runs (the default API runs this small grid on the
/// sm80 family).
pub(crate) fn a_window_of_1024_keys_at_4097_tokens() {
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 1,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 4097,
        seq_len_kv: 4097,
        head_dim: 128,
    };
    let rows: Vec<QueryRow> = [0, 1, 1023, 1024, 1025, 2048, 4032, 4095, 4096]
        .into_iter()
        .flat_map(|query| {
            (0..shape.heads_q).map(move |head| QueryRow {
                batch: 0,
                head,
                query,
            })
        })
        .collect();
    for modifiers in [
        Modifiers {
            window: window(Some(1023), Some(0)),
            softcap: None,
            alibi: None,
        },
        Modifiers {
            window: window(Some(1023), Some(0)),
            softcap: Some(50.0),
            alibi: Some(AlibiLayout::PerHead),
        },
    ] {
        check_sampled::<f16>(&gpu, shape, modifiers, &rows, None);
        check_sampled::<bf16>(&gpu, shape, modifiers, &rows, None);
        for kernel in sm90_modified_kernels(&gpu) {
            if kernel.spec.tile.head_dim == shape.head_dim {
                match kernel.spec.dtype {
                    Dtype::F16 => check_sampled::<f16>(&gpu, shape, modifiers, &rows, Some(kernel)),
                    Dtype::Bf16 => {
                        check_sampled::<bf16>(&gpu, shape, modifiers, &rows, Some(kernel))
                    }
                }
            }
        }
    }
}

fn check_sampled<T: Element>(
    gpu: &FlashAttention,
    shape: AttentionShape,
    modifiers: Modifiers,
    rows: &[QueryRow],
    kernel: Option<&'static ForwardKernel>,
) {
    let seed = fresh_seed();
    let q = random_normal::<T>(shape.q_elements().unwrap(), 0.5, 1.0, seed);
    let k = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0x5555);
    let v = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 0xAAAA);
    let slopes = modifiers
        .alibi
        .map_or(Vec::new(), |layout| slopes(&shape, layout));
    let alibi = modifiers.alibi.map(|layout| AlibiSlopes {
        slopes: &slopes,
        layout,
    });
    let scoring = Scoring {
        softmax_scale: shape.default_softmax_scale() as f64,
        causal: true,
        window: modifiers.window,
        softcap: modifiers.softcap.map(f64::from),
        alibi,
    };
    let reference = attention_rows_with(&q, &k, &v, shape, &scoring, Precision::F64, rows);
    let plain = attention_rows_with(
        &q,
        &k,
        &v,
        shape,
        &scoring,
        Precision::Plain(T::DTYPE),
        rows,
    );
    let options = ForwardOptions {
        causal: true,
        window: modifiers.window,
        softcap: modifiers.softcap,
        kernel,
        ..ForwardOptions::default()
    };
    let output = match alibi {
        None => gpu.forward_host(&q, &k, &v, shape, &options),
        Some(alibi) => gpu.forward_host_alibi(&q, &k, &v, alibi, shape, &options),
    }
    .unwrap();
    let d = shape.head_dim;
    let ours: Vec<f64> = rows
        .iter()
        .flat_map(|row| {
            let start = row.index(&shape) * d;
            output[start..start + d].iter().map(|x| x.to_f64())
        })
        .collect();
    let ours = error_stats(ours, &reference.output);
    let plain = error_stats(plain.output, &reference.output);
    assert!(
        within_tolerance(&ours, &plain),
        "{shape:?} {modifiers:?} {} seed {seed}: ours {ours:?}, plain {plain:?}",
        kernel.map_or("default kernel", |kernel| kernel.entry)
    );
}

/// Key blocks wholly outside a query block's window are skipped, not masked: a NaN in V reaches
/// exactly the rows of the query blocks that compute its key's block (those that see the key,
/// and, as `0 * NaN`, the others of their blocks: the README's caveat), and no other row. Each
/// modified kernel the device runs, with its own tile's rows of one key-block range
/// ([`flash_attn::KernelSpec::key_block_rows`]: the sm90 family's pick each warpgroup's own).
pub(crate) fn key_blocks_outside_the_window_are_skipped() {
    let gpu = gpu();
    for kernel in FORWARD_KERNELS.iter().filter(|k| {
        k.spec.variant == Variant::Modified
            && k.spec.dtype == Dtype::F16
            && k.runs_on(gpu.compute_capability())
    }) {
        let tile = kernel.spec.tile;
        let shape = AttentionShape {
            batch: 1,
            heads_q: 1,
            heads_kv: 1,
            seq_len_q: 1000,
            seq_len_kv: 1000,
            head_dim: tile.head_dim,
        };
        let (left, right) = (200i64, 0i64);
        // A key in the middle: past the windows of the first query blocks, before those of the
        // last ones.
        let poisoned_key = 500usize;
        let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 7);
        let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 8);
        let mut v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 9);
        v[poisoned_key * shape.head_dim] = f16::NAN;
        let options = ForwardOptions {
            window: window(Some(left), Some(right)),
            kernel: Some(kernel),
            ..ForwardOptions::default()
        };
        let output = gpu.forward_host(&q, &k, &v, shape, &options).unwrap();
        let block_m = kernel.spec.key_block_rows() as i64;
        let block_n = tile.block_n as i64;
        for query in 0..shape.seq_len_q as i64 {
            // The key blocks the query's block (of `block_m` rows) computes: from the block of
            // its first query's first key to the block of its last query's last key.
            let first_query = query / block_m * block_m;
            let last_query = (first_query + block_m).min(shape.seq_len_q as i64) - 1;
            let first_key = (first_query - left).max(0);
            let end_key = (last_query + right + 1).min(shape.seq_len_kv as i64);
            let computed =
                first_key / block_n * block_n..(end_key + block_n - 1) / block_n * block_n;
            let nan = output[query as usize * shape.head_dim].to_f64().is_nan();
            assert_eq!(
                nan,
                computed.contains(&(poisoned_key as i64)),
                "{}: query {query} (its block computes keys {computed:?})",
                kernel.entry
            );
            // The other columns never meet the NaN.
            assert!(output[query as usize * shape.head_dim + 1]
                .to_f64()
                .is_finite());
        }
    }
}

/// A window that bounds nothing more than causal masking runs the dense causal kernel: the
/// same bits as `causal: true`.
pub(crate) fn a_window_no_wider_than_causal_is_the_dense_kernel() {
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 1,
        seq_len_q: 300,
        seq_len_kv: 333,
        head_dim: 64,
    };
    let q = random_normal::<bf16>(shape.q_elements().unwrap(), 0.5, 1.0, 1);
    let k = random_normal::<bf16>(shape.kv_elements().unwrap(), 0.5, 1.0, 2);
    let causal = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let expected = gpu.forward_host(&q, &k, &k, shape, &causal).unwrap();
    for options in [
        ForwardOptions {
            window: window(None, Some(0)),
            ..ForwardOptions::default()
        },
        ForwardOptions {
            window: window(Some(10_000), Some(0)),
            ..ForwardOptions::default()
        },
        ForwardOptions {
            causal: true,
            window: window(Some(332), Some(50)),
            ..ForwardOptions::default()
        },
    ] {
        let kernel = plan(Dtype::Bf16, &shape, &options, gpu.sm_count()).unwrap();
        assert_eq!(kernel.kernel().spec.variant, Variant::Dense);
        let got = gpu.forward_host(&q, &k, &k, shape, &options).unwrap();
        assert!(
            got.iter()
                .zip(&expected)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{options:?}"
        );
    }
}

/// `forward_alibi`, `forward_host_alibi` and `forward_alibi_raw` compute the same bits.
pub(crate) fn the_alibi_calls_agree_bit_for_bit() {
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        seq_len_q: 129,
        seq_len_kv: 300,
        head_dim: 128,
    };
    let modifiers = COMBINATIONS[8];
    let problem = ModifiedProblem::<f16>::new(shape, true, modifiers);
    let options = problem.options(Layout::Bhsd, None);
    let safe = problem.run(&gpu, &options).unwrap();
    let alibi = problem.alibi().unwrap();
    let host = gpu
        .forward_host_alibi(&problem.q, &problem.k, &problem.v, alibi, shape, &options)
        .unwrap();
    let (q, k, v) = (
        DeviceBuffer::from_slice(&problem.q).unwrap(),
        DeviceBuffer::from_slice(&problem.k).unwrap(),
        DeviceBuffer::from_slice(&problem.v).unwrap(),
    );
    let slopes = DeviceBuffer::from_slice(&problem.slopes).unwrap();
    let output = DeviceBuffer::from_slice(&vec![f16::NAN; shape.q_elements().unwrap()]).unwrap();
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: None,
    };
    let raw_slopes = RawAlibiSlopes {
        address: slopes.as_device_ptr().as_raw(),
        layout: alibi.layout,
    };
    // SAFETY: dense buffers of the shape and the slopes of the layout, alive until the
    // synchronize below, on the instance's own stream.
    unsafe {
        gpu.forward_alibi_raw(
            gpu.stream().as_inner(),
            Dtype::F16,
            tensors,
            raw_slopes,
            shape,
            &options,
        )
    }
    .unwrap();
    gpu.synchronize().unwrap();
    let mut raw = vec![f16::ZERO; shape.q_elements().unwrap()];
    output.copy_to(&mut raw[..]).unwrap();
    for (name, other) in [("forward_host_alibi", &host), ("forward_alibi_raw", &raw)] {
        assert!(
            other
                .iter()
                .zip(&safe.output)
                .all(|(a, b)| a.to_f64().to_bits() == b.to_bits()),
            "{name} differs from forward_alibi"
        );
    }
}

/// Back-to-back ALiBi calls with different slopes on one stream, the second growing the
/// instance's slopes buffer, the third shrinking the need again, with no synchronisation
/// between them: each gets its own slopes.
pub(crate) fn back_to_back_alibi_calls_read_their_own_slopes() {
    let gpu = FlashAttention::with_options(&crate::support::load_options()).unwrap();
    let small = AttentionShape {
        batch: 1,
        heads_q: 2,
        heads_kv: 2,
        seq_len_q: 65,
        seq_len_kv: 70,
        head_dim: 64,
    };
    let large = AttentionShape {
        batch: 3,
        heads_q: 16,
        heads_kv: 4,
        ..small
    };
    let modifiers = Modifiers {
        window: None,
        softcap: None,
        alibi: Some(AlibiLayout::PerBatchAndHead),
    };
    let problems = [
        ModifiedProblem::<f16>::new(small, false, modifiers),
        ModifiedProblem::<f16>::new(large, false, modifiers),
        ModifiedProblem::<f16>::new(small, true, modifiers),
    ];
    let mut runs = Vec::new();
    for problem in &problems {
        let s = problem.shape;
        let q = DeviceBuffer::from_slice(&problem.q).unwrap();
        let k = DeviceBuffer::from_slice(&problem.k).unwrap();
        let v = DeviceBuffer::from_slice(&problem.v).unwrap();
        let mut output =
            DeviceBuffer::from_slice(&vec![f16::NAN; s.q_elements().unwrap()]).unwrap();
        let options = problem.options(Layout::Bhsd, None);
        gpu.forward_alibi(
            &q,
            &k,
            &v,
            &mut output,
            None,
            problem.alibi().unwrap(),
            s,
            &options,
        )
        .unwrap();
        runs.push((q, k, v, output));
    }
    gpu.synchronize().unwrap();
    for (problem, (_, _, _, output)) in problems.iter().zip(&runs) {
        let mut host = vec![f16::ZERO; problem.shape.q_elements().unwrap()];
        output.copy_to(&mut host[..]).unwrap();
        let ours = error_stats(host.iter().map(|x| x.to_f64()), &problem.reference.output);
        assert!(
            within_tolerance(&ours, &problem.plain_error),
            "{:?}: ours {ours:?}, plain {:?}",
            problem.shape,
            problem.plain_error
        );
    }
}

/// Bad modifiers are rejected before anything is launched: an invalid softcap, an empty
/// window, one that leaves every query without a key, too few ALiBi slopes, a slope that is
/// not finite, a raw call without slopes; the output stays as it was.
pub(crate) fn errors_come_before_any_launch() {
    let gpu = gpu();
    let shape = AttentionShape::new(1, 2, 100, 64);
    let data = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 3);
    let q = DeviceBuffer::from_slice(&data).unwrap();
    let mut output = DeviceBuffer::from_slice(&vec![f16::NAN; data.len()]).unwrap();
    let options = |window, softcap| ForwardOptions {
        window,
        softcap,
        ..ForwardOptions::default()
    };
    let slopes = [0.5f32, 0.25];
    let per_head = |slopes| AlibiSlopes {
        slopes,
        layout: AlibiLayout::PerHead,
    };
    let cases: [(ForwardOptions, Option<AlibiSlopes>, Error); 6] = [
        (
            options(None, Some(-1.0)),
            None,
            Error::InvalidSoftcap { softcap: -1.0 },
        ),
        (
            options(window(Some(2), Some(-3)), None),
            None,
            Error::EmptyWindow { left: 2, right: -3 },
        ),
        (
            options(window(None, Some(-100)), None),
            None,
            Error::WindowExcludesEveryKey {
                left: None,
                right: Some(-100),
                seq_len_q: 100,
                seq_len_kv: 100,
            },
        ),
        (
            options(None, None),
            Some(per_head(&slopes[..1])),
            Error::AlibiSlopesTooShort {
                length: 1,
                required: 2,
            },
        ),
        (
            options(None, None),
            Some(per_head(&[0.5, f32::INFINITY])),
            Error::InvalidAlibiSlope {
                index: 1,
                slope: f32::INFINITY,
            },
        ),
        (
            options(None, Some(f32::NAN)),
            Some(per_head(&slopes)),
            Error::InvalidSoftcap { softcap: f32::NAN },
        ),
    ];
    for (options, alibi, expected) in cases {
        let result = match alibi {
            None => gpu.forward(&q, &q, &q, &mut output, None, shape, &options),
            Some(alibi) => gpu.forward_alibi(&q, &q, &q, &mut output, None, alibi, shape, &options),
        };
        // NaN softcaps compare by their bits.
        assert_eq!(
            format!("{:?}", result.unwrap_err()),
            format!("{expected:?}"),
            "{options:?}"
        );
    }
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: q.as_device_ptr().as_raw(),
        v: q.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: None,
    };
    let missing = RawAlibiSlopes {
        address: 0,
        layout: AlibiLayout::PerHead,
    };
    // SAFETY: the call fails before it launches anything.
    let result = unsafe {
        gpu.forward_alibi_raw(
            gpu.stream().as_inner(),
            Dtype::F16,
            tensors,
            missing,
            shape,
            &ForwardOptions::default(),
        )
    };
    assert_eq!(
        result,
        Err(Error::MisalignedBuffer {
            tensor: "alibi_slopes",
            address: 0
        })
    );
    gpu.synchronize().unwrap();
    let mut host = vec![f16::ZERO; data.len()];
    output.copy_to(&mut host[..]).unwrap();
    assert!(
        host.iter().all(|x| x.is_nan()),
        "a rejected call wrote the output"
    );
}

/// Explicit strides with the modifiers: the output written through padded strides holds, row
/// for row, the bits of the dense-buffer run, and the padding is never written.
pub(crate) fn explicit_strides_with_modifiers_are_honoured() {
    use flash_attn::TensorStrides;
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 77,
        seq_len_kv: 150,
        head_dim: 128,
    };
    let problem = ModifiedProblem::<bf16>::new(shape, false, COMBINATIONS[8]);
    let dense = |heads: usize, seq: usize| Layout::Bhsd.strides(heads, seq, 128).unwrap();
    let padded_seq = 128 + 8;
    let padded_head = (shape.seq_len_q + 3) as u64 * padded_seq;
    let o = TensorStrides {
        batch: 4 * padded_head,
        head: padded_head,
        seq: padded_seq,
    };
    let options = ForwardOptions {
        strides: Some(flash_attn::ForwardStrides {
            q: dense(4, 77),
            k: dense(2, 150),
            v: dense(2, 150),
            o,
        }),
        ..problem.options(Layout::Bhsd, None)
    };
    let output = gpu
        .forward_host_alibi(
            &problem.q,
            &problem.k,
            &problem.v,
            problem.alibi().unwrap(),
            shape,
            &options,
        )
        .unwrap();
    let dense_output = problem
        .run(&gpu, &problem.options(Layout::Bhsd, None))
        .unwrap()
        .output;
    for b in 0..2 {
        for h in 0..4 {
            for s in 0..77 {
                let row = (b as u64 * o.batch + h as u64 * o.head + s as u64 * o.seq) as usize;
                let dense_row = ((b * 4 + h) * 77 + s) * 128;
                for d in 0..128 {
                    assert_eq!(
                        output[row + d].to_f64().to_bits(),
                        dense_output[dense_row + d].to_bits(),
                        "b{b} h{h} s{s} d{d}"
                    );
                }
            }
        }
    }
    // The padding between rows is never written (forward_host zero-fills the buffer).
    assert!(output[128..136].iter().all(|x| x.to_f64() == 0.0));
}
