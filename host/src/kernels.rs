//! The registry of exposed kernels and the loading of their modules: the cubin assembled at
//! build time for the device's architecture where there is one, else the entry's PTX.

use std::ffi::c_int;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use cust::context::Context;
use cust::device::{Device, DeviceAttribute};
use cust::error::CudaError;
use cust::function::Function;
use cust::module::Module;
use cust::sys::CUfunction;
use cust::{CudaApiVersion, CudaFlags};
use flash_attn_params::{
    ptx_target_for, Architecture, Dtype, Family, KernelSpec, Variant, ARCHITECTURES,
};

use crate::{driver, Error};

/// An exposed forward kernel: its PTX entry point and its spec (family, element type, variant
/// and tile).
///
/// Only [`FORWARD_KERNELS`] holds them (the private fields keep other crates from building
/// one), so a `&ForwardKernel` always names an exposed entry, and its [`Self::index`] is its
/// place in that list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardKernel {
    /// The PTX entry name, `spec`'s `Display`, written out by the build so that
    /// [`kernel_named`] can compare it in a `const fn`.
    pub entry: &'static str,
    /// What the kernel is: its family, element type, variant and tile.
    pub spec: KernelSpec,
    index: usize,
}

impl ForwardKernel {
    /// The position of this kernel in [`FORWARD_KERNELS`]: the host keeps per-kernel state
    /// (the loaded module) in a list of the same order, and finds it without comparing names.
    pub const fn index(&self) -> usize {
        self.index
    }

    /// The PTX targets the build embedded this kernel's PTX for: those of its family
    /// ([`flash_attn_params::architectures_of`]), oldest first.
    pub fn ptx_targets(&self) -> impl Iterator<Item = &'static str> {
        DEFLATED_PTX[self.index].iter().map(|&(target, _)| target)
    }

    /// Whether a device of `compute_capability` runs this kernel: whether its family has a PTX
    /// target for it ([`ptx_target_for`]). The sm90 family's run on compute capability 9.0
    /// only; where this is `false`, loading the kernel fails with
    /// [`Error::KernelNotForDevice`].
    pub const fn runs_on(&self, compute_capability: (i32, i32)) -> bool {
        ptx_target_for(self.spec.family, compute_capability).is_some()
    }
}

// `FORWARD_KERNELS` and `DEFLATED_PTX`, written by build.rs (`flash_attn_build::build_kernels`)
// from the configurations that pass the compile-time gates and `host/ptxas-gate.tsv`.
include!(concat!(env!("OUT_DIR"), "/kernel_table.rs"));

/// The exposed kernel whose PTX entry is `name`, for tables in source, such as the dispatch
/// table and the fallbacks the build generates from their data files: evaluated in a `const` or
/// `static`, an unknown name fails the build, so such a table cannot name a kernel that is not
/// exposed.
///
/// # Panics
/// If no exposed kernel is named `name` (at compile time, a compile error). For names only
/// known at run time, [`kernel_by_name`] returns an error instead.
pub const fn kernel_named(name: &str) -> &'static ForwardKernel {
    let mut index = 0;
    while index < FORWARD_KERNELS.len() {
        if bytes_equal(FORWARD_KERNELS[index].entry.as_bytes(), name.as_bytes()) {
            return &FORWARD_KERNELS[index];
        }
        index += 1;
    }
    panic!("no exposed forward kernel has this entry name (see FORWARD_KERNELS)")
}

/// `a == b` for byte strings, usable in a `const fn` (where `==` on slices is not).
const fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// One kernel entry assembled ahead of time by `ptxas -O3` for one architecture, from the same
/// single-entry module as [`entry_ptx`]. A cubin runs only on devices of exactly its compute
/// capability; [`CUBINS`] holds one per architecture of [`ARCHITECTURES`] marked for cubins
/// (sm_89 and sm_90) and kernel the build assembled.
#[derive(Clone, Copy)]
pub struct Cubin {
    /// The PTX entry name, as in [`ForwardKernel::entry`].
    pub entry: &'static str,
    /// ptxas's `-arch`: `"sm_89"` or `"sm_90"`.
    pub arch: &'static str,
    /// `(major, minor)` of the devices that load it.
    pub compute_capability: (i32, i32),
    /// The ELF image ptxas wrote.
    pub image: &'static [u8],
}

impl fmt::Debug for Cubin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cubin")
            .field("entry", &self.entry)
            .field("arch", &self.arch)
            .field("compute_capability", &self.compute_capability)
            .field("image_bytes", &self.image.len())
            .finish()
    }
}

