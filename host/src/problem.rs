//! The description of an attention problem, and its validation into launch parameters.
//!
//! Everything here runs without a GPU: [`supports`] answers before any work is done.

use std::cmp::Reverse;

use flash_attn_params::{
    padded_head_dim, Dtype, Family, ForwardParams, ModifierParams, SequenceParams, TensorStrides,
    TileConfig, Variant, CHUNK_BYTES, CHUNK_ELEMS, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
    TMA_STRIDE_BYTES_LIMIT,
};

use crate::launch::tensor_map_stride_bytes;
use crate::modifiers::{AlibiLayout, ScoreRule};
use crate::varlen::PackedQueries;
use crate::{
    dispatch_kernel, dispatch_kernel_on, kernel_head_dim, Error, ForwardKernel, SlidingWindow,
    FORWARD_KERNELS,
};

/// Sizes of one attention problem. Q and O are `[batch, heads_q, seq_len_q, head_dim]`,
/// K and V `[batch, heads_kv, seq_len_kv, head_dim]`, in the order given by [`Layout`] or
/// explicit strides.
///
/// Every dimension must be nonzero ([`Error::ZeroSizedDimension`]); `batch` and `heads_q` at
/// most 65,535 and the sequence lengths at most [`MAX_SEQ_LEN`] ([`Error::ProblemTooLarge`]);
/// `head_dim` a multiple of 8 from 8 to 256 ([`Error::InvalidHeadDim`]), which runs on the
/// kernels of [`crate::SUPPORTED_HEAD_DIMS`] (padded where it is not one of them).
///
/// ```
/// use flash_attn::AttentionShape;
///
/// // Grouped-query attention: 32 query heads share 8 K/V heads.
/// let shape = AttentionShape { heads_kv: 8, ..AttentionShape::new(2, 32, 1024, 128) };
/// assert_eq!(shape.q_elements()?, 2 * 32 * 1024 * 128);
/// assert_eq!(shape.kv_elements()?, 2 * 8 * 1024 * 128);
/// assert_eq!(shape.flops(true), 2.0 * 2.0 * 32.0 * 1024.0 * 1024.0 * 128.0);
/// # Ok::<(), flash_attn::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Sequences in the batch.
    pub batch: usize,
    /// Query heads, of Q and O.
    pub heads_q: usize,
    /// K/V heads; `heads_q` must be a multiple (GQA), equal for MHA, 1 for MQA.
    pub heads_kv: usize,
    /// Query rows per sequence.
    pub seq_len_q: usize,
    /// Keys per sequence (for the KV-cache calls, the cache's capacity).
    pub seq_len_kv: usize,
    /// Elements of each head's query, key and value vectors.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Multi-head attention with equal query and key lengths.
    pub fn new(batch: usize, heads: usize, seq_len: usize, head_dim: usize) -> Self {
        Self {
            batch,
            heads_q: heads,
            heads_kv: heads,
            seq_len_q: seq_len,
            seq_len_kv: seq_len,
            head_dim,
        }
    }

    /// Elements of Q (and O) when densely packed, or [`Error::TensorTooLarge`] where that
    /// count does not fit in `usize`.
    pub fn q_elements(&self) -> Result<usize, Error> {
        dense_elements(
            "q",
            &[
                ("batch", self.batch),
                ("heads_q", self.heads_q),
                ("seq_len_q", self.seq_len_q),
                ("head_dim", self.head_dim),
            ],
        )
    }

    /// Elements of K (and of V) when densely packed, or [`Error::TensorTooLarge`] where that
    /// count does not fit in `usize`.
    pub fn kv_elements(&self) -> Result<usize, Error> {
        dense_elements(
            "k",
            &[
                ("batch", self.batch),
                ("heads_kv", self.heads_kv),
                ("seq_len_kv", self.seq_len_kv),
                ("head_dim", self.head_dim),
            ],
        )
    }

    /// Elements of the logsumexp output `[batch, heads_q, seq_len_q]`, or
    /// [`Error::TensorTooLarge`] where that count does not fit in `usize`.
    pub fn lse_elements(&self) -> Result<usize, Error> {
        dense_elements(
            "lse",
            &[
                ("batch", self.batch),
                ("heads_q", self.heads_q),
                ("seq_len_q", self.seq_len_q),
            ],
        )
    }

    /// Floating-point operations of one forward pass, `4 · B · H · Sq · Sk · D`, halved for causal.
    pub fn flops(&self, causal: bool) -> f64 {
        let full = 4.0
            * (self.batch * self.heads_q) as f64
            * self.seq_len_q as f64
            * self.seq_len_kv as f64
            * self.head_dim as f64;
        if causal {
            full / 2.0
        } else {
            full
        }
    }

    /// `1 / sqrt(head_dim)`, the default softmax scale.
    pub fn default_softmax_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// How a dense tensor's dimensions are ordered in memory (the head dimension is always last).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// `[batch, heads, seq_len, head_dim]`.
    #[default]
    Bhsd,
    /// `[batch, seq_len, heads, head_dim]`.
    Bshd,
}

impl Layout {
    /// Element strides of a dense tensor of `heads` x `seq_len` x `head_dim` per batch, or
    /// `None` where a stride does not fit in `u64`.
    pub fn strides(self, heads: usize, seq_len: usize, head_dim: usize) -> Option<TensorStrides> {
        let (heads, seq_len, head_dim) = (heads as u64, seq_len as u64, head_dim as u64);
        let row = match self {
            Layout::Bhsd => head_dim,
            Layout::Bshd => heads.checked_mul(head_dim)?,
        };
        let head = match self {
            Layout::Bhsd => seq_len.checked_mul(head_dim)?,
            Layout::Bshd => head_dim,
        };
        Some(TensorStrides {
            batch: heads.checked_mul(seq_len)?.checked_mul(head_dim)?,
            head,
            seq: row,
        })
    }
}

/// Explicit element strides of each tensor (batch, head, sequence; the head dimension has
/// stride 1). Every stride must be a multiple of 8 elements, so rows stay 16-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardStrides {
    /// Strides of Q.
    pub q: TensorStrides,
    /// Strides of K.
    pub k: TensorStrides,
    /// Strides of V.
    pub v: TensorStrides,
    /// Strides of the output O; distinct rows must not overlap ([`Error::OverlappingOutput`]).
    pub o: TensorStrides,
}

/// Options of a forward pass; `Default` gives non-causal attention on dense `[B, H, S, D]`
/// tensors with scale `1/sqrt(head_dim)`, no score modifier and the kernel the dispatch table
/// picks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForwardOptions {
    /// Multiplies `Q Kᵀ` before the softmax. `None` means `1 / sqrt(head_dim)`.
    pub softmax_scale: Option<f32>,
    /// Causal masking, aligned to the bottom right as in FlashAttention: query `i` sees key
    /// `j` iff `j <= i + seq_len_kv - seq_len_q`. A query that sees no key gets output 0 and
    /// logsumexp -inf.
    pub causal: bool,
    /// The order of all four dense tensors; ignored when `strides` is given.
    pub layout: Layout,
    /// Explicit strides per tensor, overriding `layout`.
    pub strides: Option<ForwardStrides>,
    /// The exposed kernel to run (an entry of `FORWARD_KERNELS`). `None` means the tuned
    /// dispatch table's kernel for the element type, head dim, masking, key length and grid
    /// size ([`crate::dispatch_kernel`]), or with a score modifier [`crate::modified_kernel`].
    pub kernel: Option<&'static ForwardKernel>,
    /// A sliding window ([`SlidingWindow`]), intersected with `causal`; key blocks wholly
    /// outside it are skipped. `None`: no window. On the KV-cache and variable-length calls,
    /// in each sequence's own coordinates (its query count and used keys).
    pub window: Option<SlidingWindow>,
    /// Caps the scaled scores at `±softcap` smoothly, `softcap * tanh(score / softcap)` (Gemma
    /// 2's and Grok's logit softcapping), before the softmax and any ALiBi bias; finite and
    /// positive ([`Error::InvalidSoftcap`]). `None`: no cap.
    pub softcap: Option<f32>,
    /// How many blocks split each query tile's key range (split-KV, FlashAttention's
    /// `num_splits`), for the KV-cache calls: `None` picks the count from the grid and the SM
    /// count ([`split_count`]); `Some(n)`, 1 to [`MAX_SPLITS`], gives each split
    /// `ceil(key_blocks / n)` key blocks (of those a query tile can see: with a sliding window
    /// its span, else the capacity), and so `n` splits or fewer where that rounding leaves
    /// the last ones empty ([`crate::LaunchPlan::splits`] says how many): for tuning, or for
    /// results that do not depend on the device's SM count. The dense and variable-length calls never
    /// split: they take `None` or `Some(1)`. Otherwise [`Error::InvalidSplitCount`].
    pub num_splits: Option<usize>,
}

