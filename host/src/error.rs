//! One error type, one variant per failure a caller can cause or meet.

use std::fmt;

use cust::error::CudaError;

/// The head dimensions the compiled kernels support.
pub const SUPPORTED_HEAD_DIMS: &[usize] = &[64];

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The CUDA driver is present but sees no device (or no driver library could be used).
    NoGpu(CudaError),
    /// The driver cannot JIT-compile the embedded PTX ISA version.
    DriverTooOld {
        driver_version: i32,
        required_version: i32,
    },
    /// The device is older than the PTX target (`sm_89`).
    UnsupportedDevice {
        name: String,
        compute_capability: (i32, i32),
    },
    /// Loading the PTX module failed.
    ModuleLoad(CudaError),
    /// `head_dim` has no compiled kernel.
    UnsupportedHeadDim {
        head_dim: usize,
        supported: &'static [usize],
    },
    /// A dimension of the problem is zero.
    ZeroSizedDimension { dimension: &'static str },
    /// `seq_len` is not a multiple of the kernel's query and key tiles.
    SeqLenNotTileMultiple { seq_len: usize, multiple: usize },
    /// The problem needs more blocks than one launch grid holds.
    ProblemTooLarge {
        dimension: &'static str,
        value: usize,
        limit: usize,
    },
    /// A buffer's length does not match the shape.
    BufferLength {
        tensor: &'static str,
        expected: usize,
        actual: usize,
    },
    /// A device buffer does not start on a 16-byte boundary.
    MisalignedBuffer { tensor: &'static str, address: u64 },
    /// The softmax scale is not a finite positive number.
    InvalidSoftmaxScale { scale: f32 },
    /// No compiled kernel has this name.
    UnknownKernel { name: String },
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
                "{name} has compute capability {major}.{minor}; the kernels are PTX for sm_89 and need 8.9 or newer"
            ),
            Error::ModuleLoad(error) => write!(f, "loading the kernels' PTX failed: {error}"),
            Error::UnsupportedHeadDim { head_dim, supported } => {
                write!(f, "unsupported head dim {head_dim}; supported: {supported:?}")
            }
            Error::ZeroSizedDimension { dimension } => write!(f, "{dimension} is zero"),
            Error::SeqLenNotTileMultiple { seq_len, multiple } => write!(
                f,
                "seq_len {seq_len} is not a multiple of {multiple}, the kernel's tile (general lengths are not supported yet)"
            ),
            Error::ProblemTooLarge { dimension, value, limit } => {
                write!(f, "{dimension} = {value} exceeds the launch limit of {limit}")
            }
            Error::BufferLength { tensor, expected, actual } => write!(
                f,
                "{tensor} holds {actual} elements but the shape needs {expected}"
            ),
            Error::MisalignedBuffer { tensor, address } => {
                write!(f, "{tensor} starts at {address:#x}, which is not 16-byte aligned")
            }
            Error::InvalidSoftmaxScale { scale } => {
                write!(f, "softmax scale {scale} is not a finite positive number")
            }
            Error::UnknownKernel { name } => write!(f, "no compiled kernel is named {name:?}"),
            Error::Cuda(error) => write!(f, "CUDA error: {error}"),
            Error::DriverCall { call, code } => write!(f, "{call} failed with CUresult {code}"),
        }
    }
}

fn version_string(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

impl std::error::Error for Error {}