// `CUBINS` and `CUBINS_NOT_BUILT`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/cubins.rs"));

/// How [`crate::FlashAttention::with_options`] opens the device and loads the kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// The GPU ordinal (default 0, the first).
    pub device: u32,
    /// Always JIT-compile the PTX, even where a cubin for the device was built (default
    /// `false`). For measuring or working around the cubins; the kernels are the same.
    pub force_ptx: bool,
    /// JIT-compile the PTX of this architecture, one of [`PTX_TARGETS`], whatever the device,
    /// for the kernels of its family (default `None`: the newest PTX target of each kernel's
    /// family not newer than the device, [`flash_attn_params::ptx_target_for`]). A device runs
    /// PTX of its own compute capability or older: `Some(*architecture_named("sm_80").unwrap())`
    /// runs the sm_80 PTX, the one an A100 or an RTX 30x0 loads, on an H100. No cubin is
    /// loaded when the target differs from the device's own. Kernels of another family load
    /// their own family's PTX target as by default.
    pub ptx_target: Option<Architecture>,
}

impl LoadOptions {
    /// The cubin these options load for kernel `entry` on a device of `compute_capability`
    /// (`(major, minor)`, matched exactly: sm_89 for 8.9, sm_90 for 9.0), or why its PTX is
    /// JIT-compiled instead. Needs no GPU; on one, a driver that refuses the cubin still
    /// sends the kernel to the PTX ([`PtxReason::CubinRejected`]).
    pub fn cubin_for(
        &self,
        entry: &str,
        compute_capability: (i32, i32),
    ) -> Result<&'static Cubin, PtxReason> {
        if self.force_ptx {
            return Err(PtxReason::Forced);
        }
        // The cubins are assembled from the PTX of the device's own PTX target of the kernel's
        // family.
        if let (Some(target), Ok(kernel)) = (self.ptx_target, kernel_by_name(entry)) {
            let own = ptx_target_for(kernel.spec.family, compute_capability);
            if target.family == kernel.spec.family && own.map(|own| own.name) != Some(target.name) {
                return Err(PtxReason::Forced);
            }
        }
        if CUBINS.is_empty() {
            return Err(PtxReason::NotBuilt);
        }
        if !CUBINS.iter().any(|cubin| cubin.entry == entry) {
            return Err(PtxReason::NotAssembled);
        }
        CUBINS
            .iter()
            .find(|cubin| cubin.entry == entry && cubin.compute_capability == compute_capability)
            .ok_or(PtxReason::OtherArchitecture)
    }
}

/// Where a loaded kernel's code came from: see [`crate::FlashAttention::preload`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelSource {
    /// The cubin ptxas assembled at build time for this device's architecture (`"sm_89"` or
    /// `"sm_90"`): loaded without the driver's JIT.
    Cubin {
        /// ptxas's `-arch` of the cubin.
        arch: &'static str,
    },
    /// The entry's PTX, JIT-compiled by the driver, and why not a cubin.
    Ptx(PtxReason),
}

/// Why a kernel was JIT-compiled from PTX rather than loaded from a cubin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxReason {
    /// [`LoadOptions::force_ptx`] was set, or [`LoadOptions::ptx_target`] names another PTX
    /// target than the device's own.
    Forced,
    /// The build found no ptxas, so it embedded no cubins ([`CUBINS_NOT_BUILT`]).
    NotBuilt,
    /// The build assembled cubins only for the kernels the default API can run (the dispatch
    /// table and the fallbacks), and this is another one (`FLASH_ATTN_CUBINS=all` at build
    /// time assembles every exposed kernel).
    NotAssembled,
    /// Cubins exist only for the architectures of [`ARCHITECTURES`] marked for them (8.9 and
    /// 9.0), and the device is another.
    OtherArchitecture,
    /// The driver refused the cubin (for instance a driver older than the ptxas that built it).
    CubinRejected(CudaError),
}

impl fmt::Display for KernelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelSource::Cubin { arch } => write!(f, "cubin ({arch})"),
            KernelSource::Ptx(PtxReason::Forced) => write!(f, "PTX JIT (forced)"),
            KernelSource::Ptx(PtxReason::NotBuilt) => {
                write!(f, "PTX JIT (the build embedded no cubins)")
            }
            KernelSource::Ptx(PtxReason::NotAssembled) => {
                write!(f, "PTX JIT (no cubin built for this kernel)")
            }
            KernelSource::Ptx(PtxReason::OtherArchitecture) => {
                write!(f, "PTX JIT (no cubin for this architecture)")
            }
            KernelSource::Ptx(PtxReason::CubinRejected(error)) => {
                write!(f, "PTX JIT (the driver refused the cubin: {error})")
            }
        }
    }
}

