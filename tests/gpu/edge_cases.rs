//! Inputs that break naive kernels: huge scores, rows that see no key, NaN and infinity.

use flash_attn::reference::{attention, error_stats, random_normal, Precision};
use flash_attn::{AttentionShape, Dtype, Element, FlashAttention, ForwardKernel, Layout, Variant};
use half::{bf16, f16};

use crate::support::{fresh_seed, gpu, selected_kernels, Problem, ABSOLUTE_TOLERANCE};

pub(crate) fn scores_beyond_the_fp16_range_stay_finite_and_accurate() {
    let gpu = gpu();
    // |q|, |k| ~ 100: raw dot products reach ~1e5, past fp16's 65504, so a softmax that saw
    // them in fp16 would overflow, and so does the plain-fp16 model. The yardstick here is the
    // mixed model (scores in f32, probabilities and output in fp16), as a fused kernel computes.
    let shape = AttentionShape::new(2, 2, 192, 64);
    let seed = fresh_seed();
    let q = random_normal::<f16>(shape.q_elements().unwrap(), 20.0, 100.0, seed);
    let k = random_normal::<f16>(shape.kv_elements().unwrap(), 20.0, 100.0, seed ^ 1);
    let v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 2);
    let values: Vec<f64> = v.iter().map(|x| x.to_f64()).collect();
    let v_spread = values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - values.iter().copied().fold(f64::INFINITY, f64::min);
    for causal in [false, true] {
        let problem =
            Problem::with_inputs(shape, causal, None, seed, q.clone(), k.clone(), v.clone());
        let scale = problem.softmax_scale as f64;
        let mixed = attention(
            &q,
            &k,
            &v,
            shape,
            scale,
            causal,
            Precision::Mixed(Dtype::F16),
        );
        let mixed_error = error_stats(mixed.output, &problem.reference.output);
        let run = problem
            .run(&gpu, &problem.options(Layout::Bhsd, None))
            .unwrap();
        let ours = error_stats(run.output.iter().copied(), &problem.reference.output);
        // Beyond the mixed model: the kernel exponentiates `s * scale * log2(e) - max * ...` in
        // f32, so each probability carries a relative error up to about |logit| * 2^-23 (two
        // roundings at the logit's magnitude), which moves an output by at most that times the
        // spread of V; plus one fp16 ulp of the largest output for the final rounding.
        let exponent_term = largest_scaled_score(&q, &k, shape, scale) * 2f64.powi(-23) * v_spread;
        let largest = problem
            .reference
            .output
            .iter()
            .fold(0f64, |m, x| m.max(x.abs()));
        let output_ulp = 2f64.powi(largest.log2().floor() as i32 - 10);
        let context = format!(
            "causal {causal}, seed {seed}: ours {ours:?}, mixed {mixed_error:?}, \
             exponent term {exponent_term}, ulp {output_ulp}"
        );
        assert_eq!(ours.non_finite, 0, "{context}");
        let bound = 2.0 * mixed_error.max_abs + exponent_term + output_ulp;
        assert!(ours.max_abs <= bound, "{context}");
        assert!(
            ours.mean_abs <= 2.0 * mixed_error.mean_abs + ABSOLUTE_TOLERANCE,
            "{context}"
        );
        for (&got, &want) in run.logsumexp.iter().zip(&problem.reference.logsumexp) {
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }
}

/// The largest |q.k| * scale over all (batch, head, query, key) of a dense MHA problem.
fn largest_scaled_score(q: &[f16], k: &[f16], shape: AttentionShape, scale: f64) -> f64 {
    let d = shape.head_dim;
    let rows = |x: &[f16]| -> Vec<Vec<f64>> {
        x.chunks(d)
            .map(|row| row.iter().map(|e| e.to_f64()).collect())
            .collect()
    };
    let (q, k) = (rows(q), rows(k));
    let mut largest = 0f64;
    for (index, query) in q.iter().enumerate() {
        let head = index / shape.seq_len_q;
        for key in &k[head * shape.seq_len_kv..(head + 1) * shape.seq_len_kv] {
            let dot: f64 = query.iter().zip(key).map(|(a, b)| a * b).sum();
            largest = largest.max((dot * scale).abs());
        }
    }
    largest
}

pub(crate) fn rows_that_see_no_key_are_zero_with_minus_infinite_logsumexp() {
    let gpu = gpu();
    // Causal with Sq > Sk, bottom-right aligned: query i sees keys j <= i - (Sq - Sk), so the
    // first Sq - Sk = 140 rows see nothing.
    let shape = AttentionShape {
        batch: 1,
        heads_q: 2,
        heads_kv: 1,
        seq_len_q: 200,
        seq_len_kv: 60,
        head_dim: 128,
    };
    let problem = Problem::<f16>::new(shape, true, None);
    let run = problem
        .run(&gpu, &problem.options(Layout::Bhsd, None))
        .unwrap();
    for head in 0..2 {
        for row in 0..200 {
            let values = &run.output[(head * 200 + row) * 128..(head * 200 + row + 1) * 128];
            let lse = run.logsumexp[head * 200 + row];
            if row < 140 {
                assert!(values.iter().all(|&x| x == 0.0), "row {row} should be 0");
                assert_eq!(lse, f64::NEG_INFINITY, "row {row}");
            } else {
                assert!(
                    values.iter().all(|x| x.is_finite() && *x != 0.0) && lse.is_finite(),
                    "row {row}"
                );
            }
        }
    }
    problem.check(&gpu, &problem.options(Layout::Bhsd, None));
}

