//! One error type, one variant per failure a caller can cause or meet.

use std::fmt;

use cust::error::CudaError;
use flash_attn_params::{Dtype, TensorStrides, Variant};

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The CUDA driver is present but sees no device (or no driver library could be used).
    NoGpu(CudaError),
    /// The driver cannot JIT-compile the embedded PTX ISA version.
    DriverTooOld {
        driver_version: i32,
        required_version: i32,
    },
    /// The device is older than every PTX target the build compiled (`sm_80`).
    UnsupportedDevice {
        name: String,
        compute_capability: (i32, i32),
    },
    /// [`crate::LoadOptions::ptx_target`] names an architecture the build compiled no PTX for,
    /// or one newer than the device.
    UnsupportedPtxTarget {
        target: &'static str,
        compute_capability: (i32, i32),
    },
    /// The kernel needs more shared memory per block than the device lets a block opt into
    /// (sm_86 and sm_87 give 99 KiB, against 163 KiB on the A100).
    SharedMemoryUnavailable {
        kernel: &'static str,
        needed: usize,
        available: usize,
    },
    /// Loading the PTX module failed.
    ModuleLoad(CudaError),
    /// The head dim is not a multiple of 8 from 8 to 256 (0 is
    /// [`Error::ZeroSizedDimension`]).
    InvalidHeadDim { head_dim: usize },
    /// No kernel of `variant` runs the problem's head dim: the variant has none of exactly it
    /// (or, for the modified variant, which pads, none at least as large). `largest`
    /// is the variant's largest kernel head dim (0: the build exposes none of the variant for
    /// the element type).
    UnsupportedHeadDim {
        head_dim: usize,
        variant: Variant,
        largest: usize,
    },
    /// A dimension of the problem is zero.
    ZeroSizedDimension { dimension: &'static str },
    /// `heads_q` is not a multiple of `heads_kv`.
    InvalidGqaRatio { heads_q: usize, heads_kv: usize },
    /// The kernel named in the options is compiled for another element type.
    KernelDtypeMismatch { kernel: &'static str, dtype: Dtype },
    /// A dimension exceeds what one launch (grid, or the kernel's 32-bit index math) holds.
    ProblemTooLarge {
        dimension: &'static str,
        value: usize,
        limit: usize,
    },
    /// A size, extent or offset of `tensor` does not fit: its element count passes `usize`, or
    /// an offset the kernel would form passes [`crate::MAX_TENSOR_BYTES`]. `dimension` names
    /// the dimension whose term is the largest (or at which the count overflowed).
    TensorTooLarge {
        tensor: &'static str,
        dimension: &'static str,
    },
    /// The kernel named in the options cannot run the problem's head dim: it is compiled for
    /// another one (a modified kernel, which pads: a smaller one).
    KernelHeadDimMismatch {
        kernel: &'static str,
        kernel_head_dim: usize,
        head_dim: usize,
    },
    /// The host could not allocate a buffer of this many elements (`forward_host`'s output).
    HostAllocation {
        tensor: &'static str,
        elements: usize,
    },
    /// A buffer is shorter than the shape and strides need.
    BufferTooSmall {
        tensor: &'static str,
        required: u64,
        actual: usize,
    },
    /// A device address is null or not aligned: 16 bytes for Q, K, V, O and the workspace, 4
    /// for the logsumexp, the u32 buffers (cache lengths, block table, sequence offsets) and
    /// the ALiBi slopes.
    MisalignedBuffer { tensor: &'static str, address: u64 },
    /// A stride is not a multiple of 8 elements, so rows would not be 16-byte aligned.
    MisalignedStride {
        tensor: &'static str,
        stride: &'static str,
        value: u64,
    },
    /// Distinct output rows would share memory, and the kernel would race on them.
    OverlappingOutput { strides: TensorStrides },
    /// A variable-length batch has a different number of query and key offsets (`batch + 1`
    /// of each).
    SeqOffsetsBatchMismatch { q_offsets: usize, kv_offsets: usize },
    /// The offsets of a variable-length batch (`cu_seqlens_q` or `cu_seqlens_kv`) do not start
    /// at 0.
    SeqOffsetsStart { offsets: &'static str, first: u32 },
    /// The offsets of a variable-length batch decrease: sequence `sequence` would end (`end`)
    /// before it starts (`start`).
    SeqOffsetsDecrease {
        offsets: &'static str,
        sequence: usize,
        start: u32,
        end: u32,
    },
    /// The extents of a variable-length batch given to
    /// [`crate::FlashAttention::forward_varlen_raw`] are inconsistent: its longest sequence
    /// (`longest`, `max_seq_len_q` or `max_seq_len_kv`) has more tokens than the whole batch.
    VarlenExtentsMismatch {
        longest: &'static str,
        value: usize,
        tokens: usize,
    },
    /// The softmax scale is not a finite positive number.
    InvalidSoftmaxScale { scale: f32 },
    /// [`crate::ForwardOptions::num_splits`] is 0 or above what the call can split the key
    /// range into: [`crate::MAX_SPLITS`] for the KV-cache calls, 1 for the others (which never
    /// split).
    InvalidSplitCount { splits: usize, limit: usize },
    /// Not one of the exposed kernels (`FORWARD_KERNELS`): no kernel has this name, or the
    /// kernel given is a copy of a compiled one with its fields changed.
    UnknownKernel { name: String },
    /// The kernel named in the options is of another variant than the call needs: a dense
    /// kernel for [`crate::FlashAttention::forward`] (a modified one, `_mod`, where the options
    /// or the call have a score modifier), a serving one (`_serving`) for the KV-cache calls.
    KernelVariantMismatch {
        kernel: &'static str,
        needed: Variant,
    },
    /// Fewer cache lengths than sequences.
    CacheLengthsTooShort { lengths: usize, batch: usize },
    /// A paged cache's page size is not a power of two from 16 to 256.
    UnsupportedPageSize { page_size: usize },
    /// A paged cache's capacity per sequence (`pages_per_sequence * page_size`) is not the
    /// shape's `seq_len_kv`.
    PagedCapacityMismatch {
        seq_len_kv: usize,
        pages_per_sequence: usize,
        page_size: usize,
    },
    /// Explicit K or V strides that are not the paged layout's
    /// (`[num_pages, page_size, heads_kv, head_dim]`, contiguous).
    PagedStridesMismatch { tensor: &'static str },
    /// The block table holds fewer than `batch * pages_per_sequence` page indices.
    BlockTableTooShort { length: usize, required: usize },
    /// The caller's split-KV workspace is smaller than the plan needs
    /// ([`crate::LaunchPlan::workspace_bytes`]).
    WorkspaceTooSmall { required: usize, actual: usize },
    /// A stream or buffer given to the cudarc backend (`what`: "stream", "q", "cache_lens", ...)
    /// belongs to another CUDA context than this instance's, the primary context of device
    /// `instance_device`: its own context is of device `device` and `primary` or not.
    ContextMismatch {
        what: &'static str,
        device: usize,
        primary: bool,
        instance_device: u32,
    },
    /// The softcap is not a finite positive number, or the softmax scale over it (what the
    /// kernel multiplies scores by before the `tanh`) or it times log2(e) is not finite and
    /// positive in f32.
    InvalidSoftcap { softcap: f32 },
    /// A sliding window whose right bound lies before its left one (`left + right < 0`): no
    /// query sees any key, whatever the lengths.
    EmptyWindow { left: i64, right: i64 },
    /// A sliding window that leaves every query of the problem without a key: its left bound is
    /// past the last key for the first query (`left < 1 - seq_len_q`), or its right bound before
    /// the first key for the last query (`right < 1 - seq_len_kv`). Single queries that see no
    /// key are allowed (as under causal masking with `seq_len_q > seq_len_kv`); a problem none
    /// of whose queries does is a caller's mistake.
    WindowExcludesEveryKey {
        left: Option<i64>,
        right: Option<i64>,
        seq_len_q: usize,
        seq_len_kv: usize,
    },
    /// Fewer ALiBi slopes than the layout needs (`heads_q`, or `batch * heads_q`).
    AlibiSlopesTooShort { length: usize, required: usize },
    /// The ALiBi slope at `index` is not finite, or so large that its bias over the problem's
    /// longest distance would not be finite in f32.
    InvalidAlibiSlope { index: usize, slope: f32 },
    /// A score modifier (`window`, `softcap`) on a call whose kernels do not take it yet (the
    /// KV-cache and variable-length calls, whose kernels are of `variant`).
    ModifierNotSupported {
        modifier: &'static str,
        variant: Variant,
    },
    /// A CUDA call failed.
    Cuda(CudaError),
    /// A raw driver call that `cust` does not wrap failed with this `CUresult` code.
    DriverCall { call: &'static str, code: u32 },
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
                "head dim {head_dim} has no {variant:?} kernel (they run head dims up to {largest}; the serving kernels only their own, 64 and 128)"
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
            Error::KernelVariantMismatch { kernel, needed } => write!(
                f,
                "{kernel} is not a {needed:?} kernel, which this call needs"
            ),
            Error::CacheLengthsTooShort { lengths, batch } => write!(
                f,
                "{lengths} cache lengths for a batch of {batch} sequences"
            ),
            Error::UnsupportedPageSize { page_size } => write!(
                f,
                "page size {page_size} is not a power of two from 16 to 256"
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
            Error::ModifierNotSupported { modifier, variant } => write!(
                f,
                "the {variant:?} kernels (KV-cache and variable-length calls) take no {modifier} yet"
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