/// `.version 7.8` PTX needs a CUDA 11.8 driver to JIT-compile.
const REQUIRED_DRIVER_VERSION: i32 = 11080;

/// The head dimensions of the kernels, for every element type: the candidate space's (every one
/// has fallback kernels in the shipping set; a CPU test checks it). A problem's head dim may be
/// any multiple of 8 up to the largest: it runs on the kernels of the next one
/// ([`kernel_head_dim`]).
pub const SUPPORTED_HEAD_DIMS: &[usize] = &flash_attn_params::CANDIDATE_HEAD_DIMS;

/// The kernel for each element type and head dim where the dispatch table has no entry, as
/// `host/fallback-kernels.txt` lists them (the build writes the list as `kernel_named` calls, so
/// a name that is not exposed fails the build). The build assembles cubins for them, as for
/// every kernel the dispatch table names.
const FALLBACK_KERNELS: &[&ForwardKernel] =
    &include!(concat!(env!("OUT_DIR"), "/fallback_kernels.rs"));

/// The head dim of the kernels of `variant` and `dtype` that run a problem of head dim
/// `head_dim`: `head_dim` itself where the variant has kernels of it, else the smallest head
/// dim above it of the variant's kernels that pad ([`flash_attn_params::pads_head_dim`]: the
/// modified, serving and paged ones but at 64 and 128 and the sm90 warp-specialised serving
/// ones; [`crate::KernelSpec::runs_head_dim`]), whose columns past `head_dim` the kernel pads
/// and never stores (as FlashAttention pads). The dense kernels run their own head dim only.
///
/// [`Error::InvalidHeadDim`] unless `head_dim` is a multiple of 8 from 8 to 256;
/// [`Error::UnsupportedHeadDim`] where the variant has no such kernel.
pub fn kernel_head_dim(dtype: Dtype, variant: Variant, head_dim: usize) -> Result<usize, Error> {
    if flash_attn_params::padded_head_dim(head_dim).is_none() {
        return Err(Error::InvalidHeadDim { head_dim });
    }
    let of_variant = || {
        FORWARD_KERNELS
            .iter()
            .filter(move |kernel| kernel.spec.variant == variant && kernel.spec.dtype == dtype)
    };
    of_variant()
        .filter(|kernel| kernel.spec.runs_head_dim(head_dim))
        .map(|kernel| kernel.spec.tile.head_dim)
        .min()
        .ok_or_else(|| Error::UnsupportedHeadDim {
            head_dim,
            variant,
            largest: of_variant()
                .map(|kernel| kernel.spec.tile.head_dim)
                .max()
                .unwrap_or(0),
        })
}

/// The fallback kernel for `dtype` and the kernel head dim a problem of head dim `head_dim` pads
/// to ([`flash_attn_params::padded_head_dim`]; a dense kernel runs only its own head dim, the
/// host runs a padded problem on a modified kernel). The default API runs the dispatch table's choice
/// ([`crate::dispatch_kernel`]), which falls back to this one only where the table has no
/// entry; the untuned table holds this kernel everywhere.
pub fn default_kernel(dtype: Dtype, head_dim: usize) -> Result<&'static ForwardKernel, Error> {
    let kernel_head_dim =
        flash_attn_params::padded_head_dim(head_dim).ok_or(Error::InvalidHeadDim { head_dim })?;
    FALLBACK_KERNELS
        .iter()
        .copied()
        .find(|kernel| kernel.spec.dtype == dtype && kernel.spec.tile.head_dim == kernel_head_dim)
        .ok_or(Error::UnsupportedHeadDim {
            head_dim,
            variant: Variant::Dense,
            largest: 0,
        })
}

/// Looks an exposed kernel up by its PTX entry name: [`Error::UnknownKernel`] where none has it.
///
/// ```
/// use flash_attn::{kernel_by_name, FORWARD_KERNELS};
///
/// let first = &FORWARD_KERNELS[0];
/// assert_eq!(kernel_by_name(first.entry)?, first);
/// assert_eq!(first.entry, first.spec.to_string());
/// assert!(kernel_by_name("flash_fwd_f16_d96").is_err());
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn kernel_by_name(name: &str) -> Result<&'static ForwardKernel, Error> {
    FORWARD_KERNELS
        .iter()
        .find(|kernel| kernel.entry == name)
        .ok_or_else(|| Error::UnknownKernel {
            name: name.to_owned(),
        })
}

