//! A FlashAttention forward pass written in pure Rust.
//!
//! The kernels are `#![no_std]` Rust compiled to PTX (the `kernels-gpu` crate) for each PTX
//! target of the architecture table ([`ARCHITECTURES`]: sm_80, and sm_90a for Hopper's family);
//! this crate embeds that PTX, one deflated module per kernel and target (and, where the build
//! found `ptxas`, the default API's kernels assembled into cubins for sm_89, sm_90 and sm_90a),
//! loads the cubin or the PTX matching the device through `cust` ([`ptx_target_for`]),
//! validates every call and launches it.
//!
//! A kernel is a [`KernelSpec`]: its main loop's [`Family`], element type ([`Dtype`]),
//! [`Variant`] of the main loop and [`TileConfig`] (head dim included); its PTX entry name
//! spells the spec out. Which kernels a build holds ([`FORWARD_KERNELS`]) is chosen at build
//! time ([`KERNEL_SET`]): by default the **shipping set**, the kernels the dispatch table and
//! the fallbacks name (`host/dispatch-table.tsv`, `host/fallback-kernels.txt`; 25 today), which
//! is all the default API runs; with `FLASH_ATTN_KERNELS=all` in the build's environment, the
//! **search space**, every spec that passes the compile-time gates and the ptxas gate (262),
//! for the tuner and for naming other kernels in [`ForwardOptions::kernel`]. Either way a
//! kernel whose ptxas record fails is not exposed.
//!
//! ```no_run
//! use flash_attn::{AttentionShape, FlashAttention, ForwardOptions};
//! use half::f16;
//!
//! let shape = AttentionShape::new(4, 8, 512, 64);
//! let q = vec![f16::from_f32(0.1); shape.q_elements()?];
//! let attention = FlashAttention::new()?;
//! let output = attention.forward_host(&q, &q, &q, shape, &ForwardOptions::default())?;
//! assert_eq!(output.len(), shape.q_elements()?);
//! # Ok::<(), flash_attn::Error>(())
//! ```
//!
//! Everything but the launch runs without a GPU: [`plan`] (and [`plan_kv_cache`],
//! [`plan_varlen`], ...) validates a problem and sizes its buffers, [`supports`] says whether
//! it runs, and [`reference`](mod@reference) computes it on the CPU.
#![warn(missing_docs)]

#[cfg(feature = "cudarc")]
mod cudarc_backend;
mod dispatch;
mod driver;
mod element;
mod error;
mod kernels;
mod launch;
mod modifiers;
mod problem;
pub mod reference;
pub mod rng;
mod varlen;

use std::ffi::c_void;
use std::sync::Mutex;

use cust::context::CurrentContext;
use cust::memory::{AsyncCopyDestination, DeviceBuffer, DeviceCopy, DeviceSlice};
use cust::stream::{Stream, StreamFlags};
use element::{as_half1, from_half1};
pub use flash_attn_params::{
    architecture_named, architectures_of, for_each_candidate, for_each_gated_config,
    max_smem_per_block_of, padded_head_dim, ptx_target_for, sm90_copies_by_tma,
    sm90_overlaps_blocks, Architecture, Dtype, Family, ForwardParams, KernelSet, KernelSpec, Mask,
    ModifiedParams, ModifiedServingParams, ModifierParams, QSource, SequenceParams, ServingParams,
    SmemLayout, TensorStrides, TileConfig, TileMask, Variant, ARCHITECTURES, BUILT_CONFIGS,
    CANDIDATE_BLOCK_M, CANDIDATE_BLOCK_N, CANDIDATE_DTYPES, CANDIDATE_FAMILIES,
    CANDIDATE_HEAD_DIMS, CANDIDATE_LAYOUTS, CANDIDATE_Q_SOURCES, CANDIDATE_STAGES,
    CANDIDATE_VARIANTS, CANDIDATE_WARPS, HEAD_DIM_GRANULE, KERNELS_ENV, KERNEL_SET, MAX_HEAD_DIM,
    MODIFIED_TILES, SERVING_TILES, SM89_MAX_SMEM_PER_BLOCK, SM90_MAX_SMEM_PER_BLOCK,
    SM90_MODIFIED_TILES, SM90_ONE_MODIFIER_TILES, SM90_PAGED_TILES, SM90_PRODUCER_WARPS,
    SM90_SERVING_TILES, TENSOR_MAPS_BYTES,
};

#[cfg(feature = "cudarc")]
pub use cudarc_backend::CudarcAttention;
pub use dispatch::{
    default_api_kernels, dispatch_entry, dispatch_kernel, dispatch_kernel_on, dispatch_table,
    dispatch_table_sm90a, DispatchEntry, GridSize, SeqBucket, GRID_TILE_ROWS, NOT_TUNED,
    SMALL_GRID_TILES_PER_SM,
};
pub use element::{round_to, Element, HalfElement};
pub use error::Error;
pub use kernels::{
    default_kernel, entry_ptx, entry_ptx_for, kernel_by_name, kernel_head_dim, kernel_named, Cubin,
    ForwardKernel, KernelSource, LoadOptions, PtxReason, CUBINS, CUBINS_NOT_BUILT, FORWARD_KERNELS,
    PTX_TARGETS, SUPPORTED_HEAD_DIMS,
};
pub use modifiers::{
    modified_kernel, modified_kernel_on, plan_alibi, plan_alibi_on, AlibiLayout, AlibiSlopes,
    RawAlibiSlopes, SlidingWindow,
};
pub use problem::{
    plan, plan_kv_cache, plan_kv_cache_alibi, plan_kv_cache_on, plan_on, plan_paged_kv_cache,
    plan_paged_kv_cache_alibi, plan_paged_kv_cache_on, serving_kernel, split_count, supports,
    AttentionShape, BufferLengths, ForwardOptions, ForwardStrides, LaunchPlan, Layout,
    PagedKvCache, MAX_SEQ_LEN, MAX_SPLITS, MAX_TENSOR_BYTES,
};
pub use varlen::{
    plan_varlen, plan_varlen_alibi, plan_varlen_kv_cache, plan_varlen_kv_cache_alibi,
    plan_varlen_kv_cache_on, plan_varlen_on, RawSeqOffsets, VarlenCacheExtents, VarlenCacheShape,
    VarlenExtents, VarlenShape,
};

