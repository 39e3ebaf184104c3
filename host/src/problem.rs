//! The description of an attention problem, and its validation into launch parameters.
//!
//! Everything here runs without a GPU: [`supports`] answers before any work is done.

use flash_attn_params::{Dtype, ForwardParams, TensorStrides, CHUNK_ELEMS};

use crate::dispatch::dispatch_kernel;
use crate::{Error, ForwardKernel, FORWARD_KERNELS};

/// Sizes of one attention problem. Q and O are `[batch, heads_q, seq_len_q, head_dim]`,
/// K and V `[batch, heads_kv, seq_len_kv, head_dim]`, in the order given by [`Layout`] or
/// explicit strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub batch: usize,
    pub heads_q: usize,
    /// K/V heads; `heads_q` must be a multiple (GQA), equal for MHA, 1 for MQA.
    pub heads_kv: usize,
    pub seq_len_q: usize,
    pub seq_len_kv: usize,
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

    /// Elements of Q (and O) when densely packed.
    pub fn q_elements(&self) -> usize {
        self.batch * self.heads_q * self.seq_len_q * self.head_dim
    }

    /// Elements of K (and of V) when densely packed.
    pub fn kv_elements(&self) -> usize {
        self.batch * self.heads_kv * self.seq_len_kv * self.head_dim
    }

    /// Elements of the logsumexp output `[batch, heads_q, seq_len_q]`.
    pub fn lse_elements(&self) -> usize {
        self.batch * self.heads_q * self.seq_len_q
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
    /// Element strides of a dense tensor of `heads` x `seq_len` x `head_dim` per batch.
    pub fn strides(self, heads: usize, seq_len: usize, head_dim: usize) -> TensorStrides {
        let (heads, seq_len, head_dim) = (heads as u64, seq_len as u64, head_dim as u64);
        match self {
            Layout::Bhsd => TensorStrides {
                batch: heads * seq_len * head_dim,
                head: seq_len * head_dim,
                seq: head_dim,
            },
            Layout::Bshd => TensorStrides {
                batch: seq_len * heads * head_dim,
                head: head_dim,
                seq: heads * head_dim,
            },
        }
    }
}

/// Explicit element strides of each tensor (batch, head, sequence; the head dimension has
/// stride 1). Every stride must be a multiple of 8 elements, so rows stay 16-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardStrides {
    pub q: TensorStrides,
    pub k: TensorStrides,
    pub v: TensorStrides,
    pub o: TensorStrides,
}

/// Options of a forward pass; `Default` gives non-causal attention on dense `[B, H, S, D]`
/// tensors with scale `1/sqrt(head_dim)` and the kernel the dispatch table picks.
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
    /// size ([`crate::dispatch_kernel`]).
    pub kernel: Option<&'static ForwardKernel>,
}

impl ForwardOptions {
    /// The strides of Q, K, V and O that these options mean for `shape`.
    pub fn resolved_strides(&self, shape: &AttentionShape) -> ForwardStrides {
        self.strides.unwrap_or_else(|| {
            let q = self
                .layout
                .strides(shape.heads_q, shape.seq_len_q, shape.head_dim);
            let kv = self
                .layout
                .strides(shape.heads_kv, shape.seq_len_kv, shape.head_dim);
            ForwardStrides {
                q,
                k: kv,
                v: kv,
                o: q,
            }
        })
    }
}

/// Largest grid y (query heads) and z (batch) of one launch.
const MAX_GRID_YZ: usize = 65_535;
/// The kernel does its row arithmetic in 32 bits, masking in i32 on `seq_len_q + seq_len_kv`:
/// 2^30 keeps that sum inside i32 (and a 2^30-token attention is far beyond any single launch).
const MAX_SEQ_LEN: usize = 1 << 30;

/// A validated problem: the kernel, its parameters (pointers still 0) and the grid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaunchPlan {
    pub(crate) kernel: &'static ForwardKernel,
    pub(crate) params: ForwardParams,
    pub(crate) grid: (u32, u32, u32),
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

pub(crate) fn plan(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
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
    let kernel = match options.kernel {
        // A copy of a compiled kernel with its fields changed would launch that kernel's code
        // with another tile's threads and shared memory.
        Some(kernel) if *kernel != FORWARD_KERNELS[kernel.index()] => {
            return Err(Error::UnknownKernel {
                name: kernel.entry.to_owned(),
            })
        }
        Some(kernel) => kernel,
        None => dispatch_kernel(dtype, shape, options.causal, sm_count)?,
    };
    if kernel.dtype != dtype {
        return Err(Error::KernelDtypeMismatch {
            kernel: kernel.entry,
            dtype,
        });
    }
    if kernel.tile.head_dim != shape.head_dim {
        return Err(Error::UnsupportedHeadDim {
            head_dim: shape.head_dim,
            supported: crate::kernels::SUPPORTED_HEAD_DIMS,
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
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidSoftmaxScale { scale });
    }
    let strides = options.resolved_strides(shape);
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
    if overlaps(
        &strides.o,
        shape.batch,
        shape.heads_q,
        shape.seq_len_q,
        shape.head_dim,
    ) {
        return Err(Error::OverlappingOutput { strides: strides.o });
    }
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
        scale_log2: scale * std::f32::consts::LOG2_E,
        causal: options.causal as u32,
    };
    let grid = (
        shape.seq_len_q.div_ceil(kernel.tile.block_m) as u32,
        shape.heads_q as u32,
        shape.batch as u32,
    );
    Ok(LaunchPlan {
        kernel,
        params,
        grid,
    })
}

/// One past the largest element offset a tensor with these strides and sizes touches.
fn extent(
    strides: &TensorStrides,
    batch: usize,
    heads: usize,
    seq_len: usize,
    head_dim: usize,
) -> u64 {
    (batch as u64 - 1) * strides.batch
        + (heads as u64 - 1) * strides.head
        + (seq_len as u64 - 1) * strides.seq
        + head_dim as u64
}

/// The elements each of q, k, v and o must hold for `shape` with `strides`, in that order.
pub(crate) fn required_lengths(
    strides: &ForwardStrides,
    shape: &AttentionShape,
) -> [(&'static str, u64); 4] {
    let s = shape;
    [
        (
            "q",
            extent(&strides.q, s.batch, s.heads_q, s.seq_len_q, s.head_dim),
        ),
        (
            "k",
            extent(&strides.k, s.batch, s.heads_kv, s.seq_len_kv, s.head_dim),
        ),
        (
            "v",
            extent(&strides.v, s.batch, s.heads_kv, s.seq_len_kv, s.head_dim),
        ),
        (
            "o",
            extent(&strides.o, s.batch, s.heads_q, s.seq_len_q, s.head_dim),
        ),
    ]
}

/// Whether two distinct (batch, head, row) rows of an output with these strides share an
/// element. Dimensions of size 1 never step, so their strides don't matter; the others, sorted
/// by stride, must each step past everything the smaller ones span.
fn overlaps(
    strides: &TensorStrides,
    batch: usize,
    heads: usize,
    seq_len: usize,
    head_dim: usize,
) -> bool {
    let mut dimensions = [
        (strides.batch, batch as u64),
        (strides.head, heads as u64),
        (strides.seq, seq_len as u64),
    ];
    dimensions.sort_unstable();
    let mut span = head_dim as u64;
    for (stride, size) in dimensions.into_iter().filter(|&(_, size)| size > 1) {
        if stride < span {
            return true;
        }
        span += stride * (size - 1);
    }
    false
}