/// A loaded kernel entry: its own module (holding only this entry), the function in it, and
/// where its code came from.
struct LoadedEntry {
    function: CUfunction,
    source: KernelSource,
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

/// A CUDA context on one device, loading each kernel on its first use: the cubin built for the
/// device's exact compute capability where there is one (no JIT), else the entry's PTX.
///
/// One module per entry, loaded lazily: the driver JIT-compiles a whole module at once, and
/// ptxas took 3.3 s for the module of 12 entries against 0.2 s for one (on this project's
/// 2-core build machine), so loading them all up front would cost seconds per process where
/// the PTX is JIT-compiled.
pub(crate) struct LoadedKernels {
    /// One slot per `FORWARD_KERNELS` entry, in order: a kernel's slot is at its
    /// [`ForwardKernel::index`]. Field order is drop order: the modules must go before the
    /// context they live in.
    entries: Vec<OnceLock<LoadedEntry>>,
    /// Serialises the JIT of a missing entry, so that two threads never load the same one.
    loading: Mutex<()>,
    pub(crate) device_name: String,
    /// `(major, minor)`: picks the cubin, which must match it exactly.
    pub(crate) compute_capability: (i32, i32),
    /// Streaming multiprocessors: the dispatch table's grid size is relative to them. Queried
    /// once here, so that a launch makes no driver query for it.
    pub(crate) sm_count: usize,
    /// The most dynamic shared memory a block may opt into on this device.
    max_smem_per_block: usize,
    /// The device and whether to force the PTX.
    pub(crate) options: LoadOptions,
    // Keeps the primary context retained while the modules live, and is made current on the
    // calling thread before each launch.
    pub(crate) context: Context,
}

impl LoadedKernels {
    pub(crate) fn load(options: &LoadOptions) -> Result<Self, Error> {
        cust::init(CudaFlags::empty()).map_err(Error::NoGpu)?;
        let device = Device::get_device(options.device).map_err(Error::NoGpu)?;
        let name = device.name()?;
        let compute_capability = (
            device.get_attribute(DeviceAttribute::ComputeCapabilityMajor)?,
            device.get_attribute(DeviceAttribute::ComputeCapabilityMinor)?,
        );
        let sm_count = device.get_attribute(DeviceAttribute::MultiprocessorCount)? as usize;
        // Every device the project supports runs the sm80 family.
        if ptx_target_for(Family::Sm80, compute_capability).is_none() {
            return Err(Error::UnsupportedDevice {
                name,
                compute_capability,
            });
        }
        // A forced target must be one that a device of this compute capability runs, of the
        // family whose kernels it serves.
        if let Some(target) = options.ptx_target {
            let runs_here = ARCHITECTURES.iter().any(|arch| {
                arch.name == target.name
                    && PTX_TARGETS.contains(&arch.name)
                    && if arch.arch_specific {
                        arch.compute_capability == compute_capability
                    } else {
                        arch.compute_capability <= compute_capability
                    }
            });
            if !runs_here {
                return Err(Error::UnsupportedPtxTarget {
                    target: target.name,
                    compute_capability,
                });
            }
        }
        let max_smem_per_block = max_smem_per_block_optin(&device)?;
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
            compute_capability,
            sm_count,
            max_smem_per_block,
            options: *options,
            context,
        })
    }

    /// The loaded function of `kernel`, one of `FORWARD_KERNELS`, loaded on first use.
    /// The context must be current on the calling thread.
    pub(crate) fn function(&self, kernel: &ForwardKernel) -> Result<CUfunction, Error> {
        self.entry(kernel).map(|entry| entry.function)
    }

    /// The PTX target this device JIT-compiles for kernels of `family`: the one the options
    /// force where it is of that family, else the device's own ([`ptx_target_for`]); `None`
    /// where the device runs no PTX of the family.
    pub(crate) fn ptx_target_of(&self, family: Family) -> Option<&'static Architecture> {
        match self.options.ptx_target {
            Some(target) if target.family == family => {
                ARCHITECTURES.iter().find(|arch| arch.name == target.name)
            }
            _ => ptx_target_for(family, self.compute_capability),
        }
    }

    /// Where the code of `kernel` came from, loading it first if it is not loaded yet.
    /// The context must be current on the calling thread.
    pub(crate) fn source(&self, kernel: &ForwardKernel) -> Result<KernelSource, Error> {
        self.entry(kernel).map(|entry| entry.source)
    }

    fn entry(&self, kernel: &ForwardKernel) -> Result<&LoadedEntry, Error> {
        let index = kernel.index();
        let slot = &self.entries[index];
        if let Some(entry) = slot.get() {
            return Ok(entry);
        }
        // A poisoned lock only means another thread's load failed; the slot is still empty.
        let _guard = self
            .loading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = slot.get() {
            return Ok(entry);
        }
        // The exposed kernel itself, whatever a caller's copy of it says.
        let kernel = &FORWARD_KERNELS[index];
        let Some(ptx_target) = self.ptx_target_of(kernel.spec.family) else {
            return Err(Error::KernelNotForDevice {
                kernel: kernel.entry,
                family: kernel.spec.family,
                compute_capability: self.compute_capability,
            });
        };
        if kernel.spec.smem_bytes() > self.max_smem_per_block {
            return Err(Error::SharedMemoryUnavailable {
                kernel: kernel.entry,
                needed: kernel.spec.smem_bytes(),
                available: self.max_smem_per_block,
            });
        }
        let (module, source) = self.load_module(kernel, ptx_target)?;
        let function = module.get_function(kernel.entry)?;
        allow_dynamic_shared_memory(&function, kernel.spec.smem_bytes())?;
        let function = function.to_raw();
        // Cannot be taken: the lock is held and the slot was empty.
        let _ = slot.set(LoadedEntry {
            function,
            source,
            _module: module,
        });
        Ok(slot.get().expect("just set"))
    }

    /// The module of `kernel` alone: its cubin for this device's exact compute capability,
    /// unless forced to PTX, none was built, or the driver refuses it; else its PTX for
    /// `ptx_target` (of its family), JIT-compiled.
    fn load_module(
        &self,
        kernel: &ForwardKernel,
        ptx_target: &Architecture,
    ) -> Result<(Module, KernelSource), Error> {
        let reason = match self
            .options
            .cubin_for(kernel.entry, self.compute_capability)
        {
            Err(reason) => reason,
            Ok(cubin) => match Module::from_cubin(cubin.image, &[]) {
                Ok(module) => return Ok((module, KernelSource::Cubin { arch: cubin.arch })),
                Err(error) => PtxReason::CubinRejected(error),
            },
        };
        let ptx = ptx_of(kernel, ptx_target.name).expect("a PTX target of the kernel's family");
        let module = Module::from_ptx(ptx, &[]).map_err(Error::ModuleLoad)?;
        Ok((module, KernelSource::Ptx(reason)))
    }
}