/// [`Error::InvalidSplitCount`] unless `options.num_splits` is `None` or 1 to `limit`.
pub(crate) fn check_num_splits(options: &ForwardOptions, limit: usize) -> Result<(), Error> {
    match options.num_splits {
        Some(splits) if splits == 0 || splits > limit => {
            Err(Error::InvalidSplitCount { splits, limit })
        }
        _ => Ok(()),
    }
}

impl ForwardOptions {
    /// The strides of Q, K, V and O that these options mean for `shape`, or
    /// [`Error::TensorTooLarge`] where a dense stride does not fit in `u64`.
    pub fn resolved_strides(&self, shape: &AttentionShape) -> Result<ForwardStrides, Error> {
        if let Some(strides) = self.strides {
            return Ok(strides);
        }
        let dense = |tensor, heads, seq_len| {
            self.layout
                .strides(heads, seq_len, shape.head_dim)
                .ok_or(Error::TensorTooLarge {
                    tensor,
                    dimension: "batch",
                })
        };
        let q = dense("q", shape.heads_q, shape.seq_len_q)?;
        let kv = dense("k", shape.heads_kv, shape.seq_len_kv)?;
        Ok(ForwardStrides {
            q,
            k: kv,
            v: kv,
            o: q,
        })
    }
}

/// The element count of a dense tensor of these dimensions, naming the first dimension whose
/// product with those before it passes `usize`.
fn dense_elements(
    tensor: &'static str,
    dimensions: &[(&'static str, usize)],
) -> Result<usize, Error> {
    dimensions
        .iter()
        .try_fold(1usize, |product, &(dimension, size)| {
            product
                .checked_mul(size)
                .ok_or(Error::TensorTooLarge { tensor, dimension })
        })
}

/// Largest grid y (query heads) and z (batch) of one launch.
pub(crate) const MAX_GRID_YZ: usize = 65_535;
/// The kernel does its row arithmetic in 32 bits, masking in i32 on `seq_len_q + seq_len_kv`:
/// 2^30 keeps that sum inside i32 (and a 2^30-token attention is far beyond any single launch).
pub const MAX_SEQ_LEN: usize = 1 << 30;
/// The largest byte offset from a tensor's base that the kernel may compute, for any row of any
/// tile it launches, padding rows past the sequence end included (it never dereferences those):
/// `isize::MAX`, the bound of Rust pointer arithmetic, so that no 64-bit offset can wrap.
pub const MAX_TENSOR_BYTES: u64 = isize::MAX as u64;

/// The minimum lengths, in elements, of the buffers of one call, or the lengths it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferLengths {
    /// Elements of Q.
    pub q: usize,
    /// Elements of K.
    pub k: usize,
    /// Elements of V.
    pub v: usize,
    /// Elements of the output O.
    pub o: usize,
    /// The logsumexp output, `[batch, heads_q, seq_len_q]` f32 (`[heads_q, tokens_q]` for a
    /// variable-length batch); `None`: none is written.
    pub lse: Option<usize>,
}

/// A validated problem: the kernel, its parameters (pointers still 0), the grid, and the buffer
/// lengths it needs. [`plan`] makes one without a GPU; [`crate::FlashAttention::forward`]
/// launches exactly this after [`LaunchPlan::check_buffers`].
#[derive(Clone, Copy, Debug)]
pub struct LaunchPlan {
    pub(crate) kernel: &'static ForwardKernel,
    pub(crate) params: ForwardParams,
    /// The serving kernels' second half of the argument (addresses still 0); `None` for a dense
    /// kernel.
    pub(crate) sequences: Option<SequenceParams>,
    pub(crate) grid: (u32, u32, u32),
    pub(crate) required: BufferLengths,
    pub(crate) workspace_bytes: usize,
    pub(crate) counters: usize,
    /// The modified kernels' second half of the argument (the ALiBi address still 0); `None`
    /// for any other kernel.
    pub(crate) modifiers: Option<ModifierParams>,
    /// ALiBi slopes the launch reads: 0 without ALiBi.
    pub(crate) alibi_slopes: usize,
}

impl LaunchPlan {
    /// The kernel that runs.
    pub fn kernel(&self) -> &'static ForwardKernel {
        self.kernel
    }

    /// The kernel's argument, with the five pointers still 0.
    pub fn params(&self) -> &ForwardParams {
        &self.params
    }

    /// The launch grid: (query tiles times splits, query heads, batch), or for a persistent
    /// kernel ([`flash_attn_params::KernelSpec::is_persistent`]) (blocks, 1, 1)
    /// ([`TileConfig::walk_grid`]).
    pub fn grid(&self) -> (u32, u32, u32) {
        self.grid
    }

    /// The serving kernels' sequence parameters (addresses still 0), `None` for a dense plan.
    pub fn sequences(&self) -> Option<&SequenceParams> {
        self.sequences.as_ref()
    }

    /// Key-range splits (split-KV): 1 for none.
    pub fn splits(&self) -> u32 {
        self.sequences.map_or(1, |sequences| sequences.splits)
    }

    /// Bytes of split-KV workspace (partial outputs) the launch needs: 0 without a split.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// Page indices the block table must hold: `batch * pages_per_sequence` for a plan of
    /// [`plan_paged_kv_cache`], 0 for any other.
    pub fn block_table_len(&self) -> usize {
        self.sequences
            .filter(|sequences| sequences.page_shift != 0)
            .map_or(0, |sequences| {
                self.grid.2 as usize * sequences.pages_per_sequence as usize
            })
    }

    /// Split-KV arrival counters (u32) the launch needs: 0 without a split.
    pub fn counters(&self) -> usize {
        self.counters
    }

    /// The fewest elements each buffer must hold (`lse` always given: it is needed only when
    /// the caller asks for the logsumexp).
    pub fn required(&self) -> BufferLengths {
        self.required
    }

    /// Whether buffers of these lengths hold everything the kernel reads or writes:
    /// [`Error::BufferTooSmall`] names the first that does not.
    pub fn check_buffers(&self, actual: &BufferLengths) -> Result<(), Error> {
        let required = self.required;
        // The plan always knows the logsumexp's length; it matters only when one is given.
        let lse = (actual.lse)
            .zip(required.lse)
            .map(|(actual, required)| ("lse", required, actual));
        [
            ("q", required.q, actual.q),
            ("k", required.k, actual.k),
            ("v", required.v, actual.v),
            ("o", required.o, actual.o),
        ]
        .into_iter()
        .chain(lse)
        .try_for_each(|(tensor, required, actual)| {
            if actual < required {
                Err(Error::BufferTooSmall {
                    tensor,
                    required: required as u64,
                    actual,
                })
            } else {
                Ok(())
            }
        })
    }
}

/// Whether a problem of element type `dtype` is supported, checked without a GPU or buffers:
/// the kernel that would run on a device of `sm_count` multiprocessors
/// ([`crate::FlashAttention::sm_count`]; the default kernel depends on the grid size relative
/// to them), or the error the launch would return.
pub fn supports(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<&'static ForwardKernel, Error> {
    plan(dtype, shape, options, sm_count).map(|plan| plan.kernel)
}

