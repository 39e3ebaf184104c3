//! CPU attention in f64, to check GPU results against, and a plain 16-bit model of it that sets
//! the error budget.
//!
//! Tensors are dense `[batch, heads, seq_len, head_dim]` ([`crate::Layout::Bhsd`]); use
//! [`relayout`] for others. Variable-length batches ([`attention_varlen`]) are packed
//! `[total_tokens, heads, head_dim]`, as FlashAttention takes them. Which keys a query sees is
//! the kernels' own rule, [`Mask`] (causal masking and sliding windows aligned to the bottom
//! right); [`attention_with`] adds the score modifiers ([`Scoring`]: softcap, ALiBi).
//!
//! ```
//! use flash_attn::reference::{attention, error_stats, random_normal, within_tolerance, Precision};
//! use flash_attn::AttentionShape;
//! use half::f16;
//!
//! let shape = AttentionShape::new(1, 2, 64, 64);
//! let q: Vec<f16> = random_normal(shape.q_elements()?, 0.0, 1.0, 1);
//! let k: Vec<f16> = random_normal(shape.kv_elements()?, 0.0, 1.0, 2);
//! let v: Vec<f16> = random_normal(shape.kv_elements()?, 0.0, 1.0, 3);
//! let scale = shape.default_softmax_scale() as f64;
//! let exact = attention(&q, &k, &v, shape, scale, true, Precision::F64);
//! // Causal, equal lengths: the first query sees key 0 alone, so its output is V's row 0.
//! assert!(exact.output[..64].iter().zip(&v[..64]).all(|(o, v)| *o == v.to_f64()));
//!
//! // The error budget of a 16-bit kernel: that of a plain 16-bit implementation.
//! let plain = attention(&q, &k, &v, shape, scale, true, Precision::Plain(flash_attn::Dtype::F16));
//! let plain_error = error_stats(plain.output.iter().copied(), &exact.output);
//! assert!(plain_error.max_abs > 0.0 && within_tolerance(&plain_error, &plain_error));
//! # Ok::<(), flash_attn::Error>(())
//! ```

use std::ops::Range;

use flash_attn_params::{Dtype, Mask};

use crate::element::{as_half1, half_from_f64};
use crate::rng::SplitMix64;
use crate::{
    round_to, AlibiLayout, AlibiSlopes, AttentionShape, Element, ForwardOptions, HalfElement,
    Layout, SlidingWindow, VarlenShape, MAX_SEQ_LEN,
};

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
    /// The attention output, `head_dim` values per query row.
    pub output: Vec<f64>,
    /// The logsumexp of each query row.
    pub logsumexp: Vec<f64>,
}

/// One query row of one (batch, query head) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryRow {
    /// The sequence in the batch.
    pub batch: usize,
    /// The query head.
    pub head: usize,
    /// The query's position in its sequence.
    pub query: usize,
}

impl QueryRow {
    /// The row at `index` in the dense `[batch, heads_q, seq_len_q]` order, the order of
    /// [`ReferenceOutput::logsumexp`].
    pub fn from_index(shape: &AttentionShape, index: usize) -> Self {
        let (head_row, query) = (index / shape.seq_len_q, index % shape.seq_len_q);
        Self {
            batch: head_row / shape.heads_q,
            head: head_row % shape.heads_q,
            query,
        }
    }

    /// Its position in the dense `[batch, heads_q, seq_len_q]` order.
    pub fn index(&self, shape: &AttentionShape) -> usize {
        (self.batch * shape.heads_q + self.head) * shape.seq_len_q + self.query
    }

    /// The keys this row sees (`mask`'s range for its query, possibly empty), and the elements
    /// of K (and of V) that hold them in its K/V head.
    fn visible_kv(&self, shape: &AttentionShape, mask: &Mask) -> (Range<usize>, Range<usize>) {
        let d = shape.head_dim;
        let kv_head = self.head / (shape.heads_q / shape.heads_kv);
        let head = (self.batch * shape.heads_kv + kv_head) * shape.seq_len_kv * d;
        let query = u32_length(self.query);
        let (start, end) = (mask.key_start(query) as usize, mask.key_end(query) as usize);
        let keys = start..end.max(start);
        let elements = head + keys.start * d..head + keys.end * d;
        (keys, elements)
    }
}

