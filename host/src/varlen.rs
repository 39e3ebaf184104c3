//! Variable-length batches: sequences of different lengths packed one after the other along the
//! sequence dimension of Q, K, V and O, as FlashAttention's `flash_attn_varlen_func` takes them,
//! run by the serving kernels ([`crate::Variant::Serving`]), which read each sequence's token
//! range from the offsets (`cu_seqlens_q`, `cu_seqlens_kv`).
//!
//! [`VarlenShape`] holds the offsets on the host and validates them ([`VarlenShape::extents`]);
//! [`plan_varlen`] plans the launch from the [`VarlenExtents`] without a GPU;
//! [`FlashAttention::forward_varlen`] uploads the offsets and launches, and
//! [`FlashAttention::forward_varlen_raw`] takes offsets already on the device.
//!
//! Split-KV is not used: a variable-length batch is a prefill, whose grid
//! (`ceil(max_seq_len_q / 64)` query blocks x `heads_q` x `batch`) fills the GPU unless the
//! batch is tiny, and whose combine would need a workspace row per query token. Every plan has
//! one split.

use cust::memory::DeviceSlice;
use flash_attn_params::{Dtype, SequenceParams, TensorStrides, TileConfig, Variant};

use crate::modifiers::ScoreRule;
use crate::problem::{
    check_num_splits, check_problem, overlaps, plan_cache, serving_kernel_on, Rows, ELEMENT_BYTES,
    MAX_GRID_YZ,
};
use crate::{
    cache_buffers_raw, device_tensors, AlibiLayout, AlibiSlopes, AttentionShape, BufferLengths,
    CacheBuffers, Element, Error, FlashAttention, ForwardOptions, ForwardStrides, LaunchPlan,
    PagedKvCache, RawAlibiSlopes, RawStream, RawTensors, RawWorkspace, SequenceBuffers,
    MAX_TENSOR_BYTES,
};

/// A batch of sequences of variable length, its offsets on the host.
///
/// Q and O hold the query tokens of every sequence one after the other along their sequence
/// dimension, K and V the key tokens: with [`crate::Layout::Bshd`] the tensors are
/// `[total_tokens, heads, head_dim]` (FlashAttention's packed layout), with
/// [`crate::Layout::Bhsd`] (the default of [`ForwardOptions`]) `[heads, total_tokens,
/// head_dim]`, and explicit [`ForwardStrides`] give each tensor's head and token strides (their
/// batch strides are not used). Sequence `b` has the query tokens
/// `cu_seqlens_q[b]..cu_seqlens_q[b + 1]` and the key tokens
/// `cu_seqlens_kv[b]..cu_seqlens_kv[b + 1]`; the total token counts are the last offsets.
/// Each sequence is attended on its own, causal masking aligned to the bottom right of that
/// sequence ([`crate::Mask`] with its two lengths).
///
/// A sequence may be empty: with no query it has no output; with queries but no key, its
/// output rows are 0 and their logsumexp -inf (the rule for a query that sees no key).
///
/// ```
/// use flash_attn::{plan_varlen, Dtype, Error, ForwardOptions, Layout, VarlenShape};
///
/// // Three sequences of 100, 200 and 1 tokens, packed `[301, heads, 64]`.
/// let offsets = [0, 100, 300, 301];
/// let shape = VarlenShape {
///     cu_seqlens_q: &offsets,
///     cu_seqlens_kv: &offsets,
///     heads_q: 16,
///     heads_kv: 4,
///     head_dim: 64,
/// };
/// let extents = shape.extents()?;
/// assert_eq!((extents.batch, extents.tokens_q, extents.max_seq_len_q), (3, 301, 200));
/// let options = ForwardOptions {
///     causal: true,
///     layout: Layout::Bshd,
///     ..ForwardOptions::default()
/// };
/// let plan = plan_varlen(Dtype::F16, &extents, &options, 132)?;
/// assert_eq!(plan.required().o, 301 * 16 * 64);
/// assert_eq!(plan.splits(), 1);
///
/// let decreasing = VarlenShape { cu_seqlens_q: &[0, 5, 3], cu_seqlens_kv: &[0, 5, 6], ..shape };
/// assert_eq!(
///     decreasing.extents().unwrap_err(),
///     Error::SeqOffsetsDecrease { offsets: "cu_seqlens_q", sequence: 1, start: 5, end: 3 }
/// );
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenShape<'a> {
    /// `batch + 1` query-token offsets: 0 first, never decreasing; the last is the query token
    /// count of Q and O.
    pub cu_seqlens_q: &'a [u32],
    /// `batch + 1` key-token offsets, as `cu_seqlens_q`; the last is the key token count of K
    /// and V.
    pub cu_seqlens_kv: &'a [u32],
    /// Query heads, of Q and O.
    pub heads_q: usize,
    /// K/V heads; `heads_q` must be a multiple (GQA), equal for MHA, 1 for MQA.
    pub heads_kv: usize,
    /// Elements of each head's query, key and value vectors.
    pub head_dim: usize,
}