/// Validates a problem and plans its launch without a GPU: everything
/// [`crate::FlashAttention::forward`] checks except the buffers, whose required lengths the plan
/// holds ([`LaunchPlan::check_buffers`]). Every size, extent and offset is computed with checked
/// or 128-bit arithmetic: a problem that does not fit is an error, never a wrap or a panic.
///
/// ```
/// use flash_attn::{plan, AttentionShape, BufferLengths, Dtype, Error, ForwardOptions};
///
/// let shape = AttentionShape::new(4, 8, 512, 64);
/// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
/// // 132: the SM count of an H100 SXM (`FlashAttention::sm_count` on a GPU).
/// let plan = plan(Dtype::F16, &shape, &options, 132)?;
/// let required = plan.required();
/// assert_eq!((required.q, required.o), (shape.q_elements()?, shape.q_elements()?));
/// assert_eq!(required.lse, Some(shape.lse_elements()?));
/// assert_eq!((plan.grid().1, plan.grid().2), (8, 4)); // query heads, batch
///
/// let short = BufferLengths { k: required.k - 1, lse: None, ..required };
/// assert!(matches!(plan.check_buffers(&short), Err(Error::BufferTooSmall { tensor: "k", .. })));
/// # Ok::<(), Error>(())
/// ```
pub fn plan(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_dense(dtype, shape, options, None, sm_count, None)
}

/// [`plan`] for a device of `compute_capability` (`(major, minor)`,
/// [`crate::FlashAttention::compute_capability`]): where the options name no kernel, a dense
/// problem runs the device's dispatch table ([`crate::dispatch_kernel_on`]: on compute
/// capability 9.0 the sm_90a table first). What the `FlashAttention` calls plan with.
pub fn plan_on(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_dense(
        dtype,
        shape,
        options,
        None,
        sm_count,
        Some(compute_capability),
    )
}

/// [`plan`] (`alibi` `None`), [`plan_on`] and [`crate::plan_alibi`]: a dense kernel, or a
/// modified one where the options or ALiBi ask for a score modifier ([`ScoreRule`]); on a
/// device of `compute_capability` where it is known.
pub(crate) fn plan_dense(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    alibi: Option<AlibiLayout>,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
) -> Result<LaunchPlan, Error> {
    check_num_splits(options, 1)?;
    let rule = ScoreRule::new(shape, options, alibi);
    let checked = check_problem(dtype, shape, options, rule.variant(), || {
        rule.default_kernel(dtype, shape, sm_count, compute_capability)
    })?;
    let kernel = checked.kernel;
    let required = batch_required(shape, &checked, &kernel.spec.tile)?;
    let (params, modifiers) = rule.params(shape, options, kernel.spec.variant, checked.params)?;
    // Both sequence lengths are at most 2^30 and batch and heads at most 2^16 here: exact.
    let query_tiles = shape.seq_len_q.div_ceil(kernel.spec.tile.block_m);
    let grid = if kernel.spec.is_persistent() {
        // The kernel numbers its tiles in 32 bits: Q would hold terabytes before this fails.
        let tiles = u32::try_from(query_tiles * shape.heads_q * shape.batch).map_err(|_| {
            Error::TensorTooLarge {
                tensor: "q",
                dimension: "batch",
            }
        })?;
        let sm_count = u32::try_from(sm_count).unwrap_or(u32::MAX);
        TileConfig::walk_grid(tiles, sm_count, rule.tiles_alike(shape.seq_len_q))
    } else {
        (query_tiles as u32, shape.heads_q as u32, shape.batch as u32)
    };
    Ok(LaunchPlan {
        kernel,
        params,
        sequences: None,
        grid,
        required,
        workspace_bytes: 0,
        counters: 0,
        modifiers,
        alibi_slopes: rule.alibi_slopes(shape),
    })
}

/// Bytes per element of Q, K, V and O (fp16 and bf16).
pub(crate) const ELEMENT_BYTES: u128 = 2;

/// The buffer lengths of a batch of `shape` (every sequence of the same lengths) in `checked`'s
/// strides, for a kernel of `tile`: its tiles span whole blocks of rows.
fn batch_required(
    shape: &AttentionShape,
    checked: &CheckedProblem,
    tile: &TileConfig,
) -> Result<BufferLengths, Error> {
    let strides = &checked.strides;
    let q_rows = Rows {
        batch: shape.batch,
        heads: shape.heads_q,
        seq_len: shape.seq_len_q,
        padded_seq_len: shape.seq_len_q.div_ceil(tile.block_m) * tile.block_m,
        head_dim: shape.head_dim,
    };
    let kv_rows = Rows {
        heads: shape.heads_kv,
        seq_len: shape.seq_len_kv,
        padded_seq_len: shape.seq_len_kv.div_ceil(tile.block_n) * tile.block_n,
        ..q_rows
    };
    Ok(BufferLengths {
        q: q_rows.extent("q", &strides.q, ELEMENT_BYTES)?,
        k: kv_rows.extent("k", &strides.k, ELEMENT_BYTES)?,
        v: kv_rows.extent("v", &strides.v, ELEMENT_BYTES)?,
        o: q_rows.extent("o", &strides.o, ELEMENT_BYTES)?,
        lse: Some(checked.lse_elements),
    })
}

/// What [`check_problem`] found: the kernel, the resolved strides, the kernel's argument (its
/// addresses still 0, for the problem as given) and the logsumexp's elements.
pub(crate) struct CheckedProblem {
    pub(crate) kernel: &'static ForwardKernel,
    pub(crate) strides: ForwardStrides,
    pub(crate) params: ForwardParams,
    pub(crate) lse_elements: usize,
}

