use flash_attn::reference::{attention, error_stats, random_normal_f16, Precision};
use flash_attn::AttentionShape;
use half::f16;

fn halves(values: &[f64]) -> Vec<f16> {
    values.iter().map(|&x| f16::from_f64(x)).collect()
}

fn shape(seq_len: usize, head_dim: usize) -> AttentionShape {
    AttentionShape {
        batch: 1,
        heads: 1,
        seq_len,
        head_dim,
    }
}

#[test]
fn two_keys_match_the_hand_computed_softmax() {
    // q0 = [1, 0] scores [1, 0] against k; q1 = [0, 2] scores [0, 2].
    let q = halves(&[1.0, 0.0, 0.0, 2.0]);
    let k = halves(&[1.0, 0.0, 0.0, 1.0]);
    let v = halves(&[1.0, 2.0, 3.0, 4.0]);
    let output = attention(&q, &k, &v, shape(2, 2), 1.0, Precision::F64);
    let e = std::f64::consts::E;
    let (w0, w1) = (e / (e + 1.0), 1.0 / (e + 1.0));
    let (u0, u1) = (1.0 / (1.0 + e * e), e * e / (1.0 + e * e));
    let expected = [
        w0 + 3.0 * w1,
        2.0 * w0 + 4.0 * w1,
        u0 + 3.0 * u1,
        2.0 * u0 + 4.0 * u1,
    ];
    for (got, want) in output.iter().zip(expected) {
        assert!((got - want).abs() < 1e-12, "{output:?} != {expected:?}");
    }
}

#[test]
fn softmax_scale_multiplies_the_scores() {
    // Both queries are [1, 0]: scores [1, 0], scaled by 0.5 to [0.5, 0].
    let q = halves(&[1.0, 0.0, 1.0, 0.0]);
    let k = halves(&[1.0, 0.0, 0.0, 1.0]);
    let v = halves(&[1.0, 0.0, 0.0, 1.0]);
    let output = attention(&q, &k, &v, shape(2, 2), 0.5, Precision::F64);
    let w0 = 0.5f64.exp() / (0.5f64.exp() + 1.0);
    for row in output.chunks(2) {
        assert!(
            (row[0] - w0).abs() < 1e-12 && (row[1] - (1.0 - w0)).abs() < 1e-12,
            "{output:?}"
        );
    }
}

#[test]
fn a_single_key_returns_its_value() {
    let v = random_normal_f16(64, 0.5, 1.0, 7);
    let q = random_normal_f16(64, 0.5, 1.0, 8);
    let k = random_normal_f16(64, 0.5, 1.0, 9);
    let output = attention(&q, &k, &v, shape(1, 64), 0.125, Precision::F64);
    for (got, want) in output.iter().zip(&v) {
        assert_eq!(*got, want.to_f64());
    }
}

#[test]
fn equal_scores_average_the_values() {
    let seq_len = 8;
    let q = vec![f16::ZERO; seq_len * 4];
    let k = random_normal_f16(seq_len * 4, 0.5, 1.0, 1);
    let v = random_normal_f16(seq_len * 4, 0.5, 1.0, 2);
    let output = attention(&q, &k, &v, shape(seq_len, 4), 1.0, Precision::F64);
    for d in 0..4 {
        let mean = (0..seq_len).map(|s| v[s * 4 + d].to_f64()).sum::<f64>() / seq_len as f64;
        for row in 0..seq_len {
            assert!((output[row * 4 + d] - mean).abs() < 1e-12);
        }
    }
}

#[test]
fn heads_are_independent() {
    let shape = AttentionShape {
        batch: 2,
        heads: 3,
        seq_len: 16,
        head_dim: 8,
    };
    let q = random_normal_f16(shape.elements(), 0.5, 1.0, 3);
    let k = random_normal_f16(shape.elements(), 0.5, 1.0, 4);
    let v = random_normal_f16(shape.elements(), 0.5, 1.0, 5);
    let all = attention(&q, &k, &v, shape, 0.3, Precision::F64);
    let head_len = 16 * 8;
    let single = AttentionShape {
        batch: 1,
        heads: 1,
        ..shape
    };
    for head in 0..6 {
        let range = head * head_len..(head + 1) * head_len;
        let alone = attention(
            &q[range.clone()],
            &k[range.clone()],
            &v[range.clone()],
            single,
            0.3,
            Precision::F64,
        );
        assert_eq!(alone, all[range]);
    }
}

#[test]
fn plain_f16_stays_close_to_f64_but_not_equal() {
    let shape = shape(128, 64);
    let q = random_normal_f16(shape.elements(), 0.5, 1.0, 11);
    let k = random_normal_f16(shape.elements(), 0.5, 1.0, 12);
    let v = random_normal_f16(shape.elements(), 0.5, 1.0, 13);
    let exact = attention(&q, &k, &v, shape, 0.125, Precision::F64);
    let plain = attention(&q, &k, &v, shape, 0.125, Precision::PlainF16);
    let stats = error_stats(plain.iter().copied(), &exact);
    assert!(stats.max_abs > 0.0 && stats.max_abs < 1e-2, "{stats:?}");
    assert_eq!(stats.non_finite, 0);
}

#[test]
fn error_stats_count_non_finite_outputs() {
    let reference = [1.0, 2.0, 3.0];
    let stats = error_stats([1.5, f64::NAN, f64::INFINITY], &reference);
    assert_eq!(stats.non_finite, 2);
    assert_eq!(stats.max_abs, 0.5);
}

#[test]
fn random_inputs_have_the_requested_moments() {
    let values = random_normal_f16(100_000, 0.5, 2.0, 42);
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
    assert_ne!(values, random_normal_f16(100_000, 0.5, 2.0, 43));
}
