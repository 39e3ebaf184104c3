//! The score modifiers: a sliding window, a softcap and ALiBi biases, alone or combined, run by
//! the modified kernels ([`Variant::Modified`], entries `_mod`; on the serving calls
//! [`Variant::ServingModified`] and [`Variant::PagedModified`]).
//!
//! - The window and the softcap are options ([`ForwardOptions::window`],
//!   [`ForwardOptions::softcap`]): plain values, so that `ForwardOptions` stays `Copy` and free
//!   of lifetimes, and every entry point that takes options (`forward`, `forward_raw`,
//!   `forward_host`, [`crate::plan`], [`crate::supports`], and a future backend's) honours
//!   them.
//! - ALiBi's slopes are data, one f32 per query head (or per batch and head): they come with
//!   the call, as the tensors do, through calls of their own: [`FlashAttention::forward_alibi`]
//!   (host slopes, validated and uploaded on the instance's stream),
//!   [`FlashAttention::forward_host_alibi`] and [`FlashAttention::forward_alibi_raw`] (a device
//!   address, [`RawAlibiSlopes`], for callers on other bindings), and with the `cudarc` feature
//!   `CudarcAttention::forward_alibi` (host slopes, validated and uploaded on the caller's
//!   stream) and `CudarcAttention::forward_alibi_device_slopes` (a cudarc buffer); [`plan_alibi`]
//!   plans them without a GPU, [`LaunchPlan::check_alibi_slopes`] checks host slopes and
//!   [`LaunchPlan::check_alibi_slopes_len`] the count of slopes on the device.
//!
//! A problem whose options bound nothing beyond causal masking runs the dense kernels, which
//! know none of this: the window `(None, Some(0))` is causal masking, and a window offset that
//! reaches past every key bounds nothing.
//!
//! The KV-cache, paged and variable-length calls take the window and the softcap through the
//! same options, run by the modified serving kernels ([`Variant::ServingModified`],
//! [`Variant::PagedModified`]) in each sequence's own coordinates. Their ALiBi forms mirror the
//! dense ones, and so does the bias, in each sequence's own coordinates (its query count and
//! used keys; [`AlibiLayout::PerBatchAndHead`] is one slope per sequence and query head):
//! [`FlashAttention::forward_kv_cache_alibi`], [`FlashAttention::forward_paged_kv_cache_alibi`],
//! [`FlashAttention::forward_varlen_alibi`], [`FlashAttention::forward_varlen_kv_cache_alibi`]
//! and [`FlashAttention::forward_varlen_paged_kv_cache_alibi`] (host slopes, checked and
//! uploaded as `forward_alibi`'s), their raw forms (`_alibi_raw`, [`RawAlibiSlopes`]; one for
//! both variable-length cache calls, as without ALiBi), the cudarc backend's `_alibi` and
//! `_alibi_device_slopes` forms, and the planners [`crate::plan_kv_cache_alibi`],
//! [`crate::plan_paged_kv_cache_alibi`], [`crate::plan_varlen_alibi`] and
//! [`crate::plan_varlen_kv_cache_alibi`]. Each call family has one path with ALiBi or without;
//! a decode step's query heads are packed into one tile's rows with ALiBi as without (the
//! kernel reads each row's own head's slope).

use std::sync::Mutex;

use cust::memory::{DeviceBuffer, DeviceSlice};
use flash_attn_params::{
    padded_head_dim, Dtype, Family, ForwardParams, Mask, ModifierParams, Variant,
};

use crate::dispatch::{dispatch_kernel, dispatch_kernel_on};
use crate::problem::plan_dense;
use crate::{
    device_tensors, kernel_head_dim, AttentionShape, Element, Error, FlashAttention, ForwardKernel,
    ForwardOptions, LaunchPlan, RawStream, RawTensors, FORWARD_KERNELS, MAX_SEQ_LEN,
};

