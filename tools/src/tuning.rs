//! The autotuner's logic, which needs no GPU: measurements and their grouping into dispatch
//! entries, winner selection, the confirmation verdict, the updated dispatch table and its
//! data file, and (in submodules) the reports (text, JSON, SVG) and the
//! reading back of a run's measurements from its JSON.
//!
//! The `flash-attn-tune` tool does the GPU work (validating and timing every configuration on
//! a sweep of shapes) and hands the results to these functions.

mod parse;
mod report;

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

pub use parse::measurements_from_json;
pub use report::{
    confirmation_report, group_rankings, ranked_tables, table_report, to_json, to_svg, TuningRun,
};

use flash_attn::reference::{ErrorStats, QueryRow};
use flash_attn::rng::SplitMix64;
use flash_attn::{
    default_kernel, AttentionShape, DispatchEntry, Dtype, Family, ForwardKernel, GridSize,
    SeqBucket, GRID_TILE_ROWS, NOT_TUNED, SUPPORTED_HEAD_DIMS,
};
use flash_attn_build::dispatch::{format_dispatch_rows, DispatchRow};

use crate::stats::{
    bootstrap_median_interval, cliffs_delta, mann_whitney_u, median, Interval, RankTest,
    BOOTSTRAP_RESAMPLES,
};
use crate::timing::LaunchTimes;

/// The significance level of the confirmation stage's rank test.
pub const CONFIRMATION_ALPHA: f64 = 0.05;

/// The element types the tuner covers, in the dispatch table's order.
pub const DTYPES: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

/// Sequence lengths of the sweep besides the S = 512 shapes: one per key-length bucket.
pub const SWEEP_SEQ_LENS: [usize; 5] = [128, 256, 1024, 2048, 4096];

/// Away from S = 512 the sweep's large-grid shapes keep 16 heads and about the query rows of
/// the 16,16,512 shape, so that every such problem fills the GPU many times over.
const SWEEP_HEADS: usize = 16;
const SWEEP_QUERY_ROWS: usize = 16 * 16 * 512;

/// Query tiles per multiprocessor of the sweep's small-grid shapes away from S = 512: about
/// those of the seed shape on the H100 (1.9), well inside [`GridSize::Small`].
const SMALL_SWEEP_TILES_PER_SM: usize = 2;

/// The tuner's sweep for one head dim on a device of `sm_count` multiprocessors: a
/// small-grid and a large-grid shape for every key-length bucket (see [`GridSize`]), each
/// group's representative shape first.
///
/// At S = 512: the seed shape 4,8,512 first (it represents the small-grid group, 1.9 tiles
/// per SM on an H100), then 16,16,512 (representing the large-grid group) and 32,16,512. Then,
/// for each S of [`SWEEP_SEQ_LENS`], the large-grid shape of 16 heads and 16·16·512 query rows
/// in all, and a small-grid shape of at most 2 query tiles per SM (up to 16 heads, the rest as
/// batch; at least one head, which is small-grid on any device of 16 or more SMs). The seed shape is small-grid on devices of 64 SMs or more; on fewer, the
/// small-grid groups at S = 512 go unmeasured and keep their entries.
pub fn sweep_shapes(head_dim: usize, sm_count: usize) -> Vec<AttentionShape> {
    let mut shapes: Vec<AttentionShape> = [(4, 8), (16, 16), (32, 16)]
        .into_iter()
        .map(|(batch, heads)| AttentionShape::new(batch, heads, 512, head_dim))
        .collect();
    for seq_len in SWEEP_SEQ_LENS {
        let heads_total = (SWEEP_QUERY_ROWS / seq_len).max(SWEEP_HEADS);
        shapes.push(AttentionShape::new(
            heads_total / SWEEP_HEADS,
            SWEEP_HEADS,
            seq_len,
            head_dim,
        ));
        // Rounded down at each step, so the tiles stay at or under the target.
        let small_heads_total =
            (SMALL_SWEEP_TILES_PER_SM * sm_count * GRID_TILE_ROWS / seq_len).max(1);
        let heads = small_heads_total.min(SWEEP_HEADS);
        shapes.push(AttentionShape::new(
            small_heads_total / heads,
            heads,
            seq_len,
            head_dim,
        ));
    }
    shapes
}