impl VarlenShape<'_> {
    /// The number of sequences: one less than the query offsets (0 for fewer than two).
    pub fn batch(&self) -> usize {
        self.cu_seqlens_q.len().saturating_sub(1)
    }

    /// The extents of the batch, once its offsets are known to be valid: as many query as key
    /// offsets ([`Error::SeqOffsetsBatchMismatch`]), at least two ([`Error::ZeroSizedDimension`]
    /// `batch`), each list starting at 0 ([`Error::SeqOffsetsStart`]) and never decreasing
    /// ([`Error::SeqOffsetsDecrease`]). The token counts are the last offsets; the buffers are
    /// checked against them at launch, and the longest sequences against
    /// [`crate::MAX_SEQ_LEN`] by [`plan_varlen`].
    pub fn extents(&self) -> Result<VarlenExtents, Error> {
        let (q_offsets, kv_offsets) = (self.cu_seqlens_q.len(), self.cu_seqlens_kv.len());
        if q_offsets != kv_offsets {
            return Err(Error::SeqOffsetsBatchMismatch {
                q_offsets,
                kv_offsets,
            });
        }
        let (tokens_q, max_seq_len_q) = check_offsets("cu_seqlens_q", self.cu_seqlens_q)?;
        let (tokens_kv, max_seq_len_kv) = check_offsets("cu_seqlens_kv", self.cu_seqlens_kv)?;
        Ok(VarlenExtents {
            batch: self.batch(),
            tokens_q,
            tokens_kv,
            max_seq_len_q,
            max_seq_len_kv,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            head_dim: self.head_dim,
        })
    }

    /// Floating-point operations of the forward pass, counting real work only: the sum over
    /// sequences of `4 · heads_q · Sq · Sk · head_dim`, halved for causal (as
    /// [`AttentionShape::flops`]). Offsets that decrease count nothing for that sequence.
    pub fn flops(&self, causal: bool) -> f64 {
        let lengths = |offsets: &[u32]| -> Vec<f64> {
            offsets
                .windows(2)
                .map(|pair| pair[1].saturating_sub(pair[0]) as f64)
                .collect()
        };
        let pairs: f64 = lengths(self.cu_seqlens_q)
            .iter()
            .zip(lengths(self.cu_seqlens_kv))
            .map(|(queries, keys)| queries * keys)
            .sum();
        let full = 4.0 * self.heads_q as f64 * pairs * self.head_dim as f64;
        if causal {
            full / 2.0
        } else {
            full
        }
    }
}

/// Checks one list of offsets as [`VarlenShape::extents`] says; returns its token count (the
/// last offset) and its longest sequence.
fn check_offsets(name: &'static str, offsets: &[u32]) -> Result<(usize, usize), Error> {
    let (first, last) = match offsets {
        [first, .., last] => (*first, *last),
        _ => return Err(Error::ZeroSizedDimension { dimension: "batch" }),
    };
    if first != 0 {
        return Err(Error::SeqOffsetsStart {
            offsets: name,
            first,
        });
    }
    let mut longest = 0;
    for (sequence, pair) in offsets.windows(2).enumerate() {
        let (start, end) = (pair[0], pair[1]);
        if end < start {
            return Err(Error::SeqOffsetsDecrease {
                offsets: name,
                sequence,
                start,
                end,
            });
        }
        longest = longest.max((end - start) as usize);
    }
    Ok((last as usize, longest))
}

/// What planning a variable-length batch needs to know of it: its sizes, without the offsets.
/// [`VarlenShape::extents`] computes it from validated offsets; a caller of
/// [`FlashAttention::forward_varlen_raw`], whose offsets live on the device, states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenExtents {
    /// The number of sequences.
    pub batch: usize,
    /// The query tokens of Q and O: the last query offset.
    pub tokens_q: usize,
    /// The key tokens of K and V: the last key offset.
    pub tokens_kv: usize,
    /// The longest sequence's query tokens: the grid has `ceil(max_seq_len_q / block_m)` query
    /// blocks per (sequence, head).
    pub max_seq_len_q: usize,
    /// The longest sequence's key tokens.
    pub max_seq_len_kv: usize,
    /// Query heads, of Q and O.
    pub heads_q: usize,
    /// K/V heads; `heads_q` must be a multiple.
    pub heads_kv: usize,
    /// Elements of each head's query, key and value vectors.
    pub head_dim: usize,
}

/// Device addresses of the offsets of a variable-length batch, for
/// [`FlashAttention::forward_varlen_raw`]: `batch + 1` u32 each, as [`VarlenShape`] describes
/// them; 4-byte aligned, not 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSeqOffsets {
    /// Device address of the query-token offsets, [`VarlenShape::cu_seqlens_q`].
    pub cu_seqlens_q: u64,
    /// Device address of the key-token offsets, [`VarlenShape::cu_seqlens_kv`].
    pub cu_seqlens_kv: u64,
}

/// Plans a variable-length batch without a GPU: everything
/// [`FlashAttention::forward_varlen`] checks except the offsets themselves
/// ([`VarlenShape::extents`]) and the buffers, whose required lengths the plan holds
/// ([`LaunchPlan::check_buffers`]: Q and O of `tokens_q` tokens, K and V of `tokens_kv`, the
/// logsumexp `[heads_q, tokens_q]` f32).
///
/// It runs a serving kernel ([`crate::serving_kernel`] for the dense problem of the batch's mean
/// query and key lengths on a device of `sm_count` multiprocessors, or `options.kernel` if that
/// is one; [`plan_varlen_on`] for a device of compute capability 9.0), on a grid of `ceil(max_seq_len_q / block_m)` x `heads_q` x `batch` blocks; a block
/// whose rows all lie past its sequence's end returns at once. No split-KV ([`LaunchPlan::splits`] is 1, no
/// workspace). The checks are the dense ones ([`crate::plan`]) on the longest sequences
/// (`max_seq_len_q`, `max_seq_len_kv` at most [`crate::MAX_SEQ_LEN`]; no sequence with a
/// query, or none with a key, is [`Error::ZeroSizedDimension`] `seq_len_q` or `seq_len_kv`),
/// and on the packed tensors: at most 65,535 sequences, token counts that fit the u32 offsets
/// ([`Error::ProblemTooLarge`]), longest sequences no longer than the batch
/// ([`Error::VarlenExtentsMismatch`]), output rows of distinct tokens or heads that do not
/// overlap, and every offset the kernel forms within [`MAX_TENSOR_BYTES`].
pub fn plan_varlen(
    dtype: Dtype,
    extents: &VarlenExtents,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_varlen_with(dtype, extents, None, options, sm_count, None)
}

