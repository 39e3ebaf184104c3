use flash_attn::reference::{attention, error_stats, random_normal, relayout, Precision};
use flash_attn::{AttentionShape, Dtype, Layout};
use half::f16;

fn halves(values: &[f64]) -> Vec<f16> {
    values.iter().map(|&x| f16::from_f64(x)).collect()
}

fn shape(seq_len_q: usize, seq_len_kv: usize, head_dim: usize) -> AttentionShape {
    AttentionShape {
        batch: 1,
        heads_q: 1,
        heads_kv: 1,
        seq_len_q,
        seq_len_kv,
        head_dim,
    }
}

#[test]
fn two_keys_match_the_hand_computed_softmax() {
    // q0 = [1, 0] scores [1, 0] against k; q1 = [0, 2] scores [0, 2].
    let q = halves(&[1.0, 0.0, 0.0, 2.0]);
    let k = halves(&[1.0, 0.0, 0.0, 1.0]);
    let v = halves(&[1.0, 2.0, 3.0, 4.0]);
    let result = attention(&q, &k, &v, shape(2, 2, 2), 1.0, false, Precision::F64);
    let e = std::f64::consts::E;
    let (w0, w1) = (e / (e + 1.0), 1.0 / (e + 1.0));
    let (u0, u1) = (1.0 / (1.0 + e * e), e * e / (1.0 + e * e));
    let expected = [
        w0 + 3.0 * w1,
        2.0 * w0 + 4.0 * w1,
        u0 + 3.0 * u1,
        2.0 * u0 + 4.0 * u1,
    ];
    for (got, want) in result.output.iter().zip(expected) {
        assert!(
            (got - want).abs() < 1e-12,
            "{:?} != {expected:?}",
            result.output
        );
    }
    // logsumexp of [1, 0] and [0, 2].
    assert!((result.logsumexp[0] - (e + 1.0).ln()).abs() < 1e-12);
    assert!((result.logsumexp[1] - (1.0 + e * e).ln()).abs() < 1e-12);
}

#[test]
fn softmax_scale_multiplies_the_scores() {
    // Both queries are [1, 0]: scores [1, 0], scaled by 0.5 to [0.5, 0].
    let q = halves(&[1.0, 0.0, 1.0, 0.0]);
    let k = halves(&[1.0, 0.0, 0.0, 1.0]);
    let v = halves(&[1.0, 0.0, 0.0, 1.0]);
    let result = attention(&q, &k, &v, shape(2, 2, 2), 0.5, false, Precision::F64);
    let w0 = 0.5f64.exp() / (0.5f64.exp() + 1.0);
    for row in result.output.chunks(2) {
        assert!((row[0] - w0).abs() < 1e-12 && (row[1] - (1.0 - w0)).abs() < 1e-12);
    }
}

#[test]
fn causal_masking_is_aligned_to_the_bottom_right() {
    // 2 queries, 3 keys, all scores 0: query 0 sees keys 0..=1, query 1 sees keys 0..=2.
    let q = halves(&[0.0; 2]);
    let k = halves(&[0.0; 3]);
    let v = halves(&[3.0, 6.0, 9.0]);
    let result = attention(&q, &k, &v, shape(2, 3, 1), 1.0, true, Precision::F64);
    assert_eq!(result.output, vec![4.5, 6.0]);
    assert_eq!(result.logsumexp, vec![2f64.ln(), 3f64.ln()]);
}

#[test]
fn queries_before_the_first_key_see_nothing() {
    // 3 queries, 1 key, causal: only the last query (i = 2 >= Sq - Sk) sees the key.
    let q = halves(&[1.0; 3]);
    let k = halves(&[1.0]);
    let v = halves(&[5.0]);
    let result = attention(&q, &k, &v, shape(3, 1, 1), 1.0, true, Precision::F64);
    assert_eq!(result.output, vec![0.0, 0.0, 5.0]);
    assert_eq!(
        result.logsumexp[..2],
        [f64::NEG_INFINITY, f64::NEG_INFINITY]
    );
    assert_eq!(result.logsumexp[2], 1.0);
}