/// The checks every plan makes, dense or serving, before it sizes the buffers: no zero-sized
/// dimension, whole K/V head groups, the kernel (`options.kernel`, else `default_kernel()`)
/// a compiled one of `variant`, `dtype` and the head dim, sizes within the grid and row-index
/// limits, a usable softmax scale, strides of whole 16-byte chunks and output rows that do not
/// overlap.
pub(crate) fn check_problem(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    variant: Variant,
    default_kernel: impl FnOnce() -> Result<&'static ForwardKernel, Error>,
) -> Result<CheckedProblem, Error> {
    for (dimension, value) in [
        ("batch", shape.batch),
        ("heads_q", shape.heads_q),
        ("heads_kv", shape.heads_kv),
        ("seq_len_q", shape.seq_len_q),
        ("seq_len_kv", shape.seq_len_kv),
        ("head_dim", shape.head_dim),
    ] {
        if value == 0 {
            return Err(Error::ZeroSizedDimension { dimension });
        }
    }
    if !shape.heads_q.is_multiple_of(shape.heads_kv) {
        return Err(Error::InvalidGqaRatio {
            heads_q: shape.heads_q,
            heads_kv: shape.heads_kv,
        });
    }
    if padded_head_dim(shape.head_dim).is_none() {
        return Err(Error::InvalidHeadDim {
            head_dim: shape.head_dim,
        });
    }
    let kernel = match options.kernel {
        // A copy of a compiled kernel with its fields changed would launch that kernel's code
        // with another tile's threads and shared memory.
        Some(kernel) if *kernel != FORWARD_KERNELS[kernel.index()] => {
            return Err(Error::UnknownKernel {
                name: kernel.entry.to_owned(),
            })
        }
        Some(kernel) => kernel,
        None => default_kernel()?,
    };
    if !kernel.spec.variant.runs_problems_of(variant) {
        return Err(Error::KernelVariantMismatch {
            kernel: kernel.entry,
            needed: variant,
        });
    }
    if kernel.spec.dtype != dtype {
        return Err(Error::KernelDtypeMismatch {
            kernel: kernel.entry,
            dtype,
        });
    }
    // A larger kernel that pads runs the problem padded; a smaller one cannot hold its rows.
    if !kernel.spec.runs_head_dim(shape.head_dim) {
        return Err(Error::KernelHeadDimMismatch {
            kernel: kernel.entry,
            kernel_head_dim: kernel.spec.tile.head_dim,
            head_dim: shape.head_dim,
        });
    }
    for (dimension, value, limit) in [
        ("seq_len_q", shape.seq_len_q, MAX_SEQ_LEN),
        ("seq_len_kv", shape.seq_len_kv, MAX_SEQ_LEN),
        ("heads_q", shape.heads_q, MAX_GRID_YZ),
        ("batch", shape.batch, MAX_GRID_YZ),
    ] {
        if value > limit {
            return Err(Error::ProblemTooLarge {
                dimension,
                value,
                limit,
            });
        }
    }
    let scale = options
        .softmax_scale
        .unwrap_or(shape.default_softmax_scale());
    let scale_log2 = scale * std::f32::consts::LOG2_E;
    // A finite scale above f32::MAX / log2(e) would become an infinite exponent scale.
    if !(scale.is_finite() && scale > 0.0 && scale_log2.is_finite()) {
        return Err(Error::InvalidSoftmaxScale { scale });
    }
    let strides = options.resolved_strides(shape)?;
    for (tensor, tensor_strides) in [
        ("q", strides.q),
        ("k", strides.k),
        ("v", strides.v),
        ("o", strides.o),
    ] {
        for (name, value) in [
            ("batch", tensor_strides.batch),
            ("head", tensor_strides.head),
            ("seq", tensor_strides.seq),
        ] {
            if !value.is_multiple_of(CHUNK_ELEMS as u64) {
                return Err(Error::MisalignedStride {
                    tensor,
                    stride: name,
                    value,
                });
            }
        }
    }
    // A kernel that copies by TMA reads Q, K and V through tensor maps, whose byte strides the
    // driver takes below 2^40 only.
    if kernel.spec.copies_by_tma() {
        let limit = TMA_STRIDE_BYTES_LIMIT / (CHUNK_BYTES / CHUNK_ELEMS) as u64 - 1;
        for (dimension, value, extent) in [
            ("q batch stride", strides.q.batch, shape.batch),
            ("q head stride", strides.q.head, shape.heads_q),
            ("q seq stride", strides.q.seq, shape.seq_len_q),
            ("k batch stride", strides.k.batch, shape.batch),
            ("k head stride", strides.k.head, shape.heads_kv),
            ("k seq stride", strides.k.seq, shape.seq_len_kv),
            ("v batch stride", strides.v.batch, shape.batch),
            ("v head stride", strides.v.head, shape.heads_kv),
            ("v seq stride", strides.v.seq, shape.seq_len_kv),
        ] {
            if tensor_map_stride_bytes(value, extent as u64) >= TMA_STRIDE_BYTES_LIMIT {
                return Err(Error::ProblemTooLarge {
                    dimension,
                    value: value as usize,
                    limit: limit as usize,
                });
            }
        }
    }
    if overlaps(
        &strides.o,
        shape.batch,
        shape.heads_q,
        shape.seq_len_q,
        shape.head_dim,
    ) {
        return Err(Error::OverlappingOutput { strides: strides.o });
    }
    let lse_elements = shape.lse_elements()?;
    if lse_elements as u128 * 4 > MAX_TENSOR_BYTES as u128 {
        return Err(Error::TensorTooLarge {
            tensor: "lse",
            dimension: "batch",
        });
    }
    // The sizes are within the limits checked above, so these casts are exact.
    let params = ForwardParams {
        q: 0,
        k: 0,
        v: 0,
        o: 0,
        lse: 0,
        q_strides: strides.q,
        k_strides: strides.k,
        v_strides: strides.v,
        o_strides: strides.o,
        seq_len_q: shape.seq_len_q as u32,
        seq_len_kv: shape.seq_len_kv as u32,
        heads_q: shape.heads_q as u32,
        kv_group_size: (shape.heads_q / shape.heads_kv) as u32,
        scale_log2,
        causal: options.causal as u32,
        head_dim: shape.head_dim as u32,
        batch: shape.batch as u32,
    };
    Ok(CheckedProblem {
        kernel,
        strides,
        params,
        lse_elements,
    })
}

/// The kernel of `variant` ([`Variant::Serving`] or [`Variant::Paged`]) for `dtype` and a
/// problem like `shape` (head dim any multiple of 8 from 8 to 256), `causal` or not, on a device
/// of `sm_count` multiprocessors. Of the variant's kernels at the head dim the problem runs on
/// ([`kernel_head_dim`]: its own where it is a kernel head dim, else the next one whose kernels
/// pad, e.g. 80 on 96 and 200 on 224): those with the rows per block (`block_m`) of the kernel
/// that the dispatch table picks for the dense problem `shape` ([`crate::dispatch_kernel`]),
/// where the variant has such a tile and each sequence has at least that many query rows
/// (`shape.seq_len_q`), else those with the fewest rows; of them, the one with the most K/V
/// stages.
///
/// The dense table weighs what more rows per block trade (K/V reuse against fewer blocks and
/// the idle rows of each sequence's last block) at the problem's grid and key length, so the
/// serving kernels follow it: long prefills of large grids run the 128-row serving tiles of
/// head dims 64 and 128 where the table's pick has 128 rows (at D=128 non-causal the table's
/// `m128_n64_w4_s1_qsmem` runs dense and `m128_n32_w4_s3_pad_qsmem` serves; its causal picks
/// have 64 rows), and decode (one query row
/// per sequence), chunks of fewer than 128 queries, the paged kernels and the other head dims
/// run the 64-row tile. The variable-length plans pass the dense problem of the batch's mean
/// lengths. The tiles are [`crate::SERVING_TILES`]: m64 n64 with 3 stages at head dims 32, 64
/// and 96 and 2 at 128 (and the m128 serving tiles of 64 and 128; the paged D=128 kernel m64
/// n32 with 3), then Q in shared memory, m64 n32 at 160 and 224, m64 n16 at 192 and 256 (the
/// paged D=256 kernel with one stage). These are the sm80 family's kernels, which run on every
/// supported device; on compute capability 9.0 a variable-length batch of a head dim above 32,
/// and the KV-cache calls that they take, run the sm90 family's instead
/// ([`crate::plan_varlen_on`], [`plan_kv_cache_on`]).
///
/// ```
/// use flash_attn::{serving_kernel, AttentionShape, Dtype, Variant};
///
/// // Decode: one query per sequence, on the 64-row tile.
/// let decode = AttentionShape {
///     seq_len_q: 1,
///     ..AttentionShape::new(64, 32, 4096, 128)
/// };
/// let kernel = serving_kernel(Dtype::F16, &decode, false, Variant::Serving, 132)?;
/// assert_eq!(kernel.entry, "flash_fwd_f16_d128_m64_n64_w4_s2_serving");
/// // A long prefill of a large grid, where the dense table picks 128 rows: the 128-row tile.
/// let prefill = AttentionShape::new(4, 32, 2048, 128);
/// let kernel = serving_kernel(Dtype::F16, &prefill, false, Variant::Serving, 132)?;
/// assert_eq!(kernel.entry, "flash_fwd_f16_d128_m128_n32_w4_s3_pad_qsmem_serving");
/// // Head dim 80 runs padded on the kernels of head dim 96.
/// let padded = AttentionShape::new(8, 8, 512, 80);
/// let kernel = serving_kernel(Dtype::Bf16, &padded, false, Variant::Paged, 132)?;
/// assert_eq!(kernel.spec.tile.head_dim, 96);
/// assert!(kernel.spec.pads_head_dim());
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn serving_kernel(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    variant: Variant,
    sm_count: usize,
) -> Result<&'static ForwardKernel, Error> {
    let kernel_head_dim = kernel_head_dim(dtype, variant, shape.head_dim)?;
    let dense_rows = dispatch_kernel(dtype, shape, causal, sm_count)
        .ok()
        .map(|kernel| kernel.spec.tile.block_m)
        .filter(|&block_m| block_m <= shape.seq_len_q);
    FORWARD_KERNELS
        .iter()
        .filter(|kernel| {
            let spec = kernel.spec;
            spec.family == Family::Sm80
                && spec.variant == variant
                && spec.dtype == dtype
                && spec.tile.head_dim == kernel_head_dim
        })
        // The dense kernel's rows if the variant has them, else the fewest; then most stages.
        .max_by_key(|kernel| {
            let tile = kernel.spec.tile;
            (
                Some(tile.block_m) == dense_rows,
                Reverse(tile.block_m),
                tile.stages,
            )
        })
        .ok_or(Error::UnsupportedHeadDim {
            head_dim: shape.head_dim,
            variant,
            largest: 0,
        })
}