/// [`plan_varlen`] for a device of `compute_capability` (`(major, minor)`,
/// [`FlashAttention::compute_capability`]), what [`FlashAttention::forward_varlen`] plans
/// with: on compute capability 9.0, where the options name no kernel, a batch of a head dim
/// above 32 without a score modifier or ALiBi runs the sm90 family's serving kernel
/// ([`crate::SM90_SERVING_TILES`]: that of the dense problem's `wgmma` tile, at D=96 and at the
/// head dims that pad the 8-warp tile), elsewhere [`plan_varlen`]'s. On an H200 the
/// 16-sequence batch of BENCHMARKS.md logs 85 to 87 ran 1.2-1.9x faster on it than on the sm80
/// family's, and from D=160 the warp-specialised serving kernels ran it 1.2-1.4x faster than
/// the 8-warp ones (log 93).
///
/// ```
/// use flash_attn::{plan_varlen, plan_varlen_on, Dtype, Family, ForwardOptions, VarlenShape};
///
/// let (cu_seqlens_q, cu_seqlens_kv) = ([0, 300, 1324], [0, 300, 1324]);
/// let shape = VarlenShape { cu_seqlens_q: &cu_seqlens_q, cu_seqlens_kv: &cu_seqlens_kv,
///     heads_q: 32, heads_kv: 8, head_dim: 128 };
/// let extents = shape.extents()?;
/// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
/// let hopper = plan_varlen_on(Dtype::F16, &extents, &options, 132, (9, 0))?;
/// assert_eq!(hopper.kernel().spec.family, Family::Sm90);
/// assert_eq!(hopper.kernel().entry, "flash_fwd_f16_d128_m128_n128_w12_s2_serving_sm90a");
/// let ada = plan_varlen_on(Dtype::F16, &extents, &options, 128, (8, 9))?;
/// assert_eq!(ada.kernel().spec.family, Family::Sm80);
/// assert_eq!(ada.kernel(), plan_varlen(Dtype::F16, &extents, &options, 128)?.kernel());
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn plan_varlen_on(
    dtype: Dtype,
    extents: &VarlenExtents,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_varlen_with(
        dtype,
        extents,
        None,
        options,
        sm_count,
        Some(compute_capability),
    )
}

/// [`plan_varlen`] for a call with ALiBi biases whose slopes are laid out as `layout`
/// ([`FlashAttention::forward_varlen_alibi`]): the modified serving kernel
/// ([`Variant::ServingModified`]), and [`LaunchPlan::alibi_slopes_len`] slopes to read, where
/// [`AlibiLayout::PerBatchAndHead`] means one slope per (sequence, query head),
/// `extents.batch * heads_q` of them. Each sequence's bias is in its own coordinates: query `i`
/// and key `j` of a sequence of `seq_len_q` queries and `seq_len_kv` keys are
/// `|i + seq_len_kv - seq_len_q - j|` apart. Validates everything the call does but the
/// offsets and the slopes' values ([`LaunchPlan::check_alibi_slopes`]).
pub fn plan_varlen_alibi(
    dtype: Dtype,
    extents: &VarlenExtents,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_varlen_with(dtype, extents, Some(layout), options, sm_count, None)
}

/// [`plan_varlen`] (`alibi` `None`), [`plan_varlen_on`] and [`plan_varlen_alibi`], on a
/// device of `compute_capability` where it is known ([`serving_kernel_on`]).
pub(crate) fn plan_varlen_with(
    dtype: Dtype,
    extents: &VarlenExtents,
    alibi: Option<AlibiLayout>,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
) -> Result<LaunchPlan, Error> {
    check_num_splits(options, 1)?;
    if extents.batch == 0 {
        return Err(Error::ZeroSizedDimension { dimension: "batch" });
    }
    if extents.batch > MAX_GRID_YZ {
        return Err(Error::ProblemTooLarge {
            dimension: "batch",
            value: extents.batch,
            limit: MAX_GRID_YZ,
        });
    }
    check_packed_tokens(
        ("tokens_kv", extents.tokens_kv),
        ("max_seq_len_kv", extents.max_seq_len_kv),
    )?;
    let queries = PackedQueries {
        tokens_q: extents.tokens_q,
        max_seq_len_q: extents.max_seq_len_q,
    };
    queries.check()?;
    // The dense checks, on one sequence of the longest lengths in the packed tensors' strides
    // (batch stride 0: the token offsets place each sequence).
    let longest = AttentionShape {
        batch: 1,
        heads_q: extents.heads_q,
        heads_kv: extents.heads_kv,
        seq_len_q: extents.max_seq_len_q,
        seq_len_kv: extents.max_seq_len_kv,
        head_dim: extents.head_dim,
    };
    let packed = ForwardOptions {
        strides: Some(packed_strides(extents, options)?),
        ..*options
    };
    let rule = ScoreRule::new(&longest, options, alibi);
    let variant = rule.serving_variant(Variant::Serving);
    // The kernel of the dense problem of the batch's mean lengths.
    let mean = AttentionShape {
        batch: extents.batch,
        seq_len_q: extents.tokens_q.div_ceil(extents.batch),
        seq_len_kv: extents.tokens_kv.div_ceil(extents.batch),
        ..longest
    };
    let checked = check_problem(dtype, &longest, &packed, variant, || {
        serving_kernel_on(
            dtype,
            &mean,
            rule.causal(),
            variant,
            sm_count,
            compute_capability,
        )
    })?;
    let (kernel, strides) = (checked.kernel, checked.strides);
    let (params, modifiers) =
        rule.params(&longest, options, kernel.spec.variant, checked.params)?;
    let tile = kernel.spec.tile;
    let query_lengths = queries.required(&longest, &strides, &tile)?;
    // The last key block of a sequence forms the addresses of up to `block_n - 1` rows past
    // its end, and so past the last token (never dereferenced).
    let kv_rows = Rows {
        batch: 1,
        heads: extents.heads_kv,
        seq_len: extents.tokens_kv,
        padded_seq_len: extents.tokens_kv + tile.block_n - 1,
        head_dim: extents.head_dim,
    };
    let required = BufferLengths {
        k: kv_rows.extent("k", &strides.k, ELEMENT_BYTES)?,
        v: kv_rows.extent("v", &strides.v, ELEMENT_BYTES)?,
        ..query_lengths
    };
    // Both longest lengths are at most 2^30 (checked), so these fit in u32.
    let query_blocks = extents.max_seq_len_q.div_ceil(tile.block_m);
    let key_blocks = extents.max_seq_len_kv.div_ceil(tile.block_n);
    let sequences = SequenceParams {
        lse_strides: queries.lse_strides(),
        splits: 1,
        // One split that covers the longest key sequence.
        keys_per_split: (key_blocks * tile.block_n) as u32,
        partial_rows: extents.tokens_q as u32,
        query_blocks: query_blocks as u32,
        ..SequenceParams::DENSE
    };
    Ok(LaunchPlan {
        kernel,
        params,
        sequences: Some(sequences),
        grid: (
            query_blocks as u32,
            extents.heads_q as u32,
            extents.batch as u32,
        ),
        required,
        workspace_bytes: 0,
        counters: 0,
        modifiers,
        // Of the whole batch (`mean` has its sequences), not of `longest`'s one sequence.
        alibi_slopes: rule.alibi_slopes(&mean),
    })
}

