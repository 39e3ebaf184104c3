//! Timing of back-to-back launches with CUDA events, as the benchmarks and the peer comparison
//! report it, and the JSON file of the timing tool.

use cust::event::{Event, EventFlags};
use cust::stream::Stream;
use flash_attn::{AttentionShape, Error, ForwardKernel};
use serde::{Deserialize, Serialize};

/// The decode shapes `(batch, cache length)` of the serving issue (D=128, one query row, 32
/// query heads over 8 K/V heads), timed by the serving benchmark and `flash-attn-decode-timing`.
pub const DECODE_SHAPES: [(usize, usize); 3] = [(8, 8192), (1, 32768), (64, 2048)];

/// The head dim of the serving issue's shapes ([`DECODE_SHAPES`]).
pub const DECODE_HEAD_DIM: usize = 128;

/// Floating-point operations of causal attention of `queries` queries against `keys` keys
/// aligned to the bottom right (query `i` sees keys `0..=i + keys - queries`), per head:
/// `4 · D` per visible score.
pub fn chunk_flops(queries: u32, keys: u32, head_dim: usize) -> f64 {
    let (queries, keys) = (queries as f64, keys as f64);
    let hidden = queries.min(keys);
    let visible = queries * keys - hidden * (hidden - 1.0) / 2.0;
    4.0 * visible * head_dim as f64
}

/// The decode problem at one of [`DECODE_SHAPES`], of head dim `head_dim`
/// ([`DECODE_HEAD_DIM`] for the issue's).
pub fn decode_shape(batch: usize, cache_length: usize, head_dim: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: cache_length,
        head_dim,
    }
}

/// The page sizes timed against the contiguous cache: the issue's bounds (16: within 10%; 64
/// and above: within 5%) and the largest.
pub const PAGE_SIZES: [usize; 3] = [16, 64, 256];

/// A paged cache holding `batch` full sequences of `cache_length` keys in pages of
/// `page_size`, and its block table: every page used once, in an order shuffled with
/// `page_size` as the seed.
pub fn shuffled_pages(
    batch: usize,
    cache_length: usize,
    page_size: usize,
) -> (flash_attn::PagedKvCache, Vec<u32>) {
    let pages_per_sequence = cache_length / page_size;
    let paged = flash_attn::PagedKvCache {
        num_pages: batch * pages_per_sequence,
        page_size,
        pages_per_sequence,
    };
    let mut table: Vec<u32> = (0..paged.num_pages as u32).collect();
    let mut rng = flash_attn::rng::SplitMix64::new(page_size as u64);
    for i in (1..table.len()).rev() {
        table.swap(i, rng.below(i + 1));
    }
    (paged, table)
}

/// The varlen prefill batch: 16 sequences of lengths drawn uniformly from 128..=4096 with seed
/// 2026, as cumulative offsets (queries and keys alike).
pub fn varlen_prefill_offsets() -> Vec<u32> {
    let (sequences, shortest, longest) = (16, 128, 4096);
    let mut rng = flash_attn::rng::SplitMix64::new(2026);
    let mut offsets = vec![0u32];
    for _ in 0..sequences {
        let length = shortest + rng.below(longest - shortest + 1);
        offsets.push(offsets[offsets.len() - 1] + length as u32);
    }
    offsets
}

/// The shapes `(batch, heads, seq_len, head_dim)` of the peer table in the project's anchors,
/// timed by the benchmarks and the timing tool; the seed shape first.
pub const ANCHOR_SHAPES: [(usize, usize, usize, usize); 6] = [
    (4, 8, 512, 64),
    (16, 16, 512, 64),
    (32, 16, 512, 64),
    (4, 8, 512, 128),
    (8, 16, 2048, 64),
    (2, 16, 4096, 128),
];

/// A `--shape B,H,S,D` argument of the timing tools as `(batch, heads, seq_len, head_dim)`;
/// `None` unless it is four sizes.
///
/// ```
/// use flash_attn_tools::timing::parse_shape;
///
/// assert_eq!(parse_shape("2,16,4096,128"), Some((2, 16, 4096, 128)));
/// assert_eq!(parse_shape("2,16,4096"), None);
/// assert_eq!(parse_shape("2,16,x,128"), None);
/// ```
pub fn parse_shape(text: &str) -> Option<(usize, usize, usize, usize)> {
    let sizes: Vec<usize> = text
        .split(',')
        .map(|size| size.parse().ok())
        .collect::<Option<_>>()?;
    let [batch, heads, seq_len, head_dim] = sizes[..] else {
        return None;
    };
    Some((batch, heads, seq_len, head_dim))
}

/// Per-launch times of several repeats, each the mean over `launches_per_repeat` back-to-back
/// launches between two events.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchTimes {
    /// Microseconds per launch, one value per repeat, sorted ascending.
    pub per_launch_us: Vec<f64>,
    pub launches_per_repeat: usize,
    /// Host time per launch call (median over repeats): if it reaches the GPU time, the
    /// measurement is bound by the launch path, not the kernel.
    pub host_us_per_launch: f64,
}

