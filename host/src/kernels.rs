//! The registry of compiled kernels and the loading of their PTX module.

use std::ffi::c_int;

use cust::context::Context;
use cust::device::{Device, DeviceAttribute};
use cust::function::Function;
use cust::module::Module;
use cust::sys::CUfunction;
use cust::{CudaApiVersion, CudaFlags};
use flash_attn_params::{Dtype, ForwardKernel, FORWARD_KERNELS};

use crate::Error;

/// The PTX of every compiled kernel, built from `kernels-gpu` by this crate's build script.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/flash_attn_kernels.ptx"));

/// `.version 7.8` PTX needs a CUDA 11.8 driver to JIT-compile.
const REQUIRED_DRIVER_VERSION: i32 = 11080;
const MIN_COMPUTE_CAPABILITY: (i32, i32) = (8, 9);

/// The head dimensions with a compiled kernel, for every element type.
pub const SUPPORTED_HEAD_DIMS: &[usize] = &[64, 128];

/// The kernel used for `dtype` and `head_dim` when the caller names none: the first matching
/// entry of the compiled list.
pub fn default_kernel(dtype: Dtype, head_dim: usize) -> Result<&'static ForwardKernel, Error> {
    FORWARD_KERNELS
        .iter()
        .find(|kernel| kernel.dtype == dtype && kernel.tile.head_dim == head_dim)
        .ok_or(Error::UnsupportedHeadDim {
            head_dim,
            supported: SUPPORTED_HEAD_DIMS,
        })
}

/// Looks a compiled kernel up by its PTX entry name.
pub fn kernel_by_name(name: &str) -> Result<&'static ForwardKernel, Error> {
    FORWARD_KERNELS
        .iter()
        .find(|kernel| kernel.entry == name)
        .ok_or_else(|| Error::UnknownKernel {
            name: name.to_owned(),
        })
}

/// A loaded kernel entry.
#[derive(Clone, Copy)]
struct KernelHandle(CUfunction);

// SAFETY: a CUfunction is an opaque driver handle, valid in every thread while its module is
// loaded (the module lives as long as the `LoadedKernels` that holds the handle). The driver
// API is thread-safe, and every launch makes the owning context current on the calling thread
// first (`FlashAttention::launch`).
unsafe impl Send for KernelHandle {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for KernelHandle {}

/// A CUDA context on one device with the kernels' module loaded.
pub(crate) struct LoadedKernels {
    /// The entry of each of `FORWARD_KERNELS`, in order, looked up once: a lookup per launch
    /// would cost a string allocation and a driver call. Valid while `module` is loaded.
    functions: Vec<KernelHandle>,
    // Kept loaded, never read again: `functions` point into it. Field order is drop order: the
    // module must go before the context it lives in.
    _module: Module,
    pub(crate) device_name: String,
    // Keeps the primary context retained while the module lives, and is made current on the
    // calling thread before each launch.
    pub(crate) context: Context,
}

impl LoadedKernels {
    pub(crate) fn load(ordinal: u32) -> Result<Self, Error> {
        cust::init(CudaFlags::empty()).map_err(Error::NoGpu)?;
        let device = Device::get_device(ordinal).map_err(Error::NoGpu)?;
        let name = device.name()?;
        let compute_capability = (
            device.get_attribute(DeviceAttribute::ComputeCapabilityMajor)?,
            device.get_attribute(DeviceAttribute::ComputeCapabilityMinor)?,
        );
        if compute_capability < MIN_COMPUTE_CAPABILITY {
            return Err(Error::UnsupportedDevice {
                name,
                compute_capability,
            });
        }
        let driver_version = driver_version()?;
        if driver_version < REQUIRED_DRIVER_VERSION {
            return Err(Error::DriverTooOld {
                driver_version,
                required_version: REQUIRED_DRIVER_VERSION,
            });
        }
        let context = Context::new(device)?;
        let module = Module::from_ptx(PTX, &[]).map_err(Error::ModuleLoad)?;
        let mut functions = Vec::with_capacity(FORWARD_KERNELS.len());
        for kernel in FORWARD_KERNELS {
            let function = module.get_function(kernel.entry)?;
            allow_dynamic_shared_memory(&function, kernel.tile.smem_bytes())?;
            functions.push(KernelHandle(function.to_raw()));
        }
        Ok(Self {
            functions,
            _module: module,
            device_name: name,
            context,
        })
    }

    /// The loaded entry of `kernel`, one of `FORWARD_KERNELS`.
    pub(crate) fn function(&self, kernel: &ForwardKernel) -> Result<CUfunction, Error> {
        FORWARD_KERNELS
            .iter()
            .position(|compiled| compiled.entry == kernel.entry)
            .map(|index| self.functions[index].0)
            .ok_or_else(|| Error::UnknownKernel {
                name: kernel.entry.to_owned(),
            })
    }
}

fn driver_version() -> Result<i32, Error> {
    let version = CudaApiVersion::get()?;
    Ok(version.major() * 1000 + version.minor() * 10)
}

/// Blocks may use more than 48 KiB of dynamic shared memory only after opting in.
fn allow_dynamic_shared_memory(function: &Function<'_>, bytes: usize) -> Result<(), Error> {
    // SAFETY: `function` is a live handle from a loaded module; the attribute takes an int.
    let result = unsafe {
        cust::sys::cuFuncSetAttribute(
            function.to_raw(),
            cust::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as c_int,
        )
    };
    match result {
        cust::sys::CUresult::CUDA_SUCCESS => Ok(()),
        failure => Err(Error::DriverCall {
            call: "cuFuncSetAttribute",
            code: failure as u32,
        }),
    }
}
