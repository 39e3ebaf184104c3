//! The registry of compiled kernels and the loading of their PTX module.

use std::ffi::c_int;
use std::sync::{Mutex, OnceLock};

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

/// A loaded kernel entry: its own module (holding only this entry) and the function in it.
struct LoadedEntry {
    function: CUfunction,
    // Kept loaded, never read again: `function` points into it.
    _module: Module,
}

// SAFETY: a CUfunction and a CUmodule are opaque driver handles, valid in every thread while the
// module is loaded (the module lives as long as the `LoadedEntry`, which `LoadedKernels` keeps
// until the context goes). The driver API is thread-safe, every launch makes the owning context
// current on the calling thread first (`FlashAttention::launch`), and nothing mutates a loaded
// entry.
unsafe impl Send for LoadedEntry {}
// SAFETY: as above.
unsafe impl Sync for LoadedEntry {}

/// A CUDA context on one device, loading each kernel's PTX on its first use.
///
/// One module per entry, loaded lazily: the driver JIT-compiles a whole module at once, and
/// ptxas takes 3.3 s for the module of all 12 entries against 0.2 s for one (on this project's
/// 2-core build machine), so loading them all up front would cost seconds per process.
pub(crate) struct LoadedKernels {
    /// One slot per `FORWARD_KERNELS` entry, in order. Field order is drop order: the modules
    /// must go before the context they live in.
    entries: Vec<OnceLock<LoadedEntry>>,
    /// Serialises the JIT of a missing entry, so that two threads never load the same one.
    loading: Mutex<()>,
    pub(crate) device_name: String,
    // Keeps the primary context retained while the modules live, and is made current on the
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
        Ok(Self {
            entries: FORWARD_KERNELS.iter().map(|_| OnceLock::new()).collect(),
            loading: Mutex::new(()),
            device_name: name,
            context,
        })
    }

    /// The loaded entry of `kernel`, one of `FORWARD_KERNELS`, JIT-compiled on first use.
    /// The context must be current on the calling thread.
    pub(crate) fn function(&self, kernel: &ForwardKernel) -> Result<CUfunction, Error> {
        let index = FORWARD_KERNELS
            .iter()
            .position(|compiled| compiled.entry == kernel.entry)
            .ok_or_else(|| Error::UnknownKernel {
                name: kernel.entry.to_owned(),
            })?;
        let slot = &self.entries[index];
        if let Some(entry) = slot.get() {
            return Ok(entry.function);
        }
        // A poisoned lock only means another thread's load failed; the slot is still empty.
        let _guard = self
            .loading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = slot.get() {
            return Ok(entry.function);
        }
        let kernel = &FORWARD_KERNELS[index];
        let ptx = entry_ptx(kernel.entry).ok_or_else(|| Error::UnknownKernel {
            name: kernel.entry.to_owned(),
        })?;
        let module = Module::from_ptx(&ptx, &[]).map_err(Error::ModuleLoad)?;
        let function = module.get_function(kernel.entry)?;
        allow_dynamic_shared_memory(&function, kernel.tile.smem_bytes())?;
        let function = function.to_raw();
        let entry = LoadedEntry {
            function,
            _module: module,
        };
        // Cannot be taken: the lock is held and the slot was empty.
        let _ = slot.set(entry);
        Ok(function)
    }
}

/// The PTX of one entry of [`PTX`] as a module of its own: everything before the first entry
/// (version, target, the shared-memory declaration, the panic handler) plus that entry's body.
pub fn entry_ptx(entry: &str) -> Option<String> {
    let preamble = &PTX[..PTX.find(".visible .entry")?];
    let start = PTX.find(&format!(".visible .entry {entry}("))?;
    // An entry's body ends at the first closing brace at the start of a line.
    let end = start + PTX[start..].find("\n}\n")? + 3;
    Some(format!("{preamble}{}", &PTX[start..end]))
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
