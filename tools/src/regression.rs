//! The regression check: a new timing run of our kernels against a baseline, both written by
//! `flash-attn-timing --json`, case by case. A case is what the default API ran (`results`) for
//! a shape, masking and element type, whichever kernel the dispatch chose in each run: what a
//! user sees, so that a new dispatch table cannot hide a slower shape by changing its kernel
//! (the report names both kernels where they differ).
//!
//! For every case with samples in both runs: a two-sided Mann-Whitney rank test of "the two
//! runs have the same distribution" ([`mann_whitney_u`]), and the ratio of medians, new /
//! baseline, with a 95% bootstrap interval resampling both runs ([`bootstrap_ratio_interval`]).
//! A case is SLOWER only when the test rejects at `alpha` and the whole interval lies above
//! `1 + tolerance`: the slowdown is both real (beyond the run-to-run noise) and larger than the
//! tolerance; FASTER symmetrically; anything else is "same".

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::stats::{
    bootstrap_ratio_interval, mann_whitney_u, median, Interval, BOOTSTRAP_RESAMPLES,
};
use crate::timing::{shape_label, TimedCase, TimingFile};

/// The default significance level of the rank test.
pub const DEFAULT_ALPHA: f64 = 0.01;
/// The default smallest change of the median that counts, as a fraction.
pub const DEFAULT_TOLERANCE: f64 = 0.02;
/// One fixed seed: the interval is then a function of the samples alone.
const BOOTSTRAP_SEED: u64 = 12_345;

/// What the check concludes for one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Slower,
    Faster,
    Same,
}

impl Change {
    /// The rule: see the module's documentation.
    pub fn of(p_value: f64, ratio: Interval, alpha: f64, tolerance: f64) -> Self {
        if p_value < alpha && ratio.low > 1.0 + tolerance {
            Change::Slower
        } else if p_value < alpha && ratio.high < 1.0 - tolerance {
            Change::Faster
        } else {
            Change::Same
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Change::Slower => "SLOWER",
            Change::Faster => "FASTER",
            Change::Same => "same",
        }
    }
}

/// What identifies a case across runs: `(batch, heads, seq_len, seq_len_kv, head_dim, causal,
/// dtype)`, ordered as the report lists them (`seq_len_kv` where the keys are not `seq_len`,
/// so that such a case never pairs with one of as many keys as queries).
type CaseKey = (usize, usize, usize, Option<usize>, usize, bool, String);

/// The default API's cases of a run that have samples, by key.
fn cases(file: &TimingFile) -> BTreeMap<CaseKey, &TimedCase> {
    file.results
        .iter()
        .filter(|case| !case.samples_us.is_empty())
        .map(|case| {
            let key = (
                case.batch,
                case.heads,
                case.seq_len,
                case.seq_len_kv,
                case.head_dim,
                case.causal,
                case.dtype.clone(),
            );
            (key, case)
        })
        .collect()
}

/// The report of `current` against `baseline`, one line per shared case and a summary line
/// last, and how many cases are [`Change::Slower`].
pub fn compare(
    baseline: &TimingFile,
    current: &TimingFile,
    alpha: f64,
    tolerance: f64,
) -> Result<(String, usize), String> {
    let (baseline, current) = (cases(baseline), cases(current));
    let shared: Vec<(&CaseKey, &TimedCase, &TimedCase)> = baseline
        .iter()
        .filter_map(|(key, base)| Some((key, *base, *current.get(key)?)))
        .collect();
    if shared.is_empty() {
        let summary = "regression check: no case with samples in both files; nothing compared\n";
        return Ok((summary.to_owned(), 0));
    }
    let mut report = format!(
        "{:<14} {:<6} {:<5} {:<36} {:>9} {:>9} {:>8} {:>15} {:>8}  verdict\n",
        "B,H,S,D",
        "causal",
        "dtype",
        "kernel",
        "base us",
        "new us",
        "new/base",
        "95% interval",
        "p"
    );
    let mut slower = 0;
    for ((batch, heads, seq_len, seq_len_kv, head_dim, causal, dtype), base, new) in &shared {
        // The kernel of each run: one name, or `base -> new` where the dispatch changed it.
        let kernel = if base.config == new.config {
            new.config.clone()
        } else {
            format!("{} -> {}", base.config, new.config)
        };
        let invalid = || format!("{kernel}: a sample is not a number");
        let (base_samples, new_samples) = (&base.samples_us, &new.samples_us);
        let p_value = mann_whitney_u(base_samples, new_samples)
            .ok_or_else(invalid)?
            .p_value;
        let ratio = bootstrap_ratio_interval(
            base_samples,
            new_samples,
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED,
        )
        .ok_or_else(invalid)?;
        let base_median = median(base_samples).ok_or_else(invalid)?;
        let new_median = median(new_samples).ok_or_else(invalid)?;
        let change = Change::of(p_value, ratio, alpha, tolerance);
        slower += usize::from(change == Change::Slower);
        let _ = writeln!(
            report,
            "{:<14} {:<6} {dtype:<5} {kernel:<36} {base_median:>9.2} {new_median:>9.2} {:>8.3} \
             {:>15} {:>8}  {}",
            shape_label(*batch, *heads, *seq_len, *seq_len_kv, *head_dim),
            if *causal { "True" } else { "False" },
            new_median / base_median,
            format!("{:.3}-{:.3}", ratio.low, ratio.high),
            scientific(p_value),
            change.label()
        );
    }
    let _ = writeln!(
        report,
        "regression check: {} cases, {slower} slower beyond noise and {:.0}% (alpha {alpha})",
        shared.len(),
        tolerance * 100.0
    );
    Ok((report, slower))
}

/// `value` with one decimal in scientific notation and a signed exponent of at least two
/// digits (`1.2e-05`), the report's format since its Python days.
fn scientific(value: f64) -> String {
    let text = format!("{value:.1e}");
    let (mantissa, exponent) = text.split_once('e').expect("scientific notation");
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}
