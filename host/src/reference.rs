//! CPU attention in f64, to check GPU results against, and a plain-fp16 model that sets the
//! error budget.
//!
//! Tensors are `[batch, heads, seq_len, head_dim]`, contiguous.

use half::f16;

use crate::AttentionShape;

/// How the arithmetic of [`attention`] is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Everything in f64: the reference.
    F64,
    /// What a plain fp16 implementation computes: scores and probabilities rounded to fp16,
    /// products accumulated in f32, the output rounded to fp16. Its error against [`Precision::F64`]
    /// is the yardstick for a fused kernel's error.
    PlainF16,
}

/// Softmax attention `softmax(Q Kᵀ · scale) V` for every (batch, head), computed on the CPU
/// with one thread per available core. Panics if a slice is shorter than the shape needs.
pub fn attention(
    q: &[f16],
    k: &[f16],
    v: &[f16],
    shape: AttentionShape,
    softmax_scale: f64,
    precision: Precision,
) -> Vec<f64> {
    let head_len = shape.seq_len * shape.head_dim;
    let heads = shape.batch * shape.heads;
    let required = heads * head_len;
    assert!(q.len() >= required && k.len() >= required && v.len() >= required);
    let mut output = vec![0.0; required];
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(heads)
        .max(1);
    let heads_per_thread = heads.div_ceil(threads);
    std::thread::scope(|scope| {
        for (chunk_index, chunk) in output.chunks_mut(heads_per_thread * head_len).enumerate() {
            scope.spawn(move || {
                for (i, head_output) in chunk.chunks_mut(head_len).enumerate() {
                    let head = chunk_index * heads_per_thread + i;
                    let range = head * head_len..(head + 1) * head_len;
                    one_head(
                        &q[range.clone()],
                        &k[range.clone()],
                        &v[range],
                        shape,
                        softmax_scale,
                        precision,
                        head_output,
                    );
                }
            });
        }
    });
    output
}

fn round_f16(x: f64) -> f64 {
    f16::from_f64(x).to_f64()
}

fn one_head(
    q: &[f16],
    k: &[f16],
    v: &[f16],
    shape: AttentionShape,
    softmax_scale: f64,
    precision: Precision,
    output: &mut [f64],
) {
    let (seq_len, head_dim) = (shape.seq_len, shape.head_dim);
    let to_f64 = |x: &f16| x.to_f64();
    let (q, k, v): (Vec<f64>, Vec<f64>, Vec<f64>) = (
        q.iter().map(to_f64).collect(),
        k.iter().map(to_f64).collect(),
        v.iter().map(to_f64).collect(),
    );
    let mut scores = vec![0.0; seq_len];
    for row in 0..seq_len {
        let query = &q[row * head_dim..(row + 1) * head_dim];
        for (key_index, score) in scores.iter_mut().enumerate() {
            let key = &k[key_index * head_dim..(key_index + 1) * head_dim];
            *score = match precision {
                Precision::F64 => dot(query, key),
                Precision::PlainF16 => round_f16(dot_f32(query, key)),
            } * softmax_scale;
        }
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut sum = 0.0;
        for score in scores.iter_mut() {
            *score = match precision {
                Precision::F64 => (*score - max).exp(),
                Precision::PlainF16 => ((*score - max) as f32).exp() as f64,
            };
            sum += *score;
        }
        let out = &mut output[row * head_dim..(row + 1) * head_dim];
        out.fill(0.0);
        match precision {
            Precision::F64 => {
                for (key_index, &weight) in scores.iter().enumerate() {
                    let value = &v[key_index * head_dim..(key_index + 1) * head_dim];
                    for (o, &x) in out.iter_mut().zip(value) {
                        *o += weight / sum * x;
                    }
                }
            }
            Precision::PlainF16 => {
                let mut accumulator = vec![0f32; head_dim];
                for (key_index, &weight) in scores.iter().enumerate() {
                    let probability = round_f16(weight / sum) as f32;
                    let value = &v[key_index * head_dim..(key_index + 1) * head_dim];
                    for (a, &x) in accumulator.iter_mut().zip(value) {
                        *a += probability * x as f32;
                    }
                }
                for (o, a) in out.iter_mut().zip(accumulator) {
                    *o = round_f16(a as f64);
                }
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn dot_f32(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x as f32 * y as f32)
        .sum::<f32>() as f64
}

/// Error statistics of `actual` against `reference`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    pub max_abs: f64,
    pub mean_abs: f64,
    /// Elements that are NaN or infinite in `actual`.
    pub non_finite: usize,
}

/// Compares two equally long outputs element by element.
pub fn error_stats(actual: impl IntoIterator<Item = f64>, reference: &[f64]) -> ErrorStats {
    let (mut max_abs, mut sum_abs, mut non_finite, mut count) = (0.0f64, 0.0, 0, 0usize);
    for (a, r) in actual.into_iter().zip(reference) {
        count += 1;
        if !a.is_finite() {
            non_finite += 1;
            continue;
        }
        let error = (a - r).abs();
        max_abs = max_abs.max(error);
        sum_abs += error;
    }
    assert_eq!(count, reference.len(), "outputs differ in length");
    ErrorStats {
        max_abs,
        mean_abs: sum_abs / count.max(1) as f64,
        non_finite,
    }
}

/// Deterministic normally distributed fp16 test data (SplitMix64 + Box-Muller), so that tests
/// and benchmarks need no RNG dependency and a failing seed can be replayed.
pub fn random_normal_f16(len: usize, mean: f64, std_dev: f64, seed: u64) -> Vec<f16> {
    let mut state = seed;
    let mut next_unit = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // 53 random bits in (0, 1]: never 0, so the logarithm below is finite.
        ((z >> 11) + 1) as f64 / (1u64 << 53) as f64
    };
    (0..len)
        .map(|_| {
            let (u1, u2) = (next_unit(), next_unit());
            let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            f16::from_f64(mean + std_dev * normal)
        })
        .collect()
}
