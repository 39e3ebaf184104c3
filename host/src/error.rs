//! One error type, one variant per failure a caller can cause or meet.

use std::fmt;

use cust::error::CudaError;
use flash_attn_params::{Dtype, TensorStrides, Variant, MAX_PAGE_SIZE, MIN_PAGE_SIZE};

/// Every failure of the crate's calls: the problem's validation (found before anything is
/// launched, and without a GPU by [`crate::plan`] and the other planning functions), the
/// device's and the driver's limits when kernels are loaded, and the errors of CUDA calls.
/// `Display` says what is wrong in a sentence.
///
/// ```
/// use flash_attn::{plan, AttentionShape, Dtype, Error, ForwardOptions};
///
/// let shape = AttentionShape { heads_kv: 3, ..AttentionShape::new(1, 8, 512, 64) };
/// let error = plan(Dtype::F16, &shape, &ForwardOptions::default(), 132).unwrap_err();
/// assert_eq!(error, Error::InvalidGqaRatio { heads_q: 8, heads_kv: 3 });
/// assert_eq!(
///     error.to_string(),
///     "heads_q = 8 is not a multiple of heads_kv = 3 (GQA needs whole groups)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The CUDA driver is present but sees no device (or no driver library could be used).
    NoGpu(CudaError),
    /// The driver cannot JIT-compile the embedded PTX ISA version.
    DriverTooOld {
        /// The CUDA version the driver supports, as `cuDriverGetVersion` gives it
        /// (`1000 * major + 10 * minor`: 12080 for 12.8).
        driver_version: i32,
        /// The oldest CUDA version whose driver JIT-compiles the PTX, in the same encoding.
        required_version: i32,
    },
    /// The device is older than every PTX target the build compiled (`sm_80`).
    UnsupportedDevice {
        /// The device's name, as the driver gives it.
        name: String,
        /// The device's compute capability, `(major, minor)`.
        compute_capability: (i32, i32),
    },
    /// [`crate::LoadOptions::ptx_target`] names an architecture the build compiled no PTX for,
    /// or one newer than the device.
    UnsupportedPtxTarget {
        /// The architecture asked for (`"sm_89"`).
        target: &'static str,
        /// The device's compute capability, `(major, minor)`.
        compute_capability: (i32, i32),
    },
    /// The kernel's family has no PTX this device runs: the sm90 family's sm_90a kernels run
    /// only on devices of compute capability exactly 9.0 (architecture-specific PTX is not
    /// forward compatible), see [`crate::ptx_target_for`].
    KernelNotForDevice {
        /// The kernel's PTX entry name.
        kernel: &'static str,
        /// The kernel's family, whose PTX targets the architecture table gives.
        family: flash_attn_params::Family,
        /// The device's compute capability, `(major, minor)`.
        compute_capability: (i32, i32),
    },
    /// The kernel needs more shared memory per block than the device lets a block opt into
    /// (sm_86 and sm_87 give 99 KiB, against 163 KiB on the A100).
    SharedMemoryUnavailable {
        /// The kernel's PTX entry name.
        kernel: &'static str,
        /// Bytes of dynamic shared memory the kernel's tile needs per block
        /// ([`crate::TileConfig::smem_bytes`]).
        needed: usize,
        /// The most bytes a block may opt into on the device.
        available: usize,
    },
    /// Loading the PTX module failed.
    ModuleLoad(CudaError),
    /// The head dim is not a multiple of 8 from 8 to 256 (0 is
    /// [`Error::ZeroSizedDimension`]).
    InvalidHeadDim {
        /// The problem's head dim.
        head_dim: usize,
    },
    /// No kernel of `variant` runs the problem's head dim: the variant has none of exactly it,
    /// nor one above it that pads ([`crate::KernelSpec::pads_head_dim`]). `largest`
    /// is the variant's largest kernel head dim (0: the build exposes none of the variant for
    /// the element type).
    UnsupportedHeadDim {
        /// The problem's head dim.
        head_dim: usize,
        /// The variant of the call's kernels.
        variant: Variant,
        /// The variant's largest kernel head dim for the element type.
        largest: usize,
    },
    /// A dimension of the problem is zero.
    ZeroSizedDimension {
        /// The dimension's name, as the shape's field (`"batch"`, `"seq_len_kv"`, ...).
        dimension: &'static str,
    },
    /// `heads_q` is not a multiple of `heads_kv`.
    InvalidGqaRatio {
        /// The problem's query heads.
        heads_q: usize,
        /// The problem's K/V heads.
        heads_kv: usize,
    },
    /// The kernel named in the options is compiled for another element type.
    KernelDtypeMismatch {
        /// The kernel's PTX entry name.
        kernel: &'static str,
        /// The element type of the call's tensors.
        dtype: Dtype,
    },
    /// A dimension exceeds what one launch (grid, or the kernel's 32-bit index math) holds.
    ProblemTooLarge {
        /// The dimension's name (`"seq_len_q"`, `"batch"`, `"tokens_q"`, `"num_pages"`, ...,
        /// or a Q, K or V stride, `"q seq stride"`, `"k seq stride"`, ...).
        dimension: &'static str,
        /// Its value in the problem.
        value: usize,
        /// The largest value it may take: [`crate::MAX_SEQ_LEN`] for a sequence length, 65,535
        /// for the batch and the query heads (the grid's z and y), `u32::MAX` for token and
        /// page counts, and `u32::MAX` over the query blocks per sequence for a KV-cache batch
        /// whose grid or workspace rows would pass u32; for a Q, K or V stride of a dimension of
        /// more than one element, read by a kernel that copies them by TMA
        /// ([`flash_attn_params::KernelSpec::copies_by_tma`]), 2^39 - 1 elements (the tensor
        /// maps' strides are below 2^40 bytes).
        limit: usize,
    },
    /// A size, extent or offset of `tensor` does not fit: its element count passes `usize`, or
    /// an offset the kernel would form passes [`crate::MAX_TENSOR_BYTES`]. `dimension` names
    /// the dimension whose term is the largest (or at which the count overflowed).
    TensorTooLarge {
        /// The tensor: `"q"`, `"k"`, `"v"`, `"o"`, `"lse"` or `"workspace"`.
        tensor: &'static str,
        /// The dimension with the largest term (`"batch"`, `"head"`, `"seq"`), or the shape's
        /// dimension at which the element count overflowed.
        dimension: &'static str,
    },
    /// The kernel named in the options cannot run the problem's head dim: it is compiled for
    /// another one (or, for a kernel that pads, a smaller one).
    KernelHeadDimMismatch {
        /// The kernel's PTX entry name.
        kernel: &'static str,
        /// The head dim the kernel is compiled for.
        kernel_head_dim: usize,
        /// The problem's head dim.
        head_dim: usize,
    },
    /// The host could not allocate a buffer of this many elements (`forward_host`'s output).
    HostAllocation {
        /// The buffer's tensor (`"o"`).
        tensor: &'static str,
        /// Its length, in elements.
        elements: usize,
    },
    /// A buffer is shorter than the shape and strides need.
    BufferTooSmall {
        /// The buffer's tensor: `"q"`, `"k"`, `"v"`, `"o"` or `"lse"`.
        tensor: &'static str,
        /// The fewest elements it must hold ([`crate::LaunchPlan::required`]).
        required: u64,
        /// The elements it holds.
        actual: usize,
    },
    /// A device address is null or not aligned: 16 bytes for Q, K, V, O and the workspace, 4
    /// for the logsumexp, the u32 buffers (cache lengths, block table, sequence offsets) and
    /// the ALiBi slopes.
    MisalignedBuffer {
        /// The buffer: `"q"`, `"k"`, `"v"`, `"o"`, `"lse"`, `"workspace"`, `"counters"`,
        /// `"cache_lens"`, `"block_table"`, `"cu_seqlens_q"`, `"cu_seqlens_kv"` or
        /// `"alibi_slopes"`.
        tensor: &'static str,
        /// Its device address.
        address: u64,
    },
    /// A stride is not a multiple of 8 elements, so rows would not be 16-byte aligned.
    MisalignedStride {
        /// The tensor: `"q"`, `"k"`, `"v"` or `"o"`.
        tensor: &'static str,
        /// The stride: `"batch"`, `"head"` or `"seq"`.
        stride: &'static str,
        /// Its value, in elements.
        value: u64,
    },
    /// Distinct output rows would share memory, and the kernel would race on them.
    OverlappingOutput {
        /// The output's strides, as resolved from the options.
        strides: TensorStrides,
    },
    /// A variable-length batch has a different number of query and key offsets (`batch + 1`
    /// of each).
    SeqOffsetsBatchMismatch {
        /// The length of `cu_seqlens_q`.
        q_offsets: usize,
        /// The length of `cu_seqlens_kv`.
        kv_offsets: usize,
    },
    /// The offsets of a variable-length batch (`cu_seqlens_q` or `cu_seqlens_kv`) do not start
    /// at 0.
    SeqOffsetsStart {
        /// Which offsets: `"cu_seqlens_q"` or `"cu_seqlens_kv"`.
        offsets: &'static str,
        /// Their first value.
        first: u32,
    },
    /// The offsets of a variable-length batch decrease: sequence `sequence` would end (`end`)
    /// before it starts (`start`).
    SeqOffsetsDecrease {
        /// Which offsets: `"cu_seqlens_q"` or `"cu_seqlens_kv"`.
        offsets: &'static str,
        /// The sequence's index in the batch.
        sequence: usize,
        /// Its first token, `offsets[sequence]`.
        start: u32,
        /// One past its last token, `offsets[sequence + 1]`.
        end: u32,
    },
    /// The extents of a variable-length batch given to
    /// [`crate::FlashAttention::forward_varlen_raw`] are inconsistent: its longest sequence
    /// (`longest`, `max_seq_len_q` or `max_seq_len_kv`) has more tokens than the whole batch.
    VarlenExtentsMismatch {
        /// The extent: `"max_seq_len_q"` or `"max_seq_len_kv"`.
        longest: &'static str,
        /// Its value.
        value: usize,
        /// The batch's tokens on the same side (`tokens_q` or `tokens_kv`).
        tokens: usize,
    },
    /// The softmax scale is not a finite positive number (or it times log2(e) is not finite in
    /// f32, or, with ALiBi and no softcap, its inverse is not).
    InvalidSoftmaxScale {
        /// The scale: [`crate::ForwardOptions::softmax_scale`], or its default
        /// `1 / sqrt(head_dim)`.
        scale: f32,
    },
    /// [`crate::ForwardOptions::num_splits`] is 0 or above what the call can split the key
    /// range into: [`crate::MAX_SPLITS`] for the KV-cache calls, 1 for the others (which never
    /// split).
    InvalidSplitCount {
        /// The count asked for.
        splits: usize,
        /// The most this call takes.
        limit: usize,
    },
    /// Not one of the exposed kernels (`FORWARD_KERNELS`): no kernel has this name, or the
    /// kernel given is a copy of a compiled one with its fields changed.
    UnknownKernel {
        /// The name looked up, or the given kernel's entry name.
        name: String,
    },
    /// The kernel named in the options is of another variant than the call needs: a dense
    /// kernel for [`crate::FlashAttention::forward`] (a modified one, `_mod`, where the options
    /// or the call have a score modifier), a serving one (`_serving`) for the KV-cache calls.
    KernelVariantMismatch {
        /// The kernel's PTX entry name.
        kernel: &'static str,
        /// The variant the call needs (for ALiBi or the softcap alone [`Variant::Alibi`] or
        /// [`Variant::Softcap`], whose problems a [`Variant::Modified`] kernel runs too).
        needed: Variant,
    },
    /// The kernel named in the options (an sm90 family [`Variant::Serving`] or
    /// [`Variant::Paged`] kernel: one split, no packed query heads) cannot run this KV-cache
    /// call: a decode step whose grouped query heads are packed into one tile's rows, or a key
    /// range split (by the options' `num_splits`, or because the kernel's grid would leave the
    /// GPU idle), which the sm80 family's serving kernels run.
    KernelNotForKvCache {
        /// The kernel's PTX entry name.
        kernel: &'static str,
    },
    /// Fewer cache lengths than sequences.
    CacheLengthsTooShort {
        /// The cache-lengths buffer's length, in u32.
        lengths: usize,
        /// The sequences of the batch.
        batch: usize,
    },
    /// A paged cache's page size is not a power of two from 16 to 256.
    UnsupportedPageSize {
        /// [`crate::PagedKvCache::page_size`].
        page_size: usize,
    },
    /// A paged cache's capacity per sequence (`pages_per_sequence * page_size`) is not the
    /// shape's `seq_len_kv`.
    PagedCapacityMismatch {
        /// The shape's `seq_len_kv`.
        seq_len_kv: usize,
        /// [`crate::PagedKvCache::pages_per_sequence`].
        pages_per_sequence: usize,
        /// [`crate::PagedKvCache::page_size`].
        page_size: usize,
    },
    /// Explicit K or V strides that are not the paged layout's
    /// (`[num_pages, page_size, heads_kv, head_dim]`, contiguous).
    PagedStridesMismatch {
        /// The tensor: `"k"` or `"v"`.
        tensor: &'static str,
    },
    /// The block table holds fewer than `batch * pages_per_sequence` page indices.
    BlockTableTooShort {
        /// The block table's length, in u32.
        length: usize,
        /// The page indices the plan reads ([`crate::LaunchPlan::block_table_len`]).
        required: usize,
    },
    /// The caller's split-KV workspace is smaller than the plan needs
    /// ([`crate::LaunchPlan::workspace_bytes`], or the counters of
    /// [`crate::LaunchPlan::counters`]).
    WorkspaceTooSmall {
        /// Bytes the plan needs: of partials, or of counters (4 per counter).
        required: usize,
        /// Bytes the caller's [`crate::RawWorkspace`] gives, of the same buffer.
        actual: usize,
    },
    /// A stream or buffer given to the cudarc backend (`what`: "stream", "q", "cache_lens", ...)
    /// belongs to another CUDA context than this instance's, the primary context of device
    /// `instance_device`: its own context is of device `device` and `primary` or not.
    ContextMismatch {
        /// The stream or buffer: `"stream"`, or the tensor's name.
        what: &'static str,
        /// The ordinal of its context's device.
        device: usize,
        /// Whether its context is that device's primary context.
        primary: bool,
        /// The ordinal of the instance's device ([`crate::LoadOptions::device`]).
        instance_device: u32,
    },
    /// The softcap is not a finite positive number, or the softmax scale over it (what the
    /// kernel multiplies scores by before the `tanh`) or it times log2(e) is not finite and
    /// positive in f32.
    InvalidSoftcap {
        /// [`crate::ForwardOptions::softcap`].
        softcap: f32,
    },
    /// A sliding window whose right bound lies before its left one (`left + right < 0`): no
    /// query sees any key, whatever the lengths.
    EmptyWindow {
        /// The left offset, [`crate::SlidingWindow::left`].
        left: i64,
        /// The right offset, intersected with causal masking (at most 0 when causal).
        right: i64,
    },
    /// A sliding window that leaves every query of the problem without a key: its left bound is
    /// past the last key for the first query (`left < 1 - seq_len_q`), or its right bound before
    /// the first key for the last query (`right < 1 - seq_len_kv`). Single queries that see no
    /// key are allowed (as under causal masking with `seq_len_q > seq_len_kv`); a problem none
    /// of whose queries does is a caller's mistake.
    WindowExcludesEveryKey {
        /// The left offset (`None`: unbounded).
        left: Option<i64>,
        /// The right offset, intersected with causal masking (`None`: unbounded).
        right: Option<i64>,
        /// The problem's query rows per sequence.
        seq_len_q: usize,
        /// The problem's keys per sequence.
        seq_len_kv: usize,
    },
    /// Fewer ALiBi slopes than the layout needs (`heads_q`, or `batch * heads_q`).
    AlibiSlopesTooShort {
        /// The slopes given.
        length: usize,
        /// The slopes the layout needs ([`crate::AlibiLayout::slopes`]).
        required: usize,
    },
    /// The ALiBi slope at `index` is not finite, or so large that its bias over the problem's
    /// longest distance would not be finite in f32.
    InvalidAlibiSlope {
        /// The slope's index in the slopes given.
        index: usize,
        /// Its value.
        slope: f32,
    },
    /// A CUDA call failed.
    Cuda(CudaError),
    /// A raw driver call that `cust` does not wrap failed with this `CUresult` code.
    DriverCall {
        /// The driver function (`"cuLaunchKernel"`, `"cuFuncSetAttribute"`, ...) or the cudarc
        /// call (`"CudaStream::alloc_zeros"`, ...).
        call: &'static str,
        /// The `CUresult` it returned.
        code: u32,
    },
}