/// A sliding window in the bottom-right-aligned coordinates of causal masking: query `i` sits on
/// its diagonal key `d = i + seq_len_kv - seq_len_q`, and sees key `j` only if
/// `d - left <= j <= d + right` (a `None` side is unbounded). Causal masking is
/// `SlidingWindow { left: None, right: Some(0) }`; Mistral's window of `w` keys is
/// `(Some(w - 1), Some(0))`. With [`ForwardOptions::causal`] as well, the two intersect (the right
/// bound becomes at most 0).
///
/// The offsets may be negative (a window that leaves out the diagonal), as long as the window
/// is not empty (`left + right >= 0`, else [`Error::EmptyWindow`]) and some query of the problem
/// sees some key ([`Error::WindowExcludesEveryKey`]). A query that sees no key gets output 0 and
/// logsumexp -inf, as under causal masking.
///
/// ```
/// use flash_attn::{AttentionShape, Error, ForwardOptions, SlidingWindow};
///
/// // Mistral's window of 128 keys: query `i` sees keys `i - 127..=i`.
/// let window = SlidingWindow { left: Some(127), right: Some(0) };
/// let options = ForwardOptions { window: Some(window), ..ForwardOptions::default() };
/// let mask = options.mask(&AttentionShape::new(1, 1, 1024, 64))?;
/// assert_eq!((mask.key_start(500), mask.key_end(500)), (373, 501));
///
/// let empty = SlidingWindow { left: Some(-2), right: Some(1) };
/// let options = ForwardOptions { window: Some(empty), ..ForwardOptions::default() };
/// assert_eq!(
///     options.mask(&AttentionShape::new(1, 1, 1024, 64)),
///     Err(Error::EmptyWindow { left: -2, right: 1 })
/// );
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    /// Keys before the diagonal that a query sees; `None`: all of them.
    pub left: Option<i64>,
    /// Keys after the diagonal that a query sees; `None`: all of them.
    pub right: Option<i64>,
}

/// How the ALiBi slopes of a call are laid out (FlashAttention's `alibi_slopes` of shape
/// `(heads_q,)` or `(batch, heads_q)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlibiLayout {
    /// One slope per query head: `heads_q` f32, head `h`'s at `h`.
    PerHead,
    /// One slope per (batch, query head): `batch * heads_q` f32, `(b, h)`'s at `b * heads_q + h`.
    PerBatchAndHead,
}

impl AlibiLayout {
    /// The slopes this layout needs for `shape`.
    pub fn slopes(self, shape: &AttentionShape) -> usize {
        match self {
            AlibiLayout::PerHead => shape.heads_q,
            // Both at most 65,535 once the shape is valid; saturating before that.
            AlibiLayout::PerBatchAndHead => shape.batch.saturating_mul(shape.heads_q),
        }
    }
}

/// ALiBi slopes on the host, for [`FlashAttention::forward_alibi`]: query head `h` of batch `b`
/// adds `-slope * |i + seq_len_kv - seq_len_q - j|` to the scaled (and capped) score of query
/// `i` and key `j`, as FlashAttention does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlibiSlopes<'a> {
    /// At least [`AlibiLayout::slopes`] values, each finite ([`LaunchPlan::check_alibi_slopes`]).
    pub slopes: &'a [f32],
    /// Which slope serves which (batch, query head).
    pub layout: AlibiLayout,
}

/// ALiBi slopes on the device, for [`FlashAttention::forward_alibi_raw`]: the address of the
/// f32 slopes (4-byte aligned, not 0) in `layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawAlibiSlopes {
    /// Device address of the slopes: [`AlibiLayout::slopes`] f32, 4-byte aligned, not 0.
    pub address: u64,
    /// Which slope serves which (batch, query head).
    pub layout: AlibiLayout,
}

/// The options' window intersected with causal masking, in i128 (no arithmetic on any i64
/// offset can overflow): `(left, right)`, `None` where unbounded.
fn intersected_window(options: &ForwardOptions) -> (Option<i128>, Option<i128>) {
    let window = options.window.unwrap_or_default();
    let causal = options.causal.then_some(0);
    let right = match (window.right.map(i128::from), causal) {
        (Some(right), Some(diagonal)) => Some(right.min(diagonal)),
        (right, causal) => right.or(causal),
    };
    (window.left.map(i128::from), right)
}

/// The sides of the options' window that bound something for `shape`: a left offset of at
/// least `seq_len_kv - 1` lets every query see from key 0, a right offset of at least
/// `seq_len_q - 1` lets every query see up to the last key, and such a side is `None`. For a
/// window that [`check_window`] accepts, the bounds left are within `±2^30`.
fn bounding_window(
    shape: &AttentionShape,
    options: &ForwardOptions,
) -> (Option<i128>, Option<i128>) {
    let (left, right) = intersected_window(options);
    (
        left.filter(|&left| left < shape.seq_len_kv as i128 - 1),
        right.filter(|&right| right < shape.seq_len_q as i128 - 1),
    )
}

