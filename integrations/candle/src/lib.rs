//! The flash-attn crate's forward pass on candle's CUDA tensors: `flash_attn(&q,
//! &k, &v, softmax_scale, causal)` as in candle-flash-attn, through candle's [`CustomOp3`], with
//! no CUDA C++ of its own (the kernels are flash-attn's, compiled from Rust to PTX).
//!
//! ```no_run
//! use candle_core::{DType, Device, Tensor};
//!
//! let device = Device::new_cuda(0)?;
//! // [batch, seq_len, heads, head_dim], as candle-flash-attn takes them.
//! let q = Tensor::randn(0f32, 1.0, (2, 512, 32, 128), &device)?.to_dtype(DType::BF16)?;
//! let k = Tensor::randn(0f32, 1.0, (2, 512, 8, 128), &device)?.to_dtype(DType::BF16)?;
//! let v = Tensor::randn(0f32, 1.0, (2, 512, 8, 128), &device)?.to_dtype(DType::BF16)?;
//! let output = flash_attn_candle::flash_attn(&q, &k, &v, 1.0 / (128f32).sqrt(), true)?;
//! assert_eq!(output.dims(), &[2, 512, 32, 128]);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! **Layout.** Dense and KV-cache tensors are `[batch, seq_len, heads, head_dim]` (candle-flash-
//! attn's order), variable-length ones `[total_tokens, heads, head_dim]`, paged caches
//! `[num_pages, page_size, heads_kv, head_dim]`. The output is a new contiguous tensor of Q's
//! shape and dtype. The inputs need not be contiguous: flash-attn takes each tensor's strides, so
//! a narrowed, transposed or offset view is read in place as long as its head dimension has stride
//! 1 and its other strides are multiples of 8 elements ([`Error::Layout`] otherwise; call
//! `.contiguous()` first). Paged caches must be contiguous.
//!
//! **Element types.** f16 and bf16 (candle's `half` 2 types); Q, K and V of one type.
//! K and V may have fewer heads than Q (GQA/MQA: `heads_q` a multiple of `heads_kv`). ALiBi
//! slopes are an f32 tensor on Q's GPU ([`flash_attn_alibi`]).
//!
//! **Errors.** A candle [`candle_core::Error`] wrapping this crate's [`Error`] (whose message
//! says what is wrong: a CPU tensor, a wrong dtype, a layout flash-attn cannot read, or
//! flash-attn's own validation, [`flash_attn::Error`]).
//!
//! **Streams and devices.** The kernel is enqueued on the tensors' candle device's stream, in
//! that device's primary context (what `Device::new_cuda` makes); one flash-attn instance is
//! loaded per GPU on first use and kept for the process. The calls return once the kernel is
//! enqueued, as candle's own ops do.
//!
//! No backward pass: these are inference kernels (candle's `bwd` reports it unsupported).

use std::fmt;
use std::sync::{Arc, Mutex};

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{
    CpuStorage, CudaStorage, CustomOp3, DType, Layout, Shape, Storage, Tensor, WithDType,
};
use half::{bf16, f16};

pub use flash_attn::{AlibiLayout, Error as FlashAttnError, ForwardOptions, SlidingWindow};
use flash_attn::{
    AttentionShape, FlashAttention, ForwardStrides, HalfElement, PagedKvCache, TensorStrides,
    VarlenShape,
};

/// What went wrong in a call of this crate: wrapped in a [`candle_core::Error`] by every
/// function here.
#[derive(Debug)]
pub enum Error {
    /// A tensor is not on a CUDA device (`device` is candle's location of it).
    NotCuda {
        tensor: &'static str,
        device: String,
    },
    /// The tensors are on different CUDA devices.
    DeviceMismatch {
        tensor: &'static str,
        device: String,
        q_device: String,
    },
    /// Q's dtype is not f16 or bf16, or another tensor's is not the one it must have (Q's for
    /// K and V, u32 for cache lengths and block tables, f32 for ALiBi slopes).
    Dtype {
        tensor: &'static str,
        dtype: DType,
        expected: &'static str,
    },
    /// A tensor has the wrong number of dimensions.
    Rank {
        tensor: &'static str,
        dims: Vec<usize>,
        expected: &'static str,
    },
    /// Two tensors' dimensions disagree (`what` says which).
    ShapeMismatch {
        what: &'static str,
        dims: Vec<usize>,
        other: Vec<usize>,
    },
    /// A layout flash-attn cannot read in place: the head dimension's stride is not 1 (or the
    /// tensor is not contiguous where that is required). `.contiguous()` first.
    Layout {
        tensor: &'static str,
        stride: Vec<usize>,
        requirement: &'static str,
    },
    /// `ForwardOptions::strides` was given: the strides here come from the tensors' layouts.
    StridesGiven,
    /// flash-attn refused the call or failed (its validation, the driver).
    FlashAttn(flash_attn::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotCuda { tensor, device } => write!(
                f,
                "flash-attn-candle: {tensor} is on {device}, not a CUDA device (flash-attn runs \
                 on NVIDIA GPUs only)"
            ),
            Error::DeviceMismatch {
                tensor,
                device,
                q_device,
            } => write!(
                f,
                "flash-attn-candle: {tensor} is on {device}, q on {q_device}: all tensors of a \
                 call must be on one GPU"
            ),
            Error::Dtype {
                tensor,
                dtype,
                expected,
            } => write!(
                f,
                "flash-attn-candle: {tensor} is {dtype:?}; expected {expected}"
            ),
            Error::Rank {
                tensor,
                dims,
                expected,
            } => write!(
                f,
                "flash-attn-candle: {tensor} has dims {dims:?}; expected {expected}"
            ),
            Error::ShapeMismatch { what, dims, other } => {
                write!(f, "flash-attn-candle: {what}: {dims:?} against {other:?}")
            }
            Error::Layout {
                tensor,
                stride,
                requirement,
            } => write!(
                f,
                "flash-attn-candle: {tensor}'s layout (strides {stride:?}) cannot be read in \
                 place: {requirement}; call .contiguous() first"
            ),
            Error::StridesGiven => write!(
                f,
                "flash-attn-candle: ForwardOptions::strides must be None: the strides come from \
                 the tensors' layouts"
            ),
            Error::FlashAttn(error) => write!(f, "flash-attn: {error}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::FlashAttn(error) => Some(error),
            _ => None,
        }
    }
}