/// The queries of a variable-length batch against a KV cache, their offsets on the host: a
/// chunked prefill (each sequence's new tokens against its cached keys, the new ones
/// included), or a decode step of sequences with different query counts.
///
/// Q and O hold the query tokens of every sequence one after the other along their sequence
/// dimension, as in [`VarlenShape`] (`[total_tokens, heads_q, head_dim]` with
/// [`crate::Layout::Bshd`]); K and V are a KV cache, contiguous
/// ([`FlashAttention::forward_varlen_kv_cache`]: `[batch, heads_kv, seq_len_kv, head_dim]` in
/// the options' layout or strides) or paged ([`FlashAttention::forward_varlen_paged_kv_cache`]).
/// Sequence `b` has the query tokens `cu_seqlens_q[b]..cu_seqlens_q[b + 1]` and attends to the
/// first `cache_lens[b]` keys of its cache (a device buffer, given at launch, clamped to
/// `seq_len_kv`), causal masking aligned to the bottom right of those: its last query sees
/// every used key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenCacheShape<'a> {
    /// `batch + 1` query-token offsets: 0 first, never decreasing; the last is the query token
    /// count of Q and O.
    pub cu_seqlens_q: &'a [u32],
    /// Query heads, of Q and O.
    pub heads_q: usize,
    /// K/V heads; `heads_q` must be a multiple (GQA), equal for MHA, 1 for MQA.
    pub heads_kv: usize,
    /// Keys each sequence's cache holds: the contiguous cache's sequence dimension, or
    /// `pages_per_sequence * page_size` for a paged one.
    pub seq_len_kv: usize,
    /// Elements of each head's query, key and value vectors.
    pub head_dim: usize,
}

impl VarlenCacheShape<'_> {
    /// The extents of the batch, once its query offsets are valid: at least two
    /// ([`Error::ZeroSizedDimension`] `batch`), starting at 0 ([`Error::SeqOffsetsStart`]),
    /// never decreasing ([`Error::SeqOffsetsDecrease`]).
    pub fn extents(&self) -> Result<VarlenCacheExtents, Error> {
        let (tokens_q, max_seq_len_q) = check_offsets("cu_seqlens_q", self.cu_seqlens_q)?;
        Ok(VarlenCacheExtents {
            longest: AttentionShape {
                batch: self.cu_seqlens_q.len() - 1,
                heads_q: self.heads_q,
                heads_kv: self.heads_kv,
                seq_len_q: max_seq_len_q,
                seq_len_kv: self.seq_len_kv,
                head_dim: self.head_dim,
            },
            tokens_q,
        })
    }
}

/// What planning a variable-length batch against a KV cache needs to know of it: its sizes,
/// without the offsets. [`VarlenCacheShape::extents`] computes it from validated offsets; a
/// caller of [`FlashAttention::forward_varlen_kv_cache_raw`], whose offsets live on the device,
/// states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenCacheExtents {
    /// The batch, heads and head dim; `seq_len_q` is the longest sequence's query count (the
    /// grid has `ceil(seq_len_q / block_m)` query blocks per (sequence, head)) and
    /// `seq_len_kv` the cache's capacity per sequence.
    pub longest: AttentionShape,
    /// The query tokens of Q and O: the last query offset.
    pub tokens_q: usize,
}

/// Plans a variable-length batch of queries against a KV cache (see [`VarlenCacheShape`]),
/// contiguous (`paged` `None`) or paged, without a GPU: everything
/// [`FlashAttention::forward_varlen_kv_cache`] and
/// [`FlashAttention::forward_varlen_paged_kv_cache`] check except the offsets themselves
/// ([`VarlenCacheShape::extents`]) and the buffers, whose required lengths the plan holds (Q
/// and O of `tokens_q` tokens, the caches as for [`crate::plan_kv_cache`] or
/// [`crate::plan_paged_kv_cache`] with `extents.longest`, the logsumexp `[heads_q, tokens_q]`
/// f32).
///
/// It runs the serving kernel of the cache ([`crate::serving_kernel`] of [`Variant::Serving`] or
/// [`Variant::Paged`] for `extents.longest` at the batch's mean query length, or
/// `options.kernel` if that is one; on Hopper the calls plan with [`plan_varlen_kv_cache_on`])
/// on a grid of `ceil(max_seq_len_q / block_m) * splits` x `heads_q` x `batch` blocks; a block whose rows
/// all lie past its sequence's queries returns at once. Where that grid would leave the GPU of
/// `sm_count` multiprocessors idle, the key range is split ([`crate::split_count`]; the
/// workspace has a row per query token). The checks are those of the cache plans on the
/// longest sequence, and of [`plan_varlen`] on the packed queries.
pub fn plan_varlen_kv_cache(
    dtype: Dtype,
    extents: &VarlenCacheExtents,
    paged: Option<&PagedKvCache>,
    options: &ForwardOptions,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_varlen_cache_with(dtype, extents, paged, None, options, sm_count, None)
}

/// [`plan_varlen_kv_cache`] for a device of `compute_capability`, what
/// [`FlashAttention::forward_varlen_kv_cache`] and
/// [`FlashAttention::forward_varlen_paged_kv_cache`] plan with: the sm90 family's serving
/// kernel (against a paged cache its paged kernel) on compute capability 9.0 where
/// [`crate::plan_kv_cache_on`] would run it on `extents.longest` (a grid that needs no split),
/// elsewhere [`plan_varlen_kv_cache`]'s.
pub fn plan_varlen_kv_cache_on(
    dtype: Dtype,
    extents: &VarlenCacheExtents,
    paged: Option<&PagedKvCache>,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_varlen_cache_with(
        dtype,
        extents,
        paged,
        None,
        options,
        sm_count,
        Some(compute_capability),
    )
}