/// [`Error::EmptyWindow`] or [`Error::WindowExcludesEveryKey`] for a window that no query, or
/// no query of `shape`, sees a key through.
fn check_window(shape: &AttentionShape, options: &ForwardOptions) -> Result<(), Error> {
    let (left, right) = intersected_window(options);
    // The intersected offsets come from i64 offsets and 0: they fit in i64.
    let narrow = |offset: Option<i128>| offset.map(|offset| offset as i64);
    if let (Some(l), Some(r)) = (left, right) {
        if l + r < 0 {
            return Err(Error::EmptyWindow {
                left: l as i64,
                right: r as i64,
            });
        }
    }
    // The first query's window starts past the last key, or the last query's ends before the
    // first key: no query sees any (each later query's window starts later, each earlier one's
    // ends earlier).
    let (seq_len_q, seq_len_kv) = (shape.seq_len_q as i128, shape.seq_len_kv as i128);
    if left.is_some_and(|left| left < 1 - seq_len_q)
        || right.is_some_and(|right| right < 1 - seq_len_kv)
    {
        return Err(Error::WindowExcludesEveryKey {
            left: narrow(left),
            right: narrow(right),
            seq_len_q: shape.seq_len_q,
            seq_len_kv: shape.seq_len_kv,
        });
    }
    Ok(())
}

impl ForwardOptions {
    /// The visibility rule that these options (causal masking and the window) mean for `shape`,
    /// validated: what the kernels and [`crate::reference`] apply. Fails as a launch would for
    /// a length of 0 or over [`MAX_SEQ_LEN`], and for a window that is empty or leaves every
    /// query without a key.
    pub fn mask(&self, shape: &AttentionShape) -> Result<Mask, Error> {
        for (dimension, value) in [
            ("seq_len_q", shape.seq_len_q),
            ("seq_len_kv", shape.seq_len_kv),
        ] {
            if value == 0 {
                return Err(Error::ZeroSizedDimension { dimension });
            }
            if value > MAX_SEQ_LEN {
                return Err(Error::ProblemTooLarge {
                    dimension,
                    value,
                    limit: MAX_SEQ_LEN,
                });
            }
        }
        check_window(shape, self)?;
        let (left, right) = bounding_window(shape, self);
        // Within ±2^30 once checked (see `bounding_window`).
        let offset = |offset: Option<i128>| offset.map(|offset| offset as i32);
        Ok(Mask::windowed(
            shape.seq_len_q as u32,
            shape.seq_len_kv as u32,
            offset(left),
            offset(right),
        ))
    }
}

/// What a dense call's options and ALiBi layout ask of the kernel, before validation: whether
/// it needs a modified kernel, and the causal flag of a dense one.
pub(crate) struct ScoreRule {
    /// The window's sides that bound something ([`bounding_window`]).
    left: Option<i128>,
    right: Option<i128>,
    /// The right side as the options give it, intersected with causal masking: what the dense
    /// kernels' causal flag was before windows (a causal problem of one query row, whose
    /// diagonal is the last key, stays causal, and keeps its dispatch table entry).
    given_right: Option<i128>,
    softcap: Option<f32>,
    alibi: Option<AlibiLayout>,
    /// Whether the head dim has no kernels of its own: the problem runs padded, on the
    /// kernels that pad ([`flash_attn_params::pads_head_dim`]).
    padded: bool,
}

impl ScoreRule {
    pub(crate) fn new(
        shape: &AttentionShape,
        options: &ForwardOptions,
        alibi: Option<AlibiLayout>,
    ) -> Self {
        let (left, right) = bounding_window(shape, options);
        Self {
            left,
            right,
            given_right: intersected_window(options).1,
            softcap: options.softcap,
            alibi,
            padded: padded_head_dim(shape.head_dim).is_some_and(|kernel| kernel != shape.head_dim),
        }
    }

    /// Whether the scores need a modifier: a softcap, ALiBi, or a window that bounds more than
    /// causal masking does.
    fn modifies_scores(&self) -> bool {
        self.softcap.is_some()
            || self.alibi.is_some()
            || self.left.is_some()
            || self.right.is_some_and(|right| right != 0)
    }

    /// Whether a dense call's problem needs a modified kernel: a score modifier, or a head dim
    /// that runs padded (which only the modified kernels do among those of dense calls).
    fn is_modified(&self) -> bool {
        self.padded || self.modifies_scores()
    }

