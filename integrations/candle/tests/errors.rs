//! The errors that need no GPU: tensors on the CPU, options this crate does not take.

use candle_core::{DType, Device, Tensor};
use flash_attn_candle::{
    flash_attn, flash_attn_kv_cache, flash_attn_varlen, flash_attn_with_options, ForwardOptions,
};

fn tensor(dims: &[usize], dtype: DType) -> Tensor {
    Tensor::zeros(dims, dtype, &Device::Cpu).unwrap()
}

#[test]
fn cpu_tensors_are_refused_by_name() {
    let q = tensor(&[1, 16, 2, 64], DType::BF16);
    let error = flash_attn(&q, &q, &q, 0.125, true).unwrap_err().to_string();
    assert!(
        error.contains("q is on Cpu, not a CUDA device"),
        "unexpected error: {error}"
    );

    let cache_lens = Tensor::new(&[16u32], &Device::Cpu).unwrap();
    let options = ForwardOptions::default();
    let error = flash_attn_kv_cache(&q, &q, &q, &cache_lens, &options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("not a CUDA device"),
        "unexpected error: {error}"
    );

    let packed = tensor(&[16, 2, 64], DType::F16);
    let error = flash_attn_varlen(&packed, &packed, &packed, &[0, 16], &[0, 16], &options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("not a CUDA device"),
        "unexpected error: {error}"
    );
}

#[test]
fn explicit_strides_are_refused() {
    let q = tensor(&[1, 16, 2, 64], DType::BF16);
    let shape = flash_attn::AttentionShape::new(1, 2, 16, 64);
    let options = ForwardOptions {
        strides: Some(ForwardOptions::default().resolved_strides(&shape).unwrap()),
        ..ForwardOptions::default()
    };
    let error = flash_attn_with_options(&q, &q, &q, &options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("ForwardOptions::strides must be None"),
        "unexpected error: {error}"
    );
}