/// Plants `value` at `index` of Q, K or V and checks that the outputs which are non-finite
/// are exactly those the f64 reference makes non-finite.
fn check_propagation(tensor: char, index: usize, value: f64, causal: bool) {
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 96,
        seq_len_kv: 130,
        head_dim: 64,
    };
    let seed = fresh_seed();
    let mut q = random_normal::<f16>(shape.q_elements().unwrap(), 0.5, 1.0, seed);
    let mut k = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 1);
    let mut v = random_normal::<f16>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 2);
    match tensor {
        'q' => q[index] = f16::from_f64(value),
        'k' => k[index] = f16::from_f64(value),
        _ => v[index] = f16::from_f64(value),
    }
    let problem = Problem::with_inputs(shape, causal, None, seed, q, k, v);
    let run = problem
        .run(&gpu, &problem.options(Layout::Bhsd, None))
        .unwrap();
    let reference = &problem.reference.output;
    let affected = reference.iter().filter(|x| !x.is_finite()).count();
    assert!(
        affected > 0,
        "the planted {value} in {tensor} affects nothing in the reference"
    );
    for (i, (&got, &want)) in run.output.iter().zip(reference).enumerate() {
        assert_eq!(
            got.is_finite(),
            want.is_finite(),
            "{tensor}[{index}] = {value}, causal {causal}: element {i}: {got} vs {want}"
        );
    }
}

pub(crate) fn nan_in_a_query_affects_only_its_row() {
    check_propagation('q', 37 * 64 + 5, f64::NAN, false);
    check_propagation('q', (3 * 96 + 50) * 64, f64::NAN, true);
}

pub(crate) fn infinity_in_a_query_affects_only_its_row() {
    check_propagation('q', 10 * 64 + 63, f64::INFINITY, true);
}

pub(crate) fn nan_in_a_key_affects_exactly_the_rows_that_see_it() {
    // Key 100 of K/V head 1 of batch 0: seen by query heads 2 and 3, by every row without
    // masking and, causally (bottom-right, Sk - Sq = 34), by rows i >= 66.
    check_propagation('k', (130 + 100) * 64 + 7, f64::NAN, false);
    check_propagation('k', (130 + 100) * 64 + 7, f64::NAN, true);
}

pub(crate) fn nan_in_a_value_affects_its_column_of_the_rows_that_see_it() {
    // Without masking every row of the group sees every key. (With causal masking a row whose
    // diagonal key block holds the NaN multiplies it by a zero probability, which IEEE makes
    // NaN; see the README.)
    check_propagation('v', (2 * 130 + 11) * 64 + 20, f64::NAN, false);
}

pub(crate) fn a_nan_in_k_past_a_query_diagonal_block_does_not_reach_it() {
    // Rows whose last visible key block ends before key 129 never load it.
    check_propagation('k', 129 * 64, f64::NAN, true);
}

/// Inputs whose scores rise along the keys, so that every row's maximum keeps growing from one
/// key block to the next: by about 2 (in log2 units) per 64 keys, which the lazy rescale
/// absorbs into a stale maximum for several blocks (probabilities up to 2^8), and by about 20,
/// which forces a rescale at every block. Each kernel must match the reference either way.
fn check_growing_maxima<T: Element>(gpu: &FlashAttention, kernel: &'static ForwardKernel) {
    let shape = AttentionShape::new(1, 2, 512, kernel.spec.tile.head_dim);
    let d = shape.head_dim;
    // Scaled score of key j: q.k * log2(e) / sqrt(d), with q ~ 1 and k_j ~ slope * j / d per
    // component: slope * j * log2(e) / sqrt(d), i.e. `growth_per_64_keys` every 64 keys.
    for growth_per_64_keys in [2.0, 20.0] {
        let slope = growth_per_64_keys * (d as f64).sqrt() / (64.0 * std::f64::consts::LOG2_E);
        for causal in [false, true] {
            let seed = fresh_seed();
            let noise = |len, seed| random_normal::<T>(len, 0.0, 0.05, seed);
            let q: Vec<T> = noise(shape.q_elements().unwrap(), seed)
                .into_iter()
                .map(|x| T::from_f64(1.0 + x.to_f64()))
                .collect();
            let k: Vec<T> = noise(shape.kv_elements().unwrap(), seed ^ 1)
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    let key = (i / d) % shape.seq_len_kv;
                    T::from_f64(slope * key as f64 / d as f64 + x.to_f64())
                })
                .collect();
            let v = random_normal::<T>(shape.kv_elements().unwrap(), 0.5, 1.0, seed ^ 2);
            let problem = Problem::with_inputs(shape, causal, None, seed, q, k, v);
            problem.check(gpu, &problem.options(Layout::Bhsd, Some(kernel)));
        }
    }
}

pub(crate) fn running_maxima_that_grow_at_every_key_block() {
    let gpu = gpu();
    // Every dense kernel, or those `FLASH_ATTN_KERNEL_FILTER` and `FLASH_ATTN_KERNEL_SHARD`
    // keep: over the search space the whole set ran past 160 s on an H200 (BENCHMARKS.md log
    // 74), too long for one sanitizer or device step.
    for kernel in selected_kernels("dense", |k| k.spec.variant == Variant::Dense) {
        match kernel.spec.dtype {
            Dtype::F16 => check_growing_maxima::<f16>(&gpu, kernel),
            Dtype::Bf16 => check_growing_maxima::<bf16>(&gpu, kernel),
        }
    }
}