    /// The single-modifier variant of the problem ([`Variant::is_one_modifier`]) where its one
    /// modifier is ALiBi or the softcap (no window beyond causal masking, a head dim of its
    /// own): what the [`Variant::Alibi`] and [`Variant::Softcap`] kernels run.
    fn one_modifier(&self) -> Option<Variant> {
        if self.padded || self.left.is_some() || self.right.is_some_and(|right| right != 0) {
            return None;
        }
        match (self.alibi.is_some(), self.softcap.is_some()) {
            (true, false) => Some(Variant::Alibi),
            (false, true) => Some(Variant::Softcap),
            _ => None,
        }
    }

    /// The variant of the kernel a dense call's problem runs: a single-modifier variant for
    /// ALiBi or the softcap alone (whose problems a [`Variant::Modified`] kernel runs too,
    /// [`Variant::runs_problems_of`]).
    pub(crate) fn variant(&self) -> Variant {
        if let Some(variant) = self.one_modifier() {
            variant
        } else if self.is_modified() {
            Variant::Modified
        } else {
            Variant::Dense
        }
    }

    /// The variant of the kernel a serving call's problem runs, `unmodified`
    /// ([`Variant::Serving`] or [`Variant::Paged`]) or its modified form where the scores need a
    /// modifier (the serving kernels pad every head dim themselves).
    pub(crate) fn serving_variant(&self, unmodified: Variant) -> Variant {
        if self.modifies_scores() {
            unmodified.with_modifiers()
        } else {
            unmodified
        }
    }

    /// The most keys that a block of `rows` consecutive query rows (of `seq_len_q`) sees where
    /// the window bounds the left side: the left offset, plus from the first row's diagonal to
    /// the last row's right bound (or the end of the keys, `seq_len_q` past the first row's
    /// diagonal at most). `None` without a left bound: every key. What the split-KV plan
    /// spreads over its splits.
    pub(crate) fn visible_keys(&self, seq_len_q: usize, rows: usize) -> Option<usize> {
        let left = self.left?;
        let right = self.right.unwrap_or(seq_len_q as i128);
        let past_the_diagonal = (rows as i128 + right).min(seq_len_q as i128);
        // Both offsets within ±2^30 (checked), so this fits.
        Some((left + past_the_diagonal).max(1) as usize)
    }

    /// Whether the rule is causal masking (the dense kernels' flag: the given right bound is
    /// 0, or one past every key that only a window adds), or, for a modified kernel, whether its
    /// window ends at or before the diagonal (the dispatch table's causal column then describes
    /// its work best).
    pub(crate) fn causal(&self) -> bool {
        self.given_right.is_some_and(|right| right <= 0)
    }

    /// Whether the query tiles of `seq_len_q` rows see about as many keys each: no bound (each
    /// sees every key), or a band of at most half the rows (a window's span; the tiles before
    /// it ramp up). Not causal masking, under which the last tile sees every key and the first
    /// one block, nor one side alone, nor a band as wide as causal masking (dealt out in
    /// turns, a window of 8191 keys at 8192 ran 1.09x the causal time: BENCHMARKS.md log 52).
    /// How a persistent kernel's grid is chosen ([`flash_attn_params::TileConfig::walk_grid`]).
    pub(crate) fn tiles_alike(&self, seq_len_q: usize) -> bool {
        match (self.left, self.right) {
            (None, None) => true,
            (Some(left), Some(right)) => 2 * (left + right) <= seq_len_q as i128,
            _ => false,
        }
    }