impl From<flash_attn::Error> for Error {
    fn from(error: flash_attn::Error) -> Self {
        Error::FlashAttn(error)
    }
}

impl From<Error> for candle_core::Error {
    fn from(error: Error) -> Self {
        candle_core::Error::wrap(error)
    }
}

/// `softmax(q kᵀ · softmax_scale) v` over `[batch, seq_len, heads, head_dim]` tensors, causal
/// masking aligned to the bottom right when `causal` (query `i` sees key `j` iff
/// `j <= i + seq_len_kv - seq_len_q`; a query that sees no key gets 0). candle-flash-attn's
/// `flash_attn`: Q `[b, s_q, h_q, d]`, K and V `[b, s_kv, h_kv, d]`, output `[b, s_q, h_q, d]`.
pub fn flash_attn(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    softmax_scale: f32,
    causal: bool,
) -> candle_core::Result<Tensor> {
    flash_attn_with_options(q, k, v, &causal_options(softmax_scale, causal))
}

/// candle-flash-attn's `flash_attn_windowed`: a sliding window of `window_size_left` keys
/// before and `window_size_right` after each query's diagonal (`None`: unbounded on that
/// side). `(None, Some(0))` is causal attention.
pub fn flash_attn_windowed(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    softmax_scale: f32,
    window_size_left: Option<usize>,
    window_size_right: Option<usize>,
) -> candle_core::Result<Tensor> {
    let options = window_options(softmax_scale, window_size_left, window_size_right);
    flash_attn_with_options(q, k, v, &options)
}

/// [`flash_attn_windowed`] with the scores capped at `±softcap` (`softcap * tanh(score /
/// softcap)`, Gemma 2's logit softcapping) before the softmax. candle-flash-attn's
/// `flash_attn_alibi_windowed_softcap` without ALiBi ([`flash_attn_alibi_windowed_softcap`]
/// takes the slopes too).
pub fn flash_attn_windowed_softcap(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    softmax_scale: f32,
    window_size_left: Option<usize>,
    window_size_right: Option<usize>,
    softcap: f32,
) -> candle_core::Result<Tensor> {
    flash_attn_alibi_windowed_softcap(
        q,
        k,
        v,
        None,
        softmax_scale,
        window_size_left,
        window_size_right,
        softcap,
    )
}

/// The dense forward pass with any of flash-attn's [`ForwardOptions`] (scale, causal, sliding
/// window, softcap, an explicit kernel): `layout` is ignored and `strides` must be `None`
/// ([`Error::StridesGiven`]), the tensors' own layouts giving both.
pub fn flash_attn_with_options(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    let op = Attention::new(Call::Dense, None, options)?;
    check_inputs(q, k, v)?;
    rank(q, "q", 4, "[batch, seq_len_q, heads_q, head_dim]")?;
    rank(k, "k", 4, "[batch, seq_len_kv, heads_kv, head_dim]")?;
    rank(v, "v", 4, "[batch, seq_len_kv, heads_kv, head_dim]")?;
    q.apply_op3_no_bwd(k, v, &op)
}

/// candle-flash-attn's `flash_attn_alibi`: [`flash_attn`] with ALiBi biases. Query head `h`
/// of batch `b` adds `-slope * |i + seq_len_kv - seq_len_q - j|` to the scaled score of query
/// `i` and key `j` (FlashAttention's bias), `slope` from `alibi_slopes`: an f32 tensor on Q's
/// GPU, contiguous, of shape `[heads_q]` (one slope per query head, [`AlibiLayout::PerHead`])
/// or `[batch, heads_q]` (one per sequence and query head, [`AlibiLayout::PerBatchAndHead`]).
///
/// The slopes stay on the GPU: the kernel reads them on the tensors' stream, after their last
/// write (flash-attn's `CudarcAttention::forward_alibi_device_slopes`), with no
/// synchronisation. Their dtype, shape, layout and device are checked ([`Error::Dtype`],
/// [`Error::Rank`], [`Error::ShapeMismatch`], [`Error::Layout`], [`Error::NotCuda`],
/// [`Error::DeviceMismatch`]); their values cannot be without a copy to the host: a slope that
/// is not finite, or whose bias over the problem is not finite in f32, gives NaN or infinite
/// outputs (never a read or write outside a buffer), as in candle-flash-attn. Under causal
/// masking FlashAttention adds `slope * j` instead, which differs by a constant per row: the
/// same outputs.
pub fn flash_attn_alibi(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    alibi_slopes: &Tensor,
    softmax_scale: f32,
    causal: bool,
) -> candle_core::Result<Tensor> {
    let options = causal_options(softmax_scale, causal);
    flash_attn_alibi_with_options(q, k, v, alibi_slopes, &options)
}