/// What a problem does to its scores besides `Q Kᵀ`: the softmax scale, the visibility rule
/// (causal masking, a sliding window) and the score modifiers, as [`crate::ForwardOptions`]
/// and the ALiBi calls ([`crate::FlashAttention::forward_alibi`]) give them. Score `s` of query
/// `i` and key `j` becomes `s * softmax_scale`, then `softcap * tanh(score / softcap)`, then
/// `score - slope * |i + seq_len_kv - seq_len_q - j|` with the (batch, head)'s ALiBi slope.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scoring<'a> {
    /// Multiplies `Q Kᵀ` ([`crate::ForwardOptions::softmax_scale`], resolved).
    pub softmax_scale: f64,
    /// Causal masking, aligned to the bottom right.
    pub causal: bool,
    /// A sliding window, intersected with `causal` ([`crate::ForwardOptions::window`]).
    pub window: Option<SlidingWindow>,
    /// The softcap ([`crate::ForwardOptions::softcap`]).
    pub softcap: Option<f64>,
    /// ALiBi slopes ([`crate::FlashAttention::forward_alibi`]).
    pub alibi: Option<AlibiSlopes<'a>>,
}

impl Scoring<'_> {
    /// What a call's `options` ask for (their softmax scale, or `default_scale`; causal
    /// masking, the window and the softcap), without ALiBi: ALiBi's slopes come with the call.
    pub fn of_options(options: &ForwardOptions, default_scale: f64) -> Self {
        Self {
            softmax_scale: options.softmax_scale.map_or(default_scale, f64::from),
            causal: options.causal,
            window: options.window,
            softcap: options.softcap.map(f64::from),
            alibi: None,
        }
    }

    /// Scaled scores, causal or not, and no modifier.
    pub fn plain(softmax_scale: f64, causal: bool) -> Self {
        Self {
            softmax_scale,
            causal,
            window: None,
            softcap: None,
            alibi: None,
        }
    }

    /// The kernels' visibility rule ([`Mask`]) for `shape`, through the options' own rule
    /// ([`ForwardOptions::mask`]). Panics where the options reject the window. A sequence
    /// without queries or keys (a variable-length batch's) has no window to check: no query
    /// sees a key.
    fn mask(&self, shape: &AttentionShape) -> Mask {
        self.checked_mask(shape)
            .unwrap_or_else(|error| panic!("the reference takes valid windows: {error}"))
    }

    /// [`Self::mask`] for one sequence of a serving call (a KV cache's, or a variable-length
    /// batch's), whose lengths the call did not validate the window against: where the window
    /// leaves every query of this sequence without a key, a rule under which none sees one (the
    /// kernels' result: output 0, logsumexp -inf).
    fn sequence_mask(&self, shape: &AttentionShape) -> Mask {
        match self.checked_mask(shape) {
            Err(crate::Error::WindowExcludesEveryKey { .. }) => Mask::windowed(
                u32_length(shape.seq_len_q),
                u32_length(shape.seq_len_kv),
                Some(0),
                Some(-1),
            ),
            mask => {
                mask.unwrap_or_else(|error| panic!("the reference takes valid windows: {error}"))
            }
        }
    }

    /// The rule of [`Self::mask`], or the options' error for the window.
    fn checked_mask(&self, shape: &AttentionShape) -> Result<Mask, crate::Error> {
        let lengths = (u32_length(shape.seq_len_q), u32_length(shape.seq_len_kv));
        if lengths.0 == 0 || lengths.1 == 0 {
            return Ok(Mask::new(lengths.0, lengths.1, self.causal));
        }
        let options = ForwardOptions {
            causal: self.causal,
            window: self.window,
            ..ForwardOptions::default()
        };
        options.mask(shape)
    }

    /// The scoring of sequence `batch` of a serving call, computed as a batch of one: its own
    /// ALiBi slopes.
    fn of_sequence(&self, batch: usize, heads_q: usize) -> Self {
        let alibi = self.alibi.map(|alibi| match alibi.layout {
            AlibiLayout::PerHead => alibi,
            AlibiLayout::PerBatchAndHead => AlibiSlopes {
                slopes: &alibi.slopes[batch * heads_q..(batch + 1) * heads_q],
                layout: AlibiLayout::PerHead,
            },
        });
        Self { alibi, ..*self }
    }

    /// The ALiBi slope of `row`'s (batch, query head), 0 without ALiBi.
    fn slope(&self, shape: &AttentionShape, row: &QueryRow) -> f64 {
        self.alibi.map_or(0.0, |alibi| {
            let index = match alibi.layout {
                AlibiLayout::PerHead => row.head,
                AlibiLayout::PerBatchAndHead => row.batch * shape.heads_q + row.head,
            };
            alibi.slopes[index] as f64
        })
    }

    /// Whether anything but the scale changes the scores.
    fn modifies(&self) -> bool {
        self.softcap.is_some() || self.alibi.is_some()
    }
}