    /// The kernel for the problem when the options name none: the dispatch table's for a
    /// dense problem ([`dispatch_kernel`], or [`dispatch_kernel_on`] on a device of known
    /// compute capability), for ALiBi or the softcap alone the single-modifier kernel of that
    /// table's tile where the build has one that runs on the device, else [`modified_kernel`]
    /// (or [`modified_kernel_on`]) as for every other modified problem.
    pub(crate) fn default_kernel(
        &self,
        dtype: Dtype,
        shape: &AttentionShape,
        sm_count: usize,
        compute_capability: Option<(i32, i32)>,
    ) -> Result<&'static ForwardKernel, Error> {
        if self.is_modified() {
            let (causal, alone) = (self.causal(), self.one_modifier());
            return modified_kernel_for(dtype, shape, causal, sm_count, compute_capability, alone);
        }
        match compute_capability {
            Some(compute_capability) => {
                dispatch_kernel_on(dtype, shape, self.causal(), sm_count, compute_capability)
            }
            None => dispatch_kernel(dtype, shape, self.causal(), sm_count),
        }
    }

    /// The slopes a launch reads (0 without ALiBi).
    pub(crate) fn alibi_slopes(&self, shape: &AttentionShape) -> usize {
        self.alibi.map_or(0, |layout| layout.slopes(shape))
    }

    /// The kernel's arguments for the problem, once [`crate::problem::check_problem`] has made
    /// `params` (lengths and scale valid): the dense kernels' causal flag, and for a modified
    /// kernel its [`ModifierParams`] (the ALiBi address still 0) with `params.scale_log2` in the
    /// softcap's units. Checks the window ([`Error::EmptyWindow`],
    /// [`Error::WindowExcludesEveryKey`]) and the softcap ([`Error::InvalidSoftcap`]).
    pub(crate) fn params(
        &self,
        shape: &AttentionShape,
        options: &ForwardOptions,
        variant: Variant,
        mut params: ForwardParams,
    ) -> Result<(ForwardParams, Option<ModifierParams>), Error> {
        check_window(shape, options)?;
        params.causal = self.causal() as u32;
        if !variant.is_modified() {
            return Ok((params, None));
        }
        let scale = options
            .softmax_scale
            .unwrap_or(shape.default_softmax_scale());
        // The unit of the kernel's scores: the softmax scale, or the softcap.
        let (softcap_input_scale, unit) = match self.softcap {
            Some(softcap) => {
                let input_scale = scale / softcap;
                let scale_log2 = softcap * std::f32::consts::LOG2_E;
                // An input scale that underflows to 0 would read as "no softcap".
                if !(softcap.is_finite()
                    && softcap > 0.0
                    && input_scale.is_finite()
                    && input_scale > 0.0
                    && scale_log2.is_finite())
                {
                    return Err(Error::InvalidSoftcap { softcap });
                }
                params.scale_log2 = scale_log2;
                (input_scale, softcap)
            }
            None => (0.0, scale),
        };
        let alibi_slope_scale = 1.0 / unit;
        if self.alibi.is_some() && !alibi_slope_scale.is_finite() {
            return Err(match self.softcap {
                Some(softcap) => Error::InvalidSoftcap { softcap },
                None => Error::InvalidSoftmaxScale { scale },
            });
        }
        // Checked above: both within ±2^30; an unbounded side is the offset that bounds
        // nothing.
        let (seq_len_q, seq_len_kv) = (shape.seq_len_q as i128, shape.seq_len_kv as i128);
        let window_left = self.left.unwrap_or(seq_len_kv - 1) as i32;
        let window_right = self.right.unwrap_or(seq_len_q - 1) as i32;
        let alibi_batch_stride = match self.alibi {
            Some(AlibiLayout::PerBatchAndHead) => shape.heads_q as u32,
            _ => 0,
        };
        Ok((
            params,
            Some(ModifierParams {
                window_left,
                window_right,
                softcap_input_scale,
                alibi_slope_scale: if self.alibi.is_some() {
                    alibi_slope_scale
                } else {
                    0.0
                },
                alibi_batch_stride,
                ..ModifierParams::NONE
            }),
        ))
    }
}

/// The modified kernel ([`Variant::Modified`]) for a problem of `dtype` and `shape` on a device
/// of `sm_count` multiprocessors, `causal` or not: the one of the tile that the dispatch table
/// picks for the dense problem ([`dispatch_kernel`]) where the build has it, else the first of
/// the problem's element type and kernel head dim ([`kernel_head_dim`], in `MODIFIED_TILES`
/// order). Of the sm80 family: for a device of known compute capability,
/// [`modified_kernel_on`].
pub fn modified_kernel(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
) -> Result<&'static ForwardKernel, Error> {
    modified_kernel_for(dtype, shape, causal, sm_count, None, None)
}