#[test]
fn a_single_key_returns_its_value() {
    let v = random_normal::<f16>(64, 0.5, 1.0, 7);
    let q = random_normal::<f16>(64, 0.5, 1.0, 8);
    let k = random_normal::<f16>(64, 0.5, 1.0, 9);
    let result = attention(&q, &k, &v, shape(1, 1, 64), 0.125, false, Precision::F64);
    for (got, want) in result.output.iter().zip(&v) {
        assert_eq!(*got, want.to_f64());
    }
}

#[test]
fn grouped_query_heads_share_their_kv_head() {
    // GQA with 4 query heads over 2 K/V heads equals MHA with each K/V head repeated twice.
    let gqa = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 9,
        seq_len_kv: 13,
        head_dim: 8,
    };
    let q = random_normal::<f16>(gqa.q_elements().unwrap(), 0.5, 1.0, 1);
    let k = random_normal::<f16>(gqa.kv_elements().unwrap(), 0.5, 1.0, 2);
    let v = random_normal::<f16>(gqa.kv_elements().unwrap(), 0.5, 1.0, 3);
    let head_len = 13 * 8;
    let repeat = |x: &[f16]| -> Vec<f16> {
        x.chunks(head_len)
            .flat_map(|head| head.iter().chain(head).copied().collect::<Vec<_>>())
            .collect()
    };
    let mha = AttentionShape { heads_kv: 4, ..gqa };
    for causal in [false, true] {
        let grouped = attention(&q, &k, &v, gqa, 0.3, causal, Precision::F64);
        let repeated = attention(
            &q,
            &repeat(&k),
            &repeat(&v),
            mha,
            0.3,
            causal,
            Precision::F64,
        );
        assert_eq!(grouped, repeated);
    }
}

#[test]
fn plain_precision_stays_close_to_f64_but_not_equal() {
    let shape = shape(128, 128, 64);
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, 11);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 12);
    let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, 13);
    let exact = attention(&q, &k, &v, shape, 0.125, false, Precision::F64);
    for (dtype, bound) in [(Dtype::F16, 1e-2), (Dtype::Bf16, 5e-2)] {
        let plain = attention(&q, &k, &v, shape, 0.125, false, Precision::Plain(dtype));
        let stats = error_stats(plain.output, &exact.output);
        assert!(
            stats.max_abs > 0.0 && stats.max_abs < bound,
            "{dtype:?}: {stats:?}"
        );
        assert_eq!(stats.non_finite, 0);
    }
}

#[test]
fn error_stats_count_non_finite_outputs() {
    let reference = [1.0, 2.0, 3.0, f64::NEG_INFINITY];
    let stats = error_stats(
        [1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY],
        &reference,
    );
    assert_eq!(stats.non_finite, 2);
    assert_eq!(stats.max_abs, 0.5);
}

#[test]
fn relayout_round_trips() {
    let dims = (2, 3, 5, 8);
    let data: Vec<u32> = (0..2 * 3 * 5 * 8).collect();
    let bshd = relayout(&data, dims, Layout::Bhsd, Layout::Bshd);
    assert_ne!(bshd, data);
    // Element (b=1, h=2, s=3, d=4) of [B, S, H, D].
    assert_eq!(
        bshd[((5 + 3) * 3 + 2) * 8 + 4],
        (((3 + 2) * 5 + 3) * 8 + 4) as u32
    );
    assert_eq!(relayout(&bshd, dims, Layout::Bshd, Layout::Bhsd), data);
}

#[test]
fn random_inputs_have_the_requested_moments() {
    let values = random_normal::<f16>(100_000, 0.5, 2.0, 42);
    let mean = values.iter().map(|x| x.to_f64()).sum::<f64>() / values.len() as f64;
    let variance = values
        .iter()
        .map(|x| (x.to_f64() - mean).powi(2))
        .sum::<f64>()
        / values.len() as f64;
    assert!((mean - 0.5).abs() < 0.03, "mean {mean}");
    assert!(
        (variance.sqrt() - 2.0).abs() < 0.03,
        "std {}",
        variance.sqrt()
    );
    assert_ne!(values, random_normal::<f16>(100_000, 0.5, 2.0, 43));
}
