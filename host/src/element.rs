//! The element types the kernels take: fp16 and bf16, as half 1.8's types (the element types of
//! cust's device buffers) and, with the `half2` feature, as half 2's.

use cust::memory::DeviceCopy;
use flash_attn_params::Dtype;

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    #[cfg(feature = "half2")]
    impl Sealed for half2::f16 {}
    #[cfg(feature = "half2")]
    impl Sealed for half2::bf16 {}
}

/// A 16-bit element type of Q, K, V and O as cust's device buffers hold it: `half::f16` or
/// `half::bf16` of half 1.8, for which cust implements `DeviceCopy` (its `impl_half` feature).
/// The kernels accumulate in f32 either way. See [`HalfElement`] for half 2's types.
pub trait Element: DeviceCopy + bytemuck::Pod + Send + Sync + sealed::Sealed + 'static {
    /// The element type as the kernels and [`crate::plan`] name it.
    const DTYPE: Dtype;
    /// The value, exactly.
    fn to_f64(self) -> f64;
    /// `value` rounded to the nearest value of the type.
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

/// A 16-bit element type as a caller holds it: an [`Element`] (half 1.8's `f16` and `bf16`)
/// or, with the `half2` feature, half 2's `f16` and `bf16`, the version candle, cudarc, burn
/// and mistral.rs use. The calls that take host slices ([`crate::FlashAttention::forward_host`],
/// [`crate::reference`]) and, with the `cudarc` feature, cudarc buffers take any
/// `HalfElement`; cust's device buffers hold an [`Element`].
///
/// Each is the same 16 bits, read the same way (IEEE binary16, bfloat16), as its half 1.8 type
/// [`HalfElement::Half1`]. Both versions' types are `#[repr(transparent)]` over a `u16` and
/// `bytemuck::Pod`, so a slice of one is viewed as a slice of the other through `bytemuck`:
/// no copy, no conversion and no unsafe code.
///
/// Why half 2's types are not [`Element`]s: cust's buffers need `DeviceCopy`, which is cust's
/// trait on half's types, so by the orphan rule only cust or half could implement it for half
/// 2's, and neither does.
///
/// ```
/// use flash_attn::{Dtype, Element, HalfElement};
///
/// fn dtype_of<T: HalfElement>(_: &[T]) -> Dtype {
///     T::Half1::DTYPE
/// }
/// assert_eq!(dtype_of(&[half::bf16::ONE]), Dtype::Bf16);
/// ```
pub trait HalfElement: bytemuck::Pod + Send + Sync + sealed::Sealed + 'static {
    /// The half 1.8 type of the same bits and meaning: the type itself for an [`Element`].
    type Half1: Element;
}

impl<T: Element> HalfElement for T {
    type Half1 = T;
}

#[cfg(feature = "half2")]
impl HalfElement for half2::f16 {
    type Half1 = half::f16;
}

#[cfg(feature = "half2")]
impl HalfElement for half2::bf16 {
    type Half1 = half::bf16;
}

/// `values` as the half 1.8 elements of the same bits, without a copy. Cannot panic: every
/// `HalfElement` is 2 bytes aligned to 2, as its `Half1` is (the trait is sealed).
pub(crate) fn as_half1<T: HalfElement>(values: &[T]) -> &[T::Half1] {
    bytemuck::cast_slice(values)
}

/// `values` as elements of type `T`, the same allocation: no copy. Cannot panic, as
/// [`as_half1`].
pub(crate) fn from_half1<T: HalfElement>(values: Vec<T::Half1>) -> Vec<T> {
    bytemuck::allocation::cast_vec(values)
}

/// `value` rounded to the nearest `T`.
pub(crate) fn half_from_f64<T: HalfElement>(value: f64) -> T {
    bytemuck::cast(T::Half1::from_f64(value))
}

/// Rounds `value` to the nearest value of `dtype`.
pub fn round_to(dtype: Dtype, value: f64) -> f64 {
    match dtype {
        Dtype::F16 => half::f16::from_f64(value).to_f64(),
        Dtype::Bf16 => half::bf16::from_f64(value).to_f64(),
    }
}
