//! The cudarc backend (feature `cudarc`): the safe calls over cudarc's `CudaSlice`, `CudaView`
//! and `CudaViewMut`, enqueued on a caller's `CudaStream`.
//!
//! It turns cudarc's buffers and stream into [`RawTensors`], [`SequenceBuffers`] and a stream
//! handle and calls the one raw launch ([`FlashAttention::launch`]); the validation is the cust
//! calls' ([`crate::plan`] and its siblings, [`LaunchPlan::check_buffers`], the cache-length and
//! block-table checks).
//!
//! **One context.** cust's `Context::new` and cudarc's `CudaContext::new` both retain the
//! device's primary context (`cuDevicePrimaryCtxRetain`): a [`FlashAttention`] on device `n`
//! and a cudarc context of ordinal `n` hold the same `CUcontext`, in which the kernels are
//! loaded and cudarc's memory and streams live. Every call checks that the stream and every
//! buffer belong to that context ([`Error::ContextMismatch`] otherwise: another device, or a
//! context made by `CudaContext::new_non_primary`).
//!
//! **cudarc's stream synchronisation.** Where a cudarc context manages synchronisation between
//! its streams (once a second stream was made, with event tracking on: cudarc 0.16 and later),
//! each `CudaSlice` records an event after its last read and its last write. The calls take
//! every address through cudarc's `DevicePtr::device_ptr` (inputs) and
//! `DevicePtrMut::device_ptr_mut` (outputs) on the caller's stream, as cudarc's own launches
//! do: the stream waits for the last write of each input and for the last read and write of
//! each output, and once the kernel is enqueued the guards record this launch as the buffers'
//! latest read or write. Errors of those waits and records are kept in the context as cudarc
//! keeps them (`CudaContext::check_err`).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DriverError,
    SyncOnDrop,
};

use crate::varlen::{plan_varlen_cache_with, plan_varlen_with};
use crate::{
    check_cache_buffers, problem, AlibiLayout, AlibiSlopes, AttentionShape, BufferLengths, Element,
    Error, FlashAttention, ForwardOptions, HalfElement, LaunchPlan, LoadOptions, PagedKvCache,
    RawTensors, RawWorkspace, SequenceBuffers, VarlenCacheShape, VarlenShape,
};

/// A [`FlashAttention`] whose calls are enqueued on a caller's cudarc stream, of the instance's
/// device's primary context: [`FlashAttention::on_cudarc_stream`]. Its calls are
/// [`FlashAttention::forward`], its ALiBi sibling and its KV-cache and variable-length siblings
/// over cudarc buffers of half 2's (or half 1.8's) `f16` and `bf16`, validated as those are;
/// they return once the kernel is enqueued.
///
/// ```no_run
/// use cudarc::driver::CudaContext;
/// use flash_attn::{AttentionShape, FlashAttention, ForwardOptions};
/// use half2::f16;
///
/// let context = CudaContext::new(0)?;
/// let stream = context.default_stream();
/// let attention = FlashAttention::for_cudarc_context(&context)?;
/// let shape = AttentionShape::new(2, 8, 256, 64);
/// let q = stream.clone_htod(&vec![f16::from_f32(0.5); shape.q_elements()?])?;
/// let (k, v) = (q.clone(), q.clone());
/// let mut output = stream.alloc_zeros::<f16>(shape.q_elements()?)?;
/// attention
///     .on_cudarc_stream(&stream)?
///     .forward(&q, &k, &v, &mut output, None, shape, &ForwardOptions::default())?;
/// let output: Vec<f16> = stream.clone_dtoh(&output)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CudarcAttention<'a> {
    attention: &'a FlashAttention,
    stream: &'a Arc<CudaStream>,
}