/// A CUDA stream for [`FlashAttention::forward_raw`], as the driver API's `CUstream` handle,
/// whichever binding made it: cust's `Stream::as_inner()` converts directly, cudarc's
/// `CudaStream::cu_stream()` and the runtime API's `cudaStream_t` (the same handle) after a cast
/// to `*mut c_void`. A null handle is the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawStream(pub *mut c_void);

impl From<*mut c_void> for RawStream {
    fn from(handle: *mut c_void) -> Self {
        Self(handle)
    }
}

/// Kept so that cust callers pass `stream.as_inner()` as is.
impl From<cust::sys::CUstream> for RawStream {
    fn from(handle: cust::sys::CUstream) -> Self {
        Self(handle.cast())
    }
}

/// Device addresses for [`FlashAttention::forward_raw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawTensors {
    /// Device address of Q (16-byte aligned, not 0).
    pub q: u64,
    /// Device address of K (16-byte aligned, not 0).
    pub k: u64,
    /// Device address of V (16-byte aligned, not 0).
    pub v: u64,
    /// Device address of the output O (16-byte aligned, not 0), written.
    pub o: u64,
    /// Device address of the logsumexp output, `[batch, heads_q, seq_len_q]` f32
    /// (`[heads_q, tokens_q]` for a variable-length batch), contiguous and 4-byte aligned, or
    /// `None` for none.
    pub lse: Option<u64>,
}

/// The forward pass on one GPU: a CUDA context, the loaded kernels and a stream.
pub struct FlashAttention {
    // Field order is drop order: the workspace and the stream must go before the context
    // inside `kernels`.
    /// The split-KV workspace of this instance's KV-cache calls, grown on demand, its arrival
    /// counters zeroed once (the kernels leave them at 0). Every kernel that uses it runs on
    /// `stream`, so calls are ordered on it; the lock only guards the growth.
    workspace: Mutex<Workspace>,
    /// The sequence offsets of this instance's variable-length calls (`forward_varlen`), grown
    /// on demand; each call uploads its offsets on `stream`, so calls are ordered on it, and
    /// the lock keeps one upload-and-launch at a time.
    varlen_offsets: Mutex<Option<DeviceBuffer<u32>>>,
    /// The ALiBi slopes of this instance's `forward_alibi` calls, as `varlen_offsets`.
    alibi_slopes: modifiers::AlibiSlopesBuffer,
    stream: Stream,
    kernels: kernels::LoadedKernels,
}

/// The split-KV buffers of one instance: partial outputs, and arrival counters zeroed when made.
#[derive(Default)]
struct Workspace {
    partials: Option<DeviceBuffer<u8>>,
    counters: Option<DeviceBuffer<u32>>,
}

/// The checks of a KV-cache call's index buffers, by their lengths in u32:
/// [`Error::CacheLengthsTooShort`] unless `cache_lens` hold one length per sequence (`batch`),
/// then [`Error::BlockTableTooShort`] unless a paged call's block table (`block_table`, `None`
/// for a contiguous cache) holds every page index of `plan`.
fn check_cache_buffers(
    plan: &LaunchPlan,
    batch: usize,
    cache_lens: usize,
    block_table: Option<usize>,
) -> Result<(), Error> {
    if cache_lens < batch {
        return Err(Error::CacheLengthsTooShort {
            lengths: cache_lens,
            batch,
        });
    }
    match block_table {
        Some(length) if length < plan.block_table_len() => Err(Error::BlockTableTooShort {
            length,
            required: plan.block_table_len(),
        }),
        _ => Ok(()),
    }
}

/// A KV-cache call's index buffers on the device: the used key counts, and for a paged cache
/// its block table and geometry (both `Some` or both `None`).
#[derive(Clone, Copy)]
struct CacheBuffers<'a> {
    cache_lens: &'a DeviceSlice<u32>,
    block_table: Option<&'a DeviceSlice<u32>>,
    paged: Option<&'a PagedKvCache>,
}

impl<'a> CacheBuffers<'a> {
    /// A contiguous cache's.
    fn contiguous(cache_lens: &'a DeviceSlice<u32>) -> Self {
        Self {
            cache_lens,
            block_table: None,
            paged: None,
        }
    }

    /// A paged cache's.
    fn paged(
        cache_lens: &'a DeviceSlice<u32>,
        block_table: &'a DeviceSlice<u32>,
        paged: &'a PagedKvCache,
    ) -> Self {
        Self {
            cache_lens,
            block_table: Some(block_table),
            paged: Some(paged),
        }
    }

    /// [`check_cache_buffers`] for `plan` of `batch` sequences, then the buffers' addresses.
    fn check(&self, plan: &LaunchPlan, batch: usize) -> Result<SequenceBuffers, Error> {
        let table_len = self.block_table.map(|table| table.len());
        check_cache_buffers(plan, batch, self.cache_lens.len(), table_len)?;
        Ok(SequenceBuffers {
            seq_used_kv: self.cache_lens.as_device_ptr().as_raw(),
            block_table: self
                .block_table
                .map_or(0, |table| table.as_device_ptr().as_raw()),
            ..SequenceBuffers::default()
        })
    }
}

/// A raw KV-cache call's index buffers and workspace (`block_table` 0 for a contiguous cache).
fn cache_buffers_raw(
    block_table: u64,
    cache_lens: u64,
    workspace: Option<RawWorkspace>,
) -> SequenceBuffers {
    SequenceBuffers {
        seq_used_kv: cache_lens,
        block_table,
        workspace,
        ..SequenceBuffers::default()
    }
}

/// The device buffers a serving kernel reads besides the tensors: the sequence offsets of a
/// variable-length batch, the used key counts of a KV cache and the block table of a paged one
/// (0: none), and the split-KV workspace.
#[derive(Clone, Copy, Debug, Default)]
struct SequenceBuffers {
    cu_seqlens_q: u64,
    cu_seqlens_kv: u64,
    seq_used_kv: u64,
    block_table: u64,
    workspace: Option<RawWorkspace>,
}