/// How [`one_row`] turns one row's products into scores: the scale and the modifiers, for the
/// row's query `query` (its distances to the keys come from `mask`) with ALiBi slope `slope`.
#[derive(Clone, Copy)]
struct RowScoring {
    scale: f64,
    softcap: Option<f64>,
    slope: f64,
    mask: Mask,
    query: u32,
    /// The row's first visible key: score `n` of the row is key `first_key + n`'s.
    first_key: u32,
    /// Round the modified score to the precision's element type (a plain implementation
    /// materialises it in 16 bits).
    modified: bool,
}

impl RowScoring {
    fn new(
        scoring: &Scoring,
        shape: &AttentionShape,
        mask: Mask,
        row: &QueryRow,
        first_key: usize,
    ) -> Self {
        Self {
            scale: scoring.softmax_scale,
            softcap: scoring.softcap,
            slope: scoring.slope(shape, row),
            mask,
            query: row.query as u32,
            first_key: first_key as u32,
            modified: scoring.modifies(),
        }
    }

    /// The score of the row's `n`-th visible key, whose product with the query is `product`.
    fn score(&self, product: f64, n: usize) -> f64 {
        let mut score = product * self.scale;
        if let Some(softcap) = self.softcap {
            score = softcap * (score / softcap).tanh();
        }
        if self.slope != 0.0 {
            let distance = self
                .mask
                .distance_from_diagonal(self.query, self.first_key + n as u32);
            score -= self.slope * distance.unsigned_abs() as f64;
        }
        score
    }
}

/// A sequence length or position as the mask rule takes it: the rule is exact for lengths up
/// to [`MAX_SEQ_LEN`], as in the kernels.
fn u32_length(length: usize) -> u32 {
    assert!(
        length <= MAX_SEQ_LEN,
        "the reference, like the kernels, takes sequences of at most MAX_SEQ_LEN"
    );
    length as u32
}

/// Query rows per unit of parallel work.
const ROWS_PER_TASK: usize = 16;

/// Softmax attention `softmax(Q Kᵀ · scale) V` on the CPU, one thread per available core.
/// Panics if a slice is shorter than the dense shape needs.
pub fn attention<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    softmax_scale: f64,
    causal: bool,
    precision: Precision,
) -> ReferenceOutput {
    attention_with(
        q,
        k,
        v,
        shape,
        &Scoring::plain(softmax_scale, causal),
        precision,
    )
}

/// [`attention`] with the visibility rule and score modifiers of `scoring`, as the modified
/// kernels compute it. Panics if a slice is shorter than the dense shape needs, where the
/// window is one the options reject, or where the ALiBi slopes are fewer than their layout
/// needs.
pub fn attention_with<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    attention_masked(q, k, v, shape, scoring, scoring.mask(&shape), precision)
}