impl FlashAttention {
    /// [`Self::on_device`] for the device of a cudarc context, which must be that device's
    /// primary context (`CudaContext::new`), the one this instance uses:
    /// [`Error::ContextMismatch`] otherwise.
    pub fn for_cudarc_context(context: &CudaContext) -> Result<Self, Error> {
        // cudarc made the context with `cuDeviceGet(ordinal as i32)`, so the ordinal fits (and
        // one that did not would be refused as no device).
        let device = u32::try_from(context.ordinal()).unwrap_or(u32::MAX);
        let attention = Self::with_options(&LoadOptions {
            device,
            ..LoadOptions::default()
        })?;
        attention.check_context("context", context)?;
        Ok(attention)
    }

    /// This instance's calls on `stream`, a cudarc stream of this device's primary context
    /// ([`Error::ContextMismatch`] otherwise), instead of [`Self::stream`]. See
    /// [`CudarcAttention`].
    pub fn on_cudarc_stream<'a>(
        &'a self,
        stream: &'a Arc<CudaStream>,
    ) -> Result<CudarcAttention<'a>, Error> {
        self.check_context("stream", stream.context())?;
        Ok(CudarcAttention {
            attention: self,
            stream,
        })
    }

    /// [`Error::ContextMismatch`] unless `context` is this instance's: compares the driver's
    /// handles, without a driver call.
    fn check_context(&self, what: &'static str, context: &CudaContext) -> Result<(), Error> {
        if context.cu_ctx().cast::<c_void>() == self.kernels.context.as_raw().cast::<c_void>() {
            return Ok(());
        }
        Err(Error::ContextMismatch {
            what,
            device: context.ordinal(),
            primary: context.is_primary(),
            instance_device: self.kernels.options.device,
        })
    }
}

/// The tensors of one call, as cudarc buffers (the logsumexp's lifetime is its own: a `&mut`
/// to a trait object inside an `Option` is not coerced to a shorter one), and the ALiBi slopes
/// of an ALiBi call.
struct Tensors<'b, 'l, T> {
    q: &'b dyn DevicePtr<T>,
    k: &'b dyn DevicePtr<T>,
    v: &'b dyn DevicePtr<T>,
    output: &'b mut dyn DevicePtrMut<T>,
    lse: Option<&'l mut dyn DevicePtrMut<f32>>,
    alibi: Option<Slopes<'b>>,
}

impl<'b, 'l, T> Tensors<'b, 'l, T> {
    /// The tensors of a call, without ALiBi.
    fn new(
        q: &'b dyn DevicePtr<T>,
        k: &'b dyn DevicePtr<T>,
        v: &'b dyn DevicePtr<T>,
        output: &'b mut dyn DevicePtrMut<T>,
        lse: Option<&'l mut dyn DevicePtrMut<f32>>,
    ) -> Self {
        Self {
            q,
            k,
            v,
            output,
            lse,
            alibi: None,
        }
    }

    /// The tensors of an ALiBi call, whose slopes are `alibi`.
    fn with(self, alibi: Slopes<'b>) -> Self {
        Self {
            alibi: Some(alibi),
            ..self
        }
    }
}

/// The ALiBi slopes of a call: host slopes, which the call checks in full and uploads on the
/// caller's stream, or the caller's slopes on the device, of which it checks the count.
#[derive(Clone, Copy)]
enum Slopes<'b> {
    Host(AlibiSlopes<'b>),
    Device(&'b dyn DevicePtr<f32>, AlibiLayout),
}

impl Slopes<'_> {
    fn layout(&self) -> AlibiLayout {
        match self {
            Slopes::Host(alibi) => alibi.layout,
            Slopes::Device(_, layout) => *layout,
        }
    }

    /// Whether the slopes serve `plan`: host slopes by [`LaunchPlan::check_alibi_slopes`],
    /// slopes on the device by their count ([`LaunchPlan::check_alibi_slopes_len`]).
    fn check(&self, plan: &LaunchPlan) -> Result<(), Error> {
        match self {
            Slopes::Host(alibi) => plan.check_alibi_slopes(alibi.slopes),
            Slopes::Device(slopes, _) => plan.check_alibi_slopes_len(slopes.len()),
        }
    }
}

