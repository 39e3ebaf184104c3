//! The raw launch: the only place where device addresses cross to the GPU.

use std::ffi::c_void;

use cust::sys::{cuLaunchKernel, CUfunction, CUstream};
use flash_attn_params::KernelSpec;

use crate::{driver, Error};

/// Enqueues one forward kernel on `stream` without waiting for it.
///
/// # Safety
/// - `function` is the entry compiled for `spec`, from a module loaded in the context current
///   on this thread, and `stream` belongs to that context.
/// - `params` is the kernel's argument type (`ForwardParams` for a dense kernel,
///   `ServingParams` for a serving one) and satisfies the kernel's contract (`flash_attn_kernels::fwd::sm80::forward`): every
///   row its strides name for `grid` is a 16-byte-aligned device address that stays valid until
///   the kernel finishes, readable for q, k, v and writable for o (and lse, if not 0); output
///   rows don't overlap each other or the inputs.
pub(crate) unsafe fn launch_forward(
    stream: CUstream,
    function: CUfunction,
    spec: &KernelSpec,
    grid: (u32, u32, u32),
    mut params: impl Copy,
) -> Result<(), Error> {
    // The kernel takes one by-value argument, a `#[repr(C)]` parameter struct: the driver
    // copies its size (from the kernel's signature) from this pointer before returning.
    let mut arguments = [&mut params as *mut _ as *mut c_void];
    let result = cuLaunchKernel(
        function,
        grid.0,
        grid.1,
        grid.2,
        spec.tile.threads() as u32,
        1,
        1,
        spec.smem_bytes() as u32,
        stream,
        arguments.as_mut_ptr(),
        std::ptr::null_mut(),
    );
    driver::check("cuLaunchKernel", result)
}