/// A caller's split-KV workspace for [`FlashAttention::forward_kv_cache_raw`]: `partials`, a
/// device allocation of `partial_bytes` bytes, at least [`LaunchPlan::workspace_bytes`]; and
/// `counters`, one of `counter_count` u32, at least [`LaunchPlan::counters`], zeroed before its
/// first use (each launch leaves them at 0 again). One launch at a time uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawWorkspace {
    /// Device address of the partial outputs (16-byte aligned, not 0).
    pub partials: u64,
    /// Bytes at `partials`.
    pub partial_bytes: usize,
    /// Device address of the arrival counters (16-byte aligned, not 0).
    pub counters: u64,
    /// u32 counters at `counters`.
    pub counter_count: usize,
}

impl FlashAttention {
    /// Uses the first GPU.
    pub fn new() -> Result<Self, Error> {
        Self::on_device(0)
    }

    /// Uses GPU `ordinal` (its primary context). Fails with [`Error::NoGpu`] where there is none,
    /// and with a specific error where the device or driver is too old for the kernels.
    pub fn on_device(ordinal: u32) -> Result<Self, Error> {
        Self::with_options(&LoadOptions {
            device: ordinal,
            ..LoadOptions::default()
        })
    }

    /// As [`Self::on_device`] for `options.device`; `options.force_ptx` makes every kernel
    /// JIT-compile from PTX even where the build embedded a cubin for the device.
    pub fn with_options(options: &LoadOptions) -> Result<Self, Error> {
        let kernels = kernels::LoadedKernels::load(options)?;
        // A blocking stream (not NON_BLOCKING): it waits for work on the legacy default stream
        // and that stream waits for it. cust's synchronous copies (`DeviceBuffer::from_slice`,
        // `copy_from`, `copy_to`) run there, and a pageable `cuMemcpyHtoD` may return before its
        // data lands: with a non-blocking stream, a kernel launched right after such an upload
        // could read the old bytes, and a `copy_to` right after `forward` could read the output
        // before the kernel wrote it.
        let stream = Stream::new(StreamFlags::DEFAULT, None)?;
        Ok(Self {
            workspace: Mutex::new(Workspace::default()),
            varlen_offsets: Mutex::new(None),
            alibi_slopes: Mutex::new(None),
            stream,
            kernels,
        })
    }

    /// The device's name, as the driver gives it (`"NVIDIA H100 80GB HBM3"`).
    pub fn device_name(&self) -> &str {
        &self.kernels.device_name
    }