/// What the tuner groups measurements by: one dispatch-table entry per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    pub dtype: Dtype,
    pub head_dim: usize,
    pub causal: bool,
    pub bucket: SeqBucket,
    pub grid: GridSize,
}

impl GroupKey {
    /// The group of a problem whose grid is `grid` on the measuring device.
    pub fn of(dtype: Dtype, shape: &AttentionShape, causal: bool, grid: GridSize) -> Self {
        Self {
            dtype,
            head_dim: shape.head_dim,
            causal,
            bucket: SeqBucket::of(shape.seq_len_kv),
            grid,
        }
    }

    /// Every group of the supported element types and head dims, in the dispatch table's
    /// order: element type, head dim, masking (off first), bucket, grid size (small first).
    pub fn all() -> Vec<Self> {
        let mut keys = Vec::new();
        for dtype in DTYPES {
            for &head_dim in SUPPORTED_HEAD_DIMS {
                for causal in [false, true] {
                    for bucket in SeqBucket::ALL {
                        for grid in GridSize::ALL {
                            keys.push(Self {
                                dtype,
                                head_dim,
                                causal,
                                bucket,
                                grid,
                            });
                        }
                    }
                }
            }
        }
        keys
    }

    /// Whether `entry` is this group's dispatch entry.
    pub fn matches(&self, entry: &DispatchEntry) -> bool {
        let key = (entry.dtype, entry.head_dim, entry.causal, entry.bucket);
        key == (self.dtype, self.head_dim, self.causal, self.bucket) && entry.grid == self.grid
    }

    /// This group's dispatch entry holding `kernel`, marked [`NOT_TUNED`].
    fn untuned_entry(self, kernel: &'static ForwardKernel) -> DispatchEntry {
        DispatchEntry {
            head_dim: self.head_dim,
            dtype: self.dtype,
            causal: self.causal,
            bucket: self.bucket,
            grid: self.grid,
            kernel,
            margin_percent: 0.0,
            confirmed: false,
            measured_on: NOT_TUNED,
        }
    }

    /// The same key with the other grid size.
    fn other_grid(self) -> Self {
        Self {
            grid: self.grid.other(),
            ..self
        }
    }

    /// `f16 D=64 causal keys<=512 small-grid`, for reports.
    pub fn label(&self) -> String {
        format!(
            "{} D={} {} keys{} {}",
            self.dtype.name(),
            self.head_dim,
            if self.causal { "causal" } else { "non-causal" },
            self.bucket.label(),
            self.grid.label()
        )
    }
}

/// The outcome of checking one configuration's output against the f64 reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Validation {
    /// Every output element finite, and the sampled rows within
    /// [`flash_attn::reference::within_tolerance`]; `ours` and `plain` are the errors on those rows.
    Passed { ours: ErrorStats, plain: ErrorStats },
    /// Wrong output; the reason, for the report.
    Failed(String),
}

/// The timing of one configuration on one problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub times: LaunchTimes,
    /// The 95% bootstrap interval of the median time per launch, in microseconds.
    pub median_interval_us: Interval,
}

impl Timing {
    /// Adds the bootstrap interval of the median; `None` when there are no valid samples.
    pub fn new(times: LaunchTimes) -> Option<Self> {
        // One fixed seed: the interval is then a function of the samples alone.
        let median_interval_us =
            bootstrap_median_interval(&times.per_launch_us, BOOTSTRAP_RESAMPLES, 0x5EED)?;
        Some(Self {
            times,
            median_interval_us,
        })
    }

    /// The median time per launch, in microseconds.
    pub fn median_us(&self) -> f64 {
        self.times.median()
    }
}

/// One configuration on one problem: validated first, timed only if correct.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub kernel: &'static ForwardKernel,
    pub shape: AttentionShape,
    pub causal: bool,
    /// The shape's grid size on the measuring device (`GridSize::of(&shape, sm_count)`):
    /// recorded, because the shape alone does not give it.
    pub grid: GridSize,
    pub validation: Validation,
    /// `None` when the validation failed: a wrong kernel is not timed.
    pub timing: Option<Timing>,
}

impl Measurement {
    /// The dispatch-table group this measurement counts for.
    pub fn group(&self) -> GroupKey {
        GroupKey::of(self.kernel.spec.dtype, &self.shape, self.causal, self.grid)
    }