/// [`attention_with`] under the visibility rule `mask` (the serving references' per-sequence
/// rule, [`Scoring::sequence_mask`]).
fn attention_masked<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    scoring: &Scoring,
    mask: Mask,
    precision: Precision,
) -> ReferenceOutput {
    assert_dense_inputs(q, k, v, &shape);
    let d = shape.head_dim;
    let rows = shape.lse_elements().expect("a shape the CPU can hold");
    // Converted once: a 16-bit to f64 conversion per multiply-add would dominate the run time.
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
                        let index = first_row + i;
                        let row = QueryRow::from_index(&shape, index);
                        let (keys, elements) = row.visible_kv(&shape, &mask);
                        *row_lse = one_row(
                            &q[index * d..(index + 1) * d],
                            &k[elements.clone()],
                            &v[elements],
                            &RowScoring::new(scoring, &shape, mask, &row, keys.start),
                            precision,
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

/// [`attention`] for the chosen query rows only, in their order: `output` holds `head_dim`
/// values per row and `logsumexp` one. The results equal those of [`attention`] for the same
/// rows bit for bit; the cost is that of the rows alone, so that long sequences can be checked
/// on samples. Panics if a slice is shorter than the dense shape needs or a row lies outside
/// the shape.
#[allow(clippy::too_many_arguments)]
pub fn attention_rows<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    softmax_scale: f64,
    causal: bool,
    precision: Precision,
    rows: &[QueryRow],
) -> ReferenceOutput {
    attention_rows_with(
        q,
        k,
        v,
        shape,
        &Scoring::plain(softmax_scale, causal),
        precision,
        rows,
    )
}

/// [`attention_rows`] with the visibility rule and score modifiers of `scoring`
/// ([`attention_with`]), bit for bit its results for the same rows.
pub fn attention_rows_with<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: AttentionShape,
    scoring: &Scoring,
    precision: Precision,
    rows: &[QueryRow],
) -> ReferenceOutput {
    assert_dense_inputs(q, k, v, &shape);
    let mask = scoring.mask(&shape);
    let d = shape.head_dim;
    let mut output = vec![0.0; rows.len() * d];
    let mut logsumexp = Vec::with_capacity(rows.len());
    let mut scores = vec![0.0; shape.seq_len_kv];
    for (row, out) in rows.iter().zip(output.chunks_mut(d)) {
        assert!(
            row.batch < shape.batch && row.head < shape.heads_q && row.query < shape.seq_len_q,
            "{row:?} lies outside {shape:?}"
        );
        let start = row.index(&shape) * d;
        // Only this row's query and the keys it sees are converted.
        let (keys, elements) = row.visible_kv(&shape, &mask);
        logsumexp.push(one_row(
            &to_f64(&q[start..start + d]),
            &to_f64(&k[elements.clone()]),
            &to_f64(&v[elements]),
            &RowScoring::new(scoring, &shape, mask, row, keys.start),
            precision,
            &mut scores,
            out,
        ));
    }
    ReferenceOutput { output, logsumexp }
}