/// The `variant` kernel of a variable-length batch or KV-cache call like `shape` (the dense
/// problem of its mean lengths) on a device of `compute_capability` where it is known: on one
/// that runs the sm90 family (compute capability 9.0) the sm90 family's kernel of the variant
/// and the kernel head dim ([`kernel_head_dim`], as [`serving_kernel`] pads) where there is one
/// ([`crate::SM90_SERVING_TILES`] for [`Variant::Serving`], [`crate::SM90_PAGED_TILES`] for
/// [`Variant::Paged`]: every kernel head dim from 64, no score modifier), the dense
/// problem's main loop on Hopper: that of the dense problem's tile ([`dispatch_kernel_on`])
/// where it has one that runs the problem's head dim (from D=160 the warp-specialised tiles
/// run their own head dim only, [`crate::KernelSpec::runs_head_dim`]), else the head dim's
/// first that does; else [`serving_kernel`].
pub(crate) fn serving_kernel_on(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    variant: Variant,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
) -> Result<&'static ForwardKernel, Error> {
    if let Some(capability) = compute_capability {
        let head_dim = kernel_head_dim(dtype, variant, shape.head_dim)?;
        let sm90_serving = || {
            FORWARD_KERNELS.iter().filter(move |kernel| {
                let spec = kernel.spec;
                spec.family == Family::Sm90
                    && spec.variant == variant
                    && spec.dtype == dtype
                    && spec.tile.head_dim == head_dim
                    && spec.runs_head_dim(shape.head_dim)
                    && kernel.runs_on(capability)
            })
        };
        let dense_tile = dispatch_kernel_on(dtype, shape, causal, sm_count, capability)
            .ok()
            .map(|kernel| kernel.spec.tile);
        let chosen = sm90_serving()
            .find(|kernel| Some(kernel.spec.tile) == dense_tile)
            .or_else(|| sm90_serving().next());
        if let Some(kernel) = chosen {
            return Ok(kernel);
        }
    }
    serving_kernel(dtype, shape, causal, variant, sm_count)
}

/// Largest number of key-range splits (split-KV), as FlashAttention's.
pub const MAX_SPLITS: usize = 128;

/// The number of key-range splits for `blocks` blocks of `key_blocks` key blocks each on
/// `sm_count` multiprocessors, FlashAttention-2's rule: none when the blocks nearly fill the
/// GPU (80% of two per multiprocessor, the sm80 serving tiles' occupancy); else the fewest splits
/// whose waves are at least 85% as full as the best count's, skipping counts that leave the
/// same number of key blocks per split as one fewer split.
///
/// ```
/// use flash_attn::split_count;
///
/// // A decode step of 64 (sequence, K/V head) blocks over 64 key blocks leaves most of 132
/// // SMs idle: split the key range.
/// assert_eq!(split_count(64, 64, 132), 4);
/// // 1,024 blocks fill the GPU: no split.
/// assert_eq!(split_count(1024, 64, 132), 1);
/// ```
pub fn split_count(blocks: usize, key_blocks: usize, sm_count: usize) -> usize {
    split_count_resident(
        blocks,
        key_blocks,
        sm_count,
        split_blocks_per_sm(Family::Sm80),
    )
}

/// The blocks per multiprocessor that the split rule counts a family's serving kernels as
/// keeping resident: two for the sm80 family's (FlashAttention-2's rule), one for the sm90
/// family's, whose 128 to 255 registers at 256 to 512 threads take the whole register file
/// (`tests/cpu/ptxas.rs` checks it on the gate). Counted at two, a grid of 128 blocks of the
/// sm90 `m128` tiles on 132 SMs was split, and so ran on the sm80 family's kernel, 1.8x
/// (D=128) to 2.2x (D=64) slower than unsplit on the sm90 one (H200, BENCHMARKS.md log 88).
pub(crate) const fn split_blocks_per_sm(family: Family) -> usize {
    match family {
        Family::Sm80 => 2,
        Family::Sm90 => 1,
    }
}

/// [`split_count`] for kernels that keep `blocks_per_sm` blocks resident per multiprocessor.
pub(crate) fn split_count_resident(
    blocks: usize,
    key_blocks: usize,
    sm_count: usize,
    blocks_per_sm: usize,
) -> usize {
    // In u128: `sm_count` is the caller's, and no product of these may wrap.
    let slots = blocks_per_sm.max(1) as u128 * sm_count.max(1) as u128;
    if blocks as u128 * 5 >= slots * 4 || key_blocks <= 1 {
        return 1;
    }
    let max_splits = (MAX_SPLITS as u128).min(slots).min(key_blocks as u128) as usize;
    let efficiency = |splits: usize| {
        let work = blocks as u128 * splits as u128;
        work as f64 / (work.div_ceil(slots) * slots) as f64
    };
    let distinct = |splits: usize| {
        splits == 1 || key_blocks.div_ceil(splits) != key_blocks.div_ceil(splits - 1)
    };
    let best = (1..=max_splits)
        .filter(|&splits| distinct(splits))
        .map(efficiency)
        .fold(0.0, f64::max);
    (1..=max_splits)
        .find(|&splits| distinct(splits) && efficiency(splits) >= 0.85 * best)
        .unwrap_or(1)
}

/// Plans attention against a KV cache (decode, or a chunk of queries appended to a cache): Q and
/// O as `shape` and the options say, K and V caches `[batch, heads_kv, seq_len_kv, head_dim]`
/// (in the options' layout or strides: `seq_len_kv` is the cache's capacity) of which sequence
/// `b` uses keys `0..cache_lens[b]` (device u32, one per sequence, given at launch; a length
/// above the capacity is read as the capacity, so no key outside the cache is ever read).
/// Causal masking aligns each sequence's queries to the bottom right of its used keys.
///
/// It runs a serving kernel ([`serving_kernel`], or `options.kernel` if that is one; on Hopper
/// the call plans with [`plan_kv_cache_on`]). With one query row per sequence (decode) and
/// grouped-query heads, the query heads that share a K/V
/// head become the rows of one tile, so that each K/V tile is read once per K/V head; and where
/// the grid would leave the GPU idle, the key range is split over several blocks
/// ([`split_count`]) whose partials the last of them combines, in the workspace that
/// [`LaunchPlan::workspace_bytes`] sizes.
pub fn plan_kv_cache(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_cache(dtype, shape, None, None, None, options, sm_count, None)
}

/// [`plan_kv_cache`] for a device of `compute_capability` (`(major, minor)`,
/// [`crate::FlashAttention::compute_capability`]), what
/// [`crate::FlashAttention::forward_kv_cache`] plans with: on compute capability 9.0, where
/// the options name no kernel, a call without score modifiers of more than one query per
/// sequence (a decode step stays on the sm80 family's 64-row tiles, which ran it faster)
/// whose grid of the sm90 family's serving tile
/// ([`crate::SM90_SERVING_TILES`]; against a paged cache, [`plan_paged_kv_cache_on`], its
/// paged tile, [`crate::SM90_PAGED_TILES`]; chosen as for a variable-length batch:
/// [`crate::plan_varlen_on`]) needs no split of the key range ([`split_count`]'s rule, counting
/// that tile at its one block per SM) runs that kernel, a chunked prefill's `wgmma` main loop;
/// elsewhere [`plan_kv_cache`]'s. On an H200, chunked prefills of 256 to 2,048 queries against
/// 4,096 to 8,192 cached keys ran 1.6-1.8x faster on it than on the sm80 family's at D=128,
/// 1.1-2.2x at D=64 (BENCHMARKS.md log 88).
///
/// ```
/// use flash_attn::{
///     plan_kv_cache, plan_kv_cache_on, AttentionShape, Dtype, Family, ForwardOptions,
/// };
///
/// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
/// // A chunked prefill: 512 new queries per sequence over caches of 4,096 keys.
/// let prefill = AttentionShape {
///     seq_len_q: 512,
///     heads_kv: 8,
///     ..AttentionShape::new(4, 32, 4096, 128)
/// };
/// let hopper = plan_kv_cache_on(Dtype::Bf16, &prefill, &options, 132, (9, 0))?;
/// assert_eq!(hopper.kernel().spec.family, Family::Sm90);
/// assert_eq!(hopper.splits(), 1);
/// let ada = plan_kv_cache_on(Dtype::Bf16, &prefill, &options, 128, (8, 9))?;
/// assert_eq!(ada.kernel(), plan_kv_cache(Dtype::Bf16, &prefill, &options, 128)?.kernel());
/// // A decode step (one query per sequence) stays on the sm80 family's kernels.
/// let decode = AttentionShape { seq_len_q: 1, ..prefill };
/// let kernel = plan_kv_cache_on(Dtype::Bf16, &decode, &options, 132, (9, 0))?.kernel();
/// assert_eq!(kernel.spec.family, Family::Sm80);
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn plan_kv_cache_on(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_cache(
        dtype,
        shape,
        None,
        None,
        None,
        options,
        sm_count,
        Some(compute_capability),
    )
}