    /// The median time per launch of a configuration that passed validation and was timed.
    pub fn median_us(&self) -> Option<f64> {
        match (&self.validation, &self.timing) {
            (Validation::Passed { .. }, Some(timing)) => Some(timing.median_us()),
            _ => None,
        }
    }

    /// Throughput at the median time, counting `AttentionShape::flops`.
    pub fn tflops(&self) -> Option<f64> {
        self.median_us()
            .map(|us| self.shape.flops(self.causal) / (us * 1e-6) / 1e12)
    }

    /// Whether both ran the same problem (element type, shape and masking).
    fn same_problem(&self, other: &Measurement) -> bool {
        (self.kernel.spec.dtype, self.shape, self.causal)
            == (other.kernel.spec.dtype, other.shape, other.causal)
    }
}

/// `measurement`'s median time over the best median of any valid configuration on the same
/// problem among `measurements`: 1 for the fastest.
pub fn ratio_to_best(measurements: &[Measurement], measurement: &Measurement) -> Option<f64> {
    let time = measurement.median_us()?;
    let best = measurements
        .iter()
        .filter(|other| other.same_problem(measurement))
        .filter_map(Measurement::median_us)
        .fold(f64::INFINITY, f64::min);
    Some(time / best)
}

/// One configuration's median times over the shapes of a group, `None` where it failed
/// validation or was not measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigTimes {
    pub kernel: &'static ForwardKernel,
    pub median_us: Vec<Option<f64>>,
}

/// A configuration's score in its group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankedConfig {
    pub kernel: &'static ForwardKernel,
    /// The mean over the group's shapes of its time divided by the best time at that shape:
    /// 1 for a configuration that is fastest at every shape.
    pub mean_relative_time: f64,
}