/// candle-flash-attn's `flash_attn_alibi_windowed`: [`flash_attn_alibi`] within a sliding
/// window, the window arguments as [`flash_attn_windowed`] takes them.
pub fn flash_attn_alibi_windowed(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    alibi_slopes: &Tensor,
    softmax_scale: f32,
    window_size_left: Option<usize>,
    window_size_right: Option<usize>,
) -> candle_core::Result<Tensor> {
    let options = window_options(softmax_scale, window_size_left, window_size_right);
    flash_attn_alibi_with_options(q, k, v, alibi_slopes, &options)
}

/// candle-flash-attn's `flash_attn_alibi_windowed_softcap`: [`flash_attn_windowed_softcap`]
/// with ALiBi biases where `alibi_slopes` is given ([`flash_attn_alibi`]); the biases are
/// added to the capped scores.
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_alibi_windowed_softcap(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    alibi_slopes: Option<&Tensor>,
    softmax_scale: f32,
    window_size_left: Option<usize>,
    window_size_right: Option<usize>,
    softcap: f32,
) -> candle_core::Result<Tensor> {
    let options = ForwardOptions {
        softcap: Some(softcap),
        ..window_options(softmax_scale, window_size_left, window_size_right)
    };
    match alibi_slopes {
        Some(alibi_slopes) => flash_attn_alibi_with_options(q, k, v, alibi_slopes, &options),
        None => flash_attn_with_options(q, k, v, &options),
    }
}

/// [`flash_attn_alibi`] with any of flash-attn's [`ForwardOptions`], as
/// [`flash_attn_with_options`] takes them. The arguments' ranks and the slopes' dtype and shape
/// are checked first, then the devices and the other dtypes.
pub fn flash_attn_alibi_with_options(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    alibi_slopes: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    rank(q, "q", 4, "[batch, seq_len_q, heads_q, head_dim]")?;
    rank(k, "k", 4, "[batch, seq_len_kv, heads_kv, head_dim]")?;
    rank(v, "v", 4, "[batch, seq_len_kv, heads_kv, head_dim]")?;
    let alibi = Alibi::new(alibi_slopes, q.dims()[0], q.dims()[2])?;
    let op = Attention::new(Call::Dense, Some(alibi), options)?;
    check_inputs(q, k, v)?;
    op.check_alibi_device(q)?;
    q.apply_op3_no_bwd(k, v, &op)
}

/// A call's ALiBi slopes: the f32 tensor and the layout its shape gives.
struct Alibi {
    slopes: Tensor,
    layout: AlibiLayout,
}

impl Alibi {
    /// The slopes of a call over `batch` sequences and `heads_q` query heads: an f32 tensor
    /// `[heads_q]` or `[batch, heads_q]` ([`Error::Dtype`], [`Error::Rank`],
    /// [`Error::ShapeMismatch`] otherwise). Needs no GPU: the device is checked apart.
    fn new(slopes: &Tensor, batch: usize, heads_q: usize) -> Result<Self, Error> {
        const EXPECTED: &str = "[heads_q] or [batch, heads_q]";
        if slopes.dtype() != DType::F32 {
            return Err(Error::Dtype {
                tensor: "alibi_slopes",
                dtype: slopes.dtype(),
                expected: "f32",
            });
        }
        let layout = match *slopes.dims() {
            [heads] if heads == heads_q => AlibiLayout::PerHead,
            [b, heads] if b == batch && heads == heads_q => AlibiLayout::PerBatchAndHead,
            [_] | [_, _] => {
                return Err(Error::ShapeMismatch {
                    what: "alibi_slopes must be [heads_q] or [batch, heads_q] of the call's \
                           [batch, heads_q]",
                    dims: slopes.dims().to_vec(),
                    other: vec![batch, heads_q],
                })
            }
            _ => {
                return Err(Error::Rank {
                    tensor: "alibi_slopes",
                    dims: slopes.dims().to_vec(),
                    expected: EXPECTED,
                })
            }
        };
        Ok(Self {
            slopes: slopes.clone(),
            layout,
        })
    }

    /// [`Self::new`] for the slopes where given.
    fn given(slopes: Option<&Tensor>, batch: usize, heads_q: usize) -> Result<Option<Self>, Error> {
        slopes
            .map(|slopes| Self::new(slopes, batch, heads_q))
            .transpose()
    }

    /// [`Error::NotCuda`] or [`Error::DeviceMismatch`] unless the slopes are on `q`'s GPU.
    fn check_device(&self, q: &Tensor) -> Result<(), Error> {
        check_device(&self.slopes, "alibi_slopes", q)
    }
}

/// Attention against a KV cache (decoding): Q `[b, s_q, h_q, d]` (the new tokens), the caches
/// `k_cache` and `v_cache` `[b, s_cache, h_kv, d]` of which sequence `i` uses the first
/// `cache_lens[i]` keys (`cache_lens` a u32 tensor `[b]` on the same GPU, read by the kernel:
/// no synchronisation). Causal masking aligns the last query with the last used key. `options`
/// as in [`flash_attn_with_options`] (`num_splits` sets the split-KV count).
pub fn flash_attn_kv_cache(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    cache_lens: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    kv_cache(q, k_cache, v_cache, cache_lens, None, options)
}

