//! The errors that need no GPU: tensors on the CPU, options this crate does not take, ALiBi
//! slopes of the wrong dtype or shape.

use candle_core::{DType, Device, Tensor};
use flash_attn_candle::{
    flash_attn, flash_attn_alibi, flash_attn_alibi_windowed_softcap, flash_attn_kv_cache,
    flash_attn_varlen, flash_attn_with_options, ForwardOptions,
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

#[test]
fn alibi_slopes_of_the_wrong_dtype_or_shape_are_refused_by_name() {
    // q [batch 2, seq 16, heads_q 4, head_dim 64], k and v with 2 heads.
    let q = tensor(&[2, 16, 4, 64], DType::F16);
    let kv = tensor(&[2, 16, 2, 64], DType::F16);
    let cases = [
        (
            tensor(&[4], DType::F16),
            "alibi_slopes is F16; expected f32",
        ),
        (
            tensor(&[2], DType::F32),
            "alibi_slopes must be [heads_q] or [batch, heads_q] of q: [2] against [2, 16, 4, 64]",
        ),
        (
            tensor(&[4, 2], DType::F32),
            "alibi_slopes must be [heads_q] or [batch, heads_q] of q",
        ),
        (
            tensor(&[2, 4, 1], DType::F32),
            "alibi_slopes has dims [2, 4, 1]; expected [heads_q] or [batch, heads_q]",
        ),
        // Slopes that fit: the CPU tensors are refused next.
        (
            tensor(&[2, 4], DType::F32),
            "q is on Cpu, not a CUDA device",
        ),
    ];
    for (slopes, expected) in cases {
        let error = flash_attn_alibi(&q, &kv, &kv, &slopes, 0.125, true)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "unexpected error: {error}");
    }
    let slopes = tensor(&[4], DType::BF16);
    let error =
        flash_attn_alibi_windowed_softcap(&q, &kv, &kv, Some(&slopes), 0.125, None, None, 30.0)
            .unwrap_err()
            .to_string();
    assert!(
        error.contains("alibi_slopes is BF16; expected f32"),
        "unexpected error: {error}"
    );
}
