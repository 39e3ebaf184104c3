//! The element types the kernels take: fp16 and bf16.

use cust::memory::DeviceCopy;
use flash_attn_params::Dtype;

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// A 16-bit element type of Q, K, V and O (`half::f16` or `half::bf16`). The kernels
/// accumulate in f32 either way.
pub trait Element: DeviceCopy + Copy + Send + Sync + sealed::Sealed + 'static {
    const DTYPE: Dtype;
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl Element for half::f16 {
    const DTYPE: Dtype = Dtype::F16;
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn from_f64(value: f64) -> Self {
        half::f16::from_f64(value)
    }
}

impl Element for half::bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
    fn from_f64(value: f64) -> Self {
        half::bf16::from_f64(value)
    }
}

/// Rounds `value` to the nearest value of `dtype`.
pub fn round_to(dtype: Dtype, value: f64) -> f64 {
    match dtype {
        Dtype::F16 => half::f16::from_f64(value).to_f64(),
        Dtype::Bf16 => half::bf16::from_f64(value).to_f64(),
    }
}