/// [`flash_attn_kv_cache`] with ALiBi biases, `alibi_slopes` as [`flash_attn_alibi`] takes
/// them (`[heads_q]` or `[batch, heads_q]`); the distance of query `i` (of `s_q`) to key `j`
/// is `|i + cache_lens[b] - s_q - j|`, each sequence's queries being its last positions.
pub fn flash_attn_kv_cache_alibi(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    cache_lens: &Tensor,
    alibi_slopes: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    kv_cache(q, k_cache, v_cache, cache_lens, Some(alibi_slopes), options)
}

/// [`flash_attn_kv_cache`], with ALiBi where `alibi_slopes` is given.
fn kv_cache(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    cache_lens: &Tensor,
    alibi_slopes: Option<&Tensor>,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    rank(q, "q", 4, "[batch, seq_len_q, heads_q, head_dim]")?;
    let alibi = Alibi::given(alibi_slopes, q.dims()[0], q.dims()[2])?;
    check_inputs(q, k_cache, v_cache)?;
    rank(
        k_cache,
        "k_cache",
        4,
        "[batch, seq_len_cache, heads_kv, head_dim]",
    )?;
    rank(
        v_cache,
        "v_cache",
        4,
        "[batch, seq_len_cache, heads_kv, head_dim]",
    )?;
    check_u32(cache_lens, "cache_lens", q, 1, "[batch]")?;
    let op = Attention::new(
        Call::KvCache {
            cache_lens: cache_lens.clone(),
        },
        alibi,
        options,
    )?;
    op.check_alibi_device(q)?;
    q.apply_op3_no_bwd(k_cache, v_cache, &op)
}

/// Attention against a paged KV cache (vLLM's and FlashAttention's layout): `k_pages` and
/// `v_pages` `[num_pages, page_size, h_kv, d]`, contiguous, `page_size` a power of two from 16
/// to 256; `block_table` u32 `[b, pages_per_sequence]` names the pages of each sequence;
/// `cache_lens` u32 `[b]` as in [`flash_attn_kv_cache`]. Q `[b, s_q, h_q, d]`.
pub fn flash_attn_paged_kv_cache(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &Tensor,
    cache_lens: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    paged_kv_cache(q, k_pages, v_pages, block_table, cache_lens, None, options)
}

/// [`flash_attn_paged_kv_cache`] with ALiBi biases, as [`flash_attn_kv_cache_alibi`] adds
/// them.
pub fn flash_attn_paged_kv_cache_alibi(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &Tensor,
    cache_lens: &Tensor,
    alibi_slopes: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    paged_kv_cache(
        q,
        k_pages,
        v_pages,
        block_table,
        cache_lens,
        Some(alibi_slopes),
        options,
    )
}

/// [`flash_attn_paged_kv_cache`], with ALiBi where `alibi_slopes` is given.
fn paged_kv_cache(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &Tensor,
    cache_lens: &Tensor,
    alibi_slopes: Option<&Tensor>,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    rank(q, "q", 4, "[batch, seq_len_q, heads_q, head_dim]")?;
    let alibi = Alibi::given(alibi_slopes, q.dims()[0], q.dims()[2])?;
    check_inputs(q, k_pages, v_pages)?;
    rank(
        k_pages,
        "k_pages",
        4,
        "[num_pages, page_size, heads_kv, head_dim]",
    )?;
    rank(
        v_pages,
        "v_pages",
        4,
        "[num_pages, page_size, heads_kv, head_dim]",
    )?;
    check_u32(
        block_table,
        "block_table",
        q,
        2,
        "[batch, pages_per_sequence]",
    )?;
    check_u32(cache_lens, "cache_lens", q, 1, "[batch]")?;
    let op = Attention::new(
        Call::PagedKvCache {
            block_table: block_table.clone(),
            cache_lens: cache_lens.clone(),
        },
        alibi,
        options,
    )?;
    op.check_alibi_device(q)?;
    q.apply_op3_no_bwd(k_pages, v_pages, &op)
}

/// A variable-length batch (FlashAttention's `flash_attn_varlen`): the sequences packed one
/// after the other, Q `[total_q, h_q, d]`, K and V `[total_kv, h_kv, d]`; sequence `i` has
/// the query tokens `cu_seqlens_q[i]..cu_seqlens_q[i + 1]` and the keys
/// `cu_seqlens_kv[i]..cu_seqlens_kv[i + 1]`. The offsets are host slices (flash-attn validates
/// them in full before the launch, then uploads them on the stream): where they live on the
/// GPU as a tensor, `tensor.to_vec1::<u32>()` copies them. Output `[total_q, h_q, d]`.
pub fn flash_attn_varlen(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens_q: &[u32],
    cu_seqlens_kv: &[u32],
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, None, options)
}

/// [`flash_attn_varlen`] with ALiBi biases (candle-flash-attn's `flash_attn_varlen_alibi`):
/// `alibi_slopes` `[heads_q]` or `[sequences, heads_q]` (`sequences` =
/// `cu_seqlens_q.len() - 1`), otherwise as [`flash_attn_alibi`] takes them; each sequence's
/// distances in its own bottom-right-aligned coordinates.
pub fn flash_attn_varlen_alibi(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens_q: &[u32],
    cu_seqlens_kv: &[u32],
    alibi_slopes: &Tensor,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    let slopes = Some(alibi_slopes);
    varlen(q, k, v, cu_seqlens_q, cu_seqlens_kv, slopes, options)
}

