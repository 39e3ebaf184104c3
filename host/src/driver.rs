//! The one place where a raw driver result becomes an [`Error`], for the driver calls that cust
//! does not wrap.

use cust::sys::CUresult;

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