/// [`modified_kernel`] on a device of `compute_capability`, what the default API runs for a
/// problem with a score modifier: the modified kernel of the family and tile of the dense
/// problem's kernel on that device ([`dispatch_kernel_on`]: on compute capability 9.0 the
/// sm90 family's where the sm_90a table has a row), else the first of that family's at the
/// problem's kernel head dim, else [`modified_kernel`]'s choice, of the sm80 family.
///
/// ```
/// use flash_attn::{modified_kernel, modified_kernel_on, AttentionShape, Dtype, Family};
///
/// let shape = AttentionShape::new(2, 16, 4096, 128);
/// let hopper = modified_kernel_on(Dtype::F16, &shape, true, 132, (9, 0))?;
/// let ada = modified_kernel_on(Dtype::F16, &shape, true, 58, (8, 9))?;
/// assert_eq!(hopper.spec.family, Family::Sm90);
/// assert_eq!(ada, modified_kernel(Dtype::F16, &shape, true, 58)?);
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn modified_kernel_on(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<&'static ForwardKernel, Error> {
    modified_kernel_for(
        dtype,
        shape,
        causal,
        sm_count,
        Some(compute_capability),
        None,
    )
}

/// [`modified_kernel`] (`compute_capability` `None`: the sm80 family) and
/// [`modified_kernel_on`]; with `alone` (a single-modifier variant, [`Variant::is_one_modifier`])
/// that variant's kernel of the dense kernel's tile first, where the build has one the device
/// runs.
pub(crate) fn modified_kernel_for(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
    compute_capability: Option<(i32, i32)>,
    alone: Option<Variant>,
) -> Result<&'static ForwardKernel, Error> {
    let head_dim = kernel_head_dim(dtype, Variant::Modified, shape.head_dim)?;
    let dense = match compute_capability {
        Some(compute_capability) => {
            dispatch_kernel_on(dtype, shape, causal, sm_count, compute_capability)?
        }
        None => dispatch_kernel(dtype, shape, causal, sm_count)?,
    };
    // The kernels of `variant` at the head dim that the device runs, of the dense kernel's
    // family.
    let of_dense_family = |variant: Variant| {
        FORWARD_KERNELS.iter().filter(move |kernel| {
            kernel.spec.variant == variant
                && kernel.spec.dtype == dtype
                && kernel.spec.tile.head_dim == head_dim
                && kernel.spec.family == dense.spec.family
                && match compute_capability {
                    Some(compute_capability) => kernel.runs_on(compute_capability),
                    None => kernel.spec.family == Family::Sm80,
                }
        })
    };
    let twin = |variant: Variant| {
        of_dense_family(variant).find(|kernel| kernel.spec.tile == dense.spec.tile)
    };
    // The dense tile's single-modifier twin where `alone` names one, else its modified twin,
    // else the head dim's first modified kernel of the family (the sm80 family's dispatch table
    // and modified tiles were tuned apart; the sm90 family's table tiles have twins at D=64, 96
    // and 128: `SM90_MODIFIED_TILES` says why not beyond).
    alone
        .and_then(twin)
        .or_else(|| twin(Variant::Modified))
        .or_else(|| of_dense_family(Variant::Modified).next())
        .map(Ok)
        .unwrap_or_else(|| match dense.spec.family {
            // No sm90 modified kernel at the head dim: the sm80 family's choice.
            Family::Sm90 => modified_kernel_for(dtype, shape, causal, sm_count, None, None),
            Family::Sm80 => Err(Error::UnsupportedHeadDim {
                head_dim: shape.head_dim,
                variant: Variant::Modified,
                largest: 0,
            }),
        })
}

/// [`crate::plan`] for a call with ALiBi biases whose slopes are laid out as `layout`: the
/// modified kernel, and [`LaunchPlan::alibi_slopes_len`] slopes to read. Validates everything
/// [`FlashAttention::forward_alibi`] does but the slopes' values
/// ([`LaunchPlan::check_alibi_slopes`]).
pub fn plan_alibi(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
) -> Result<LaunchPlan, Error> {
    plan_dense(dtype, shape, options, Some(layout), sm_count, None)
}