/// [`flash_attn_varlen`], with ALiBi where `alibi_slopes` is given.
fn varlen(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens_q: &[u32],
    cu_seqlens_kv: &[u32],
    alibi_slopes: Option<&Tensor>,
    options: &ForwardOptions,
) -> candle_core::Result<Tensor> {
    rank(q, "q", 3, "[total_q, heads_q, head_dim]")?;
    let sequences = cu_seqlens_q.len().saturating_sub(1);
    let alibi = Alibi::given(alibi_slopes, sequences, q.dims()[1])?;
    check_inputs(q, k, v)?;
    rank(k, "k", 3, "[total_kv, heads_kv, head_dim]")?;
    rank(v, "v", 3, "[total_kv, heads_kv, head_dim]")?;
    let op = Attention::new(
        Call::Varlen {
            cu_seqlens_q: cu_seqlens_q.to_vec(),
            cu_seqlens_kv: cu_seqlens_kv.to_vec(),
        },
        alibi,
        options,
    )?;
    op.check_alibi_device(q)?;
    q.apply_op3_no_bwd(k, v, &op)
}

/// candle-flash-attn's `softmax_scale` and `causal` arguments as options.
fn causal_options(softmax_scale: f32, causal: bool) -> ForwardOptions {
    ForwardOptions {
        softmax_scale: Some(softmax_scale),
        causal,
        ..ForwardOptions::default()
    }
}

/// candle-flash-attn's `softmax_scale` and window arguments as options: `(None, Some(0))` is
/// plain causal masking (flash-attn's unmodified kernels), anything else a [`SlidingWindow`].
fn window_options(softmax_scale: f32, left: Option<usize>, right: Option<usize>) -> ForwardOptions {
    let to_i64 = |size: usize| i64::try_from(size).unwrap_or(i64::MAX);
    match (left, right) {
        (None, None) => causal_options(softmax_scale, false),
        (None, Some(0)) => causal_options(softmax_scale, true),
        (left, right) => ForwardOptions {
            window: Some(SlidingWindow {
                left: left.map(to_i64),
                right: right.map(to_i64),
            }),
            ..causal_options(softmax_scale, false)
        },
    }
}

/// Which forward pass, and what it reads besides Q, K and V.
enum Call {
    Dense,
    KvCache {
        cache_lens: Tensor,
    },
    PagedKvCache {
        block_table: Tensor,
        cache_lens: Tensor,
    },
    Varlen {
        cu_seqlens_q: Vec<u32>,
        cu_seqlens_kv: Vec<u32>,
    },
}

/// The custom op: one call with its ALiBi slopes (if any) and options.
struct Attention {
    call: Call,
    alibi: Option<Alibi>,
    options: ForwardOptions,
}

impl Attention {
    fn new(call: Call, alibi: Option<Alibi>, options: &ForwardOptions) -> Result<Self, Error> {
        if options.strides.is_some() {
            return Err(Error::StridesGiven);
        }
        Ok(Self {
            call,
            alibi,
            options: *options,
        })
    }

    /// [`Alibi::check_device`] for the call's slopes, if it has any.
    fn check_alibi_device(&self, q: &Tensor) -> Result<(), Error> {
        self.alibi
            .as_ref()
            .map_or(Ok(()), |alibi| alibi.check_device(q))
    }
}

/// The checks every call makes before candle's op machinery: Q, K and V on one CUDA device,
/// Q of f16 or bf16 and K and V of Q's dtype (candle's own errors would not name the tensor).
fn check_inputs(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<(), Error> {
    check_device(q, "q", q)?;
    check_device(k, "k", q)?;
    check_device(v, "v", q)?;
    if !matches!(q.dtype(), DType::F16 | DType::BF16) {
        return Err(Error::Dtype {
            tensor: "q",
            dtype: q.dtype(),
            expected: "f16 or bf16",
        });
    }
    for (tensor, name) in [(k, "k"), (v, "v")] {
        if tensor.dtype() != q.dtype() {
            return Err(Error::Dtype {
                tensor: name,
                dtype: tensor.dtype(),
                expected: "q's dtype",
            });
        }
    }
    Ok(())
}

/// [`Error::NotCuda`] unless `tensor` is on a CUDA device, [`Error::DeviceMismatch`] unless on
/// `q`'s.
fn check_device(tensor: &Tensor, name: &'static str, q: &Tensor) -> Result<(), Error> {
    let device = tensor.device();
    if !device.is_cuda() {
        return Err(Error::NotCuda {
            tensor: name,
            device: format!("{:?}", device.location()),
        });
    }
    if !device.same_device(q.device()) {
        return Err(Error::DeviceMismatch {
            tensor: name,
            device: format!("{:?}", device.location()),
            q_device: format!("{:?}", q.device().location()),
        });
    }
    Ok(())
}

/// [`Error::Rank`] unless `tensor` has `rank` dimensions.
fn rank(
    tensor: &Tensor,
    name: &'static str,
    rank: usize,
    expected: &'static str,
) -> Result<(), Error> {
    if tensor.rank() != rank {
        return Err(Error::Rank {
            tensor: name,
            dims: tensor.dims().to_vec(),
            expected,
        });
    }
    Ok(())
}

/// A u32 index tensor of `rank` dimensions on Q's device.
fn check_u32(
    tensor: &Tensor,
    name: &'static str,
    q: &Tensor,
    dims: usize,
    expected: &'static str,
) -> Result<(), Error> {
    check_device(tensor, name, q)?;
    if tensor.dtype() != DType::U32 {
        return Err(Error::Dtype {
            tensor: name,
            dtype: tensor.dtype(),
            expected: "u32",
        });
    }
    rank(tensor, name, dims, expected)
}

/// One flash-attn instance per GPU ordinal, loaded on first use (its kernels, in the device's
/// primary context, which candle's `CudaDevice` also uses).
fn instance(device: &CudaDevice) -> Result<Arc<FlashAttention>, Error> {
    static INSTANCES: Mutex<Vec<(usize, Arc<FlashAttention>)>> = Mutex::new(Vec::new());
    let stream = device.cuda_stream();
    let context = stream.context();
    let ordinal = context.ordinal();
    let mut instances = INSTANCES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, attention)) = instances.iter().find(|(device, _)| *device == ordinal) {
        return Ok(attention.clone());
    }
    let attention = Arc::new(FlashAttention::for_cudarc_context(context)?);
    instances.push((ordinal, attention.clone()));
    Ok(attention)
}