/// [`plan_varlen_kv_cache`] with ALiBi biases whose slopes are laid out as `layout`
/// ([`FlashAttention::forward_varlen_kv_cache_alibi`] and
/// [`FlashAttention::forward_varlen_paged_kv_cache_alibi`]): the modified serving or paged
/// kernel, [`LaunchPlan::alibi_slopes_len`] slopes (one per (sequence, query head) with
/// [`AlibiLayout::PerBatchAndHead`]). Each sequence's bias is in its own coordinates: its query
/// `i` and key `j` are `|i + used - queries - j|` apart, `queries` its query count and `used`
/// its used keys. Validates everything the calls do but the offsets and the slopes' values
/// ([`LaunchPlan::check_alibi_slopes`]).
pub fn plan_varlen_kv_cache_alibi(
    dtype: Dtype,
    extents: &VarlenCacheExtents,
    paged: Option<&PagedKvCache>,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_varlen_cache_with(dtype, extents, paged, Some(layout), options, sm_count, None)
}

/// [`plan_varlen_kv_cache`] (`alibi` `None`), [`plan_varlen_kv_cache_on`] and
/// [`plan_varlen_kv_cache_alibi`], on a device of `compute_capability` where it is known (as
/// [`crate::plan_kv_cache_on`]).
pub(crate) fn plan_varlen_cache_with(
    dtype: Dtype,
    extents: &VarlenCacheExtents,
    paged: Option<&PagedKvCache>,
    alibi: Option<AlibiLayout>,
    options: &ForwardOptions,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
) -> Result<LaunchPlan, Error> {
    let queries = PackedQueries {
        tokens_q: extents.tokens_q,
        max_seq_len_q: extents.longest.seq_len_q,
    };
    plan_cache(
        dtype,
        &extents.longest,
        Some(queries),
        paged,
        alibi,
        options,
        sm_count,
        compute_capability,
    )
}

/// The strides of the packed tensors: the options' explicit strides, or those of their layout
/// for one batch of the batch's token counts; every batch stride 0.
fn packed_strides(
    extents: &VarlenExtents,
    options: &ForwardOptions,
) -> Result<ForwardStrides, Error> {
    let mut strides = match options.strides {
        Some(strides) => strides,
        None => {
            let dense = |tensor, heads, tokens| {
                options
                    .layout
                    .strides(heads, tokens, extents.head_dim)
                    .ok_or(Error::TensorTooLarge {
                        tensor,
                        dimension: "seq",
                    })
            };
            let q = dense("q", extents.heads_q, extents.tokens_q)?;
            let kv = dense("k", extents.heads_kv, extents.tokens_kv)?;
            ForwardStrides {
                q,
                k: kv,
                v: kv,
                o: q,
            }
        }
    };
    for tensor in [
        &mut strides.q,
        &mut strides.k,
        &mut strides.v,
        &mut strides.o,
    ] {
        tensor.batch = 0;
    }
    Ok(strides)
}