/// [`plan_alibi`] for a device of `compute_capability` ([`crate::plan_on`]'s rule: on compute
/// capability 9.0 the sm90 family's modified kernel where the sm_90a table has a row,
/// [`modified_kernel_on`]). What the `FlashAttention` calls with ALiBi plan with.
pub fn plan_alibi_on(
    dtype: Dtype,
    shape: &AttentionShape,
    options: &ForwardOptions,
    layout: AlibiLayout,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<LaunchPlan, Error> {
    plan_dense(
        dtype,
        shape,
        options,
        Some(layout),
        sm_count,
        Some(compute_capability),
    )
}

/// The most an ALiBi bias may reach in f32, in the kernel's units and in log2 units: a quarter
/// of `f32::MAX`, so that a score plus its bias stays finite.
const LARGEST_BIAS: f64 = f32::MAX as f64 / 4.0;

impl LaunchPlan {
    /// The ALiBi slopes the launch reads: 0 but for a plan of [`plan_alibi`] or of a serving
    /// call's ALiBi planner ([`crate::plan_kv_cache_alibi`], [`crate::plan_varlen_alibi`], ...).
    pub fn alibi_slopes_len(&self) -> usize {
        self.alibi_slopes
    }

    /// The plan with its kernel reading the ALiBi slopes at `address` (0: none); a plan of a
    /// kernel without modifiers reads none, and stays as it is.
    pub(crate) fn with_alibi_address(mut self, address: u64) -> Self {
        if let Some(modifiers) = self.modifiers.as_mut() {
            modifiers.alibi_slopes = address;
        }
        self
    }

    /// [`Self::check_alibi_slopes`] for a call's host slopes, if it has any.
    pub(crate) fn check_host_alibi(&self, alibi: Option<AlibiSlopes>) -> Result<(), Error> {
        alibi.map_or(Ok(()), |alibi| self.check_alibi_slopes(alibi.slopes))
    }

    /// The score modifiers of a modified kernel's launch (its ALiBi address still 0), `None`
    /// for any other.
    pub fn modifiers(&self) -> Option<&ModifierParams> {
        self.modifiers.as_ref()
    }

    /// The part of [`Self::check_alibi_slopes`] that needs no values, for slopes already on
    /// the device: [`Error::AlibiSlopesTooShort`] unless `length` f32 hold
    /// [`Self::alibi_slopes_len`] slopes.
    ///
    /// ```
    /// use flash_attn::{plan_alibi, AlibiLayout, AttentionShape, Dtype, Error, ForwardOptions};
    ///
    /// let shape = AttentionShape::new(2, 8, 512, 64);
    /// let layout = AlibiLayout::PerBatchAndHead;
    /// let plan = plan_alibi(Dtype::F16, &shape, &ForwardOptions::default(), layout, 132)?;
    /// assert_eq!(plan.check_alibi_slopes_len(16), Ok(()));
    /// assert_eq!(
    ///     plan.check_alibi_slopes_len(8),
    ///     Err(Error::AlibiSlopesTooShort { length: 8, required: 16 })
    /// );
    /// # Ok::<(), Error>(())
    /// ```
    pub fn check_alibi_slopes_len(&self, length: usize) -> Result<(), Error> {
        let required = self.alibi_slopes;
        if length < required {
            return Err(Error::AlibiSlopesTooShort { length, required });
        }
        Ok(())
    }

    /// Whether `slopes` serve this plan of [`plan_alibi`] (or of a serving call's ALiBi planner,
    /// the problem's longest distance being that of its longest sequences): at least
    /// [`Self::alibi_slopes_len`] of them ([`Error::AlibiSlopesTooShort`]), each finite and
    /// small enough that its bias over the problem's longest distance (`max(seq_len_q,
    /// seq_len_kv)`) stays finite in f32, in the kernel's units and in log2 units
    /// ([`Error::InvalidAlibiSlope`], naming the first that is not). Extra slopes are not read.
    pub fn check_alibi_slopes(&self, slopes: &[f32]) -> Result<(), Error> {
        self.check_alibi_slopes_len(slopes.len())?;
        let required = self.alibi_slopes;
        let slope_scale = self.modifiers.map_or(0.0, |m| m.alibi_slope_scale) as f64;
        let longest = self.params.seq_len_q.max(self.params.seq_len_kv) as f64;
        let log2_scale = self.params.scale_log2 as f64;
        for (index, &slope) in slopes[..required].iter().enumerate() {
            let largest = slope.abs() as f64 * longest * slope_scale;
            if !slope.is_finite() || largest > LARGEST_BIAS || largest * log2_scale > LARGEST_BIAS {
                return Err(Error::InvalidAlibiSlope { index, slope });
            }
        }
        Ok(())
    }
}

/// The ALiBi slopes of an instance's [`FlashAttention::forward_alibi`] calls on the device,
/// grown on demand.
pub(crate) type AlibiSlopesBuffer = Mutex<Option<DeviceBuffer<f32>>>;

impl FlashAttention {
    /// [`plan_alibi_on`] for this instance's device (its multiprocessors and compute
    /// capability): what the ALiBi calls plan with.
    pub(crate) fn plan_alibi_here(
        &self,
        dtype: Dtype,
        shape: &AttentionShape,
        options: &ForwardOptions,
        layout: AlibiLayout,
    ) -> Result<LaunchPlan, Error> {
        plan_alibi_on(
            dtype,
            shape,
            options,
            layout,
            self.sm_count(),
            self.compute_capability(),
        )
    }

    /// [`Self::forward`] with ALiBi biases: query head `h` of batch `b` adds
    /// `-slope * |i + seq_len_kv - seq_len_q - j|` to the scaled (and capped, with
    /// [`ForwardOptions::softcap`]) score of query `i` and key `j`, `slope` from `alibi` (see
    /// [`AlibiSlopes`]); the options' window and softcap apply as in `forward`. See
    /// [`plan_alibi`] for the checks; the slopes are checked on the host
    /// ([`LaunchPlan::check_alibi_slopes`]).
    ///
    /// The slopes are copied into a device buffer of this instance on its stream
    /// (`cuMemcpyHtoDAsync`, ordered before the kernel and after every earlier kernel that read
    /// the buffer), as [`Self::forward_varlen`] copies its offsets: the buffer grows on the
    /// first call that needs more room (which synchronises the stream before it frees the old
    /// one); after that a call allocates nothing and does not wait for the GPU.
    /// [`Self::forward_alibi_raw`] takes slopes already on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = self.plan_alibi_here(T::DTYPE, &shape, options, alibi.layout)?;
        plan.check_alibi_slopes(alibi.slopes)?;
        let tensors = device_tensors(&plan, q, k, v, output, lse)?;
        self.with_alibi_uploaded(plan, Some(alibi), |plan| {
            // SAFETY: as in `forward`; the slopes were checked on the host, and
            // `with_alibi_uploaded` keeps their device copy alive and unchanged until the
            // kernel is done with it.
            unsafe { self.launch(self.stream.as_inner(), plan, tensors, None) }
        })
    }

    /// [`Self::forward_host`] with ALiBi biases ([`Self::forward_alibi`]).
    pub fn forward_host_alibi<T: Element>(
        &self,
        q: &[T],
        k: &[T],
        v: &[T],
        alibi: AlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<Vec<T>, Error> {
        self.forward_host_with(q, k, v, Some(alibi), shape, options)
    }

    /// As [`Self::forward_alibi`] with raw device addresses, slopes already on the device and a
    /// caller's stream: it neither allocates nor synchronises, so it can be captured in a CUDA
    /// graph. It validates the problem ([`plan_alibi`]) and the alignment of the addresses
    /// (slopes 4-byte aligned and not 0); it cannot read the slopes.
    ///
    /// # Safety
    /// As for [`Self::forward_raw`], and: `alibi.address` is the device address of
    /// [`AlibiLayout::slopes`] f32 in `alibi.layout`, alive and unchanged until the kernel
    /// finishes, each as [`LaunchPlan::check_alibi_slopes`] requires (finite, its bias over the
    /// problem finite in f32): a slope that is not gives NaN or infinite outputs, never an
    /// access outside a buffer.
    pub unsafe fn forward_alibi_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        alibi: RawAlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = self.plan_alibi_here(dtype, &shape, options, alibi.layout)?;
        let plan = plan.with_alibi_address(alibi.address);
        self.launch(stream.into().0.cast(), plan, tensors, None)
    }

    /// Calls `launch` with `plan` reading a device copy of `alibi`'s slopes (those the plan
    /// reads, checked on the host: [`LaunchPlan::check_alibi_slopes`]) in this instance's slopes
    /// buffer, uploaded on its stream ([`Self::with_uploaded`], which holds the buffer's lock
    /// until `launch` returns); without ALiBi, with `plan` as it is. Taken first where a call
    /// uploads more (its offsets, or its workspace): one order of the locks for every call.
    pub(crate) fn with_alibi_uploaded(
        &self,
        plan: LaunchPlan,
        alibi: Option<AlibiSlopes>,
        launch: impl FnOnce(LaunchPlan) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(alibi) = alibi else {
            return launch(plan);
        };
        // Checked before (`check_host_alibi`); an error, not a panic, if a caller did not.
        plan.check_alibi_slopes_len(alibi.slopes.len())?;
        let slopes = &alibi.slopes[..plan.alibi_slopes_len()];
        self.with_uploaded(&self.alibi_slopes, slopes, |address| {
            launch(plan.with_alibi_address(address))
        })
    }
}