/// [`attention`] for a variable-length batch ([`VarlenShape`]), as
/// [`crate::FlashAttention::forward_varlen`] computes it, sequence by sequence: `q`, `k` and `v`
/// are packed `[total_tokens, heads, head_dim]` ([`Layout::Bshd`] with one batch, as
/// FlashAttention's `flash_attn_varlen_func` takes them), `output` is packed like `q` and
/// `logsumexp` is `[heads_q, tokens_q]`. Causal masking is aligned to the bottom right of each
/// sequence; a sequence with queries but no key gets output 0 and logsumexp -inf. Panics if the
/// offsets are invalid ([`VarlenShape::extents`]) or a slice is shorter than they need.
pub fn attention_varlen<T: HalfElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: &VarlenShape,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    let extents = shape
        .extents()
        .unwrap_or_else(|error| panic!("invalid offsets: {error}"));
    let (heads_q, heads_kv, d) = (shape.heads_q, shape.heads_kv, shape.head_dim);
    assert!(
        q.len() >= extents.tokens_q * heads_q * d
            && k.len() >= extents.tokens_kv * heads_kv * d
            && v.len() >= extents.tokens_kv * heads_kv * d,
        "inputs shorter than the packed {extents:?} needs"
    );
    let mut output = vec![0.0; extents.tokens_q * heads_q * d];
    let mut logsumexp = vec![0.0; heads_q * extents.tokens_q];
    let sequences = shape
        .cu_seqlens_q
        .windows(2)
        .zip(shape.cu_seqlens_kv.windows(2));
    for (batch, (queries, keys)) in sequences.enumerate() {
        let (queries, keys) = (
            queries[0] as usize..queries[1] as usize,
            keys[0] as usize..keys[1] as usize,
        );
        if queries.is_empty() {
            continue;
        }
        let sequence = AttentionShape {
            batch: 1,
            heads_q,
            heads_kv,
            seq_len_q: queries.len(),
            seq_len_kv: keys.len(),
            head_dim: d,
        };
        let (q_dims, kv_dims) = ((1, heads_q, queries.len(), d), (1, heads_kv, keys.len(), d));
        // A sequence's tokens are contiguous in the packed tensors.
        let dense = |packed: &[T], tokens: &Range<usize>, heads: usize, dims| {
            let elements = tokens.start * heads * d..tokens.end * heads * d;
            relayout(&packed[elements], dims, Layout::Bshd, Layout::Bhsd)
        };
        let result = attention_masked(
            &dense(q, &queries, heads_q, q_dims),
            &dense(k, &keys, heads_kv, kv_dims),
            &dense(v, &keys, heads_kv, kv_dims),
            sequence,
            &scoring.of_sequence(batch, heads_q),
            scoring.sequence_mask(&sequence),
            precision,
        );
        output[queries.start * heads_q * d..queries.end * heads_q * d].copy_from_slice(&relayout(
            &result.output,
            q_dims,
            Layout::Bhsd,
            Layout::Bshd,
        ));
        for (head, head_logsumexp) in result.logsumexp.chunks(queries.len()).enumerate() {
            let first = head * extents.tokens_q + queries.start;
            logsumexp[first..first + queries.len()].copy_from_slice(head_logsumexp);
        }
    }
    ReferenceOutput { output, logsumexp }
}

fn assert_dense_inputs<T>(q: &[T], k: &[T], v: &[T], shape: &AttentionShape) {
    let (q_elements, kv_elements) = (shape.q_elements(), shape.kv_elements());
    assert!(
        q_elements.is_ok_and(|elements| q.len() >= elements)
            && kv_elements.is_ok_and(|elements| k.len() >= elements && v.len() >= elements),
        "inputs shorter than the dense {shape:?} needs"
    );
}

fn to_f64<T: HalfElement>(values: &[T]) -> Vec<f64> {
    as_half1(values).iter().map(|e| e.to_f64()).collect()
}