/// What a serving kernel reads besides the tensors: the caller's cache lengths and block table,
/// and the offsets of a variable-length batch, uploaded by the call.
#[derive(Default)]
struct Sequences<'b> {
    cache_lens: Option<&'b dyn DevicePtr<u32>>,
    block_table: Option<&'b dyn DevicePtr<u32>>,
    /// `cu_seqlens_q` and `cu_seqlens_kv`, validated; the key offsets empty for queries
    /// against a KV cache (whose lengths are `cache_lens`).
    offsets: Option<(&'b [u32], &'b [u32])>,
}

/// A cudarc error as this crate's, naming the cudarc call.
fn driver_error(call: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |error| Error::DriverCall {
        call,
        code: error.0 as u32,
    }
}

impl CudarcAttention<'_> {
    /// [`FlashAttention::forward`] on this stream: `output = softmax(q kᵀ · scale) v`, with
    /// `lse` the logsumexp of each query row (`[batch, heads_q, seq_len_q]` f32) if given.
    /// Validated as `forward` is, and the stream and every buffer must belong to the
    /// instance's context; nothing is enqueued on error. Allocates nothing and does not
    /// synchronise, so it can be captured in a CUDA graph.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = problem::plan_on(
            T::Half1::DTYPE,
            &shape,
            options,
            self.attention.sm_count(),
            self.attention.compute_capability(),
        )?;
        self.launch(plan, Tensors::new(q, k, v, output, lse), None)
    }

    /// [`FlashAttention::forward_alibi`] on this stream: [`Self::forward`] with ALiBi biases,
    /// the slopes `alibi` on the host (see [`AlibiSlopes`]), the options' window and softcap
    /// applying as in `forward`. Validated as `forward_alibi` is: the problem by
    /// [`crate::plan_alibi_on`] for the instance's device, the slopes in full by
    /// [`LaunchPlan::check_alibi_slopes`] (enough of them, each finite and its bias over the
    /// problem finite in f32), before anything is enqueued.
    ///
    /// The slopes the plan reads are copied to a device buffer allocated on this stream
    /// (`CudaStream::clone_htod`: `cuMemcpyHtoDAsync`, ordered before the kernel; from pageable
    /// memory the driver stages the source before the call returns), which is freed there after
    /// the kernel (a `CudaSlice` frees on its own stream: `cuMemFreeAsync` where the device has
    /// memory pools, else once the stream is synchronised), as [`Self::forward_varlen`] uploads
    /// its offsets. It does not use the instance's slopes buffer, which belongs to the
    /// instance's own stream: a later cust call could overwrite it there while the kernel on
    /// this stream still reads it. So each call allocates; for CUDA graph capture, or slopes
    /// that live on the device already, see [`Self::forward_alibi_device_slopes`].
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use flash_attn::{AlibiLayout, AlibiSlopes, AttentionShape, FlashAttention, ForwardOptions};
    /// use half2::bf16;
    ///
    /// let context = CudaContext::new(0)?;
    /// let stream = context.default_stream();
    /// let attention = FlashAttention::for_cudarc_context(&context)?;
    /// let shape = AttentionShape::new(2, 8, 256, 64);
    /// let q = stream.clone_htod(&vec![bf16::from_f32(0.5); shape.q_elements()?])?;
    /// let (k, v) = (q.clone(), q.clone());
    /// let mut output = stream.alloc_zeros::<bf16>(shape.q_elements()?)?;
    /// // BLOOM's slopes, one per query head.
    /// let slopes: Vec<f32> = (1..=8).map(|h| 2f32.powi(-h)).collect();
    /// let alibi = AlibiSlopes { slopes: &slopes, layout: AlibiLayout::PerHead };
    /// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
    /// attention
    ///     .on_cudarc_stream(&stream)?
    ///     .forward_alibi(&q, &k, &v, &mut output, None, alibi, shape, &options)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn forward_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan =
            self.attention
                .plan_alibi_here(T::Half1::DTYPE, &shape, options, alibi.layout)?;
        let tensors = Tensors::new(q, k, v, output, lse).with(Slopes::Host(alibi));
        self.launch(plan, tensors, None)
    }

    /// [`Self::forward_alibi`] with the slopes already on the device: `slopes` at least
    /// [`AlibiLayout::slopes`] f32 in `layout`, of the instance's context, read by the kernel
    /// after their last write (cudarc's guard, as for the tensors). Allocates nothing and does
    /// not synchronise, so it can be captured in a CUDA graph.
    ///
    /// Only the slopes' count is checked ([`LaunchPlan::check_alibi_slopes_len`]:
    /// [`Error::AlibiSlopesTooShort`]), not their values, which stay on the device: a slope
    /// that [`LaunchPlan::check_alibi_slopes`] would reject (not finite, or its bias over the
    /// problem not finite in f32) gives NaN or infinite outputs, never an access outside a
    /// buffer, as for [`FlashAttention::forward_alibi_raw`]. Where the slopes are on the host,
    /// [`Self::forward_alibi`] checks them in full.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = self
            .attention
            .plan_alibi_here(T::Half1::DTYPE, &shape, options, layout)?;
        let tensors = Tensors::new(q, k, v, output, lse).with(Slopes::Device(slopes, layout));
        self.launch(plan, tensors, None)
    }

    /// [`FlashAttention::forward_kv_cache`] on this stream: `k_cache` and `v_cache` of
    /// `shape.seq_len_kv` keys per sequence, of which sequence `b` uses the first
    /// `cache_lens[b]`. With split-KV ([`LaunchPlan::workspace_bytes`] of
    /// [`crate::plan_kv_cache`] above 0) it allocates the workspace on this stream
    /// (`CudaStream::alloc_zeros`: stream-ordered where the device has memory pools) and frees
    /// it there after the kernel; the instance's own workspace belongs to its own stream.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_kv_cache<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse);
        self.on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`FlashAttention::forward_kv_cache_alibi`] on this stream: [`Self::forward_kv_cache`]
    /// with ALiBi biases in each sequence's own coordinates, the slopes on the host, checked
    /// and uploaded as [`Self::forward_alibi`] does (one allocation per call; see
    /// [`Self::forward_kv_cache_alibi_device_slopes`] for slopes on the device).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_kv_cache_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse).with(Slopes::Host(alibi));
        self.on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`Self::forward_kv_cache_alibi`] with the slopes already on the device, as
    /// [`Self::forward_alibi_device_slopes`] takes them (only their count is checked).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_kv_cache_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let slopes = Slopes::Device(slopes, layout);
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse).with(slopes);
        self.on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`FlashAttention::forward_paged_kv_cache`] on this stream: `k_pages` and `v_pages`
    /// `[num_pages, page_size, heads_kv, head_dim]`, `block_table` at least
    /// `batch * pages_per_sequence` u32, `cache_lens` at least `batch` u32. A sequence whose
    /// used pages include an index at or past `num_pages` reads no key and gets NaN output rows.
    /// The split-KV workspace as in [`Self::forward_kv_cache`].
    #[allow(clippy::too_many_arguments)]
    pub fn forward_paged_kv_cache<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse);
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// [`FlashAttention::forward_paged_kv_cache_alibi`] on this stream:
    /// [`Self::forward_paged_kv_cache`] with ALiBi biases, the slopes on the host (as
    /// [`Self::forward_kv_cache_alibi`] takes them).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_paged_kv_cache_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse).with(Slopes::Host(alibi));
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// [`Self::forward_paged_kv_cache_alibi`] with the slopes already on the device, as
    /// [`Self::forward_alibi_device_slopes`] takes them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_paged_kv_cache_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let slopes = Slopes::Device(slopes, layout);
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse).with(slopes);
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// The KV-cache calls ([`Self::forward_kv_cache`], [`Self::forward_paged_kv_cache`] with
    /// `pages`, and their ALiBi forms): plans and launches on the cache.
    fn on_cache<T: HalfElement>(
        &self,
        tensors: Tensors<'_, '_, T>,
        cache_lens: &dyn DevicePtr<u32>,
        pages: Option<(&dyn DevicePtr<u32>, &PagedKvCache)>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = problem::plan_cache(
            T::Half1::DTYPE,
            &shape,
            None,
            pages.map(|(_, paged)| paged),
            tensors.alibi.map(|alibi| alibi.layout()),
            options,
            self.attention.sm_count(),
            Some(self.attention.compute_capability()),
        )?;
        let cache = Cache {
            batch: shape.batch,
            cache_lens,
            block_table: pages.map(|(table, _)| table),
            cu_seqlens_q: None,
        };
        self.launch_on_cache(plan, tensors, cache)
    }

    /// [`FlashAttention::forward_varlen`] on this stream: the sequences of `shape` packed one
    /// after the other, `lse` `[heads_q, tokens_q]` f32 if given. The offsets are validated in
    /// full, then copied to a device buffer allocated on this stream (`CudaStream::clone_htod`,
    /// ordered before the kernel) and freed there after it.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        self.varlen(Tensors::new(q, k, v, output, lse), shape, options)
    }

    /// [`FlashAttention::forward_varlen_alibi`] on this stream: [`Self::forward_varlen`] with
    /// ALiBi biases in each sequence's own coordinates (with [`AlibiLayout::PerBatchAndHead`],
    /// one slope per (sequence, query head)), the slopes on the host, checked and uploaded as
    /// [`Self::forward_alibi`] does.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k, v, output, lse).with(Slopes::Host(alibi));
        self.varlen(tensors, shape, options)
    }

    /// [`Self::forward_varlen_alibi`] with the slopes already on the device, as
    /// [`Self::forward_alibi_device_slopes`] takes them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let slopes = Slopes::Device(slopes, layout);
        let tensors = Tensors::new(q, k, v, output, lse).with(slopes);
        self.varlen(tensors, shape, options)
    }

    /// The variable-length calls ([`Self::forward_varlen`] and its ALiBi forms).
    fn varlen<T: HalfElement>(
        &self,
        tensors: Tensors<'_, '_, T>,
        shape: &VarlenShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = plan_varlen_with(
            T::Half1::DTYPE,
            &shape.extents()?,
            tensors.alibi.map(|alibi| alibi.layout()),
            options,
            self.attention.sm_count(),
            Some(self.attention.compute_capability()),
        )?;
        let sequences = Sequences {
            offsets: Some((shape.cu_seqlens_q, shape.cu_seqlens_kv)),
            ..Sequences::default()
        };
        self.launch(plan, tensors, Some(sequences))
    }

    /// [`FlashAttention::forward_varlen_kv_cache`] on this stream: the queries of `shape`
    /// packed one sequence after the other (`lse` `[heads_q, tokens_q]` f32 if given), against
    /// contiguous K and V caches of which sequence `b` uses the first `cache_lens[b]` keys. The
    /// query offsets are uploaded as [`Self::forward_varlen`]'s, the split-KV workspace
    /// allocated as [`Self::forward_kv_cache`]'s.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_kv_cache<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse);
        self.varlen_on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`FlashAttention::forward_varlen_kv_cache_alibi`] on this stream:
    /// [`Self::forward_varlen_kv_cache`] with ALiBi biases in each sequence's own coordinates,
    /// the slopes on the host, checked and uploaded as [`Self::forward_alibi`] does.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_kv_cache_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse).with(Slopes::Host(alibi));
        self.varlen_on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`Self::forward_varlen_kv_cache_alibi`] with the slopes already on the device, as
    /// [`Self::forward_alibi_device_slopes`] takes them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_kv_cache_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_cache: &impl DevicePtr<T>,
        v_cache: &impl DevicePtr<T>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let slopes = Slopes::Device(slopes, layout);
        let tensors = Tensors::new(q, k_cache, v_cache, output, lse).with(slopes);
        self.varlen_on_cache(tensors, cache_lens, None, shape, options)
    }

    /// [`FlashAttention::forward_varlen_paged_kv_cache`] on this stream: as
    /// [`Self::forward_varlen_kv_cache`] against a paged cache (see
    /// [`Self::forward_paged_kv_cache`]).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_paged_kv_cache<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        shape: &VarlenCacheShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse);
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.varlen_on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// [`FlashAttention::forward_varlen_paged_kv_cache_alibi`] on this stream:
    /// [`Self::forward_varlen_paged_kv_cache`] with ALiBi biases, the slopes on the host (as
    /// [`Self::forward_varlen_kv_cache_alibi`] takes them).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_paged_kv_cache_alibi<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        alibi: AlibiSlopes,
        shape: &VarlenCacheShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse).with(Slopes::Host(alibi));
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.varlen_on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// [`Self::forward_varlen_paged_kv_cache_alibi`] with the slopes already on the device, as
    /// [`Self::forward_alibi_device_slopes`] takes them.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_varlen_paged_kv_cache_alibi_device_slopes<T: HalfElement>(
        &self,
        q: &impl DevicePtr<T>,
        k_pages: &impl DevicePtr<T>,
        v_pages: &impl DevicePtr<T>,
        block_table: &impl DevicePtr<u32>,
        cache_lens: &impl DevicePtr<u32>,
        output: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        slopes: &impl DevicePtr<f32>,
        layout: AlibiLayout,
        shape: &VarlenCacheShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let slopes = Slopes::Device(slopes, layout);
        let tensors = Tensors::new(q, k_pages, v_pages, output, lse).with(slopes);
        let pages = Some((block_table as &dyn DevicePtr<u32>, paged));
        self.varlen_on_cache(tensors, cache_lens, pages, shape, options)
    }

    /// The variable-length cache calls ([`Self::forward_varlen_kv_cache`],
    /// [`Self::forward_varlen_paged_kv_cache`] with `pages`, and their ALiBi forms).
    fn varlen_on_cache<T: HalfElement>(
        &self,
        tensors: Tensors<'_, '_, T>,
        cache_lens: &dyn DevicePtr<u32>,
        pages: Option<(&dyn DevicePtr<u32>, &PagedKvCache)>,
        shape: &VarlenCacheShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let extents = shape.extents()?;
        let plan = plan_varlen_cache_with(
            T::Half1::DTYPE,
            &extents,
            pages.map(|(_, paged)| paged),
            tensors.alibi.map(|alibi| alibi.layout()),
            options,
            self.attention.sm_count(),
            Some(self.attention.compute_capability()),
        )?;
        let cache = Cache {
            batch: extents.longest.batch,
            cache_lens,
            block_table: pages.map(|(table, _)| table),
            cu_seqlens_q: Some(shape.cu_seqlens_q),
        };
        self.launch_on_cache(plan, tensors, cache)
    }

    /// The KV-cache calls' common end: checks the cache lengths and the block table by their
    /// lengths (as the cust calls do), then launches with them.
    fn launch_on_cache<T: HalfElement>(
        &self,
        plan: LaunchPlan,
        tensors: Tensors<'_, '_, T>,
        cache: Cache<'_>,
    ) -> Result<(), Error> {
        check_cache_buffers(
            &plan,
            cache.batch,
            cache.cache_lens.len(),
            cache.block_table.map(|table| table.len()),
        )?;
        let sequences = Sequences {
            cache_lens: Some(cache.cache_lens),
            block_table: cache.block_table,
            offsets: cache
                .cu_seqlens_q
                .map(|cu_seqlens_q| (cu_seqlens_q, &[][..])),
        };
        self.launch(plan, tensors, Some(sequences))
    }

    /// Checks the buffers' lengths and contexts, allocates what the call owns (the offsets of a
    /// variable-length batch, host ALiBi slopes' device copy, the split-KV workspace), takes
    /// every address through cudarc's guards on this stream and launches `plan` (`sequences`
    /// for a serving plan, `None` for a dense one).
    fn launch<T: HalfElement>(
        &self,
        plan: LaunchPlan,
        tensors: Tensors<'_, '_, T>,
        sequences: Option<Sequences<'_>>,
    ) -> Result<(), Error> {
        if let Some(alibi) = &tensors.alibi {
            alibi.check(&plan)?;
        }
        plan.check_buffers(&BufferLengths {
            q: tensors.q.len(),
            k: tensors.k.len(),
            v: tensors.v.len(),
            o: tensors.output.len(),
            lse: tensors.lse.as_ref().map(|lse| lse.len()),
        })?;
        let attention = self.attention;
        for (what, stream) in [
            ("q", tensors.q.stream()),
            ("k", tensors.k.stream()),
            ("v", tensors.v.stream()),
            ("o", tensors.output.stream()),
        ] {
            attention.check_context(what, stream.context())?;
        }
        if let Some(lse) = &tensors.lse {
            attention.check_context("lse", lse.stream().context())?;
        }
        if let Some(Slopes::Device(slopes, _)) = tensors.alibi {
            attention.check_context("alibi_slopes", slopes.stream().context())?;
        }
        let sequences = sequences.unwrap_or_default();
        for (what, buffer) in [
            ("cache_lens", sequences.cache_lens),
            ("block_table", sequences.block_table),
        ] {
            if let Some(buffer) = buffer {
                attention.check_context(what, buffer.stream().context())?;
            }
        }

        // Everything is valid: from here on the driver is called.
        let stream = self.stream;
        let offsets = sequences
            .offsets
            .map(|(cu_seqlens_q, cu_seqlens_kv)| {
                // Both lists in one buffer: one upload.
                upload(stream, &[cu_seqlens_q, cu_seqlens_kv].concat())
            })
            .transpose()?;
        let uploaded_slopes = match tensors.alibi {
            Some(Slopes::Host(alibi)) => {
                Some(upload(stream, &alibi.slopes[..plan.alibi_slopes_len()])?)
            }
            _ => None,
        };
        let workspace = CallWorkspace::allocate(stream, &plan)?;

        let (q, _q_read) = tensors.q.device_ptr(stream);
        let (k, _k_read) = tensors.k.device_ptr(stream);
        let (v, _v_read) = tensors.v.device_ptr(stream);
        let (o, _o_write) = tensors.output.device_ptr_mut(stream);
        let (lse, _lse_write): (Option<u64>, Option<SyncOnDrop<'_>>) = match tensors.lse {
            Some(lse) => {
                let (address, guard) = lse.device_ptr_mut(stream);
                (Some(address), Some(guard))
            }
            None => (None, None),
        };
        let slopes: Option<&dyn DevicePtr<f32>> = match (tensors.alibi, &uploaded_slopes) {
            (Some(Slopes::Device(slopes, _)), _) => Some(slopes),
            (_, Some(uploaded)) => Some(uploaded),
            _ => None,
        };
        let (alibi_slopes, _slopes_read) = address_of(slopes, stream);
        let plan = plan.with_alibi_address(alibi_slopes);
        let (seq_used_kv, _cache_lens_read) = address_of(sequences.cache_lens, stream);
        let (block_table, _block_table_read) = address_of(sequences.block_table, stream);
        let offsets_address = offsets.as_ref().map(|offsets| offsets.device_ptr(stream));
        let (cu_seqlens_q, cu_seqlens_kv) = match (&offsets_address, sequences.offsets) {
            (Some((address, _)), Some((q, kv))) => {
                let kv_address = address + std::mem::size_of_val(q) as u64;
                (*address, if kv.is_empty() { 0 } else { kv_address })
            }
            _ => (0, 0),
        };
        let buffers = SequenceBuffers {
            cu_seqlens_q,
            cu_seqlens_kv,
            seq_used_kv,
            block_table,
            workspace: workspace.as_ref().map(|workspace| workspace.raw(stream)),
        };
        let serving = plan.sequences().is_some();
        // SAFETY: the stream and every buffer belong to the instance's context (checked above);
        // each buffer holds every element the plan reaches (`check_buffers`, the cache-length,
        // block-table and slope-count checks, the offsets validated by `VarlenShape::extents`
        // against the token counts the tensors were checked for); `output` and `lse` are
        // borrowed mutably, so they alias no input, and the plan rejected overlapping output
        // strides. A slope's value cannot make the kernel reach outside a buffer (host slopes
        // were checked in full; a device slope out of range gives NaN or infinite outputs). The
        // stream waits for the buffers' pending writes (and the outputs' pending reads) through
        // cudarc's guards, which record this launch once it is enqueued. A `CudaSlice` frees
        // its memory on its own stream after waiting for its recorded uses, and the buffers
        // this call allocated (the offsets and the slopes, uploaded on the stream before the
        // kernel; the workspace, zeroed there) are dropped after the launch, freed in the
        // stream's order.
        unsafe {
            attention.launch(
                stream.cu_stream().cast(),
                plan,
                RawTensors { q, k, v, o, lse },
                serving.then_some(buffers),
            )
        }
    }
}