/// Ranks the configurations that are valid and measured at every shape (the longest
/// `median_us` gives the number of shapes) by [`RankedConfig::mean_relative_time`], best
/// first; ties keep the input order. The best time at a shape is that of any configuration
/// measured there. Averaging ratios rather than times keeps the largest shape of a group from
/// outweighing the others.
pub fn rank_configs(candidates: &[ConfigTimes]) -> Vec<RankedConfig> {
    let shapes = candidates
        .iter()
        .map(|c| c.median_us.len())
        .max()
        .unwrap_or(0);
    if shapes == 0 {
        return Vec::new();
    }
    let best: Vec<f64> = (0..shapes)
        .map(|shape| {
            candidates
                .iter()
                .filter_map(|c| c.median_us.get(shape).copied().flatten())
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut ranked: Vec<RankedConfig> = candidates
        .iter()
        .filter_map(|candidate| {
            let times: Option<Vec<f64>> = (0..shapes)
                .map(|shape| candidate.median_us.get(shape).copied().flatten())
                .collect();
            let relative: f64 = times?.iter().zip(&best).map(|(t, b)| t / b).sum();
            Some(RankedConfig {
                kernel: candidate.kernel,
                mean_relative_time: relative / shapes as f64,
            })
        })
        .collect();
    ranked.sort_by(|a, b| a.mean_relative_time.total_cmp(&b.mean_relative_time));
    ranked
}

/// The measurements of one dispatch-table group.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub key: GroupKey,
    /// In the order first measured; the first is the group's representative shape.
    pub shapes: Vec<AttentionShape>,
    /// One per configuration measured in the group, times in the order of `shapes`.
    pub candidates: Vec<ConfigTimes>,
}

impl Group {
    /// The shape on which the confirmation stage re-times the two best configurations.
    pub fn representative(&self) -> Option<AttentionShape> {
        self.shapes.first().copied()
    }

    /// The group's eligible configurations, best first ([`rank_configs`]).
    pub fn ranking(&self) -> Vec<RankedConfig> {
        rank_configs(&self.candidates)
    }

    /// The group's dispatch decision: with a confirmation of the two best, as it chooses
    /// ([`Confirmation::choose`]); with a single eligible configuration, that one,
    /// unconfirmed. `None` when no configuration is eligible.
    pub fn decide(
        &self,
        confirmation: Option<&Confirmation>,
        current: Option<&ForwardKernel>,
    ) -> Option<Decision> {
        let winner = *self.ranking().first()?;
        Some(match confirmation {
            Some(confirmation) => {
                let confirmed = confirmation.verdict == Verdict::WinnerConfirmed;
                Decision {
                    key: self.key,
                    kernel: confirmation.choose(current),
                    margin_percent: if confirmed {
                        confirmation.margin_percent()
                    } else {
                        0.0
                    },
                    confirmed,
                }
            }
            None => Decision {
                key: self.key,
                kernel: winner.kernel,
                margin_percent: 0.0,
                confirmed: false,
            },
        })
    }
}

/// Sorts measurements into their groups, in the order each group is first met.
pub fn groups(measurements: &[Measurement]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for measurement in measurements {
        let key = measurement.group();
        let group = match groups.iter().position(|g| g.key == key) {
            Some(index) => index,
            None => {
                groups.push(Group {
                    key,
                    shapes: Vec::new(),
                    candidates: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[group];
        let shape = match group.shapes.iter().position(|&s| s == measurement.shape) {
            Some(index) => index,
            None => {
                group.shapes.push(measurement.shape);
                group.shapes.len() - 1
            }
        };
        let kernel = measurement.kernel;
        let candidate = match group.candidates.iter().position(|c| c.kernel == kernel) {
            Some(index) => index,
            None => {
                group.candidates.push(ConfigTimes {
                    kernel,
                    median_us: Vec::new(),
                });
                group.candidates.len() - 1
            }
        };
        let candidate = &mut group.candidates[candidate];
        if candidate.median_us.len() <= shape {
            candidate.median_us.resize(shape + 1, None);
        }
        candidate.median_us[shape] = measurement.median_us();
    }
    for group in &mut groups {
        for candidate in &mut group.candidates {
            candidate.median_us.resize(group.shapes.len(), None);
        }
    }
    groups
}

/// What the confirmation stage concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The rank test rejects "same distribution" at [`CONFIRMATION_ALPHA`] and the winner's
    /// median is the lower.
    WinnerConfirmed,
    /// The rank test does not reject: the difference is inside the run-to-run noise.
    TieWithinNoise,
    /// The rank test rejects, but the runner-up was the faster: the sweep and the re-timing
    /// disagree, so neither order is trusted (treated as a tie).
    Contradicted,
}

impl Verdict {
    /// The verdict in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Verdict::WinnerConfirmed => "winner confirmed",
            Verdict::TieWithinNoise => "tie within noise",
            Verdict::Contradicted => "contradicted (runner-up faster on re-timing): a tie",
        }
    }
}

/// The re-timing of a group's winner and runner-up, interleaved on its representative shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmation {
    pub key: GroupKey,
    pub shape: AttentionShape,
    pub winner: &'static ForwardKernel,
    pub runner_up: &'static ForwardKernel,
    /// Microseconds per launch of each repeat, in the order timed.
    pub winner_us: Vec<f64>,
    pub runner_up_us: Vec<f64>,
    pub winner_median_us: f64,
    pub runner_up_median_us: f64,
    /// The rank test of the runner-up's times against the winner's (its U counts the pairs in
    /// which the runner-up was slower).
    pub test: RankTest,
    /// Cliff's delta of the runner-up's times against the winner's: +1 when every runner-up
    /// repeat was slower than every winner repeat.
    pub cliffs_delta: f64,
    pub verdict: Verdict,
}

impl Confirmation {
    /// Tests the two samples; `None` when one is empty or holds a NaN.
    pub fn new(
        key: GroupKey,
        shape: AttentionShape,
        (winner, winner_us): (&'static ForwardKernel, Vec<f64>),
        (runner_up, runner_up_us): (&'static ForwardKernel, Vec<f64>),
    ) -> Option<Self> {
        let test = mann_whitney_u(&runner_up_us, &winner_us)?;
        let cliffs_delta = cliffs_delta(&runner_up_us, &winner_us)?;
        let (winner_median_us, runner_up_median_us) = (median(&winner_us)?, median(&runner_up_us)?);
        let verdict = if test.p_value >= CONFIRMATION_ALPHA {
            Verdict::TieWithinNoise
        } else if winner_median_us < runner_up_median_us {
            Verdict::WinnerConfirmed
        } else {
            Verdict::Contradicted
        };
        Some(Self {
            key,
            shape,
            winner,
            runner_up,
            winner_us,
            runner_up_us,
            winner_median_us,
            runner_up_median_us,
            test,
            cliffs_delta,
            verdict,
        })
    }

    /// How much slower the runner-up's median was than the winner's, in percent of the
    /// winner's (negative when it was faster).
    pub fn margin_percent(&self) -> f64 {
        (self.runner_up_median_us / self.winner_median_us - 1.0) * 100.0
    }

    /// The kernel for the table: a confirmed winner; otherwise the kernel `current`ly in the
    /// table if it is one of the two (a win inside the noise is no reason to switch), else the
    /// sweep's winner.
    pub fn choose(&self, current: Option<&ForwardKernel>) -> &'static ForwardKernel {
        match current {
            Some(current) if self.verdict != Verdict::WinnerConfirmed => {
                if *current == *self.runner_up {
                    self.runner_up
                } else {
                    self.winner
                }
            }
            _ => self.winner,
        }
    }
}

/// A group's new dispatch entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub key: GroupKey,
    pub kernel: &'static ForwardKernel,
    pub margin_percent: f64,
    pub confirmed: bool,
}

/// The dispatch table after a tuner run, one entry per group of [`GroupKey::all`] in that
/// order: the run's decision (dated `measured_on`) where it made one, else the `current`
/// table's tuned entry. Every other entry is marked [`NOT_TUNED`] and holds what
/// [`flash_attn::dispatch_kernel`] would fall back to without it: the kernel of the same key with
/// the other grid size where that one is tuned, else the fallback kernel of the element type
/// and head dim. With no decisions and an empty table this is the untuned table.
pub fn updated_table(
    current: &[DispatchEntry],
    decisions: &[Decision],
    measured_on: &'static str,
) -> Vec<DispatchEntry> {
    let tuned = |key: GroupKey| match decisions.iter().find(|d| d.key == key) {
        Some(decision) => Some(DispatchEntry {
            margin_percent: decision.margin_percent,
            confirmed: decision.confirmed,
            measured_on,
            ..key.untuned_entry(decision.kernel)
        }),
        None => current
            .iter()
            .find(|e| key.matches(e) && e.measured_on != NOT_TUNED)
            .copied(),
    };
    GroupKey::all()
        .into_iter()
        .filter_map(|key| {
            if let Some(tuned) = tuned(key) {
                return Some(tuned);
            }
            let kernel = match tuned(key.other_grid()) {
                Some(other) => other.kernel,
                // Every supported head dim has a kernel (a CPU test checks it), so this skips
                // nothing in practice.
                None => default_kernel(key.dtype, key.head_dim).ok()?,
            };
            Some(key.untuned_entry(kernel))
        })
        .collect()
}

/// The sm_90a dispatch table after a tuner run over both families on a device of compute
/// capability 9.0 (`flash-attn-tune --family sm90`), in [`GroupKey::all`] order: a row for each
/// key the run decided with an sm90 kernel (dated `measured_on`), none for a key it decided
/// with an sm80 kernel (the device then falls back to the main table, which the sm80 family's
/// own tuning fills), and the `current` row of each key the run did not decide. Unlike
/// [`updated_table`] it fills no key: a missing row is a decision.
pub fn updated_sm90a_table(
    current: &[DispatchEntry],
    decisions: &[Decision],
    measured_on: &'static str,
) -> Vec<DispatchEntry> {
    GroupKey::all()
        .into_iter()
        .filter_map(
            |key| match decisions.iter().find(|decision| decision.key == key) {
                Some(decision) if decision.kernel.spec.family == Family::Sm90 => {
                    Some(DispatchEntry {
                        margin_percent: decision.margin_percent,
                        confirmed: decision.confirmed,
                        measured_on,
                        ..key.untuned_entry(decision.kernel)
                    })
                }
                Some(_) => None,
                None => current.iter().find(|entry| key.matches(entry)).copied(),
            },
        )
        .collect()
}

/// The text of `host/dispatch-table-sm90a.tsv` holding `entries`: a header saying what the
/// table is and how it is made, then one row per entry ([`format_dispatch_rows`]).
pub fn render_sm90a_dispatch_table(entries: &[DispatchEntry]) -> String {
    let mut text = String::from(
        "# The sm_90a dispatch table: the kernel the default API runs for dense problems (no score\n\
         # modifier, not serving) on devices of compute capability 9.0 (H100, H200), which run the\n\
         # sm90 family's sm_90a kernels (`_sm90a` entries). Same format and keys as\n\
         # host/dispatch-table.tsv (see host/src/dispatch.rs), consulted first there; a key without a\n\
         # row here (the other grid size of the same key included) falls back to that table.\n\
         #\n\
         # GENERATED by `flash-attn-tune --family sm90` on a device of compute capability 9.0: a row\n\
         # where an sm90 kernel won the key over both families, none where an sm80 kernel did. Every\n\
         # kernel named here is in the shipping set (compiled, gated and assembled into a cubin by a\n\
         # default build).\n",
    );
    text.push_str(&format_dispatch_rows(&dispatch_rows(entries)));
    text
}

/// The text of `host/dispatch-table.tsv` holding `entries`: a header saying how it is made, then
/// one row per entry ([`format_dispatch_rows`]). The build names each entry's kernel through
/// [`flash_attn::kernel_named`], so a table naming a kernel that is not exposed does not build.
pub fn render_dispatch_table(entries: &[DispatchEntry]) -> String {
    let mut text = String::from(
        "# The dispatch table: the kernel the default API runs for each head dim, element type,\n\
         # causal masking, key-length bucket and grid size (see host/src/dispatch.rs).\n\
         #\n\
         # GENERATED by `flash-attn-tune`: do not edit by hand. Regenerate it on a GPU with\n\
         # `flash-attn-tune --write-table host/dispatch-table.tsv` run from a checkout\n\
         # (`cargo run --release -p flash-attn-tools --bin flash-attn-tune -- --write-table ...`),\n\
         # or copy `dispatch-table.tsv` from the tuner's `--out` folder over this file.\n",
    );
    let untuned = entries
        .iter()
        .filter(|entry| entry.measured_on == NOT_TUNED)
        .count();
    if untuned > 0 && untuned == entries.len() {
        text.push_str(
            "#\n\
             # NOT TUNED YET: no entry has been measured. Each is the fallback kernel of its\n\
             # element type and head dim (what `default_kernel` returns), whatever the masking,\n\
             # the key length and the grid size.\n",
        );
    } else if untuned > 0 {
        let _ = writeln!(
            text,
            "#\n# {untuned} entries are not tuned yet (measured_on \"{NOT_TUNED}\"): each holds the \
             kernel\n# of its key with the other grid size where that one is tuned, else the \
             fallback kernel\n# of its element type and head dim."
        );
    }
    text.push_str(&format_dispatch_rows(&dispatch_rows(entries)));
    text
}

/// `entries` as the rows of a dispatch table file.
fn dispatch_rows(entries: &[DispatchEntry]) -> Vec<DispatchRow> {
    entries
        .iter()
        .map(|entry| DispatchRow {
            head_dim: entry.head_dim,
            dtype: format!("{:?}", entry.dtype),
            causal: entry.causal,
            bucket: format!("{:?}", entry.bucket),
            grid: format!("{:?}", entry.grid),
            kernel: entry.kernel.entry.to_owned(),
            margin_percent: entry.margin_percent,
            confirmed: entry.confirmed,
            measured_on: entry.measured_on.to_owned(),
        })
        .collect()
}

/// `count` query rows of `shape` to validate on (every row if it has no more): the first row
/// of the first (batch, head), which under causal masking sees a single key, the last row of
/// the last, which sees every key, and the rest drawn uniformly, deterministic for a `seed`.
pub fn sample_rows(shape: &AttentionShape, count: usize, seed: u64) -> Vec<QueryRow> {
    let total = shape
        .lse_elements()
        .expect("sampled shapes have already been allocated, so their sizes fit");
    if total <= count {
        return (0..total)
            .map(|index| QueryRow::from_index(shape, index))
            .collect();
    }
    let mut rng = SplitMix64::new(seed);
    let mut indices = vec![0, total - 1];
    indices.extend((2..count).map(|_| rng.below(total)));
    indices.truncate(count);
    indices
        .into_iter()
        .map(|index| QueryRow::from_index(shape, index))
        .collect()
}

/// The UTC calendar date of `time` as `YYYY-MM-DD` (times before 1970 give 1970-01-01).
pub fn utc_date(time: SystemTime) -> String {
    let days = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil_from_days, over 400-year eras of 146097 days from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02}")
}