/// Computes one query row against the keys and values it sees (`keys.len() / head_dim` of
/// them, possibly none) into `out`, scored as `scoring` says; returns its logsumexp. `scores`
/// holds at least one value per visible key.
fn one_row(
    query: &[f64],
    keys: &[f64],
    values: &[f64],
    scoring: &RowScoring,
    precision: Precision,
    scores: &mut [f64],
    out: &mut [f64],
) -> f64 {
    let d = query.len();
    out.fill(0.0);
    if keys.is_empty() {
        return f64::NEG_INFINITY;
    }
    let scores = &mut scores[..keys.len() / d];
    for (n, (key_values, score)) in keys.chunks_exact(d).zip(scores.iter_mut()).enumerate() {
        let product = match precision {
            Precision::F64 => query.iter().zip(key_values).map(|(a, b)| a * b).sum(),
            Precision::Plain(_) | Precision::Mixed(_) => {
                let dot: f32 = query
                    .iter()
                    .zip(key_values)
                    .map(|(&a, &b)| a as f32 * b as f32)
                    .sum();
                match precision {
                    Precision::Plain(dtype) => round_to(dtype, dot as f64),
                    _ => dot as f64,
                }
            }
        };
        *score = scoring.score(product, n);
        if let (Precision::Plain(dtype), true) = (precision, scoring.modified) {
            *score = round_to(dtype, *score);
        }
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
    let value_rows = values.chunks_exact(d);
    match precision {
        Precision::F64 => {
            for (&weight, value_row) in scores.iter().zip(value_rows) {
                for (o, x) in out.iter_mut().zip(value_row) {
                    *o += weight / sum * x;
                }
            }
        }
        Precision::Plain(dtype) | Precision::Mixed(dtype) => {
            let mut accumulator = vec![0f32; d];
            for (&weight, value_row) in scores.iter().zip(value_rows) {
                let probability = round_to(dtype, weight / sum) as f32;
                for (a, x) in accumulator.iter_mut().zip(value_row) {
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
    /// The largest absolute difference among the elements finite in both.
    pub max_abs: f64,
    /// The mean absolute difference over all the elements, those not finite in both counting
    /// as 0.
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

/// The error budget beyond 2x the plain 16-bit error, for the final rounding both
/// implementations do: half an fp16 ulp in [0.5, 1), where most outputs of inputs of mean 0.5
/// and unit spread lie.
pub const ABSOLUTE_TOLERANCE: f64 = 2.5e-4;

/// The acceptance rule for a 16-bit kernel's output, given its error (`ours`) and that of
/// [`Precision::Plain`] (`plain`), both against [`Precision::F64`] on the same elements: no
/// non-finite element, and max and mean absolute error each at most twice the plain
/// implementation's plus [`ABSOLUTE_TOLERANCE`].
pub fn within_tolerance(ours: &ErrorStats, plain: &ErrorStats) -> bool {
    ours.non_finite == 0
        && ours.max_abs <= 2.0 * plain.max_abs + ABSOLUTE_TOLERANCE
        && ours.mean_abs <= 2.0 * plain.mean_abs + ABSOLUTE_TOLERANCE
}

/// Copies a dense `[batch, heads, seq_len, head_dim]`-shaped tensor from one layout to another.
pub fn relayout<T: Copy>(
    data: &[T],
    (batch, heads, seq_len, head_dim): (usize, usize, usize, usize),
    from: Layout,
    to: Layout,
) -> Vec<T> {
    let strides = |layout: Layout| {
        layout
            .strides(heads, seq_len, head_dim)
            .expect("a tensor the CPU holds has strides that fit in u64")
    };
    let (source, target) = (strides(from), strides(to));
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
pub fn random_normal<T: HalfElement>(len: usize, mean: f64, std_dev: f64, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    (0..len)
        .map(|_| {
            // u1 is never 0 (`next_unit` is in (0, 1]), so its logarithm is finite.
            let (u1, u2) = (rng.next_unit(), rng.next_unit());
            let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            half_from_f64(mean + std_dev * normal)
        })
        .collect()
}

/// [`attention`] against a KV cache, as [`crate::FlashAttention::forward_kv_cache`] computes
/// it: `q` is `[batch, heads_q, seq_len_q, head_dim]`, `k_cache` and `v_cache`
/// `[batch, heads_kv, seq_len_kv, head_dim]` (`seq_len_kv` the capacity), and sequence `b`
/// attends to its first `min(cache_lens[b], seq_len_kv)` keys, causal masking aligned to the
/// bottom right of those. Results in `q`'s order; a sequence with no key gets output 0 and
/// logsumexp -inf. Panics if a slice is shorter than the shape needs.
#[allow(clippy::too_many_arguments)]
pub fn attention_kv_cache<T: HalfElement>(
    q: &[T],
    k_cache: &[T],
    v_cache: &[T],
    cache_lens: &[u32],
    shape: AttentionShape,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    assert_dense_inputs(q, k_cache, v_cache, &shape);
    let d = shape.head_dim;
    let q_per_sequence = shape.heads_q * shape.seq_len_q * d;
    let mut output = Vec::with_capacity(shape.batch * q_per_sequence);
    let mut logsumexp = Vec::with_capacity(shape.batch * shape.heads_q * shape.seq_len_q);
    for (b, &used) in cache_lens.iter().enumerate().take(shape.batch) {
        let used = (used as usize).min(shape.seq_len_kv);
        let q_b = &q[b * q_per_sequence..(b + 1) * q_per_sequence];
        if used == 0 {
            output.extend(std::iter::repeat_n(0.0, q_per_sequence));
            logsumexp.extend(std::iter::repeat_n(
                f64::NEG_INFINITY,
                shape.heads_q * shape.seq_len_q,
            ));
            continue;
        }
        // The used prefix of every K/V head of sequence `b`, as a dense batch of one.
        let prefix = |cache: &[T]| -> Vec<T> {
            (0..shape.heads_kv)
                .flat_map(|h| {
                    let start = (b * shape.heads_kv + h) * shape.seq_len_kv * d;
                    cache[start..start + used * d].iter().copied()
                })
                .collect()
        };
        let sequence = AttentionShape {
            batch: 1,
            seq_len_kv: used,
            ..shape
        };
        let result = attention_masked(
            q_b,
            &prefix(k_cache),
            &prefix(v_cache),
            sequence,
            &scoring.of_sequence(b, shape.heads_q),
            scoring.sequence_mask(&sequence),
            precision,
        );
        output.extend(result.output);
        logsumexp.extend(result.logsumexp);
    }
    ReferenceOutput { output, logsumexp }
}

/// [`attention_kv_cache`] against a paged cache, as
/// [`crate::FlashAttention::forward_paged_kv_cache`] computes it: `k_pages` and `v_pages`
/// `[num_pages, page_size, heads_kv, head_dim]`, `block_table` `[batch, pages_per_sequence]`.
/// A sequence whose used keys lie in a page at or past `num_pages` gets NaN output rows and
/// logsumexps. Panics if a slice is shorter than the shape and `paged` need.
#[allow(clippy::too_many_arguments)]
pub fn attention_paged_kv_cache<T: HalfElement>(
    q: &[T],
    k_pages: &[T],
    v_pages: &[T],
    block_table: &[u32],
    cache_lens: &[u32],
    shape: AttentionShape,
    paged: &crate::PagedKvCache,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    let (k_cache, v_cache, outside) =
        gather_pages(k_pages, v_pages, block_table, cache_lens, &shape, paged);
    let mut result =
        attention_kv_cache(q, &k_cache, &v_cache, cache_lens, shape, scoring, precision);
    let (rows, d) = (shape.heads_q * shape.seq_len_q, shape.head_dim);
    for b in (0..shape.batch).filter(|&b| outside[b]) {
        result.output[b * rows * d..(b + 1) * rows * d].fill(f64::NAN);
        result.logsumexp[b * rows..(b + 1) * rows].fill(f64::NAN);
    }
    result
}

/// The contiguous `[batch, heads_kv, seq_len_kv, head_dim]` K and V caches that a paged cache
/// describes for `shape` (rows past a sequence's used keys, and every row of a sequence with a
/// page outside the cache, are 0), and for each sequence whether its used keys lie in a page
/// at or past `num_pages`.
fn gather_pages<T: HalfElement>(
    k_pages: &[T],
    v_pages: &[T],
    block_table: &[u32],
    cache_lens: &[u32],
    shape: &AttentionShape,
    paged: &crate::PagedKvCache,
) -> (Vec<T>, Vec<T>, Vec<bool>) {
    let (d, page_size) = (shape.head_dim, paged.page_size);
    let used = |b: usize| (cache_lens[b] as usize).min(shape.seq_len_kv);
    let table = |b: usize| &block_table[b * paged.pages_per_sequence..][..paged.pages_per_sequence];
    let outside: Vec<bool> = (0..shape.batch)
        .map(|b| {
            table(b)[..used(b).div_ceil(page_size)]
                .iter()
                .any(|&page| page as usize >= paged.num_pages)
        })
        .collect();
    let gather = |pages: &[T]| -> Vec<T> {
        let mut cache = vec![half_from_f64::<T>(0.0); shape.kv_elements().unwrap()];
        for b in (0..shape.batch).filter(|&b| !outside[b]) {
            for key in 0..used(b) {
                let page = table(b)[key / page_size] as usize;
                for h in 0..shape.heads_kv {
                    let from = ((page * page_size + key % page_size) * shape.heads_kv + h) * d;
                    let to = ((b * shape.heads_kv + h) * shape.seq_len_kv + key) * d;
                    cache[to..to + d].copy_from_slice(&pages[from..from + d]);
                }
            }
        }
        cache
    };
    (gather(k_pages), gather(v_pages), outside)
}

/// [`attention_varlen`] of queries against a KV cache, as
/// [`crate::FlashAttention::forward_varlen_kv_cache`] computes it: `q` is packed
/// `[tokens_q, heads_q, head_dim]` as `shape.cu_seqlens_q` says, `k_cache` and `v_cache`
/// `[batch, heads_kv, seq_len_kv, head_dim]`, and sequence `b` attends to its first
/// `min(cache_lens[b], seq_len_kv)` keys: by definition, the variable-length batch whose keys
/// are those used prefixes, packed. Results as [`attention_varlen`]'s. Panics if the offsets
/// are invalid or a slice is shorter than the shape needs.
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen_kv_cache<T: HalfElement>(
    q: &[T],
    k_cache: &[T],
    v_cache: &[T],
    cache_lens: &[u32],
    shape: &crate::VarlenCacheShape,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    let (heads_kv, capacity, d) = (shape.heads_kv, shape.seq_len_kv, shape.head_dim);
    let batch = shape.cu_seqlens_q.len().saturating_sub(1);
    let used: Vec<usize> = cache_lens[..batch]
        .iter()
        .map(|&used| (used as usize).min(capacity))
        .collect();
    // Sequence `b`'s used keys of every K/V head, token-major.
    let pack = |cache: &[T]| -> Vec<T> {
        let mut packed = Vec::new();
        for (b, &used) in used.iter().enumerate() {
            for key in 0..used {
                for h in 0..heads_kv {
                    let from = ((b * heads_kv + h) * capacity + key) * d;
                    packed.extend_from_slice(&cache[from..from + d]);
                }
            }
        }
        packed
    };
    let cu_seqlens_kv: Vec<u32> = std::iter::once(0)
        .chain(used.iter().scan(0u32, |end, &used| {
            *end += u32_length(used);
            Some(*end)
        }))
        .collect();
    let packed = VarlenShape {
        cu_seqlens_q: shape.cu_seqlens_q,
        cu_seqlens_kv: &cu_seqlens_kv,
        heads_q: shape.heads_q,
        heads_kv,
        head_dim: d,
    };
    attention_varlen(
        q,
        &pack(k_cache),
        &pack(v_cache),
        &packed,
        scoring,
        precision,
    )
}

/// [`attention_varlen_kv_cache`] against a paged cache, as
/// [`crate::FlashAttention::forward_varlen_paged_kv_cache`] computes it (see
/// [`attention_paged_kv_cache`] for the pages and the block table). A sequence whose used keys
/// lie in a page at or past `num_pages` gets NaN output rows and logsumexps.
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen_paged_kv_cache<T: HalfElement>(
    q: &[T],
    k_pages: &[T],
    v_pages: &[T],
    block_table: &[u32],
    cache_lens: &[u32],
    shape: &crate::VarlenCacheShape,
    paged: &crate::PagedKvCache,
    scoring: &Scoring,
    precision: Precision,
) -> ReferenceOutput {
    let extents = shape
        .extents()
        .unwrap_or_else(|error| panic!("invalid offsets: {error}"));
    let (k_cache, v_cache, outside) = gather_pages(
        k_pages,
        v_pages,
        block_table,
        cache_lens,
        &extents.longest,
        paged,
    );
    let mut result =
        attention_varlen_kv_cache(q, &k_cache, &v_cache, cache_lens, shape, scoring, precision);
    let (heads_q, d, tokens_q) = (shape.heads_q, shape.head_dim, extents.tokens_q);
    for (b, queries) in shape.cu_seqlens_q.windows(2).enumerate() {
        if !outside[b] {
            continue;
        }
        let queries = queries[0] as usize..queries[1] as usize;
        result.output[queries.start * heads_q * d..queries.end * heads_q * d].fill(f64::NAN);
        for head in 0..heads_q {
            result.logsumexp[head * tokens_q + queries.start..head * tokens_q + queries.end]
                .fill(f64::NAN);
        }
    }
    result
}