/// The geometry of a paged KV cache: K and V are each `[num_pages, page_size, heads_kv,
/// head_dim]`, contiguous, and the block table `[batch, pages_per_sequence]` u32 names the page
/// of each sequence's keys `p * page_size .. (p + 1) * page_size` (FlashAttention's and vLLM's
/// layout).
///
/// ```
/// use flash_attn::{
///     plan_paged_kv_cache, AttentionShape, Dtype, Error, ForwardOptions, PagedKvCache,
/// };
///
/// // Decode: one query per sequence, 32 query heads over 8 K/V heads, caches of 16 pages of
/// // 64 keys each in a pool of 512 pages.
/// let paged = PagedKvCache { num_pages: 512, page_size: 64, pages_per_sequence: 16 };
/// let shape = AttentionShape {
///     batch: 8,
///     heads_q: 32,
///     heads_kv: 8,
///     seq_len_q: 1,
///     seq_len_kv: 16 * 64,
///     head_dim: 128,
/// };
/// let options = ForwardOptions::default();
/// let plan = plan_paged_kv_cache(Dtype::Bf16, &shape, &paged, &options, 132)?;
/// assert_eq!(plan.block_table_len(), 8 * 16);
/// assert_eq!(Some(plan.required().k), paged.elements(8, 128));
///
/// let odd_pages = PagedKvCache { page_size: 48, ..paged };
/// assert_eq!(
///     plan_paged_kv_cache(Dtype::Bf16, &shape, &odd_pages, &options, 132).unwrap_err(),
///     Error::UnsupportedPageSize { page_size: 48 }
/// );
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedKvCache {
    /// Pages in each of K and V.
    pub num_pages: usize,
    /// Keys per page: a power of two from 16 to 256.
    pub page_size: usize,
    /// Block table entries per sequence; `pages_per_sequence * page_size` is the capacity per
    /// sequence, and must be the shape's `seq_len_kv`.
    pub pages_per_sequence: usize,
}

impl PagedKvCache {
    /// The element strides of K and V: `batch` steps pages, `seq` a page's rows.
    pub fn strides(&self, heads_kv: usize, head_dim: usize) -> Option<TensorStrides> {
        let seq = heads_kv.checked_mul(head_dim)?;
        Some(TensorStrides {
            batch: self.page_size.checked_mul(seq)? as u64,
            head: head_dim as u64,
            seq: seq as u64,
        })
    }

    /// Elements of each of K and V: `num_pages * page_size * heads_kv * head_dim`.
    pub fn elements(&self, heads_kv: usize, head_dim: usize) -> Option<usize> {
        self.num_pages
            .checked_mul(self.page_size)?
            .checked_mul(heads_kv)?
            .checked_mul(head_dim)
    }

    /// Page indices the block table must hold for `batch` sequences.
    pub fn block_table_len(&self, batch: usize) -> Option<usize> {
        batch.checked_mul(self.pages_per_sequence)
    }
}

/// Plans [`plan_kv_cache`]'s attention against a paged cache (see [`PagedKvCache`]): the
/// options' layout or strides place Q and O; K and V are pages (explicit K or V strides must be
/// the pages'). Sequence `b` uses keys `0..cache_lens[b]` (clamped to the capacity), in the
/// pages `block_table[b][0..ceil(used / page_size)]`; the other entries are never read.
///
/// A page index at or past `num_pages` among a sequence's used pages is never dereferenced:
/// the kernel checks them first, and that sequence's output rows and logsumexps are NaN (the
/// other sequences are computed as usual). A caller that may hand the kernel a bad table finds
/// out from those NaNs.
pub fn plan_paged_kv_cache(
    dtype: Dtype,
    shape: &AttentionShape,
    paged: &PagedKvCache,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_cache(
        dtype,
        shape,
        None,
        Some(paged),
        None,
        options,
        sm_count,
        None,
    )
}

/// [`plan_paged_kv_cache`] for a device of `compute_capability`, what
/// [`crate::FlashAttention::forward_paged_kv_cache`] plans with: the sm90 family's paged kernel
/// ([`crate::SM90_PAGED_TILES`]) on compute capability 9.0 where [`plan_kv_cache_on`] would run
/// the serving kernel of the same call against a contiguous cache (more than one query per
/// sequence, no split, the options naming no kernel), elsewhere [`plan_paged_kv_cache`]'s. It
/// checks the block table's page indices first, as the sm80 family's paged kernels do.
///
/// ```
/// use flash_attn::{
///     plan_paged_kv_cache_on, AttentionShape, Dtype, Family, ForwardOptions, PagedKvCache,
///     Variant,
/// };
///
/// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
/// // A chunked prefill of 512 queries per sequence over caches of 64 pages of 64 keys.
/// let paged = PagedKvCache { num_pages: 1024, page_size: 64, pages_per_sequence: 64 };
/// let prefill = AttentionShape {
///     seq_len_q: 512,
///     heads_kv: 8,
///     ..AttentionShape::new(4, 32, 64 * 64, 128)
/// };
/// let plan = plan_paged_kv_cache_on(Dtype::Bf16, &prefill, &paged, &options, 132, (9, 0))?;
/// let spec = plan.kernel().spec;
/// assert_eq!((spec.family, spec.variant), (Family::Sm90, Variant::Paged));
/// // A decode step stays on the sm80 family's paged kernels.
/// let decode = AttentionShape { seq_len_q: 1, ..prefill };
/// let plan = plan_paged_kv_cache_on(Dtype::Bf16, &decode, &paged, &options, 132, (9, 0))?;
/// assert_eq!(plan.kernel().spec.family, Family::Sm80);
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn plan_paged_kv_cache_on(
    dtype: Dtype,
    shape: &AttentionShape,
    paged: &PagedKvCache,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_cache(
        dtype,
        shape,
        None,
        Some(paged),
        None,
        options,
        sm_count,
        Some(compute_capability),
    )
}

/// [`plan_kv_cache`] for a call with ALiBi biases whose slopes are laid out as `layout`
/// ([`crate::FlashAttention::forward_kv_cache_alibi`]): the modified serving kernel
/// ([`Variant::ServingModified`]), and [`LaunchPlan::alibi_slopes_len`] slopes to read. Each
/// sequence's bias is in its own coordinates: query `i` and key `j` of sequence `b` are
/// `|i + used_b - seq_len_q - j|` apart, `used_b` its used keys. A decode step packs the query
/// heads of a K/V head into one tile's rows as without ALiBi (each row reads its own head's
/// slope), and the key range is split as without ALiBi. Validates everything the call does
/// but the slopes' values ([`LaunchPlan::check_alibi_slopes`]).
///
/// ```
/// use flash_attn::{plan_kv_cache_alibi, AlibiLayout, AttentionShape, Dtype, ForwardOptions};
/// use flash_attn::{Error, Variant};
///
/// // A decode step: 4 sequences, 32 query heads over 8 K/V heads, caches of 4,096 keys.
/// let shape = AttentionShape { heads_kv: 8, seq_len_q: 1, ..AttentionShape::new(4, 32, 4096, 128) };
/// let options = ForwardOptions::default();
/// let layout = AlibiLayout::PerBatchAndHead;
/// let plan = plan_kv_cache_alibi(Dtype::Bf16, &shape, &options, layout, 132)?;
/// assert_eq!(plan.kernel().spec.variant, Variant::ServingModified);
/// assert_eq!(plan.alibi_slopes_len(), 4 * 32);
/// // The 4 query heads of each K/V head packed into one tile's rows, as without ALiBi.
/// assert_eq!((plan.params().seq_len_q, plan.grid().1), (4, 8));
/// # Ok::<(), Error>(())
/// ```
pub fn plan_kv_cache_alibi(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_cache(
        dtype,
        shape,
        None,
        None,
        Some(layout),
        options,
        sm_count,
        None,
    )
}

