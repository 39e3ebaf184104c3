//! CPU attention in f64, to check GPU results against, and a plain 16-bit model of it that sets
//! the error budget.
//!
//! Tensors are dense `[batch, heads, seq_len, head_dim]` ([`crate::Layout::Bhsd`]); use
//! [`relayout`] for others. Causal masking is aligned to the bottom right, as in the kernels.

use flash_attn_params::Dtype;

use crate::{round_to, AttentionShape, Element, Layout};

/// How the arithmetic of [`attention`] is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Everything in f64: the reference.
    F64,
    /// What a plain (unfused) 16-bit implementation computes: scores and probabilities
    /// rounded to `dtype`, products accumulated in f32, the output rounded to `dtype`. Its
    /// error against [`Precision::F64`] is the yardstick for a fused kernel's error.
    Plain(Dtype),
    /// As [`Precision::Plain`] but with scores kept in f32, as a fused kernel keeps them: the
    /// yardstick where scores overflow the 16-bit range.
    Mixed(Dtype),
}

/// The reference results: `output` is `[batch, heads_q, seq_len_q, head_dim]`, `logsumexp`
/// (natural log of the sum of exponentiated scaled scores) `[batch, heads_q, seq_len_q]`. A
/// query row that sees no key has output 0 and logsumexp -inf.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceOutput {
    pub output: Vec<f64>,
    pub logsumexp: Vec<f64>,
}

/// Query rows per unit of parallel work.
const ROWS_PER_TASK: usize = 16;

/// Softmax attention `softmax(Q Kᵀ · scale) V` on the CPU, one thread per available core.
/// Panics if a slice is shorter than the dense shape needs.
pub fn attention<T: Element>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    softmax_scale: f64,
    causal: bool,
    precision: Precision,
) -> ReferenceOutput {
    assert!(
        q.len() >= shape.q_elements()
            && k.len() >= shape.kv_elements()
            && v.len() >= shape.kv_elements()
    );
    let d = shape.head_dim;
    let rows = shape.lse_elements();
    // Converted once: a 16-bit to f64 conversion per multiply-add would dominate the run time.
    let to_f64 = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let (q, k, v) = (&to_f64(q), &to_f64(k), &to_f64(v));
    let mut output = vec![0.0; rows * d];
    let mut logsumexp = vec![0.0; rows];
    let tasks: Vec<(usize, &mut [f64], &mut [f64])> = output
        .chunks_mut(ROWS_PER_TASK * d)
        .zip(logsumexp.chunks_mut(ROWS_PER_TASK))
        .enumerate()
        .map(|(task, (out, lse))| (task * ROWS_PER_TASK, out, lse))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut per_thread: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (index, task) in tasks.into_iter().enumerate() {
        per_thread[index % threads].push(task);
    }
    std::thread::scope(|scope| {
        for tasks in per_thread {
            scope.spawn(move || {
                let mut scores = vec![0.0; shape.seq_len_kv];
                for (first_row, out, lse) in tasks {
                    for (i, (row_out, row_lse)) in out.chunks_mut(d).zip(lse.iter_mut()).enumerate()
                    {
                        let row = first_row + i;
                        *row_lse = one_row(
                            q,
                            k,
                            v,
                            shape,
                            softmax_scale,
                            causal,
                            precision,
                            row,
                            &mut scores,
                            row_out,
                        );
                    }
                }
            });
        }
    });
    ReferenceOutput { output, logsumexp }
}

