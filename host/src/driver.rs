//! The one place where a raw driver result becomes an [`Error`], for the driver calls that cust
//! does not wrap, and the driver functions its bindings lack.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use cust::sys::{cuGetProcAddress, CUresult};
use flash_attn_params::TENSOR_MAP_BYTES;

use crate::Error;

/// `Ok` for `CUDA_SUCCESS`, else [`Error::DriverCall`] naming `call` and the `CUresult` code.
pub(crate) fn check(call: &'static str, result: CUresult) -> Result<(), Error> {
    match result {
        CUresult::CUDA_SUCCESS => Ok(()),
        failure => Err(Error::DriverCall {
            call,
            code: failure as u32,
        }),
    }
}

/// `cuTensorMapEncodeTiled` (CUDA 12.0), which cust 0.3's bindings lack.
pub(crate) type TensorMapEncodeTiled = unsafe extern "C" fn(
    map: *mut [u64; TENSOR_MAP_BYTES / 8],
    data_type: u32,
    rank: u32,
    address: *mut c_void,
    dims: *const u64,
    byte_strides: *const u64,
    box_dims: *const u32,
    element_strides: *const u32,
    interleave: u32,
    swizzle: u32,
    l2_promotion: u32,
    oob_fill: u32,
) -> CUresult;

/// The driver's `cuTensorMapEncodeTiled`, looked up once through `cuGetProcAddress` rather than
/// linked: a binary that names it would not start on a driver older than 12.0, where every
/// kernel but the sm90 family's still runs. [`Error::DriverCall`] where the driver has none.
pub(crate) fn tensor_map_encode_tiled() -> Result<TensorMapEncodeTiled, Error> {
    const SYMBOL: &CStr = c"cuTensorMapEncodeTiled";
    // The CUDA version whose ABI of the function is asked for: 12.0, where it appeared.
    const CUDA_VERSION: i32 = 12000;
    static FUNCTION: OnceLock<Result<usize, u32>> = OnceLock::new();
    let address = FUNCTION.get_or_init(|| {
        let mut function: *mut c_void = std::ptr::null_mut();
        // SAFETY: `SYMBOL` is a NUL-terminated name and `function` a place for the address.
        let result = unsafe { cuGetProcAddress(SYMBOL.as_ptr(), &mut function, CUDA_VERSION, 0) };
        match result {
            CUresult::CUDA_SUCCESS if !function.is_null() => Ok(function as usize),
            CUresult::CUDA_SUCCESS => Err(CUresult::CUDA_ERROR_NOT_FOUND as u32),
            failure => Err(failure as u32),
        }
    });
    match *address {
        // SAFETY: the driver gave this address for the symbol at CUDA 12.0's ABI, which is
        // `TensorMapEncodeTiled`'s.
        Ok(address) => Ok(unsafe { std::mem::transmute::<usize, TensorMapEncodeTiled>(address) }),
        Err(code) => Err(Error::DriverCall {
            call: "cuGetProcAddress(cuTensorMapEncodeTiled)",
            code,
        }),
    }
}