/// flash-attn's strides of a `[batch, seq, heads, head_dim]` tensor (`[tokens, heads,
/// head_dim]` for a packed one, batch stride 0) from candle's layout: the head dimension must
/// have stride 1. flash-attn checks the rest (multiples of 8, the extents against the buffer).
fn strides(name: &'static str, layout: &Layout) -> Result<TensorStrides, Error> {
    let stride = layout.stride();
    let layout_error = || Error::Layout {
        tensor: name,
        stride: stride.to_vec(),
        requirement: "the head dimension (the last) must have stride 1",
    };
    let to_u64 = |s: usize| s as u64;
    match *stride {
        [batch, seq, head, 1] => Ok(TensorStrides {
            batch: to_u64(batch),
            head: to_u64(head),
            seq: to_u64(seq),
        }),
        [seq, head, 1] => Ok(TensorStrides {
            batch: 0,
            head: to_u64(head),
            seq: to_u64(seq),
        }),
        _ => Err(layout_error()),
    }
}

/// The contiguous strides of the output, of Q's dims.
fn output_strides(dims: &[usize]) -> TensorStrides {
    let to_u64 = |s: usize| s as u64;
    match *dims {
        [_, seq, heads, head_dim] => TensorStrides {
            batch: to_u64(seq * heads * head_dim),
            head: to_u64(head_dim),
            seq: to_u64(heads * head_dim),
        },
        [_, heads, head_dim] => TensorStrides {
            batch: 0,
            head: to_u64(head_dim),
            seq: to_u64(heads * head_dim),
        },
        _ => unreachable!("ranks checked before the op"),
    }
}

/// A storage's elements from its layout's start, as a view flash-attn reads.
fn view<'s, T: candle_core::cuda_backend::CudaDType>(
    storage: &'s CudaStorage,
    layout: &Layout,
) -> candle_core::Result<CudaView<'s, T>> {
    let slice: &CudaSlice<T> = storage.as_cuda_slice::<T>()?;
    Ok(slice.slice(layout.start_offset()..))
}