/// [`plan_paged_kv_cache`] with ALiBi biases ([`plan_kv_cache_alibi`]): the modified paged
/// kernel ([`Variant::PagedModified`]), for
/// [`crate::FlashAttention::forward_paged_kv_cache_alibi`].
pub fn plan_paged_kv_cache_alibi(
    dtype: Dtype,
    shape: &AttentionShape,
    paged: &PagedKvCache,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_cache(
        dtype,
        shape,
        None,
        Some(paged),
        Some(layout),
        options,
        sm_count,
        None,
    )
}

/// [`plan_kv_cache`] (`queries`, `paged` and `alibi` `None`), [`plan_paged_kv_cache`] and,
/// with `queries`, [`crate::plan_varlen_kv_cache`]; with `alibi`, their ALiBi forms
/// ([`plan_kv_cache_alibi`], ...). With `queries`, Q and O hold them packed (their batch
/// strides unused) and `shape.seq_len_q` is the longest sequence's query count. With
/// `compute_capability` ([`plan_kv_cache_on`]) the sm90 family's serving kernel where it takes
/// the call.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_cache(
    dtype: Dtype,
    shape: &AttentionShape,
    queries: Option<PackedQueries>,
    paged: Option<&PagedKvCache>,
    alibi: Option<AlibiLayout>,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
) -> Result<LaunchPlan, Error> {
    let unmodified = if paged.is_some() {
        Variant::Paged
    } else {
        Variant::Serving
    };
    let rule = ScoreRule::new(shape, options, alibi);
    let variant = rule.serving_variant(unmodified);
    check_num_splits(options, MAX_SPLITS)?;
    // The dense problem the kernel is chosen for: packed queries at their mean length.
    let like = match queries {
        None => *shape,
        Some(queries) => AttentionShape {
            seq_len_q: queries.tokens_q.div_ceil(shape.batch.max(1)),
            ..*shape
        },
    };
    let group = shape.heads_q / shape.heads_kv.max(1);
    // Not for packed queries: their rows are tokens of Q's sequence dimension, found through
    // the offsets. With ALiBi the kernel reads each row's slope (row `j`'s head, below).
    let packed_heads = queries.is_none() && shape.seq_len_q == 1 && group > 1;
    // On Hopper the sm90 family's serving or paged kernel where it runs the call and is the
    // faster: no score modifier, more than one query in the longest sequence (no
    // packed heads; at a multi-head decode step the sm80 kernel's 64-row tile ran 1.20x faster
    // than the sm90 one's 192 rows, D=64, H200, BENCHMARKS.md log 88), and a grid of its tile
    // that needs no split.
    let default_kernel = || {
        let capability = compute_capability.filter(|_| shape.seq_len_q > 1);
        let kernel = serving_kernel_on(dtype, &like, rule.causal(), variant, sm_count, capability)?;
        let unsplit =
            || CacheSplit::new(kernel, shape, false, &rule, options, sm_count).splits == 1;
        if kernel.spec.family == Family::Sm80 || unsplit() {
            Ok(kernel)
        } else {
            serving_kernel(dtype, &like, rule.causal(), variant, sm_count)
        }
    };
    let (checked, mut required) = match queries {
        None => {
            let checked = check_problem(dtype, shape, options, variant, default_kernel)?;
            let required = batch_required(shape, &checked, &checked.kernel.spec.tile)?;
            (checked, required)
        }
        Some(queries) => {
            queries.check()?;
            if shape.batch > MAX_GRID_YZ {
                return Err(Error::ProblemTooLarge {
                    dimension: "batch",
                    value: shape.batch,
                    limit: MAX_GRID_YZ,
                });
            }
            // Q and O in the options' layout over the packed tokens (or their explicit
            // strides), their batch strides 0; K and V as for a batch of caches.
            let mut strides = options.resolved_strides(&AttentionShape {
                seq_len_q: queries.tokens_q,
                ..*shape
            })?;
            (strides.q.batch, strides.o.batch) = (0, 0);
            let packed = ForwardOptions {
                strides: Some(strides),
                ..*options
            };
            // The dense checks on one sequence of the longest queries (all sequences share
            // Q's rows: the offsets place them); the output's and the logsumexp's tokens
            // below.
            let longest = AttentionShape { batch: 1, ..*shape };
            let checked = check_problem(dtype, &longest, &packed, variant, default_kernel)?;
            let tile = checked.kernel.spec.tile;
            let keys = batch_required(shape, &checked, &tile)?;
            let required = BufferLengths {
                k: keys.k,
                v: keys.v,
                ..queries.required(&longest, &checked.strides, &tile)?
            };
            (checked, required)
        }
    };
    let kernel = checked.kernel;
    let split = CacheSplit::new(kernel, shape, packed_heads, &rule, options, sm_count);
    if kernel.spec.family != Family::Sm80 && (packed_heads || split.splits > 1) {
        return Err(Error::KernelNotForKvCache {
            kernel: kernel.entry,
        });
    }
    let (mut params, mut modifiers) =
        rule.params(shape, options, kernel.spec.variant, checked.params)?;
    let mut paging = SequenceParams::DENSE;
    if let Some(paged) = paged {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&paged.page_size)
            || !paged.page_size.is_power_of_two()
        {
            return Err(Error::UnsupportedPageSize {
                page_size: paged.page_size,
            });
        }
        if paged.pages_per_sequence.checked_mul(paged.page_size) != Some(shape.seq_len_kv) {
            return Err(Error::PagedCapacityMismatch {
                seq_len_kv: shape.seq_len_kv,
                pages_per_sequence: paged.pages_per_sequence,
                page_size: paged.page_size,
            });
        }
        let too_large = |tensor| Error::TensorTooLarge {
            tensor,
            dimension: "num_pages",
        };
        // The kernel compares page indices (u32) with the page count.
        if paged.num_pages > u32::MAX as usize {
            return Err(Error::ProblemTooLarge {
                dimension: "num_pages",
                value: paged.num_pages,
                limit: u32::MAX as usize,
            });
        }
        let strides = paged
            .strides(shape.heads_kv, shape.head_dim)
            .ok_or(too_large("k"))?;
        if let Some(explicit) = options.strides {
            for (tensor, given) in [("k", explicit.k), ("v", explicit.v)] {
                if given != strides {
                    return Err(Error::PagedStridesMismatch { tensor });
                }
            }
        }
        // Every key row of every page (the kernel reads only checked pages' rows).
        let elements = paged
            .elements(shape.heads_kv, shape.head_dim)
            .filter(|&elements| elements as u128 * ELEMENT_BYTES <= MAX_TENSOR_BYTES as u128)
            .ok_or(too_large("k"))?;
        (required.k, required.v) = (elements, elements);
        (params.k_strides, params.v_strides) = (strides, strides);
        paging = SequenceParams {
            // The block table's address comes at launch; this marks the plan as paged.
            pages_per_sequence: paged.pages_per_sequence as u32,
            page_shift: paged.page_size.trailing_zeros(),
            num_pages: paged.num_pages as u32,
            ..SequenceParams::DENSE
        };
    }
    let mut lse_strides = queries.map_or(
        TensorStrides {
            batch: (shape.heads_q * shape.seq_len_q) as u64,
            head: shape.seq_len_q as u64,
            seq: 1,
        },
        |queries| queries.lse_strides(),
    );
    if packed_heads {
        // One query row per sequence: the `group` query heads of a K/V head become the rows of
        // one (batch, K/V head) slice, row `j` being head `kv_head * group + j`. All rows are
        // the same query position, which sees every used key (causal or not).
        let pack = |strides: TensorStrides| TensorStrides {
            batch: strides.batch,
            head: strides.head * group as u64,
            seq: strides.head,
        };
        params.q_strides = pack(params.q_strides);
        params.o_strides = pack(params.o_strides);
        lse_strides = TensorStrides {
            batch: shape.heads_q as u64,
            head: group as u64,
            seq: 1,
        };
        params.seq_len_q = group as u32;
        params.heads_q = shape.heads_kv as u32;
        params.kv_group_size = 1;
        params.causal = 0;
        if let Some(modifiers) = modifiers.as_mut() {
            // Every row is the sequence's one query: the window of a sequence of one query.
            modifiers.rows_share_one_query = 1;
        }
    }
    let tile = kernel.spec.tile;
    let CacheSplit {
        query_blocks,
        splits,
        blocks_per_split,
    } = split;
    // A workspace row per query row: `[batch, seq_len_q]` of them, or the packed tokens.
    let partial_rows = queries.map_or(shape.batch * params.seq_len_q as usize, |queries| {
        queries.tokens_q
    });
    let (workspace_bytes, counters) = if splits > 1 {
        // Sizes within the limits above keep `counters` below 2^62; the workspace's bytes can
        // pass the address space where a caller's `sm_count` splits a huge batch.
        let bytes = (splits as u128)
            * params.heads_q as u128
            * partial_rows as u128
            * (tile.head_dim as u128 + 1)
            * 4;
        if bytes > MAX_TENSOR_BYTES as u128 {
            return Err(Error::TensorTooLarge {
                tensor: "workspace",
                dimension: "batch",
            });
        }
        (
            bytes as usize,
            shape.batch * params.heads_q as usize * query_blocks,
        )
    } else {
        (0, 0)
    };
    if query_blocks * splits > u32::MAX as usize || partial_rows > u32::MAX as usize {
        return Err(Error::ProblemTooLarge {
            dimension: "batch",
            value: shape.batch,
            limit: u32::MAX as usize / query_blocks.max(1),
        });
    }
    let sequences = SequenceParams {
        pages_per_sequence: paging.pages_per_sequence,
        page_shift: paging.page_shift,
        num_pages: paging.num_pages,
        lse_strides,
        splits: splits as u32,
        // At most `key_blocks * block_n`, which fits: `seq_len_kv <= 2^30`.
        keys_per_split: (blocks_per_split * tile.block_n) as u32,
        partial_rows: partial_rows as u32,
        query_blocks: query_blocks as u32,
        ..SequenceParams::DENSE
    };
    Ok(LaunchPlan {
        kernel,
        params,
        sequences: Some(sequences),
        grid: (
            (query_blocks * splits) as u32,
            params.heads_q,
            shape.batch as u32,
        ),
        required,
        workspace_bytes,
        counters,
        modifiers,
        // `shape.batch` is the number of sequences, packed queries or not.
        alibi_slopes: rule.alibi_slopes(shape),
    })
}