/// The PTX module of the exposed kernel `entry` for the newest PTX target of its family (sm_80
/// for the sm80 family, sm_90a for the sm90 one), which holds that entry alone: the shard's
/// preamble (version, target, the shared-memory declaration) plus the entry's body. The build
/// assembles these same modules into [`CUBINS`]. `None` where no exposed kernel is `entry`.
pub fn entry_ptx(entry: &str) -> Option<String> {
    let kernel = kernel_by_name(entry).ok()?;
    let newest = kernel.ptx_targets().last()?;
    ptx_of(kernel, newest)
}

/// As [`entry_ptx`], for the PTX target named `target` (one of [`PTX_TARGETS`]); `None` where
/// no exposed kernel is `entry` or the build compiled no PTX of `entry` for `target` (a target
/// of another family).
pub fn entry_ptx_for(entry: &str, target: &str) -> Option<String> {
    ptx_of(kernel_by_name(entry).ok()?, target)
}

/// The PTX of `kernel` for the PTX target `target`, inflated (under a millisecond for one
/// module, against 0.1-0.4 s for the driver to JIT-compile it); `None` where the kernel has no
/// PTX for `target`.
fn ptx_of(kernel: &ForwardKernel, target: &str) -> Option<String> {
    let &(_, deflated) = DEFLATED_PTX[kernel.index]
        .iter()
        .find(|(name, _)| *name == target)?;
    let bytes =
        miniz_oxide::inflate::decompress_to_vec(deflated).expect("build.rs deflated this module");
    Some(String::from_utf8(bytes).expect("PTX is ASCII"))
}

/// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` (cust's `DeviceAttribute` lacks it).
fn max_smem_per_block_optin(device: &Device) -> Result<usize, Error> {
    let mut bytes: c_int = 0;
    // SAFETY: `bytes` is a live int for the driver to write, and the device handle is valid.
    let result = unsafe {
        cust::sys::cuDeviceGetAttribute(
            &mut bytes,
            cust::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            device.as_raw(),
        )
    };
    driver::check("cuDeviceGetAttribute", result)?;
    Ok(bytes.max(0) as usize)
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
    driver::check("cuFuncSetAttribute", result)
}