/// A contiguous tensor's storage (cache lengths, block tables, ALiBi slopes: of the dtype
/// checked before the op), read by `body` while candle's lock on it is held.
fn contiguous_view<E: candle_core::cuda_backend::CudaDType, R>(
    name: &'static str,
    tensor: &Tensor,
    body: impl FnOnce(CudaView<'_, E>) -> candle_core::Result<R>,
) -> candle_core::Result<R> {
    let (storage, layout) = tensor.storage_and_layout();
    if !layout.is_contiguous() {
        return Err(Error::Layout {
            tensor: name,
            stride: layout.stride().to_vec(),
            requirement: "it must be contiguous",
        }
        .into());
    }
    match &*storage {
        Storage::Cuda(storage) => body(view::<E>(storage, layout)?),
        _ => Err(Error::NotCuda {
            tensor: name,
            device: format!("{:?}", tensor.device().location()),
        }
        .into()),
    }
}

/// `body` with the call's ALiBi slopes, if it has any, as a view flash-attn reads (candle's
/// lock on them held) and their layout.
fn with_slopes<R>(
    alibi: Option<&Alibi>,
    body: impl FnOnce(Option<(CudaView<'_, f32>, AlibiLayout)>) -> candle_core::Result<R>,
) -> candle_core::Result<R> {
    match alibi {
        Some(alibi) => contiguous_view::<f32, _>("alibi_slopes", &alibi.slopes, |slopes| {
            body(Some((slopes, alibi.layout)))
        }),
        None => body(None),
    }
}

fn dims_mismatch(what: &'static str, dims: &[usize], other: &[usize]) -> candle_core::Error {
    Error::ShapeMismatch {
        what,
        dims: dims.to_vec(),
        other: other.to_vec(),
    }
    .into()
}

impl Attention {
    fn forward<T>(
        &self,
        (q, q_layout): (&CudaStorage, &Layout),
        (k, k_layout): (&CudaStorage, &Layout),
        (v, v_layout): (&CudaStorage, &Layout),
    ) -> candle_core::Result<(CudaStorage, Shape)>
    where
        T: HalfElement + candle_core::cuda_backend::CudaDType + WithDType,
        T: candle_core::cuda_backend::cudarc::driver::DeviceRepr
            + candle_core::cuda_backend::cudarc::driver::ValidAsZeroBits,
    {
        let device = q.device().clone();
        let attention = instance(&device)?;
        let stream = device.cuda_stream();
        let on_stream = attention.on_cudarc_stream(&stream).map_err(Error::from)?;

        let (q_dims, k_dims, v_dims) = (q_layout.dims(), k_layout.dims(), v_layout.dims());
        if k_dims != v_dims {
            return Err(dims_mismatch(
                "k and v must have the same dims",
                k_dims,
                v_dims,
            ));
        }
        let head_dim = q_dims[q_dims.len() - 1];
        let heads_q = q_dims[q_dims.len() - 2];
        let heads_kv = k_dims[k_dims.len() - 2];
        if k_dims[k_dims.len() - 1] != head_dim {
            return Err(dims_mismatch(
                "q and k must have the same head_dim",
                q_dims,
                k_dims,
            ));
        }
        let mut options = self.options;
        let strides = ForwardStrides {
            q: strides("q", q_layout)?,
            k: strides("k", k_layout)?,
            v: strides("v", v_layout)?,
            o: output_strides(q_dims),
        };
        options.strides = Some(strides);

        let (q_view, k_view, v_view) = (
            view::<T>(q, q_layout)?,
            view::<T>(k, k_layout)?,
            view::<T>(v, v_layout)?,
        );
        let mut output = device.alloc_zeros::<T>(q_layout.shape().elem_count())?;
        let o = &mut output;
        let launched = |result: Result<(), flash_attn::Error>| -> candle_core::Result<()> {
            result.map_err(|error| Error::from(error).into())
        };
        match &self.call {
            Call::Dense | Call::KvCache { .. } => {
                let shape = AttentionShape {
                    batch: q_dims[0],
                    heads_q,
                    heads_kv,
                    seq_len_q: q_dims[1],
                    seq_len_kv: k_dims[1],
                    head_dim,
                };
                if k_dims[0] != q_dims[0] {
                    return Err(dims_mismatch(
                        "q and k must have the same batch",
                        q_dims,
                        k_dims,
                    ));
                }
                let (q, k, v) = (&q_view, &k_view, &v_view);
                match &self.call {
                    Call::KvCache { cache_lens } => {
                        contiguous_view::<u32, _>("cache_lens", cache_lens, |lens| {
                            with_slopes(self.alibi.as_ref(), |slopes| {
                                launched(match slopes {
                                    Some((slopes, layout)) => on_stream
                                        .forward_kv_cache_alibi_device_slopes(
                                            q, k, v, &lens, o, None, &slopes, layout, shape,
                                            &options,
                                        ),
                                    None => on_stream
                                        .forward_kv_cache(q, k, v, &lens, o, None, shape, &options),
                                })
                            })
                        })?
                    }
                    _ => with_slopes(self.alibi.as_ref(), |slopes| {
                        launched(match slopes {
                            Some((slopes, layout)) => on_stream.forward_alibi_device_slopes(
                                q, k, v, o, None, &slopes, layout, shape, &options,
                            ),
                            None => on_stream.forward(q, k, v, o, None, shape, &options),
                        })
                    })?,
                }
            }
            Call::PagedKvCache {
                block_table,
                cache_lens,
            } => {
                if !k_layout.is_contiguous() || !v_layout.is_contiguous() {
                    let layout = if k_layout.is_contiguous() {
                        ("v_pages", v_layout)
                    } else {
                        ("k_pages", k_layout)
                    };
                    return Err(Error::Layout {
                        tensor: layout.0,
                        stride: layout.1.stride().to_vec(),
                        requirement: "paged caches must be contiguous",
                    }
                    .into());
                }
                let table_dims = block_table.dims();
                let paged = PagedKvCache {
                    num_pages: k_dims[0],
                    page_size: k_dims[1],
                    pages_per_sequence: table_dims[1],
                };
                if table_dims[0] != q_dims[0] {
                    return Err(dims_mismatch(
                        "block_table's first dim must be q's batch",
                        table_dims,
                        q_dims,
                    ));
                }
                let shape = AttentionShape {
                    batch: q_dims[0],
                    heads_q,
                    heads_kv,
                    seq_len_q: q_dims[1],
                    seq_len_kv: paged.pages_per_sequence * paged.page_size,
                    head_dim,
                };
                // The pages' strides are flash-attn's own: it takes them from `paged`.
                options.strides = Some(ForwardStrides {
                    k: paged.strides(heads_kv, head_dim).unwrap_or(strides.k),
                    v: paged.strides(heads_kv, head_dim).unwrap_or(strides.v),
                    ..strides
                });
                let (q, k, v) = (&q_view, &k_view, &v_view);
                contiguous_view::<u32, _>("block_table", block_table, |table| {
                    contiguous_view::<u32, _>("cache_lens", cache_lens, |lens| {
                        with_slopes(self.alibi.as_ref(), |slopes| {
                            launched(match slopes {
                                Some((slopes, layout)) => on_stream
                                    .forward_paged_kv_cache_alibi_device_slopes(
                                        q, k, v, &table, &lens, o, None, &slopes, layout, shape,
                                        &paged, &options,
                                    ),
                                None => on_stream.forward_paged_kv_cache(
                                    q, k, v, &table, &lens, o, None, shape, &paged, &options,
                                ),
                            })
                        })
                    })
                })?
            }
            Call::Varlen {
                cu_seqlens_q,
                cu_seqlens_kv,
            } => {
                let shape = VarlenShape {
                    cu_seqlens_q,
                    cu_seqlens_kv,
                    heads_q,
                    heads_kv,
                    head_dim,
                };
                let (q, k, v) = (&q_view, &k_view, &v_view);
                with_slopes(self.alibi.as_ref(), |slopes| {
                    launched(match slopes {
                        Some((slopes, layout)) => on_stream.forward_varlen_alibi_device_slopes(
                            q, k, v, o, None, &slopes, layout, &shape, &options,
                        ),
                        None => on_stream.forward_varlen(q, k, v, o, None, &shape, &options),
                    })
                })?
            }
        }
        let output = CudaStorage::wrap_cuda_slice(output, device);
        Ok((output, q_layout.shape().clone()))
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "flash-attn"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(Error::NotCuda {
            tensor: "q",
            device: "the CPU".into(),
        }
        .into())
    }

    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        q_layout: &Layout,
        k: &CudaStorage,
        k_layout: &Layout,
        v: &CudaStorage,
        v_layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let tensors = ((q, q_layout), (k, k_layout), (v, v_layout));
        match q.dtype() {
            DType::F16 => self.forward::<f16>(tensors.0, tensors.1, tensors.2),
            DType::BF16 => self.forward::<bf16>(tensors.0, tensors.1, tensors.2),
            dtype => Err(Error::Dtype {
                tensor: "q",
                dtype,
                expected: "f16 or bf16",
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn window_arguments_as_candle_flash_attn_reads_them() {
        let plain = window_options(0.125, None, None);
        assert_eq!(
            plain,
            ForwardOptions {
                softmax_scale: Some(0.125),
                ..ForwardOptions::default()
            }
        );
        let causal = window_options(0.125, None, Some(0));
        assert!(causal.causal && causal.window.is_none());
        assert_eq!(causal, causal_options(0.125, true));
        let window = window_options(0.125, Some(128), Some(0));
        assert!(!window.causal);
        assert_eq!(window.softmax_scale, Some(0.125));
        assert_eq!(
            window.window,
            Some(SlidingWindow {
                left: Some(128),
                right: Some(0)
            })
        );
        assert_eq!(
            window_options(0.125, Some(4), None).window,
            Some(SlidingWindow {
                left: Some(4),
                right: None
            })
        );
    }

    #[test]
    fn alibi_slopes_per_head_or_per_sequence_and_head() {
        // A call over 2 sequences of 8 query heads.
        let (batch, heads_q) = (2, 8);
        let slopes = |dims: &[usize], dtype| Tensor::zeros(dims, dtype, &Device::Cpu).unwrap();
        let layout = |slopes: &Tensor| Alibi::new(slopes, batch, heads_q).map(|alibi| alibi.layout);
        assert_eq!(
            layout(&slopes(&[8], DType::F32)).unwrap(),
            AlibiLayout::PerHead
        );
        assert_eq!(
            layout(&slopes(&[2, 8], DType::F32)).unwrap(),
            AlibiLayout::PerBatchAndHead
        );
        let error = layout(&slopes(&[8], DType::BF16)).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Dtype {
                    tensor: "alibi_slopes",
                    dtype: DType::BF16,
                    expected: "f32"
                }
            ),
            "{error}"
        );
        // Heads of K and V, the batch and heads swapped, another batch.
        for dims in [&[2][..], &[8, 2], &[3, 8]] {
            let error = layout(&slopes(dims, DType::F32)).unwrap_err();
            assert!(matches!(error, Error::ShapeMismatch { .. }), "{error}");
        }
        for dims in [&[][..], &[2, 8, 1]] {
            let error = layout(&slopes(dims, DType::F32)).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::Rank {
                        tensor: "alibi_slopes",
                        ..
                    }
                ),
                "{error}"
            );
        }
    }

    #[test]
    fn strides_from_candle_layouts() {
        // [b, s, h, d] contiguous.
        let layout = Layout::contiguous((2, 16, 4, 64));
        let expected = TensorStrides {
            batch: 16 * 4 * 64,
            head: 64,
            seq: 4 * 64,
        };
        assert_eq!(strides("q", &layout).unwrap(), expected);
        assert_eq!(output_strides(&[2, 16, 4, 64]), expected);
        // [b, h, s, d] transposed to [b, s, h, d]: read in place.
        let transposed = Layout::contiguous((2, 4, 16, 64)).transpose(1, 2).unwrap();
        assert_eq!(
            strides("q", &transposed).unwrap(),
            TensorStrides {
                batch: 4 * 16 * 64,
                head: 16 * 64,
                seq: 64,
            }
        );
        // Packed [tokens, h, d]: no batch stride.
        let packed = Layout::contiguous((100, 4, 64));
        let expected = TensorStrides {
            batch: 0,
            head: 64,
            seq: 4 * 64,
        };
        assert_eq!(strides("q", &packed).unwrap(), expected);
        assert_eq!(output_strides(&[100, 4, 64]), expected);
        // The head dimension must be the innermost.
        let head_dim_strided = Layout::contiguous((2, 16, 64, 4)).transpose(2, 3).unwrap();
        let error = strides("k", &head_dim_strided).unwrap_err();
        assert!(
            matches!(error, Error::Layout { tensor: "k", .. }),
            "{error}"
        );
    }
}