/// Computes query row `row` (over all batches and heads) into `out`; returns its logsumexp.
#[allow(clippy::too_many_arguments)]
fn one_row(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    shape: AttentionShape,
    scale: f64,
    causal: bool,
    precision: Precision,
    row: usize,
    scores: &mut [f64],
    out: &mut [f64],
) -> f64 {
    let d = shape.head_dim;
    let (head_row, query) = (row / shape.seq_len_q, row % shape.seq_len_q);
    let (batch, head) = (head_row / shape.heads_q, head_row % shape.heads_q);
    let kv_head = head / (shape.heads_q / shape.heads_kv);
    let kv_base = (batch * shape.heads_kv + kv_head) * shape.seq_len_kv * d;
    let query_values = &q[row * d..(row + 1) * d];
    // Keys 0..visible are seen: all of them, or up to the bottom-right-aligned diagonal.
    let visible = if causal {
        (query + 1 + shape.seq_len_kv)
            .saturating_sub(shape.seq_len_q)
            .min(shape.seq_len_kv)
    } else {
        shape.seq_len_kv
    };
    out.fill(0.0);
    if visible == 0 {
        return f64::NEG_INFINITY;
    }
    let scores = &mut scores[..visible];
    for (key, score) in scores.iter_mut().enumerate() {
        let key_values = &k[kv_base + key * d..kv_base + (key + 1) * d];
        *score = match precision {
            Precision::F64 => query_values
                .iter()
                .zip(key_values)
                .map(|(a, b)| a * b)
                .sum(),
            Precision::Plain(_) | Precision::Mixed(_) => {
                let dot: f32 = query_values
                    .iter()
                    .zip(key_values)
                    .map(|(&a, &b)| a as f32 * b as f32)
                    .sum();
                match precision {
                    Precision::Plain(dtype) => round_to(dtype, dot as f64),
                    _ => dot as f64,
                }
            }
        } * scale;
    }
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for score in scores.iter_mut() {
        *score = match precision {
            Precision::F64 => (*score - max).exp(),
            Precision::Plain(_) | Precision::Mixed(_) => ((*score - max) as f32).exp() as f64,
        };
        sum += *score;
    }
    let value_row = |key: usize| &v[kv_base + key * d..kv_base + (key + 1) * d];
    match precision {
        Precision::F64 => {
            for (key, &weight) in scores.iter().enumerate() {
                for (o, x) in out.iter_mut().zip(value_row(key)) {
                    *o += weight / sum * x;
                }
            }
        }
        Precision::Plain(dtype) | Precision::Mixed(dtype) => {
            let mut accumulator = vec![0f32; d];
            for (key, &weight) in scores.iter().enumerate() {
                let probability = round_to(dtype, weight / sum) as f32;
                for (a, x) in accumulator.iter_mut().zip(value_row(key)) {
                    *a += probability * *x as f32;
                }
            }
            for (o, a) in out.iter_mut().zip(accumulator) {
                *o = round_to(dtype, a as f64);
            }
        }
    }
    max + sum.ln()
}

/// Error statistics of `actual` against `reference`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorStats {
    pub max_abs: f64,
    pub mean_abs: f64,
    /// Elements that are NaN or infinite in `actual` where `reference` is finite, or that
    /// differ in kind from a non-finite `reference` (NaN vs infinity, or the sign).
    pub non_finite: usize,
}

/// Compares two equally long outputs element by element. Where both are the same infinity the
/// element counts as exact.
pub fn error_stats(actual: impl IntoIterator<Item = f64>, reference: &[f64]) -> ErrorStats {
    let (mut max_abs, mut sum_abs, mut non_finite, mut count) = (0.0f64, 0.0, 0, 0usize);
    for (a, &r) in actual.into_iter().zip(reference) {
        count += 1;
        if a.is_infinite() && a == r {
            continue;
        }
        if !a.is_finite() || !r.is_finite() {
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

/// Copies a dense `[batch, heads, seq_len, head_dim]`-shaped tensor from one layout to another.
pub fn relayout<T: Copy>(
    data: &[T],
    (batch, heads, seq_len, head_dim): (usize, usize, usize, usize),
    from: Layout,
    to: Layout,
) -> Vec<T> {
    let (source, target) = (
        from.strides(heads, seq_len, head_dim),
        to.strides(heads, seq_len, head_dim),
    );
    let mut result = data[..batch * heads * seq_len * head_dim].to_vec();
    for b in 0..batch as u64 {
        for h in 0..heads as u64 {
            for s in 0..seq_len as u64 {
                let from_row = (b * source.batch + h * source.head + s * source.seq) as usize;
                let to_row = (b * target.batch + h * target.head + s * target.seq) as usize;
                result[to_row..to_row + head_dim]
                    .copy_from_slice(&data[from_row..from_row + head_dim]);
            }
        }
    }
    result
}

/// Deterministic normally distributed test data (SplitMix64 + Box-Muller), so that tests and
/// benchmarks need no RNG dependency and a failing seed can be replayed.
pub fn random_normal<T: Element>(len: usize, mean: f64, std_dev: f64, seed: u64) -> Vec<T> {
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
            T::from_f64(mean + std_dev * normal)
        })
        .collect()
}