    /// The device's compute capability, `(major, minor)`: `(9, 0)` on an H100.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.kernels.compute_capability
    }

    /// The architecture whose PTX this instance JIT-compiles for the sm80 family's kernels where
    /// it loads no cubin: the newest PTX target not newer than the device (sm_80, the family's
    /// only one, from 8.0 up), or the one [`LoadOptions::ptx_target`] forces. (The sm90 family's
    /// is sm_90a, on compute capability 9.0 alone.)
    pub fn ptx_target(&self) -> &'static Architecture {
        self.kernels
            .ptx_target_of(Family::Sm80)
            .expect("every device `new` accepts runs the sm80 family")
    }

    /// The device's streaming multiprocessors (132 on an H100 SXM), queried once when the
    /// instance is made: the default API's [`dispatch_kernel`] picks a kernel by the grid size
    /// relative to them, and [`supports`] takes them to answer the same without a GPU.
    pub fn sm_count(&self) -> usize {
        self.kernels.sm_count
    }

    /// The stream every forward pass of this instance is enqueued on: a blocking stream, so
    /// that work on the legacy default stream (cust's synchronous copies) and this instance's
    /// kernels are ordered with each other.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Loads `kernel` now instead of at its first launch, and says where its code came from.
    /// Kernels are loaded one at a time on first use: from the cubin built for the device where
    /// there is one, else JIT-compiled from PTX (0.2-0.6 s each on an H100, see the README);
    /// call this to keep that out of a latency-sensitive first call. For a kernel loaded
    /// already it only returns the source.
    pub fn preload(&self, kernel: &ForwardKernel) -> Result<KernelSource, Error> {
        CurrentContext::set_current(&self.kernels.context)?;
        self.kernels.source(kernel)
    }

    /// Waits until every enqueued forward pass has finished.
    pub fn synchronize(&self) -> Result<(), Error> {
        Ok(self.stream.synchronize()?)
    }

    /// Enqueues `output = softmax(q kᵀ · scale) v` on [`Self::stream`] and returns without
    /// waiting; with `lse`, also writes the logsumexp of each query row (natural log, f32,
    /// `[batch, heads_q, seq_len_q]` contiguous).
    ///
    /// Everything is validated first, nothing is launched on error, and the launch allocates
    /// nothing and does not synchronise (so it can be captured in a CUDA graph).
    ///
    /// ```no_run
    /// use cust::memory::DeviceBuffer;
    /// use flash_attn::{AttentionShape, FlashAttention, ForwardOptions};
    /// use half::f16;
    ///
    /// let attention = FlashAttention::new()?;
    /// let shape = AttentionShape::new(2, 8, 1024, 128);
    /// let host = vec![f16::from_f32(0.5); shape.q_elements()?];
    /// let (q, k, v) = (
    ///     DeviceBuffer::from_slice(&host)?,
    ///     DeviceBuffer::from_slice(&host)?,
    ///     DeviceBuffer::from_slice(&host)?,
    /// );
    /// let mut output = DeviceBuffer::<f16>::zeroed(shape.q_elements()?)?;
    /// let mut lse = DeviceBuffer::<f32>::zeroed(shape.lse_elements()?)?;
    /// let options = ForwardOptions { causal: true, ..ForwardOptions::default() };
    /// attention.forward(&q, &k, &v, &mut output, Some(&mut lse), shape, &options)?;
    /// attention.synchronize()?;
    /// let output: Vec<f16> = output.as_host_vec()?;
    /// # Ok::<(), flash_attn::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn forward<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = problem::plan_on(
            T::DTYPE,
            &shape,
            options,
            self.sm_count(),
            self.compute_capability(),
        )?;
        let tensors = device_tensors(&plan, q, k, v, output, lse)?;
        // SAFETY: the buffers hold every element the shape and strides reach (checked above, with
        // overflow-checked extents) and live at least as long as this call's borrows; `output` (and `lse`) are borrowed
        // mutably, so they cannot alias the inputs, and `plan` rejected overlapping output
        // strides. Work enqueued here may outlive the borrows: cust frees device memory with
        // cuMemFree, which waits for outstanding work on the device.
        unsafe { self.launch(self.stream.as_inner(), plan, tensors, None) }
    }

    /// Attention against a KV cache (decode, or a chunk of queries appended to a cache),
    /// enqueued on [`Self::stream`]: `q` and `output` as `shape` and `options` say, `k_cache`
    /// and `v_cache` of `shape.seq_len_kv` keys per sequence (the capacity), of which sequence
    /// `b` uses the first `cache_lens[b]` (a device buffer of at least `batch` u32; a length
    /// above the capacity is read as the capacity). See [`plan_kv_cache`] for the kernels,
    /// grouped-query packing and split-KV, and [`plan_kv_cache_on`], what it plans with: on
    /// Hopper, a chunk of queries runs the sm90 family's serving kernel where it takes the call.
    ///
    /// With split-KV it uses this instance's workspace, allocated (and zeroed) on the first
    /// call that needs more than it has, which synchronises; calls after that allocate nothing
    /// and do not synchronise.
    ///
    /// ```no_run
    /// use cust::memory::DeviceBuffer;
    /// use flash_attn::{AttentionShape, FlashAttention, ForwardOptions, Layout};
    /// use half::bf16;
    ///
    /// let attention = FlashAttention::new()?;
    /// // A decode step: 4 sequences of one query each, caches of 4,096 keys, 32 query heads
    /// // over 8 K/V heads, `[batch, seq_len, heads, head_dim]`.
    /// let shape = AttentionShape {
    ///     batch: 4,
    ///     heads_q: 32,
    ///     heads_kv: 8,
    ///     seq_len_q: 1,
    ///     seq_len_kv: 4096,
    ///     head_dim: 128,
    /// };
    /// let options = ForwardOptions {
    ///     causal: true,
    ///     layout: Layout::Bshd,
    ///     ..ForwardOptions::default()
    /// };
    /// let q = DeviceBuffer::<bf16>::zeroed(shape.q_elements()?)?;
    /// let k_cache = DeviceBuffer::<bf16>::zeroed(shape.kv_elements()?)?;
    /// let v_cache = DeviceBuffer::<bf16>::zeroed(shape.kv_elements()?)?;
    /// let cache_lens = DeviceBuffer::from_slice(&[4096u32, 17, 1000, 2048])?;
    /// let mut output = DeviceBuffer::<bf16>::zeroed(shape.q_elements()?)?;
    /// attention.forward_kv_cache(
    ///     &q, &k_cache, &v_cache, &cache_lens, &mut output, None, shape, &options,
    /// )?;
    /// attention.synchronize()?;
    /// # Ok::<(), flash_attn::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn forward_kv_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_cache: &DeviceSlice<T>,
        v_cache: &DeviceSlice<T>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::contiguous(cache_lens);
        self.forward_on_cache(
            q, k_cache, v_cache, cache, output, lse, None, shape, options,
        )
    }

    /// [`Self::forward_kv_cache`] against a paged cache ([`plan_paged_kv_cache`], on Hopper
    /// [`plan_paged_kv_cache_on`]): `k_pages` and `v_pages` `[num_pages, page_size, heads_kv,
    /// head_dim]`, `block_table` at least `batch * pages_per_sequence` u32 (sequence `b`'s pages
    /// from `b * pages_per_sequence`), `cache_lens` at least `batch` u32, all on the device. A sequence whose used pages include
    /// an index at or past `num_pages` reads no key and gets NaN output rows and logsumexps.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_paged_kv_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_pages: &DeviceSlice<T>,
        v_pages: &DeviceSlice<T>,
        block_table: &DeviceSlice<u32>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::paged(cache_lens, block_table, paged);
        self.forward_on_cache(
            q, k_pages, v_pages, cache, output, lse, None, shape, options,
        )
    }

    /// [`Self::forward_kv_cache`] with ALiBi biases, in each sequence's own coordinates: query
    /// head `h` of sequence `b` adds `-slope * |i + used - seq_len_q - j|` to the scaled (and
    /// capped, with [`ForwardOptions::softcap`]) score of its query `i` and key `j`, `used`
    /// being its used keys (`cache_lens[b]`, clamped to the capacity) and `slope` from `alibi`
    /// (see [`AlibiSlopes`]); the options' window and softcap apply as in `forward_kv_cache`.
    /// See [`plan_kv_cache_alibi`] for the kernel and the checks (a decode step's query heads
    /// are packed as without ALiBi); the slopes are checked on the host ([`LaunchPlan::check_alibi_slopes`])
    /// and uploaded as [`Self::forward_alibi`] uploads them, the split-KV workspace used as in
    /// `forward_kv_cache`. [`Self::forward_kv_cache_alibi_raw`] takes slopes already on the
    /// device.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_kv_cache_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_cache: &DeviceSlice<T>,
        v_cache: &DeviceSlice<T>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::contiguous(cache_lens);
        let alibi = Some(alibi);
        self.forward_on_cache(
            q, k_cache, v_cache, cache, output, lse, alibi, shape, options,
        )
    }

    /// [`Self::forward_paged_kv_cache`] with ALiBi biases, as [`Self::forward_kv_cache_alibi`]
    /// adds them ([`plan_paged_kv_cache_alibi`]).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_paged_kv_cache_alibi<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k_pages: &DeviceSlice<T>,
        v_pages: &DeviceSlice<T>,
        block_table: &DeviceSlice<u32>,
        cache_lens: &DeviceSlice<u32>,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: AlibiSlopes,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let cache = CacheBuffers::paged(cache_lens, block_table, paged);
        let alibi = Some(alibi);
        self.forward_on_cache(
            q, k_pages, v_pages, cache, output, lse, alibi, shape, options,
        )
    }

    /// The KV-cache calls ([`Self::forward_kv_cache`], [`Self::forward_paged_kv_cache`] and
    /// their ALiBi forms): plans, checks, uploads the slopes and launches with this instance's
    /// workspace.
    #[allow(clippy::too_many_arguments)]
    fn forward_on_cache<T: Element>(
        &self,
        q: &DeviceSlice<T>,
        k: &DeviceSlice<T>,
        v: &DeviceSlice<T>,
        cache: CacheBuffers,
        output: &mut DeviceSlice<T>,
        lse: Option<&mut DeviceSlice<f32>>,
        alibi: Option<AlibiSlopes>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = problem::plan_cache(
            T::DTYPE,
            &shape,
            None,
            cache.paged,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        plan.check_host_alibi(alibi)?;
        let buffers = cache.check(&plan, shape.batch)?;
        let tensors = device_tensors(&plan, q, k, v, output, lse)?;
        self.with_alibi_uploaded(plan, alibi, |plan| {
            // SAFETY: as in `forward`; `cache_lens` holds `batch` u32 (checked) and the kernel
            // clamps each to the capacity that the buffers were checked for; a paged call's
            // block table holds every sequence's entries (checked), and the kernel reads no
            // page at or past `num_pages`, whose K and V rows the buffers were checked to
            // hold; `with_alibi_uploaded` keeps the slopes (checked on the host) alive and
            // unchanged until the kernel is done with them.
            unsafe { self.launch_with_own_workspace(plan, tensors, buffers) }
        })
    }

    /// Copies `data` into `buffer`, a device buffer of this instance, on its stream
    /// (`cuMemcpyHtoDAsync`, ordered before the kernel that `launch` enqueues and after every
    /// earlier kernel that read the buffer), then calls `launch` with the copy's device address,
    /// holding the buffer's lock throughout: one upload-and-launch at a time. The buffer is
    /// allocated on the first call that needs more room than it has, which synchronises (the
    /// stream, before the old buffer is freed); calls after that allocate nothing and do not
    /// wait for the GPU. The varlen offsets and the ALiBi slopes travel this way.
    fn with_uploaded<E: DeviceCopy + bytemuck::Zeroable>(
        &self,
        buffer: &Mutex<Option<DeviceBuffer<E>>>,
        data: &[E],
        launch: impl FnOnce(u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut buffer = buffer.lock().unwrap_or_else(|poison| poison.into_inner());
        CurrentContext::set_current(&self.kernels.context)?;
        // A buffer that is too small goes first, once the kernels that read it (all on this
        // instance's stream) have finished.
        if buffer.as_ref().map_or(0, |b| b.len()) < data.len() {
            if buffer.is_some() {
                self.stream.synchronize()?;
            }
            *buffer = None;
            *buffer = Some(DeviceBuffer::zeroed(data.len())?);
        }
        let Some(device) = buffer.as_mut() else {
            unreachable!("the buffer was made above");
        };
        let mut device = device.index(..data.len());
        // SAFETY: the lengths match. The copy is enqueued on this instance's stream, so it runs
        // after every kernel enqueued before it (the only readers of this buffer, which the
        // lock keeps to one upload-and-launch at a time) and before the kernel `launch`
        // enqueues. From pageable memory, cuMemcpyHtoDAsync stages the source before it
        // returns (CUDA's API synchronisation behaviour), so `data` may go when this call
        // returns. The device copy lives in this instance until a larger one replaces it,
        // after a synchronisation of the stream, or until the instance goes (cuMemFree waits
        // for outstanding work).
        unsafe { device.async_copy_from(data, &self.stream)? };
        launch(device.as_device_ptr().as_raw())
    }

    /// Launches a serving plan with this instance's split-KV workspace, grown (and zeroed) when
    /// the plan needs more than it has, which synchronises.
    ///
    /// # Safety
    /// As for [`Self::launch`], `buffers` but the workspace satisfying the plan's contract.
    unsafe fn launch_with_own_workspace(
        &self,
        plan: problem::LaunchPlan,
        tensors: RawTensors,
        buffers: SequenceBuffers,
    ) -> Result<(), Error> {
        let mut workspace = self
            .workspace
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        CurrentContext::set_current(&self.kernels.context)?;
        // A buffer that is too small goes first (cuMemFree waits for the kernels that use it).
        if workspace.partials.as_ref().map_or(0, |b| b.len()) < plan.workspace_bytes() {
            workspace.partials = None;
            workspace.partials = Some(DeviceBuffer::zeroed(plan.workspace_bytes())?);
        }
        if workspace.counters.as_ref().map_or(0, |b| b.len()) < plan.counters() {
            workspace.counters = None;
            workspace.counters = Some(DeviceBuffer::zeroed(plan.counters())?);
        }
        let workspace = match (&workspace.partials, &workspace.counters) {
            (Some(partials), Some(counters)) => Some(RawWorkspace {
                partials: partials.as_device_ptr().as_raw(),
                partial_bytes: partials.len(),
                counters: counters.as_device_ptr().as_raw(),
                counter_count: counters.len(),
            }),
            _ => None,
        };
        // SAFETY: the caller's contract; the workspace is large enough, zeroed when made, and
        // used only by kernels on this instance's stream, one after the other (the lock guards
        // its growth).
        self.launch(
            self.stream.as_inner(),
            plan,
            tensors,
            Some(SequenceBuffers {
                workspace,
                ..buffers
            }),
        )
    }

    /// As [`Self::forward_kv_cache`] with raw device addresses, a caller's stream and a
    /// caller's workspace (`None` is fine where [`plan_kv_cache_on`]`(..)` for this instance's
    /// [`Self::compute_capability`], what the call plans, has `workspace_bytes()` 0; it never
    /// needs more than [`plan_kv_cache`]'s): it neither allocates nor synchronises, so it can be
    /// captured in a CUDA graph.
    ///
    /// # Safety
    /// As for [`Self::forward_raw`], with K and V caches of `shape.seq_len_kv` keys, and:
    /// `cache_lens` is the device address of `shape.batch` u32, alive and unchanged until the
    /// kernel finishes; `workspace` is as [`RawWorkspace`] says and no other work uses it until
    /// the kernel finishes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_kv_cache_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        cache_lens: u64,
        workspace: Option<RawWorkspace>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = cache_buffers_raw(0, cache_lens, workspace);
        let stream = stream.into();
        self.forward_on_cache_raw(stream, dtype, tensors, buffers, None, shape, None, options)
    }

    /// As [`Self::forward_paged_kv_cache`] with raw device addresses, a caller's stream and a
    /// caller's workspace, as [`Self::forward_kv_cache_raw`].
    ///
    /// # Safety
    /// As for [`Self::forward_kv_cache_raw`], with K and V each `paged.num_pages *
    /// paged.page_size * heads_kv * head_dim` elements, and `block_table` the device address of
    /// `batch * paged.pages_per_sequence` u32, alive and unchanged until the kernel finishes
    /// (an index at or past `num_pages` is safe: see [`plan_paged_kv_cache`]).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_paged_kv_cache_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        block_table: u64,
        cache_lens: u64,
        workspace: Option<RawWorkspace>,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = cache_buffers_raw(block_table, cache_lens, workspace);
        let (stream, paged) = (stream.into(), Some(paged));
        self.forward_on_cache_raw(stream, dtype, tensors, buffers, None, shape, paged, options)
    }

    /// [`Self::forward_kv_cache_alibi`] as [`Self::forward_kv_cache_raw`] takes its arguments,
    /// the slopes already on the device ([`RawAlibiSlopes`], 4-byte aligned and not 0): it
    /// neither allocates nor synchronises, so it can be captured in a CUDA graph. It validates
    /// the problem ([`plan_kv_cache_alibi`]); it cannot read the slopes.
    ///
    /// # Safety
    /// As for [`Self::forward_kv_cache_raw`], and for the slopes as for
    /// [`Self::forward_alibi_raw`]: `alibi.address` holds [`AlibiLayout::slopes`] f32 in
    /// `alibi.layout`, alive and unchanged until the kernel finishes (a slope that
    /// [`LaunchPlan::check_alibi_slopes`] would reject gives NaN or infinite outputs, never an
    /// access outside a buffer).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_kv_cache_alibi_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        cache_lens: u64,
        workspace: Option<RawWorkspace>,
        alibi: RawAlibiSlopes,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = cache_buffers_raw(0, cache_lens, workspace);
        let (stream, alibi) = (stream.into(), Some(alibi));
        self.forward_on_cache_raw(stream, dtype, tensors, buffers, alibi, shape, None, options)
    }

    /// [`Self::forward_paged_kv_cache_alibi`] as [`Self::forward_paged_kv_cache_raw`] takes its
    /// arguments, the slopes already on the device ([`Self::forward_kv_cache_alibi_raw`]).
    ///
    /// # Safety
    /// As for [`Self::forward_paged_kv_cache_raw`], and for the slopes as for
    /// [`Self::forward_kv_cache_alibi_raw`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_paged_kv_cache_alibi_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        block_table: u64,
        cache_lens: u64,
        workspace: Option<RawWorkspace>,
        alibi: RawAlibiSlopes,
        shape: AttentionShape,
        paged: &PagedKvCache,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let buffers = cache_buffers_raw(block_table, cache_lens, workspace);
        let (stream, alibi, paged) = (stream.into(), Some(alibi), Some(paged));
        self.forward_on_cache_raw(
            stream, dtype, tensors, buffers, alibi, shape, paged, options,
        )
    }

    /// The raw KV-cache calls ([`Self::forward_kv_cache_raw`],
    /// [`Self::forward_paged_kv_cache_raw`] and their ALiBi forms).
    ///
    /// # Safety
    /// As for the raw call that calls it.
    #[allow(clippy::too_many_arguments)]
    unsafe fn forward_on_cache_raw(
        &self,
        stream: RawStream,
        dtype: Dtype,
        tensors: RawTensors,
        buffers: SequenceBuffers,
        alibi: Option<RawAlibiSlopes>,
        shape: AttentionShape,
        paged: Option<&PagedKvCache>,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let layout = alibi.map(|alibi| alibi.layout);
        let plan = problem::plan_cache(
            dtype,
            &shape,
            None,
            paged,
            layout,
            options,
            self.sm_count(),
            Some(self.compute_capability()),
        )?;
        // 0 would read as "no lengths: every sequence uses the whole cache".
        if buffers.seq_used_kv == 0 {
            return Err(Error::MisalignedBuffer {
                tensor: "cache_lens",
                address: 0,
            });
        }
        let plan = plan.with_alibi_address(alibi.map_or(0, |alibi| alibi.address));
        self.launch(stream.0.cast(), plan, tensors, Some(buffers))
    }

    /// As [`Self::forward`] with raw device addresses and a caller's stream, a plain driver
    /// handle ([`RawStream`]: a `*mut c_void`, or cust's `CUstream`), for callers on other CUDA
    /// bindings (cudarc, candle, burn). Validates the problem and the alignment of the
    /// addresses; it cannot check sizes.
    ///
    /// # Safety
    /// - `stream` is a live stream of this device's primary context (the context
    ///   [`FlashAttention`] uses; cudarc's and the runtime API's default context).
    /// - Each address is a device allocation holding every element that `shape` and the
    ///   options' strides reach (`[batch, heads_q, seq_len_q]` f32 for `lse`), of element type
    ///   `dtype`, alive until the kernel finishes. [`plan`]`(..).required()` gives those
    ///   lengths, computed as `forward` checks them.
    /// - `o` and `lse` are writable and overlap neither each other nor the inputs.
    ///
    /// ```no_run
    /// use cust::memory::DeviceBuffer;
    /// use flash_attn::{AttentionShape, Dtype, FlashAttention, ForwardOptions, RawTensors};
    /// use half::f16;
    ///
    /// let attention = FlashAttention::new()?;
    /// let shape = AttentionShape::new(1, 8, 256, 64);
    /// let options = ForwardOptions::default();
    /// // The lengths the call needs, computed as `forward` checks them.
    /// let plan = flash_attn::plan(Dtype::F16, &shape, &options, attention.sm_count())?;
    /// let required = plan.required();
    /// let q = DeviceBuffer::<f16>::zeroed(required.q)?;
    /// let k = DeviceBuffer::<f16>::zeroed(required.k)?;
    /// let v = DeviceBuffer::<f16>::zeroed(required.v)?;
    /// let o = DeviceBuffer::<f16>::zeroed(required.o)?;
    /// let tensors = RawTensors {
    ///     q: q.as_device_ptr().as_raw(),
    ///     k: k.as_device_ptr().as_raw(),
    ///     v: v.as_device_ptr().as_raw(),
    ///     o: o.as_device_ptr().as_raw(),
    ///     lse: None,
    /// };
    /// // Any stream of the device's primary context; here the instance's own.
    /// let stream = attention.stream().as_inner();
    /// // SAFETY: the buffers hold what the plan requires, live until the synchronisation below,
    /// // and the output overlaps no input.
    /// unsafe { attention.forward_raw(stream, Dtype::F16, tensors, shape, &options)? };
    /// attention.synchronize()?;
    /// # Ok::<(), flash_attn::Error>(())
    /// ```
    pub unsafe fn forward_raw(
        &self,
        stream: impl Into<RawStream>,
        dtype: Dtype,
        tensors: RawTensors,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let plan = problem::plan_on(
            dtype,
            &shape,
            options,
            self.sm_count(),
            self.compute_capability(),
        )?;
        self.launch(stream.into().0.cast(), plan, tensors, None)
    }

    /// Checks alignment (and the workspace's size), binds the context and launches;
    /// `sequence_buffers` for a serving plan, `None` for one of [`plan`].
    ///
    /// # Safety
    /// As for [`Self::forward_raw`], or the serving call's raw form with `sequence_buffers`.
    unsafe fn launch(
        &self,
        stream: cust::sys::CUstream,
        mut plan: problem::LaunchPlan,
        tensors: RawTensors,
        sequence_buffers: Option<SequenceBuffers>,
    ) -> Result<(), Error> {
        let lse = tensors.lse.unwrap_or(0);
        for (tensor, address) in [
            ("q", tensors.q),
            ("k", tensors.k),
            ("v", tensors.v),
            ("o", tensors.o),
        ] {
            if address == 0 || address % 16 != 0 {
                return Err(Error::MisalignedBuffer { tensor, address });
            }
        }
        if tensors.lse.is_some() && (lse == 0 || !lse.is_multiple_of(4)) {
            return Err(Error::MisalignedBuffer {
                tensor: "lse",
                address: lse,
            });
        }
        (
            plan.params.q,
            plan.params.k,
            plan.params.v,
            plan.params.o,
            plan.params.lse,
        ) = (tensors.q, tensors.k, tensors.v, tensors.o, lse);
        // An ALiBi plan reads its slopes, any other plan none: the address comes exactly with
        // an ALiBi plan.
        if let Some(modifiers) = plan.modifiers {
            let address = modifiers.alibi_slopes;
            if (address != 0) != (plan.alibi_slopes > 0) || !address.is_multiple_of(4) {
                return Err(Error::MisalignedBuffer {
                    tensor: "alibi_slopes",
                    address,
                });
            }
        }
        let serving = match (plan.sequences, sequence_buffers) {
            (None, None) => None,
            (Some(mut sequences), Some(buffers)) => {
                for (tensor, address) in [
                    ("cu_seqlens_q", buffers.cu_seqlens_q),
                    ("cu_seqlens_kv", buffers.cu_seqlens_kv),
                    ("cache_lens", buffers.seq_used_kv),
                ] {
                    if !address.is_multiple_of(4) {
                        return Err(Error::MisalignedBuffer { tensor, address });
                    }
                }
                // A paged plan reads its pages through the table, any other plan through
                // the K and V strides: the table comes exactly with a paged plan.
                if (buffers.block_table != 0) != (plan.block_table_len() > 0)
                    || !buffers.block_table.is_multiple_of(4)
                {
                    return Err(Error::MisalignedBuffer {
                        tensor: "block_table",
                        address: buffers.block_table,
                    });
                }
                sequences.block_table = buffers.block_table;
                sequences.cu_seqlens_q = buffers.cu_seqlens_q;
                sequences.cu_seqlens_kv = buffers.cu_seqlens_kv;
                sequences.seq_used_kv = buffers.seq_used_kv;
                let workspace = buffers.workspace;
                if plan.workspace_bytes() > 0 {
                    let workspace = workspace.unwrap_or(RawWorkspace {
                        partials: 0,
                        partial_bytes: 0,
                        counters: 0,
                        counter_count: 0,
                    });
                    if workspace.partial_bytes < plan.workspace_bytes() {
                        return Err(Error::WorkspaceTooSmall {
                            required: plan.workspace_bytes(),
                            actual: workspace.partial_bytes,
                        });
                    }
                    if workspace.counter_count < plan.counters() {
                        return Err(Error::WorkspaceTooSmall {
                            required: plan.counters() * 4,
                            actual: workspace.counter_count * 4,
                        });
                    }
                    for (tensor, address) in [
                        ("workspace", workspace.partials),
                        ("counters", workspace.counters),
                    ] {
                        if address == 0 || !address.is_multiple_of(16) {
                            return Err(Error::MisalignedBuffer { tensor, address });
                        }
                    }
                    sequences.workspace = workspace.partials;
                    sequences.counters = workspace.counters;
                }
                Some(ServingParams {
                    forward: plan.params,
                    sequences,
                })
            }
            _ => {
                unreachable!("a serving plan comes with its sequence buffers, a dense one without")
            }
        };
        CurrentContext::set_current(&self.kernels.context)?;
        let function = self.kernels.function(plan.kernel)?;
        let spec = &plan.kernel.spec;
        match (serving, plan.modifiers) {
            (Some(params), None) => launch::launch_with_tensor_maps(
                stream,
                function,
                spec,
                plan.grid,
                params,
                &params.forward,
            ),
            (Some(ServingParams { forward, sequences }), Some(modifiers)) => {
                let params = ModifiedServingParams {
                    forward,
                    sequences,
                    modifiers,
                };
                launch::launch_forward(stream, function, spec, plan.grid, params)
            }
            (None, Some(modifiers)) => {
                let params = ModifiedParams {
                    forward: plan.params,
                    modifiers,
                };
                launch::launch_with_tensor_maps(
                    stream,
                    function,
                    spec,
                    plan.grid,
                    params,
                    &plan.params,
                )
            }
            (None, None) => launch::launch_with_tensor_maps(
                stream,
                function,
                spec,
                plan.grid,
                plan.params,
                &plan.params,
            ),
        }
    }

    /// Copies host tensors to the GPU, runs [`Self::forward`] and copies the output back, laid
    /// out as the options say (elements that output strides skip are 0). `q`, `k` and `v` are
    /// checked against the shape and strides like device buffers.
    ///
    /// Every step is enqueued on [`Self::stream`], in order: the uploads
    /// (`cuMemcpyHtoDAsync`), the zeroing of the output, the kernel and the download; then the
    /// call waits for that stream, on success and on error alike. The order is explicit: it
    /// does not rest on the legacy default stream's implicit synchronisation (a synchronous
    /// `cuMemcpyHtoD` from pageable memory may return before its data lands).
    ///
    /// The elements may be half 1.8's or, with the `half2` feature, half 2's ([`HalfElement`]):
    /// half 2's slices are viewed as the half 1.8 type of the same bits, and the output comes
    /// back as a `Vec<T>` of the allocation written, so nothing is copied or converted.
    pub fn forward_host<T: HalfElement>(
        &self,
        q: &[T],
        k: &[T],
        v: &[T],
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<Vec<T>, Error> {
        let (q, k, v) = (as_half1(q), as_half1(k), as_half1(v));
        self.forward_host_half1(q, k, v, shape, options)
            .map(from_half1)
    }

    /// [`Self::forward_host`] on cust's element type.
    fn forward_host_half1<T: Element>(
        &self,
        q: &[T],
        k: &[T],
        v: &[T],
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<Vec<T>, Error> {
        self.forward_host_with(q, k, v, None, shape, options)
    }

    /// [`Self::forward_host`], with ALiBi slopes ([`Self::forward_host_alibi`]) or without.
    fn forward_host_with<T: Element>(
        &self,
        q: &[T],
        k: &[T],
        v: &[T],
        alibi: Option<AlibiSlopes>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<Vec<T>, Error> {
        let plan = match alibi {
            None => problem::plan_on(
                T::DTYPE,
                &shape,
                options,
                self.sm_count(),
                self.compute_capability(),
            )?,
            Some(alibi) => {
                let plan = self.plan_alibi_here(T::DTYPE, &shape, options, alibi.layout)?;
                plan.check_alibi_slopes(alibi.slopes)?;
                plan
            }
        };
        let required = plan.required();
        plan.check_buffers(&BufferLengths {
            q: q.len(),
            k: k.len(),
            v: v.len(),
            o: required.o,
            lse: None,
        })?;
        let mut host = Vec::new();
        host.try_reserve_exact(required.o)
            .map_err(|_| Error::HostAllocation {
                tensor: "o",
                elements: required.o,
            })?;
        host.resize(required.o, T::from_f64(0.0));
        let (q, k, v) = (&q[..required.q], &k[..required.k], &v[..required.v]);
        CurrentContext::set_current(&self.kernels.context)?;
        // SAFETY: plain device allocations of `DeviceCopy` elements; each is fully written on
        // the stream (the uploads, the zeroing) before the kernel, which is ordered after them,
        // reads it.
        let (mut q_device, mut k_device, mut v_device, mut output) = unsafe {
            (
                DeviceBuffer::<T>::uninitialized(q.len())?,
                DeviceBuffer::<T>::uninitialized(k.len())?,
                DeviceBuffer::<T>::uninitialized(v.len())?,
                DeviceBuffer::<T>::uninitialized(required.o)?,
            )
        };
        let stream = &self.stream;
        let mut enqueue = || -> Result<(), Error> {
            // SAFETY: the host slices and `host` outlive the copies: the stream is synchronised
            // below before any of them can go, whatever this closure returns. Lengths match.
            unsafe {
                q_device.async_copy_from(q, stream)?;
                k_device.async_copy_from(k, stream)?;
                v_device.async_copy_from(v, stream)?;
                let mut output_bytes = DeviceSlice::<u8>::from_raw_parts_mut(
                    output.as_device_ptr().cast(),
                    std::mem::size_of_val(&host[..]),
                );
                output_bytes.set_8_async(0, stream)?;
            }
            match alibi {
                None => self.forward(
                    &q_device,
                    &k_device,
                    &v_device,
                    &mut output,
                    None,
                    shape,
                    options,
                )?,
                Some(alibi) => self.forward_alibi(
                    &q_device,
                    &k_device,
                    &v_device,
                    &mut output,
                    None,
                    alibi,
                    shape,
                    options,
                )?,
            }
            // SAFETY: as above.
            unsafe { output.async_copy_to(&mut host[..], stream)? };
            Ok(())
        };
        let enqueued = enqueue();
        let finished = self.synchronize();
        enqueued?;
        finished?;
        Ok(host)
    }
}

/// The device addresses of a call's buffers, once they are known to hold what `plan` needs
/// ([`LaunchPlan::check_buffers`]).
fn device_tensors<T: Element>(
    plan: &LaunchPlan,
    q: &DeviceSlice<T>,
    k: &DeviceSlice<T>,
    v: &DeviceSlice<T>,
    output: &mut DeviceSlice<T>,
    lse: Option<&mut DeviceSlice<f32>>,
) -> Result<RawTensors, Error> {
    plan.check_buffers(&BufferLengths {
        q: q.len(),
        k: k.len(),
        v: v.len(),
        o: output.len(),
        lse: lse.as_ref().map(|lse| lse.len()),
    })?;
    Ok(RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: lse.map(|lse| lse.as_device_ptr().as_raw()),
    })
}
