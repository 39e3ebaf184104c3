//! The statistics of the tuner and the regression check: medians with bootstrap intervals, a
//! rank test and an effect size. Timing samples are skewed (a slow repeat is common, a fast
//! outlier is not), so everything here is rank- or median-based rather than built on means and
//! variances.

use flash_attn::rng::SplitMix64;

/// Resamples per bootstrap interval: enough that the 2.5% and 97.5% percentiles each rest on
/// 50 resamples.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The median (for an even count, the mean of the two middle values); `None` when `samples`
/// is empty or holds a NaN.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted_median(&sorted))
}

fn sorted_median(sorted: &[f64]) -> f64 {
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

/// A closed interval `[low, high]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether `value` lies in the interval, bounds included.
    pub fn contains(&self, value: f64) -> bool {
        self.low <= value && value <= self.high
    }

    /// `high - low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }
}

/// The 95% percentile-bootstrap interval of the median: the medians of `resamples` resamples
/// of `samples` (drawn with replacement, as many as there are samples), cut at their 2.5th and
/// 97.5th percentiles. Deterministic for a `seed`. `None` when `samples` is empty or holds a
/// NaN, or `resamples` is 0.
pub fn bootstrap_median_interval(samples: &[f64], resamples: usize, seed: u64) -> Option<Interval> {
    median(samples)?;
    let mut rng = SplitMix64::new(seed);
    let mut resample = Resample::new(samples.len());
    percentile_interval(
        (0..resamples)
            .map(|_| resample.median(samples, &mut rng))
            .collect(),
    )
}

/// The 95% percentile-bootstrap interval of `median(current) / median(baseline)`: each of
/// `resamples` resamples draws both samples again with replacement (as many values as each
/// has). Deterministic for a `seed`. `None` when a sample is empty or holds a NaN, or
/// `resamples` is 0.
pub fn bootstrap_ratio_interval(
    baseline: &[f64],
    current: &[f64],
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    median(baseline)?;
    median(current)?;
    let mut rng = SplitMix64::new(seed);
    let (mut base, mut new) = (Resample::new(baseline.len()), Resample::new(current.len()));
    percentile_interval(
        (0..resamples)
            .map(|_| new.median(current, &mut rng) / base.median(baseline, &mut rng))
            .collect(),
    )
}

/// A buffer for resamples of one sample size.
struct Resample(Vec<f64>);

impl Resample {
    fn new(len: usize) -> Self {
        Self(vec![0.0; len])
    }

    /// The median of a resample of `samples`, drawn with replacement.
    fn median(&mut self, samples: &[f64], rng: &mut SplitMix64) -> f64 {
        for value in self.0.iter_mut() {
            *value = samples[rng.below(samples.len())];
        }
        self.0.sort_by(f64::total_cmp);
        sorted_median(&self.0)
    }
}

/// The 2.5th and 97.5th percentiles of the bootstrap statistics; `None` when there are none.
fn percentile_interval(mut statistics: Vec<f64>) -> Option<Interval> {
    if statistics.is_empty() {
        return None;
    }
    statistics.sort_by(f64::total_cmp);
    // As many resamples below the interval as above it.
    let outside = (0.025 * statistics.len() as f64) as usize;
    Some(Interval {
        low: statistics[outside],
        high: statistics[statistics.len() - 1 - outside],
    })
}

/// The result of a two-sided Mann-Whitney U test of two samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of the first sample: the pairs (x from the first sample, y from the second) with
    /// x > y, plus half of those with x = y. It lies in `0..=n1 * n2`, `n1 * n2 / 2` when
    /// neither sample tends to be larger.
    pub u: f64,
    /// The probability, if both samples came from one distribution, of a U at least this far
    /// from `n1 * n2 / 2`.
    pub p_value: f64,
}

/// The two-sided Mann-Whitney U test: normal approximation with tie correction and a
/// continuity correction of 0.5 (fine from about 10 values a side; the tuner uses 20 or more,
/// the timing tool 30). `None` when a sample is empty or holds a
/// NaN. When every value is tied the p-value is 1.
pub fn mann_whitney_u(first: &[f64], second: &[f64]) -> Option<RankTest> {
    if first.is_empty() || second.is_empty() || first.iter().chain(second).any(|x| x.is_nan()) {
        return None;
    }
    let mut pooled: Vec<(f64, bool)> = first
        .iter()
        .map(|&x| (x, true))
        .chain(second.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum_first, mut tie_term) = (0.0, 0.0);
    let mut start = 0;
    while start < pooled.len() {
        let tied = pooled[start..]
            .iter()
            .take_while(|(value, _)| *value == pooled[start].0)
            .count();
        // Positions start..start + tied hold ranks start + 1 ..= start + tied: their mean.
        let average_rank = start as f64 + (tied as f64 + 1.0) / 2.0;
        let in_first = pooled[start..start + tied]
            .iter()
            .filter(|(_, is_first)| *is_first)
            .count();
        rank_sum_first += average_rank * in_first as f64;
        tie_term += (tied as f64).powi(3) - tied as f64;
        start += tied;
    }
    let (n1, n2) = (first.len() as f64, second.len() as f64);
    let n = n1 + n2;
    let u = rank_sum_first - n1 * (n1 + 1.0) / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    let p_value = if variance > 0.0 {
        let z = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
        erfc(z / std::f64::consts::SQRT_2).clamp(0.0, 1.0)
    } else {
        1.0
    };
    Some(RankTest { u, p_value })
}

/// Cliff's delta of `first` against `second`, the effect size reported with the rank test:
/// P(x > y) − P(x < y) over all pairs (x from the first sample, y from the second), in
/// [-1, 1]. For times, +1 means every time of `first` exceeds every time of `second`, 0 that
/// neither tends to be larger. It equals `2 U / (n1 n2) − 1` for the U of
/// [`mann_whitney_u`], but is counted directly. `None` when a sample is empty or holds a NaN.
pub fn cliffs_delta(first: &[f64], second: &[f64]) -> Option<f64> {
    if first.is_empty() || second.is_empty() || first.iter().chain(second).any(|x| x.is_nan()) {
        return None;
    }
    let mut balance: i64 = 0;
    for x in first {
        for y in second {
            balance += (x > y) as i64 - (x < y) as i64;
        }
    }
    Some(balance as f64 / (first.len() * second.len()) as f64)
}

/// The complementary error function, to a relative error below 1.2e-7 (the Chebyshev fit of
/// Numerical Recipes' `erfcc`): far finer than any p-value needs. The standard library has no
/// stable `erfc`.
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let polynomial = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ]
    .iter()
    .rev()
    .fold(0.0, |accumulated, coefficient| {
        coefficient + t * accumulated
    });
    let value = t * (-x * x + polynomial).exp();
    if x >= 0.0 {
        value
    } else {
        2.0 - value
    }
}