/// A KV-cache call's index buffers: `cache_lens` (at least `batch` u32), the block table of a
/// paged cache, and the query offsets of a variable-length batch (validated).
struct Cache<'b> {
    batch: usize,
    cache_lens: &'b dyn DevicePtr<u32>,
    block_table: Option<&'b dyn DevicePtr<u32>>,
    cu_seqlens_q: Option<&'b [u32]>,
}

/// `data` copied to a new device buffer on `stream` (`CudaStream::clone_htod`), which a
/// call's kernel reads after the copy and which is freed on `stream` once dropped.
fn upload<E: DeviceRepr>(stream: &Arc<CudaStream>, data: &[E]) -> Result<CudaSlice<E>, Error> {
    stream
        .clone_htod(data)
        .map_err(driver_error("CudaStream::clone_htod"))
}

/// The address of an optional input (0: none) and cudarc's guard for its read.
fn address_of<'b, E>(
    buffer: Option<&'b dyn DevicePtr<E>>,
    stream: &'b CudaStream,
) -> (u64, Option<SyncOnDrop<'b>>) {
    match buffer {
        Some(buffer) => {
            let (address, guard) = buffer.device_ptr(stream);
            (address, Some(guard))
        }
        None => (0, None),
    }
}

/// The split-KV workspace of one call, allocated on the caller's stream and freed there.
struct CallWorkspace {
    partials: CudaSlice<u8>,
    counters: CudaSlice<u32>,
}

impl CallWorkspace {
    /// `None` where `plan` needs no workspace; else partials and zeroed arrival counters.
    fn allocate(stream: &Arc<CudaStream>, plan: &LaunchPlan) -> Result<Option<Self>, Error> {
        if plan.workspace_bytes() == 0 {
            return Ok(None);
        }
        // Zeroed as the instance's own workspace is: the kernels need the counters at 0, and
        // nothing has tested them on uninitialised partials.
        Ok(Some(Self {
            partials: stream
                .alloc_zeros(plan.workspace_bytes())
                .map_err(driver_error("CudaStream::alloc_zeros"))?,
            counters: stream
                .alloc_zeros(plan.counters())
                .map_err(driver_error("CudaStream::alloc_zeros"))?,
        }))
    }

    /// The workspace as the raw launch takes it. Both buffers were made on `stream` and are
    /// used only there, so their addresses need no guard.
    fn raw(&self, stream: &CudaStream) -> RawWorkspace {
        let (partials, _) = self.partials.device_ptr(stream);
        let (counters, _) = self.counters.device_ptr(stream);
        RawWorkspace {
            partials,
            partial_bytes: self.partials.len(),
            counters,
            counter_count: self.counters.len(),
        }
    }
}