impl LaunchTimes {
    /// The `q`-quantile (0..=1) with linear interpolation.
    pub fn quantile(&self, q: f64) -> f64 {
        let sorted = &self.per_launch_us;
        let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
        let (low, high) = (position.floor() as usize, position.ceil() as usize);
        sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
    }

    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }
}

/// Runs `launch` `warmup` times, then `repeats` times `launches_per_repeat` launches between
/// two events on `stream`, and returns the time per launch of each repeat.
pub fn time_launches(
    stream: &Stream,
    warmup: usize,
    repeats: usize,
    launches_per_repeat: usize,
    mut launch: impl FnMut() -> Result<(), Error>,
) -> Result<LaunchTimes, Error> {
    assert!(repeats > 0 && launches_per_repeat > 0, "nothing to time");
    for _ in 0..warmup {
        launch()?;
    }
    stream.synchronize()?;
    let (start, stop) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    let mut per_launch_us = Vec::with_capacity(repeats);
    let mut host_us = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        start.record(stream)?;
        let host_start = std::time::Instant::now();
        for _ in 0..launches_per_repeat {
            launch()?;
        }
        host_us.push(host_start.elapsed().as_secs_f64() * 1e6 / launches_per_repeat as f64);
        stop.record(stream)?;
        stop.synchronize()?;
        let milliseconds = stop.elapsed_time_f32(&start)? as f64;
        per_launch_us.push(milliseconds * 1e3 / launches_per_repeat as f64);
    }
    per_launch_us.sort_by(f64::total_cmp);
    host_us.sort_by(f64::total_cmp);
    Ok(LaunchTimes {
        per_launch_us,
        launches_per_repeat,
        host_us_per_launch: host_us[host_us.len() / 2],
    })
}

/// `value` rounded to `decimals` decimal places, for the JSON files: more digits than the
/// timing's resolution would only be noise.
pub fn rounded(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A case's shape as the timing tool and the regression report print it: `B,H,S,D`, or
/// `B,H,SxSK,D` where the keys per sequence (`seq_len_kv`) are not the queries.
pub fn shape_label(
    batch: usize,
    heads: usize,
    seq_len: usize,
    seq_len_kv: Option<usize>,
    head_dim: usize,
) -> String {
    match seq_len_kv {
        Some(keys) => format!("{batch},{heads},{seq_len}x{keys},{head_dim}"),
        None => format!("{batch},{heads},{seq_len},{head_dim}"),
    }
}

/// One timed case of `flash-attn-timing --json`, read back by `flash-attn-regression` and
/// `scripts/peer_compare.py`: the problem, the kernel (`config`), the spread of the per-launch
/// times in microseconds (3 decimals) and every repeat's time (`samples_us`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedCase {
    pub batch: usize,
    pub heads: usize,
    /// Query rows per sequence.
    pub seq_len: usize,
    /// Keys per sequence where they are not `seq_len` (`flash-attn-timing --seq-len-kv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len_kv: Option<usize>,
    pub head_dim: usize,
    pub causal: bool,
    /// `f16` or `bf16`.
    pub dtype: String,
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub repeats: usize,
    pub launches_per_repeat: usize,
    pub tflops: f64,
    pub config: String,
    #[serde(default)]
    pub samples_us: Vec<f64>,
}

impl TimedCase {
    /// The case of `times` for `kernel` on `shape`, `causal` or not.
    pub fn new(
        shape: &AttentionShape,
        causal: bool,
        kernel: &ForwardKernel,
        times: &LaunchTimes,
    ) -> Self {
        let microseconds = |value: f64| rounded(value, 3);
        Self {
            batch: shape.batch,
            heads: shape.heads_q,
            seq_len: shape.seq_len_q,
            seq_len_kv: (shape.seq_len_kv != shape.seq_len_q).then_some(shape.seq_len_kv),
            head_dim: shape.head_dim,
            causal,
            dtype: kernel.spec.dtype.name().to_owned(),
            median_us: microseconds(times.median()),
            min_us: microseconds(times.quantile(0.0)),
            max_us: microseconds(times.quantile(1.0)),
            p10_us: microseconds(times.quantile(0.1)),
            p90_us: microseconds(times.quantile(0.9)),
            repeats: times.per_launch_us.len(),
            launches_per_repeat: times.launches_per_repeat,
            tflops: rounded(shape.flops(causal) / (times.median() * 1e-6) / 1e12, 1),
            config: kernel.entry.to_owned(),
            samples_us: times
                .per_launch_us
                .iter()
                .map(|&t| microseconds(t))
                .collect(),
        }
    }
}

/// The file `flash-attn-timing --json` writes: the device, the cases of the kernels the
/// default API dispatches to (`results`), and every case timed (`all_kernels`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingFile {
    pub device: String,
    #[serde(default)]
    pub results: Vec<TimedCase>,
    #[serde(default)]
    pub all_kernels: Vec<TimedCase>,
}