/// The rule for one side of a packed batch, `(name, value)` each: its token count within the
/// u32 offsets and the kernel's token arithmetic ([`Error::ProblemTooLarge`]), its longest
/// sequence no longer than its tokens ([`Error::VarlenExtentsMismatch`]).
fn check_packed_tokens(
    (tokens_name, tokens): (&'static str, usize),
    (longest_name, longest): (&'static str, usize),
) -> Result<(), Error> {
    if tokens > u32::MAX as usize {
        return Err(Error::ProblemTooLarge {
            dimension: tokens_name,
            value: tokens,
            limit: u32::MAX as usize,
        });
    }
    if longest > tokens {
        return Err(Error::VarlenExtentsMismatch {
            longest: longest_name,
            value: longest,
            tokens,
        });
    }
    Ok(())
}

/// The queries of a variable-length batch, packed one sequence after the other along the
/// sequence dimension of Q and O: what the varlen plans ([`plan_varlen`],
/// [`plan_varlen_kv_cache`]) check and size on the query side.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedQueries {
    /// Query tokens of Q and O: the last query offset.
    pub(crate) tokens_q: usize,
    /// The longest sequence's query tokens.
    pub(crate) max_seq_len_q: usize,
}

impl PackedQueries {
    /// The token count within the u32 offsets and the kernel's token arithmetic
    /// ([`Error::ProblemTooLarge`]), the longest sequence no longer than the batch
    /// ([`Error::VarlenExtentsMismatch`]).
    pub(crate) fn check(&self) -> Result<(), Error> {
        check_packed_tokens(
            ("tokens_q", self.tokens_q),
            ("max_seq_len_q", self.max_seq_len_q),
        )
    }

    /// The lengths of Q, O and the logsumexp (`[heads_q, tokens_q]` f32) in `strides`, for a
    /// kernel of `tile` (K and V left 0); [`Error::OverlappingOutput`] where output rows of
    /// distinct tokens or heads share an element. `longest` gives the heads and head dim.
    pub(crate) fn required(
        &self,
        longest: &AttentionShape,
        strides: &ForwardStrides,
        tile: &TileConfig,
    ) -> Result<BufferLengths, Error> {
        if overlaps(
            &strides.o,
            1,
            longest.heads_q,
            self.tokens_q,
            longest.head_dim,
        ) {
            return Err(Error::OverlappingOutput { strides: strides.o });
        }
        let lse_too_large = Error::TensorTooLarge {
            tensor: "lse",
            dimension: "seq",
        };
        let lse = longest
            .heads_q
            .checked_mul(self.tokens_q)
            .ok_or(lse_too_large.clone())?;
        if lse as u128 * 4 > MAX_TENSOR_BYTES as u128 {
            return Err(lse_too_large);
        }
        // The last query block of a sequence forms the addresses of up to `block_m - 1` rows
        // past its end, and so past the last token (never dereferenced).
        let rows = Rows {
            batch: 1,
            heads: longest.heads_q,
            seq_len: self.tokens_q,
            padded_seq_len: self.tokens_q + tile.block_m - 1,
            head_dim: longest.head_dim,
        };
        Ok(BufferLengths {
            q: rows.extent("q", &strides.q, ELEMENT_BYTES)?,
            k: 0,
            v: 0,
            o: rows.extent("o", &strides.o, ELEMENT_BYTES)?,
            lse: Some(lse),
        })
    }

    /// The logsumexps' strides: `[heads_q, tokens_q]`, contiguous, a query row's at its token.
    pub(crate) fn lse_strides(&self) -> TensorStrides {
        TensorStrides {
            batch: 0,
            head: self.tokens_q as u64,
            seq: 1,
        }
    }
}

impl FlashAttention {
    /// [`Self::forward`] for a batch of sequences of variable length ([`VarlenShape`]),
    /// enqueued on [`Self::stream`]: Q, K, V and O hold the sequences one after the other along
    /// their sequence dimension, laid out as `options` say (`[total_tokens, heads, head_dim]`
    /// with [`crate::Layout::Bshd`]; explicit strides' batch strides are not used), and `lse`,
    /// if given, gets the logsumexp of each query row as `[heads_q, tokens_q]` f32, contiguous.
    /// Each sequence is attended on its own, causal masking aligned to its own bottom right.
    /// See [`plan_varlen`] for the kernel and the checks.
    ///
    /// The offsets are validated in full ([`VarlenShape::extents`]), then copied into a device
    /// buffer of this instance on its stream (`cuMemcpyHtoDAsync`, ordered before the kernel
    /// and after every earlier kernel that read the buffer). The buffer is allocated on the
    /// first call that needs more room than it has, which synchronises (the stream, before the
    /// old buffer is freed); calls after that allocate nothing and do not wait for the GPU.
    /// [`Self::forward_varlen_raw`] takes offsets already on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        self.forward_varlen_with(q, k, v, output, lse, None, shape, options)
    }

    /// [`Self::forward_varlen`] with ALiBi biases: query head `h` of sequence `b` adds
    /// `-slope * |i + seq_len_kv - seq_len_q - j|` to the scaled (and capped) score of its query
    /// `i` and key `j`, in that sequence's own lengths, `slope` from `alibi` (with
    /// [`AlibiLayout::PerBatchAndHead`], one per (sequence, query head): `batch` is the number
    /// of sequences). See [`plan_varlen_alibi`] for the checks; the slopes are checked on the
    /// host ([`LaunchPlan::check_alibi_slopes`]) and uploaded as [`Self::forward_alibi`]
    /// uploads them, the offsets as `forward_varlen` uploads them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        self.forward_varlen_with(q, k, v, output, lse, Some(alibi), shape, options)
    }

    /// [`Self::forward_varlen`] and, with `alibi`, [`Self::forward_varlen_alibi`].
    #[allow(clippy::too_many_arguments)]
    fn forward_varlen_with<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: Option<AlibiSlopes>,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let extents = shape.extents()?;
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = plan_varlen_with(
            T::DTYPE,
            &extents,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        plan.check_host_alibi(alibi)?;
        let tensors = device_tensors(&plan, q, k, v, output, lse)?;
        let offsets = [shape.cu_seqlens_q, shape.cu_seqlens_kv];
        self.with_alibi_uploaded(plan, alibi, |plan| {
            self.with_offsets_on_device(&offsets, |cu_seqlens_q| {
                let cu_seqlens_kv = cu_seqlens_q + std::mem::size_of_val(shape.cu_seqlens_q) as u64;
                // SAFETY: as in `forward`; the offsets were validated on the host against the
                // token counts that the buffers were checked for, and the longest sequences
                // against the grid; `with_offsets_on_device` keeps them alive and unchanged
                // until the kernel is done with them (and `with_alibi_uploaded` the slopes,
                // checked on the host).
                unsafe {
                    self.launch(
                        self.stream.as_inner(),
                        plan,
                        tensors,
                        Some(SequenceBuffers {
                            cu_seqlens_q,
                            cu_seqlens_kv,
                            ..SequenceBuffers::default()
                        }),
                    )
                }
            })
        })
    }

    /// [`Self::with_uploaded`] for offsets: `lists` one after the other in this instance's
    /// offsets buffer, `launch` called with the device address of the first list.
    fn with_offsets_on_device(
        &self,
        lists: &[&[u32]],
        launch: impl FnOnce(u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.with_uploaded(&self.varlen_offsets, &lists.concat(), launch)
    }

    /// [`Self::forward_kv_cache`] for a variable-length batch of queries
    /// ([`VarlenCacheShape`]), enqueued on [`Self::stream`]: Q and O packed as for
    /// [`Self::forward_varlen`] (`lse`, if given, `[heads_q, tokens_q]` f32), K and V caches
    /// `[batch, heads_kv, seq_len_kv, head_dim]` in the options' layout or strides, sequence
    /// `b` attending to its first `cache_lens[b]` keys (at least `batch` u32 on the device;
    /// a length above the capacity reads as the capacity). See [`plan_varlen_kv_cache`], and
    /// [`plan_varlen_kv_cache_on`], what it plans with (the sm90 family's serving kernel on
    /// Hopper where it takes the call).
    ///
    /// The query offsets are validated in full and uploaded as [`Self::forward_varlen`]
    /// uploads its offsets; a split-KV plan uses this instance's workspace as
    /// [`Self::forward_kv_cache`] does.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_kv_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_cache: &DeviceSlice<T>,
        v_cache: &DeviceSlice<T>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::contiguous(cache_lens);
        self.forward_varlen_on_cache(
            q, k_cache, v_cache, cache, output, lse, None, shape, options,
        )
    }

    /// [`Self::forward_varlen_kv_cache`] against a paged cache, as
    /// [`Self::forward_paged_kv_cache`] takes it: `k_pages` and `v_pages` `[num_pages,
    /// page_size, heads_kv, head_dim]`, `block_table` at least `batch * pages_per_sequence` u32
    /// on the device; `shape.seq_len_kv` must be `pages_per_sequence * page_size`. A sequence
    /// whose used pages include an index at or past `num_pages` reads no key and gets NaN
    /// output rows and logsumexps.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_paged_kv_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_pages: &DeviceSlice<T>,
        v_pages: &DeviceSlice<T>,
        block_table: &DeviceSlice<u32>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: &VarlenCacheShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::paged(cache_lens, block_table, paged);
        self.forward_varlen_on_cache(
            q, k_pages, v_pages, cache, output, lse, None, shape, options,
        )
    }

    /// [`Self::forward_varlen_kv_cache`] with ALiBi biases, in each sequence's own coordinates:
    /// query head `h` of sequence `b` adds `-slope * |i + used - queries - j|` to the scaled
    /// (and capped) score of its query `i` and key `j`, `queries` its query count and `used`
    /// its used keys (`cache_lens[b]`, clamped to the capacity), `slope` from `alibi` (with
    /// [`AlibiLayout::PerBatchAndHead`], one per (sequence, query head)). See
    /// [`plan_varlen_kv_cache_alibi`]; the slopes are checked on the host
    /// ([`LaunchPlan::check_alibi_slopes`]) and uploaded as [`Self::forward_alibi`] uploads
    /// them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_kv_cache_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_cache: &DeviceSlice<T>,
        v_cache: &DeviceSlice<T>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::contiguous(cache_lens);
        let alibi = Some(alibi);
        self.forward_varlen_on_cache(
            q, k_cache, v_cache, cache, output, lse, alibi, shape, options,
        )
    }

    /// [`Self::forward_varlen_paged_kv_cache`] with ALiBi biases, as
    /// [`Self::forward_varlen_kv_cache_alibi`] adds them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_paged_kv_cache_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_pages: &DeviceSlice<T>,
        v_pages: &DeviceSlice<T>,
        block_table: &DeviceSlice<u32>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenCacheShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::paged(cache_lens, block_table, paged);
        let alibi = Some(alibi);
        self.forward_varlen_on_cache(
            q, k_pages, v_pages, cache, output, lse, alibi, shape, options,
        )
    }

    /// The variable-length cache calls ([`Self::forward_varlen_kv_cache`],
    /// [`Self::forward_varlen_paged_kv_cache`] and their ALiBi forms): plans, checks, uploads
    /// the slopes and the query offsets, and launches with this instance's workspace.
    #[allow(clippy::too_many_arguments)]
    fn forward_varlen_on_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        cache: CacheBuffers,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: Option<AlibiSlopes>,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let extents = shape.extents()?;
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = plan_varlen_cache_with(
            T::DTYPE,
            &extents,
            cache.paged,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        plan.check_host_alibi(alibi)?;
        let buffers = cache.check(&plan, extents.longest.batch)?;
        let tensors = device_tensors(&plan, q, k, v, output, lse)?;
        self.with_alibi_uploaded(plan, alibi, |plan| {
            self.with_offsets_on_device(&[shape.cu_seqlens_q], |cu_seqlens_q| {
                // SAFETY: as in `forward_kv_cache` (and `forward_paged_kv_cache`, whose checks
                // `cache.check` made); the offsets were validated on the host against the
                // token count that Q and O were checked for, and the longest sequence against
                // the grid; `with_offsets_on_device` keeps them alive until the kernel is done
                // with them (and `with_alibi_uploaded` the slopes, checked on the host).
                unsafe {
                    self.launch_with_own_workspace(
                        plan,
                        tensors,
                        SequenceBuffers {
                            cu_seqlens_q,
                            ..buffers
                        },
                    )
                }
            })
        })
    }

    /// As [`Self::forward_varlen`] with raw device addresses, offsets already on the device and
    /// a caller's stream: it neither allocates nor synchronises, so it can be captured in a
    /// CUDA graph. It validates the extents ([`plan_varlen`]) and the addresses' alignment
    /// (offsets 4-byte aligned and not 0); it cannot read the offsets, nor check sizes.
    ///
    /// # Safety
    /// As for [`Self::forward_raw`], with the packed tensors of `extents` (the lengths
    /// [`plan_varlen`]`(..).required()` gives; `[heads_q, tokens_q]` f32 for `lse`), and:
    /// - `offsets.cu_seqlens_q` and `offsets.cu_seqlens_kv` are device addresses of
    ///   `extents.batch + 1` u32 each, alive and unchanged until the kernel finishes;
    /// - each list satisfies what [`VarlenShape::extents`] checks on the host: it starts at 0
    ///   and never decreases; the query list ends at `extents.tokens_q` (or before) and the key
    ///   list at `extents.tokens_kv` (or before);
    /// - no sequence has more than `extents.max_seq_len_q` queries or
    ///   `extents.max_seq_len_kv` keys (the grid and the key range are sized by them: a longer
    ///   sequence would be computed in part, and one past [`crate::MAX_SEQ_LEN`] would overflow
    ///   the kernel's 32-bit mask arithmetic).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_varlen_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        offsets: RawSeqOffsets,
        extents: &VarlenExtents,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        self.forward_varlen_raw_with(
            stream.into(),
            dtype,
            tensors,
            offsets,
            None,
            extents,
            options,
        )
    }

    /// [`Self::forward_varlen_alibi`] as [`Self::forward_varlen_raw`] takes its arguments, the
    /// slopes already on the device ([`RawAlibiSlopes`], 4-byte aligned and not 0). It
    /// validates the extents ([`plan_varlen_alibi`]); it cannot read the slopes.
    ///
    /// # Safety
    /// As for [`Self::forward_varlen_raw`], and for the slopes as for
    /// [`Self::forward_alibi_raw`]: `alibi.address` holds [`LaunchPlan::alibi_slopes_len`] f32
    /// (one per (sequence, query head) with [`AlibiLayout::PerBatchAndHead`]), alive and
    /// unchanged until the kernel finishes (a slope that [`LaunchPlan::check_alibi_slopes`]
    /// would reject gives NaN or infinite outputs, never an access outside a buffer).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_varlen_alibi_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        offsets: RawSeqOffsets,
        alibi: RawAlibiSlopes,
        extents: &VarlenExtents,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let alibi = Some(alibi);
        self.forward_varlen_raw_with(
            stream.into(),
            dtype,
            tensors,
            offsets,
            alibi,
            extents,
            options,
        )
    }

    /// [`Self::forward_varlen_raw`] and, with `alibi`, [`Self::forward_varlen_alibi_raw`].
    ///
    /// # Safety
    /// As for [`Self::forward_varlen_alibi_raw`], or without `alibi`
    /// [`Self::forward_varlen_raw`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn forward_varlen_raw_with(
        &self,
        stream: RawStream,
        dtype: Dtype,
        tensors: RawTensors,
        offsets: RawSeqOffsets,
        alibi: Option<RawAlibiSlopes>,
        extents: &VarlenExtents,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = plan_varlen_with(
            dtype,
            extents,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        // 0 would read as "no offsets": every sequence at token 0 of the packed tensors.
        for (tensor, address) in [
            ("cu_seqlens_q", offsets.cu_seqlens_q),
            ("cu_seqlens_kv", offsets.cu_seqlens_kv),
        ] {
            if address == 0 {
                return Err(Error::MisalignedBuffer { tensor, address });
            }
        }
        self.launch(
            stream.0.cast(),
            plan.with_alibi_address(alibi.map_or(0, |alibi| alibi.address)),
            tensors,
            Some(SequenceBuffers {
                cu_seqlens_q: offsets.cu_seqlens_q,
                cu_seqlens_kv: offsets.cu_seqlens_kv,
                ..SequenceBuffers::default()
            }),
        )
    }

    /// As [`Self::forward_varlen_kv_cache`] (`paged` `None`, `block_table` 0) and
    /// [`Self::forward_varlen_paged_kv_cache`] with raw device addresses, query offsets and
    /// cache lengths already on the device, a caller's stream and a caller's workspace
    /// (`None` is fine where [`plan_varlen_kv_cache_on`]`(..)` for this instance's
    /// [`Self::compute_capability`], what the call plans, has `workspace_bytes()` 0; it never
    /// needs more than [`plan_varlen_kv_cache`]'s): it neither allocates nor synchronises, so it
    /// can be captured in a CUDA graph. It validates the extents ([`plan_varlen_kv_cache_on`])
    /// and the addresses' alignment (the offsets and the
    /// cache lengths 4-byte aligned and not 0; a block table exactly with `paged`); it cannot
    /// read the offsets, nor check sizes.
    ///
    /// # Safety
    /// As for [`Self::forward_kv_cache_raw`] (or [`Self::forward_paged_kv_cache_raw`], with
    /// `block_table`), with Q and O packed as `extents` say (the lengths
    /// [`plan_varlen_kv_cache`]`(..).required()` gives; `[heads_q, tokens_q]` f32 for `lse`),
    /// and: `cu_seqlens_q` is the device address of `extents.longest.batch + 1` u32 that start
    /// at 0, never decrease, end at `extents.tokens_q` (or before) and differ by at most
    /// `extents.longest.seq_len_q` from one to the next, alive and unchanged until the kernel
    /// finishes (a longer sequence would be computed in part, and one past
    /// [`crate::MAX_SEQ_LEN`] would overflow the kernel's 32-bit mask arithmetic).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_varlen_kv_cache_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        cu_seqlens_q: u64,
        cache_lens: u64,
        block_table: u64,
        workspace: Option<RawWorkspace>,
        extents: &VarlenCacheExtents,
        paged: Option<&PagedKvCache>,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = SequenceBuffers {
            cu_seqlens_q,
            ..cache_buffers_raw(block_table, cache_lens, workspace)
        };
        let stream = stream.into();
        self.forward_varlen_on_cache_raw(
            stream, dtype, tensors, buffers, None, extents, paged, options,
        )
    }

    /// [`Self::forward_varlen_kv_cache_alibi`] and [`Self::forward_varlen_paged_kv_cache_alibi`]
    /// as [`Self::forward_varlen_kv_cache_raw`] takes their arguments, the slopes already on
    /// the device ([`RawAlibiSlopes`], 4-byte aligned and not 0). It validates the extents
    /// ([`plan_varlen_kv_cache_alibi`]); it cannot read the slopes.
    ///
    /// # Safety
    /// As for [`Self::forward_varlen_kv_cache_raw`], and for the slopes as for
    /// [`Self::forward_varlen_alibi_raw`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_varlen_kv_cache_alibi_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        cu_seqlens_q: u64,
        cache_lens: u64,
        block_table: u64,
        workspace: Option<RawWorkspace>,
        alibi: RawAlibiSlopes,
        extents: &VarlenCacheExtents,
        paged: Option<&PagedKvCache>,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = SequenceBuffers {
            cu_seqlens_q,
            ..cache_buffers_raw(block_table, cache_lens, workspace)
        };
        let (stream, alibi) = (stream.into(), Some(alibi));
        self.forward_varlen_on_cache_raw(
            stream, dtype, tensors, buffers, alibi, extents, paged, options,
        )
    }

    /// [`Self::forward_varlen_kv_cache_raw`] and, with `alibi`,
    /// [`Self::forward_varlen_kv_cache_alibi_raw`].
    ///
    /// # Safety
    /// As for [`Self::forward_varlen_kv_cache_alibi_raw`], or without `alibi`
    /// [`Self::forward_varlen_kv_cache_raw`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn forward_varlen_on_cache_raw(
        &self,
        stream: RawStream,
        dtype: Dtype,
        tensors: RawTensors,
        buffers: SequenceBuffers,
        alibi: Option<RawAlibiSlopes>,
        extents: &VarlenCacheExtents,
        paged: Option<&PagedKvCache>,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = plan_varlen_cache_with(
            dtype,
            extents,
            paged,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        // 0 would read as "no offsets" and "no lengths": every sequence at token 0 of Q, and
        // using its whole cache.
        for (tensor, address) in [
            ("cu_seqlens_q", buffers.cu_seqlens_q),
            ("cache_lens", buffers.seq_used_kv),
        ] {
            if address == 0 {
                return Err(Error::MisalignedBuffer { tensor, address });
            }
        }
        self.launch(
            stream.0.cast(),
            plan.with_alibi_address(alibi.map_or(0, |alibi| alibi.address)),
            tensors,
            Some(buffers),
        )
    }
}
