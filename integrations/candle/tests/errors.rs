//! The errors that need no GPU: tensors on the CPU, options this crate does not take, ALiBi
//! slopes of the wrong dtype or shape (dense and serving calls).

use candle_core::{DType, Device, Tensor};
use flash_attn_candle::{
    flash_attn, flash_attn_alibi, flash_attn_alibi_windowed_softcap, flash_attn_kv_cache,
    flash_attn_kv_cache_alibi, flash_attn_paged_kv_cache_alibi, flash_attn_varlen,
    flash_attn_varlen_alibi, flash_attn_with_options, ForwardOptions,
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
            "alibi_slopes must be [heads_q] or [batch, heads_q] of the call's [batch, heads_q]: [2] against [2, 4]",
        ),
        (
            tensor(&[4, 2], DType::F32),
            "alibi_slopes must be [heads_q] or [batch, heads_q] of the call's [batch, heads_q]: [4, 2]",
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

#[test]
fn serving_alibi_slopes_are_checked_against_the_calls_batch_and_heads() {
    let options = ForwardOptions::default();
    // A KV cache and a paged cache: q [batch 2, 1 new token, heads_q 4, head_dim 64].
    let q = tensor(&[2, 1, 4, 64], DType::F16);
    let cache = tensor(&[2, 64, 2, 64], DType::F16);
    let pages = tensor(&[8, 16, 2, 64], DType::F16);
    let cache_lens = Tensor::new(&[16u32, 64], &Device::Cpu).unwrap();
    let block_table = Tensor::new(&[[0u32, 1, 2, 3], [4, 5, 6, 7]], &Device::Cpu).unwrap();
    // A varlen batch of 3 sequences (2 + 3 + 5 tokens), 4 query heads.
    let packed_q = tensor(&[10, 4, 64], DType::F16);
    let packed_kv = tensor(&[10, 2, 64], DType::F16);
    let cu_seqlens: &[u32] = &[0, 2, 5, 10];
    let calls = |slopes: &Tensor| {
        [
            flash_attn_kv_cache_alibi(&q, &cache, &cache, &cache_lens, slopes, &options),
            flash_attn_paged_kv_cache_alibi(
                &q,
                &pages,
                &pages,
                &block_table,
                &cache_lens,
                slopes,
                &options,
            ),
        ]
        .map(|result| result.unwrap_err().to_string())
    };
    let varlen = |slopes: &Tensor| {
        flash_attn_varlen_alibi(
            &packed_q, &packed_kv, &packed_kv, cu_seqlens, cu_seqlens, slopes, &options,
        )
        .unwrap_err()
        .to_string()
    };
    let shape_error = "alibi_slopes must be [heads_q] or [batch, heads_q] of the call's \
                       [batch, heads_q]";
    for error in calls(&tensor(&[3, 4], DType::F32)) {
        assert!(
            error.contains(&format!("{shape_error}: [3, 4] against [2, 4]")),
            "unexpected error: {error}"
        );
    }
    for error in calls(&tensor(&[4], DType::BF16)) {
        assert!(
            error.contains("alibi_slopes is BF16; expected f32"),
            "unexpected error: {error}"
        );
    }
    // Slopes that fit (per head, per sequence and head): the CPU tensors are refused next.
    for slopes in [tensor(&[4], DType::F32), tensor(&[2, 4], DType::F32)] {
        for error in calls(&slopes) {
            assert!(
                error.contains("q is on Cpu, not a CUDA device"),
                "unexpected error: {error}"
            );
        }
    }
    // Varlen: the batch is the number of sequences, cu_seqlens_q.len() - 1.
    let error = varlen(&tensor(&[2, 4], DType::F32));
    assert!(
        error.contains(&format!("{shape_error}: [2, 4] against [3, 4]")),
        "unexpected error: {error}"
    );
    let error = varlen(&tensor(&[4, 1], DType::F32));
    assert!(error.contains(shape_error), "unexpected error: {error}");
    for slopes in [tensor(&[4], DType::F32), tensor(&[3, 4], DType::F32)] {
        let error = varlen(&slopes);
        assert!(
            error.contains("q is on Cpu, not a CUDA device"),
            "unexpected error: {error}"
        );
    }
}