/// How a KV-cache call's grid covers its problem on one kernel: the query blocks of each
/// (sequence, query head), and the key range's split ([`split_count`] with the kernel family's
/// [`split_blocks_per_sm`], or the options' `num_splits`) into `splits` parts of
/// `blocks_per_split` key blocks each, none empty.
#[derive(Clone, Copy)]
struct CacheSplit {
    query_blocks: usize,
    splits: usize,
    blocks_per_split: usize,
}

impl CacheSplit {
    /// The split of `shape` (the longest sequence of a packed batch) on `kernel`, its query
    /// heads packed into the rows of one tile per K/V head if `packed_heads` (a decode step of
    /// grouped heads: `heads_q / heads_kv` rows of one query).
    fn new(
        kernel: &ForwardKernel,
        shape: &AttentionShape,
        packed_heads: bool,
        rule: &ScoreRule,
        options: &ForwardOptions,
        sm_count: usize,
    ) -> Self {
        let tile = kernel.spec.tile;
        let (rows_q, heads) = if packed_heads {
            (shape.heads_q / shape.heads_kv, shape.heads_kv)
        } else {
            (shape.seq_len_q, shape.heads_q)
        };
        let query_blocks = rows_q.div_ceil(tile.block_m);
        // The key blocks a query block sees: a window's span, or the whole capacity. Packed
        // heads are rows of one query, whose window is that of a sequence of one query (sized
        // for the `group` rows, it took up to `group` keys more, and splits with nothing to
        // do).
        let (seq_len_q, rows) = if packed_heads {
            (1, 1)
        } else {
            (rows_q, rows_q.min(tile.block_m))
        };
        let key_blocks = rule
            .visible_keys(seq_len_q, rows)
            .map_or(usize::MAX, |keys| keys.div_ceil(tile.block_n) + 1)
            .min(shape.seq_len_kv.div_ceil(tile.block_n));
        // Saturating: the sm90 family's choice asks before the size checks (a grid too large
        // for either family is an error after them).
        let blocks = query_blocks
            .saturating_mul(heads)
            .saturating_mul(shape.batch);
        let resident = split_blocks_per_sm(kernel.spec.family);
        let splits = options
            .num_splits
            .unwrap_or_else(|| split_count_resident(blocks, key_blocks, sm_count, resident));
        let blocks_per_split = key_blocks.div_ceil(splits);
        Self {
            query_blocks,
            // No empty split: the count that this many key blocks per split needs.
            splits: key_blocks.div_ceil(blocks_per_split),
            blocks_per_split,
        }
    }
}

/// The rows of one tensor that a launch covers: `seq_len` that exist, `padded_seq_len` that its
/// tiles span (the kernel forms addresses of the padding rows but never dereferences them).
#[derive(Clone, Copy)]
pub(crate) struct Rows {
    pub(crate) batch: usize,
    pub(crate) heads: usize,
    pub(crate) seq_len: usize,
    pub(crate) padded_seq_len: usize,
    pub(crate) head_dim: usize,
}

impl Rows {
    /// One past the largest element offset of a row that exists: the elements a buffer must
    /// hold. Fails with [`Error::TensorTooLarge`] where any offset the kernel forms, padding rows
    /// included, passes [`MAX_TENSOR_BYTES`]; it names the dimension with the largest term. In
    /// u128: with each factor below 2^64, no product or sum here can wrap.
    pub(crate) fn extent(
        &self,
        tensor: &'static str,
        strides: &TensorStrides,
        element_bytes: u128,
    ) -> Result<usize, Error> {
        let term = |size: usize, stride: u64| (size as u128 - 1) * stride as u128;
        let terms = [
            ("batch", term(self.batch, strides.batch)),
            ("head", term(self.heads, strides.head)),
            ("seq", term(self.padded_seq_len, strides.seq)),
        ];
        let padded_extent: u128 =
            terms.iter().map(|&(_, term)| term).sum::<u128>() + self.head_dim as u128;
        if padded_extent * element_bytes > MAX_TENSOR_BYTES as u128 {
            let (dimension, _) = terms
                .into_iter()
                .max_by_key(|&(_, term)| term)
                .unwrap_or(("seq", 0));
            return Err(Error::TensorTooLarge { tensor, dimension });
        }
        // At most the padded extent, which fits (checked above).
        Ok(
            (padded_extent - (self.padded_seq_len - self.seq_len) as u128 * strides.seq as u128)
                as usize,
        )
    }
}

/// Whether two distinct (batch, head, row) rows of an output with these strides share an
/// element. Dimensions of size 1 never step, so their strides don't matter; the others, sorted
/// by stride, must each step past everything the smaller ones span. The test is sufficient,
/// not necessary: it may reject an exotic interleaving whose rows happen to be disjoint. In
/// u128, where `stride * (size - 1)` sums of three dimensions cannot wrap.
pub(crate) fn overlaps(
    strides: &TensorStrides,
    batch: usize,
    heads: usize,
    seq_len: usize,
    head_dim: usize,
) -> bool {
    let mut dimensions = [
        (strides.batch as u128, batch as u128),
        (strides.head as u128, heads as u128),
        (strides.seq as u128, seq_len as u128),
    ];
    dimensions.sort_unstable();
    let mut span = head_dim as u128;
    for (stride, size) in dimensions.into_iter().filter(|&(_, size)| size > 1) {
        if stride < span {
            return true;
        }
        span += stride * (size - 1);
    }
    false
}