impl From<CudaError> for Error {
    fn from(error: CudaError) -> Self {
        Error::Cuda(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoGpu(error) => write!(f, "no CUDA GPU is available: {error}"),
            Error::DriverTooOld { driver_version, required_version } => write!(
                f,
                "the CUDA driver supports CUDA {} but the kernels' PTX needs CUDA {} or newer; update the NVIDIA driver",
                version_string(*driver_version),
                version_string(*required_version)
            ),
            Error::UnsupportedDevice { name, compute_capability: (major, minor) } => write!(
                f,
                "{name} has compute capability {major}.{minor}; the oldest PTX target of the kernels is {} and needs {}.{} or newer",
                flash_attn_params::ARCHITECTURES[0].name,
                flash_attn_params::ARCHITECTURES[0].compute_capability.0,
                flash_attn_params::ARCHITECTURES[0].compute_capability.1
            ),
            Error::UnsupportedPtxTarget { target, compute_capability: (major, minor) } => write!(
                f,
                "the PTX target {target} was asked for, but the build compiled PTX for {:?} only, \
                 and a device of compute capability {major}.{minor} runs PTX no newer than its own",
                crate::kernels::PTX_TARGETS
            ),
            Error::KernelNotForDevice { kernel, family, compute_capability: (major, minor) } => write!(
                f,
                "{kernel} has PTX for {:?} only (the {family:?} family), which a device of \
                 compute capability {major}.{minor} cannot run (architecture-specific PTX such as \
                 sm_90a runs on its own compute capability only)",
                flash_attn_params::architectures_of(*family)
                    .filter(|arch| arch.ptx_target)
                    .map(|arch| arch.name)
                    .collect::<Vec<_>>()
            ),
            Error::SharedMemoryUnavailable { kernel, needed, available } => write!(
                f,
                "{kernel} needs {needed} bytes of shared memory per block; this device gives at most {available}"
            ),
            Error::ModuleLoad(error) => write!(f, "loading the kernels' PTX failed: {error}"),
            Error::InvalidHeadDim { head_dim } => write!(
                f,
                "head dim {head_dim} is not a multiple of 8 from 8 to 256"
            ),
            Error::UnsupportedHeadDim { head_dim, variant, largest } => write!(
                f,
                "head dim {head_dim} has no {variant:?} kernel in this build, of its own or padded (the variant's largest kernel head dim is {largest}; 0: none is exposed)"
            ),
            Error::ZeroSizedDimension { dimension } => write!(f, "{dimension} is zero"),
            Error::InvalidGqaRatio { heads_q, heads_kv } => write!(
                f,
                "heads_q = {heads_q} is not a multiple of heads_kv = {heads_kv} (GQA needs whole groups)"
            ),
            Error::KernelDtypeMismatch { kernel, dtype } => {
                write!(f, "kernel {kernel} is not compiled for {dtype:?} inputs")
            }
            Error::ProblemTooLarge { dimension, value, limit } => {
                write!(f, "{dimension} = {value} exceeds the launch limit of {limit}")
            }
            Error::TensorTooLarge { tensor, dimension } => write!(
                f,
                "{tensor} is too large: along its {dimension} dimension its element count passes usize or an offset passes 2^63 - 1 bytes"
            ),
            Error::KernelHeadDimMismatch { kernel, kernel_head_dim, head_dim } => write!(
                f,
                "kernel {kernel} is compiled for head dim {kernel_head_dim}, which cannot run the problem's head dim {head_dim} (a modified kernel runs smaller head dims padded, the others only their own)"
            ),
            Error::HostAllocation { tensor, elements } => {
                write!(f, "could not allocate {elements} elements of host memory for {tensor}")
            }
            Error::BufferTooSmall { tensor, required, actual } => write!(
                f,
                "{tensor} holds {actual} elements but the shape and strides need {required}"
            ),
            Error::MisalignedBuffer { tensor, address } => write!(
                f,
                "{tensor} starts at {address:#x}, which is null or not aligned (16 bytes for q, k, v, o and the workspace; 4 for lse and the sequence buffers)"
            ),
            Error::SeqOffsetsBatchMismatch { q_offsets, kv_offsets } => write!(
                f,
                "{q_offsets} query offsets but {kv_offsets} key offsets: a variable-length batch has batch + 1 of each"
            ),
            Error::SeqOffsetsStart { offsets, first } => {
                write!(f, "{offsets} starts at {first}, not 0")
            }
            Error::SeqOffsetsDecrease { offsets, sequence, start, end } => write!(
                f,
                "{offsets} decreases: sequence {sequence} would start at token {start} and end at {end}"
            ),
            Error::VarlenExtentsMismatch { longest, value, tokens } => write!(
                f,
                "{longest} = {value} is more than the batch's {tokens} tokens"
            ),
            Error::MisalignedStride { tensor, stride, value } => write!(
                f,
                "the {stride} stride of {tensor} is {value} elements, not a multiple of 8 (16 bytes)"
            ),
            Error::OverlappingOutput { strides } => {
                write!(f, "output strides {strides:?} make distinct output rows overlap")
            }
            Error::InvalidSoftmaxScale { scale } => {
                write!(f, "softmax scale {scale} is not a finite positive number")
            }
            Error::InvalidSplitCount { splits, limit } => write!(
                f,
                "{splits} key-range splits asked for; this call takes 1 to {limit}"
            ),
            Error::KernelVariantMismatch { kernel, needed } if needed.is_one_modifier() => {
                let article = if matches!(needed, Variant::Alibi) { "an" } else { "a" };
                write!(
                    f,
                    "{kernel} is neither {article} {needed:?} nor a Modified kernel, one of which \
                     this call needs"
                )
            }
            Error::KernelVariantMismatch { kernel, needed } => write!(
                f,
                "{kernel} is not a {needed:?} kernel, which this call needs"
            ),
            Error::KernelNotForKvCache { kernel } => write!(
                f,
                "{kernel} has no split-KV and no packed query heads, which this KV-cache call \
                 needs: name an sm80 serving or paged kernel, or ask for one split \
                 (num_splits: Some(1))"
            ),
            Error::CacheLengthsTooShort { lengths, batch } => write!(
                f,
                "{lengths} cache lengths for a batch of {batch} sequences"
            ),
            Error::UnsupportedPageSize { page_size } => write!(
                f,
                "page size {page_size} is not a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}"
            ),
            Error::PagedCapacityMismatch {
                seq_len_kv,
                pages_per_sequence,
                page_size,
            } => write!(
                f,
                "seq_len_kv {seq_len_kv} is not the paged cache's capacity, \
                 {pages_per_sequence} pages of {page_size} keys"
            ),
            Error::PagedStridesMismatch { tensor } => write!(
                f,
                "explicit {tensor} strides differ from the paged cache's layout \
                 [num_pages, page_size, heads_kv, head_dim]"
            ),
            Error::BlockTableTooShort { length, required } => write!(
                f,
                "the block table holds {length} page indices but the batch needs {required}"
            ),
            Error::WorkspaceTooSmall { required, actual } => write!(
                f,
                "the split-KV workspace holds {actual} bytes but the plan needs {required}"
            ),
            Error::ContextMismatch {
                what,
                device,
                primary,
                instance_device,
            } => write!(
                f,
                "{what} belongs to a{} context of device {device}, but this FlashAttention \
                 instance runs in the primary context of device {instance_device}",
                if *primary { " primary" } else { " non-primary" }
            ),
            Error::InvalidSoftcap { softcap } => write!(
                f,
                "softcap {softcap} is not a finite positive number (or the softmax scale over it, \
                 or it times log2(e), is not finite and positive in f32)"
            ),
            Error::EmptyWindow { left, right } => write!(
                f,
                "the sliding window ({left}, {right}) is empty: its right bound lies before its left one"
            ),
            Error::WindowExcludesEveryKey {
                left,
                right,
                seq_len_q,
                seq_len_kv,
            } => write!(
                f,
                "the sliding window ({left:?}, {right:?}) leaves all {seq_len_q} queries without \
                 a key among the {seq_len_kv}"
            ),
            Error::AlibiSlopesTooShort { length, required } => write!(
                f,
                "{length} ALiBi slopes but the layout needs {required}"
            ),
            Error::InvalidAlibiSlope { index, slope } => write!(
                f,
                "ALiBi slope {index} is {slope}: not finite, or its bias over the problem's \
                 distances is not finite in f32"
            ),
            Error::UnknownKernel { name } => {
                write!(f, "{name:?} is not one of the exposed kernels (FORWARD_KERNELS)")
            }
            Error::Cuda(error) => write!(f, "CUDA error: {error}"),
            Error::DriverCall { call, code } => write!(f, "{call} failed with CUresult {code}"),
        }
    }
}

fn version_string(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

impl std::error::Error for Error {}
